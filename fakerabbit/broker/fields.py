"""Tag-preserving codec for AMQP 0-9-1 field tables, using RabbitMQ's errata field types.

A field is ``(tag, value)`` and a table is ``{key: (tag, value)}``; the dict's insertion order is the wire
order. Decoding then encoding gives back the same bytes: an ``l`` long stays a long, a ``d`` double stays a
double, a non-UTF-8 ``S`` longstr survives through ``surrogateescape``, and a ``T`` timestamp stays a raw
integer. pamqp's table codec cannot do this (see design/pamqp-notes.md, section 2.3 item 2).

Values by tag (RabbitMQ's names in brackets):

======  ==============  ============================================================================
tag     type name       Python value
======  ==============  ============================================================================
``t``   bool            ``bool`` (any non-zero octet decodes as ``True``, as in RabbitMQ)
``b``   byte            ``int``, signed 8 bits
``B``   unsignedbyte    ``int``, unsigned 8 bits
``s``   short           ``int``, signed 16 bits
``u``   unsignedshort   ``int``, unsigned 16 bits
``I``   signedint       ``int``, signed 32 bits
``i``   unsignedint     ``int``, unsigned 32 bits
``l``   long            ``int``, signed 64 bits
``f``   float           ``float`` (32-bit on the wire)
``d``   double          ``float``
``D``   decimal         ``decimal.Decimal``: 1 octet scale, signed 32-bit unscaled value
``S``   longstr         ``str`` (UTF-8, ``surrogateescape``); ``bytes`` is also accepted when encoding
``x``   binary          ``bytes``
``T``   timestamp       ``int``: raw unsigned 64-bit seconds
``V``   void            ``None``
``A``   array           ``list[Field]``
``F``   table           ``Table``
======  ==============  ============================================================================

Everything here raises :class:`FieldError` (a ``ValueError``) for malformed input or unencodable values.
"""

from __future__ import annotations

import calendar
import decimal
import struct
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Final, TypeAlias

__all__ = [
    "INTEGER_TAGS",
    "MAX_DEPTH",
    "TYPE_NAMES",
    "Field",
    "FieldError",
    "Table",
    "decode_array",
    "decode_field",
    "decode_table",
    "encode_field",
    "encode_table",
    "from_python",
    "table_from_python",
    "table_to_python",
    "to_python",
    "type_name",
]

Field: TypeAlias = tuple[str, Any]
Table: TypeAlias = dict[str, Field]

#: Maximum nesting of tables and arrays, the outermost table counting as 1.
MAX_DEPTH: Final = 100

TYPE_NAMES: Final[dict[str, str]] = {
    "t": "bool",
    "b": "byte",
    "B": "unsignedbyte",
    "s": "short",
    "u": "unsignedshort",
    "I": "signedint",
    "i": "unsignedint",
    "l": "long",
    "f": "float",
    "d": "double",
    "D": "decimal",
    "S": "longstr",
    "x": "binary",
    "T": "timestamp",
    "V": "void",
    "A": "array",
    "F": "table",
}

INTEGER_TAGS: Final = frozenset("bBsuIil")


class FieldError(ValueError):
    """A field table or field value is malformed or cannot be encoded."""


def type_name(tag: str) -> str:
    """RabbitMQ's name for a field type tag (``"l"`` -> ``"long"``), as used in its error texts."""
    try:
        return TYPE_NAMES[tag]
    except KeyError:
        raise FieldError(f"unknown field type tag {tag!r}") from None


# --------------------------------------------------------------------------------------------------------
# decoding

_U32 = struct.Struct(">I")
_DECIMAL = struct.Struct(">Bi")

# Fixed-size scalar tags whose value is exactly what struct returns: tag byte -> (tag, struct).
_SCALARS: Final[dict[int, tuple[str, struct.Struct]]] = {
    ord(tag): (tag, struct.Struct(fmt))
    for tag, fmt in (
        ("b", ">b"),
        ("B", ">B"),
        ("s", ">h"),
        ("u", ">H"),
        ("I", ">i"),
        ("i", ">I"),
        ("l", ">q"),
        ("f", ">f"),
        ("d", ">d"),
        ("T", ">Q"),
    )
}
_SCALARS_BY_TAG: Final[dict[str, struct.Struct]] = {tag: st for tag, st in _SCALARS.values()}
# py-amqp (and so kombu and Celery) writes 64-bit ints as 'L'. RabbitMQ reads it as a signed long and, when it
# re-encodes a table (dead-lettering), writes 'l' (verified on 3.10.8), so it decodes to the 'l' tag here.
_SCALARS[ord("L")] = ("l", struct.Struct(">q"))

# A private context so a caller's decimal context (precision, traps) cannot change decoded values.
_DEC_CONTEXT: Final = decimal.Context(prec=60, Emin=-999_999, Emax=999_999)

_T, _D, _S, _X, _A, _F, _V = (ord(c) for c in "tDSxAFV")

_Buffer: TypeAlias = "bytes | bytearray | memoryview"


def _as_buffer(data: bytes | bytearray | memoryview) -> bytes | bytearray | memoryview:
    if isinstance(data, memoryview) and (data.format != "B" or data.ndim != 1):
        return data.cast("B")
    return data


def _read_length(data: _Buffer, pos: int, end: int, what: str) -> tuple[int, int]:
    """Read a 4-byte length at ``pos`` and return (start, stop) of the ``what`` it prefixes."""
    start = pos + 4
    if start > end:
        raise FieldError(f"truncated {what}: length prefix runs past the end")
    stop = start + _U32.unpack_from(data, pos)[0]
    if stop > end:
        raise FieldError(f"{what} length {stop - start} runs past the end of the enclosing data")
    return start, stop


def _decode_value(data: _Buffer, pos: int, end: int, depth: int) -> tuple[Field, int]:
    """Decode one tagged value at ``pos``; nothing may be read at or beyond ``end``."""
    if pos >= end:
        raise FieldError("truncated field: missing type tag")
    code = data[pos]
    pos += 1
    scalar = _SCALARS.get(code)
    if scalar is not None:
        tag, st = scalar
        stop = pos + st.size
        if stop > end:
            raise FieldError(f"truncated {TYPE_NAMES[tag]} field value")
        return (tag, st.unpack_from(data, pos)[0]), stop
    if code == _S:
        start, stop = _read_length(data, pos, end, "longstr")
        return ("S", str(data[start:stop], "utf-8", "surrogateescape")), stop
    if code == _F:
        start, stop = _read_length(data, pos, end, "nested table")
        return ("F", _decode_table_body(data, start, stop, depth + 1)), stop
    if code == _T:
        if pos >= end:
            raise FieldError("truncated bool field value")
        return ("t", data[pos] != 0), pos + 1
    if code == _V:
        return ("V", None), pos
    if code == _X:
        start, stop = _read_length(data, pos, end, "binary")
        return ("x", bytes(data[start:stop])), stop
    if code == _A:
        start, stop = _read_length(data, pos, end, "array")
        return ("A", _decode_array_body(data, start, stop, depth + 1)), stop
    if code == _D:
        stop = pos + 5
        if stop > end:
            raise FieldError("truncated decimal field value")
        scale, unscaled = _DECIMAL.unpack_from(data, pos)
        return ("D", decimal.Decimal(unscaled).scaleb(-scale, _DEC_CONTEXT)), stop
    raise FieldError(f"unknown field type tag {chr(code)!r} (byte 0x{code:02x})")


def _decode_table_body(data: _Buffer, pos: int, end: int, depth: int) -> Table:
    if depth > MAX_DEPTH:
        raise FieldError(f"field tables/arrays nested more than {MAX_DEPTH} deep")
    table: Table = {}
    while pos < end:
        key_start = pos + 1
        pos = key_start + data[pos]
        if pos > end:
            raise FieldError("truncated field table: key runs past the end")
        key = str(data[key_start:pos], "utf-8", "surrogateescape")
        table[key], pos = _decode_value(data, pos, end, depth)
    return table


def _decode_array_body(data: _Buffer, pos: int, end: int, depth: int) -> list[Field]:
    if depth > MAX_DEPTH:
        raise FieldError(f"field tables/arrays nested more than {MAX_DEPTH} deep")
    items: list[Field] = []
    while pos < end:
        item, pos = _decode_value(data, pos, end, depth)
        items.append(item)
    return items


def decode_table(data: bytes | bytearray | memoryview, offset: int = 0) -> tuple[Table, int]:
    """Decode the 4-byte length-prefixed field table at ``offset``; return it and the offset after it."""
    data = _as_buffer(data)
    if offset < 0:
        raise FieldError("negative offset")
    start, stop = _read_length(data, offset, len(data), "field table")
    return _decode_table_body(data, start, stop, 1), stop


def decode_array(data: bytes | bytearray | memoryview, offset: int = 0) -> tuple[list[Field], int]:
    """Decode the 4-byte length-prefixed field array at ``offset``; return it and the offset after it."""
    data = _as_buffer(data)
    if offset < 0:
        raise FieldError("negative offset")
    start, stop = _read_length(data, offset, len(data), "array")
    return _decode_array_body(data, start, stop, 1), stop


def decode_field(data: bytes | bytearray | memoryview, offset: int = 0) -> tuple[Field, int]:
    """Decode one tagged field value (tag octet then value) at ``offset``."""
    data = _as_buffer(data)
    if offset < 0:
        raise FieldError("negative offset")
    return _decode_value(data, offset, len(data), 0)


# --------------------------------------------------------------------------------------------------------
# encoding

_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
_INT_TAGS: Final = INTEGER_TAGS | {"T"}


def _check_depth(depth: int) -> None:
    if depth > MAX_DEPTH:
        raise FieldError(f"field tables/arrays nested more than {MAX_DEPTH} deep (or self-referencing)")


def _put_longstr(buf: bytearray, tag: str, value: object) -> None:
    if isinstance(value, str) and tag == "S":
        try:
            data = value.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError as exc:
            raise FieldError(f"longstr is not encodable as UTF-8: {exc}") from None
    elif isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
    else:
        needs = "str or bytes" if tag == "S" else "bytes"
        raise FieldError(f"{type_name(tag)} field needs {needs}, not {type(value).__name__}")
    if len(data) > 0xFFFFFFFF:
        raise FieldError(f"{type_name(tag)} too long ({len(data)} bytes)")
    buf += _U32.pack(len(data))
    buf += data


def _decimal_parts(value: decimal.Decimal) -> tuple[int, int]:
    """(scale, unscaled) for a Decimal, keeping its exponent (so decoding then encoding is exact)."""
    sign, digits, exponent = value.as_tuple()
    if not isinstance(exponent, int):
        raise FieldError(f"decimal field cannot hold {value}")
    unscaled = int("".join(map(str, digits))) if digits else 0
    if exponent > 0:
        if unscaled and exponent > 10:
            raise FieldError(f"decimal {value} does not fit a scale octet and a signed 32-bit value")
        unscaled *= 10**exponent
        exponent = 0
    if sign:
        unscaled = -unscaled
    if -exponent > 255 or not _INT32_MIN <= unscaled <= _INT32_MAX:
        raise FieldError(f"decimal {value} does not fit a scale octet and a signed 32-bit value")
    return -exponent, unscaled


def _encode_value_into(buf: bytearray, field: Field, depth: int) -> None:
    try:
        tag, value = field
    except (TypeError, ValueError):
        raise FieldError(f"a field must be a (tag, value) pair, not {field!r}") from None
    if not isinstance(tag, str):
        raise FieldError(f"a field tag must be a str, not {tag!r}")
    st = _SCALARS_BY_TAG.get(tag)
    if st is not None:
        if isinstance(value, bool) or not isinstance(value, int if tag in _INT_TAGS else (int, float)):
            kind = "an int" if tag in _INT_TAGS else "a number"
            raise FieldError(f"{type_name(tag)} field needs {kind}, not {type(value).__name__}")
        buf.append(ord(tag))
        try:
            buf += st.pack(value)
        except (struct.error, OverflowError):
            raise FieldError(f"value {value!r} out of range for a {type_name(tag)} field") from None
        return
    if tag == "S" or tag == "x":
        buf.append(ord(tag))
        _put_longstr(buf, tag, value)
    elif tag == "F":
        if not isinstance(value, Mapping):
            raise FieldError(f"table field needs a mapping, not {type(value).__name__}")
        buf.append(_F)
        _encode_table_into(buf, value, depth + 1)
    elif tag == "A":
        if not isinstance(value, (list, tuple)):
            raise FieldError(f"array field needs a list, not {type(value).__name__}")
        _check_depth(depth + 1)
        buf.append(_A)
        start = len(buf)
        buf += b"\0\0\0\0"
        for item in value:
            _encode_value_into(buf, item, depth + 1)
        _pack_length(buf, start)
    elif tag == "t":
        buf.append(_T)
        buf.append(1 if value else 0)
    elif tag == "V":
        if value is not None:
            raise FieldError(f"void field must have value None, not {value!r}")
        buf.append(_V)
    elif tag == "D":
        if isinstance(value, int) and not isinstance(value, bool):
            value = decimal.Decimal(value)
        if not isinstance(value, decimal.Decimal):
            raise FieldError(f"decimal field needs a Decimal, not {type(value).__name__}")
        buf.append(_D)
        buf += _DECIMAL.pack(*_decimal_parts(value))
    else:
        raise FieldError(f"unknown field type tag {tag!r}")


def _pack_length(buf: bytearray, start: int) -> None:
    size = len(buf) - start - 4
    if size > 0xFFFFFFFF:
        raise FieldError(f"encoded table/array too long ({size} bytes)")
    _U32.pack_into(buf, start, size)


def _encode_table_into(buf: bytearray, table: Mapping[str, Field], depth: int) -> None:
    _check_depth(depth)
    start = len(buf)
    buf += b"\0\0\0\0"
    for key, field in table.items():
        if not isinstance(key, str):
            raise FieldError(f"field table keys must be str, not {type(key).__name__}")
        try:
            raw_key = key.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError as exc:
            raise FieldError(f"field table key is not encodable as UTF-8: {exc}") from None
        if len(raw_key) > 255:
            raise FieldError(f"field table key longer than 255 bytes: {key[:40]!r}...")
        buf.append(len(raw_key))
        buf += raw_key
        _encode_value_into(buf, field, depth)
    _pack_length(buf, start)


def encode_table(table: Mapping[str, Field]) -> bytes:
    """Encode a table with its 4-byte length prefix, keeping each field's tag and the key order."""
    buf = bytearray()
    _encode_table_into(buf, table, 1)
    return bytes(buf)


def encode_field(field: Field) -> bytes:
    """Encode one field as its tag octet followed by its value (array and table values length-prefixed)."""
    buf = bytearray()
    _encode_value_into(buf, field, 0)
    return bytes(buf)


# --------------------------------------------------------------------------------------------------------
# plain Python values


def _from_python(value: object, depth: int) -> Field:
    if isinstance(value, str):
        return ("S", value)
    if isinstance(value, bool):
        return ("t", value)
    if isinstance(value, int):
        if _INT32_MIN <= value <= _INT32_MAX:
            return ("I", value)
        if _INT64_MIN <= value <= _INT64_MAX:
            return ("l", value)
        raise FieldError(f"integer {value} does not fit a signed 64-bit long field")
    if isinstance(value, (bytes, bytearray, memoryview)):
        return ("x", bytes(value))
    if isinstance(value, float):
        return ("d", value)
    if value is None:
        return ("V", None)
    if isinstance(value, Mapping):
        _check_depth(depth + 1)
        return ("F", _table_from_python(value, depth + 1))
    if isinstance(value, (list, tuple)):
        _check_depth(depth + 1)
        return ("A", [_from_python(item, depth + 1) for item in value])
    if isinstance(value, decimal.Decimal):
        if not value.is_finite():
            raise FieldError(f"decimal field cannot hold {value}")
        # Like pika: normalise (1.50 -> 1.5), and write integral values with scale 0 (1E+2 -> 100).
        try:
            normal = value.normalize(_DEC_CONTEXT)
        except decimal.DecimalException:
            raise FieldError(f"decimal {value} does not fit a scale octet and a signed 32-bit value") from None
        scale, unscaled = _decimal_parts(normal)
        return ("D", normal if scale else decimal.Decimal(unscaled))
    if isinstance(value, datetime):
        seconds = calendar.timegm(value.utctimetuple())
        if not 0 <= seconds <= 0xFFFFFFFFFFFFFFFF:
            raise FieldError(f"timestamp {value.isoformat()} is before 1970")
        return ("T", seconds)
    raise FieldError(f"cannot encode a {type(value).__name__} value as an AMQP field")


def _table_from_python(values: Mapping[Any, object], depth: int) -> Table:
    table: Table = {}
    for key, value in values.items():
        if not isinstance(key, str):
            raise FieldError(f"field table keys must be str, not {type(key).__name__}")
        table[key] = _from_python(value, depth)
    return table


def from_python(value: object) -> Field:
    """Build a field from a plain value, choosing tags the way pika does.

    str -> ``S``, bytes -> ``x``, bool -> ``t``, int -> ``I`` (if it fits signed 32 bits) else ``l``,
    float -> ``d``, Decimal -> ``D``, datetime -> ``T`` (whole seconds; naive means UTC), None -> ``V``,
    list/tuple -> ``A``, mapping -> ``F`` (recursively).
    """
    return _from_python(value, 0)


def table_from_python(values: Mapping[str, object]) -> Table:
    """Build a table from a mapping of plain values (see :func:`from_python`)."""
    return _table_from_python(values, 1)


def to_python(field: Field) -> Any:
    """The plain value of a field: ``T`` -> aware UTC datetime, ``A`` -> list, ``F`` -> dict, else as stored.

    A timestamp too large for ``datetime`` is returned as its raw integer.
    """
    tag, value = field
    if tag == "F":
        return table_to_python(value)
    if tag == "A":
        return [to_python(item) for item in value]
    if tag == "T":
        try:
            return datetime.fromtimestamp(value, UTC)
        except (OverflowError, ValueError, OSError):
            return value
    return value


def table_to_python(table: Mapping[str, Field]) -> dict[str, Any]:
    """A table as a dict of plain values (see :func:`to_python`)."""
    return {key: to_python(field) for key, field in table.items()}
