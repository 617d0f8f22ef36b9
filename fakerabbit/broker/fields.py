"""Tag-preserving codec for AMQP 0-9-1 field tables, using RabbitMQ's errata field types.

A field is ``(tag, value)`` and a table is ``{key: (tag, value)}``; the dict's insertion order is the wire
order. Decoding then encoding gives back the same bytes: an ``l`` long stays a long, a ``d`` double stays a
double, a non-UTF-8 ``S`` longstr survives through ``surrogateescape``, and a ``T`` timestamp stays a raw
integer. pamqp's table codec cannot do this: it encodes a ``float`` as a 32-bit ``f``, re-picks integer tags by
value (``l`` 5 comes back as ``b``), sorts keys and cannot re-encode a non-UTF-8 longstr (gmr/pamqp#79); the
round trip of every tag is pinned by tests/unit/test_fields.py.

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
Nesting is not limited (RabbitMQ takes tables nested 5,000 deep): decoding, encoding and the conversions to
and from plain values walk nested tables and arrays with a list, never on the Python stack.
"""

from __future__ import annotations

import calendar
import decimal
import math
import struct
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Final, TypeAlias

__all__ = [
    "INTEGER_TAGS",
    "TYPE_NAMES",
    "Field",
    "FieldError",
    "Table",
    "decode_array",
    "decode_field",
    "decode_table",
    "decode_table_pairs",
    "encode_field",
    "encode_table",
    "from_python",
    "sort_field_table",
    "table_from_python",
    "table_to_python",
    "to_python",
    "type_name",
]

Field: TypeAlias = tuple[str, Any]
Table: TypeAlias = dict[str, Field]


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


def sort_field_table(table: Table) -> Table:
    """``rabbit_misc:sort_field_table/1``: the same table, its keys in byte order."""
    return dict(sorted(table.items(), key=lambda kv: kv[0].encode("utf-8", "surrogateescape")))


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

_T, _D, _S, _X, _A, _F, _V, _f, _d = (ord(c) for c in "tDSxAFVfd")

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


def _decode_scalar(data: _Buffer, code: int, pos: int, end: int, finite: bool = False) -> tuple[Field, int]:
    """Decode a value that is not a table or an array (its tag octet ``code`` is already read)."""
    scalar = _SCALARS.get(code)
    if scalar is not None:
        tag, st = scalar
        stop = pos + st.size
        if stop > end:
            raise FieldError(f"truncated {TYPE_NAMES[tag]} field value")
        value = st.unpack_from(data, pos)[0]
        if finite and code in (_f, _d) and not math.isfinite(value):
            raise FieldError(f"{TYPE_NAMES[tag]} field value {value} is not a finite number")
        return (tag, value), stop
    if code == _S:
        start, stop = _read_length(data, pos, end, "longstr")
        return ("S", str(data[start:stop], "utf-8", "surrogateescape")), stop
    if code == _T:
        if pos >= end:
            raise FieldError("truncated bool field value")
        return ("t", data[pos] != 0), pos + 1
    if code == _V:
        return ("V", None), pos
    if code == _X:
        start, stop = _read_length(data, pos, end, "binary")
        return ("x", bytes(data[start:stop])), stop
    if code == _D:
        stop = pos + 5
        if stop > end:
            raise FieldError("truncated decimal field value")
        scale, unscaled = _DECIMAL.unpack_from(data, pos)
        return ("D", decimal.Decimal(unscaled).scaleb(-scale, _DEC_CONTEXT)), stop
    raise FieldError(f"unknown field type tag {chr(code)!r} (byte 0x{code:02x})")


# What a table or an array being decoded is filled into: a Table, a list of fields (an array) or a list of
# (key, field) pairs (a table whose repeated keys are kept, see decode_table_pairs).
_Container: TypeAlias = "Table | list[Field] | list[tuple[str, Field]]"


def _decode_body(data: _Buffer, pos: int, end: int, root: _Container, keyed: bool, finite: bool = False) -> None:
    """Fill ``root`` with the table (``keyed``) or array body at ``data[pos:end]``.

    Iterative: RabbitMQ takes tables nested thousands deep, so nesting lives on a list here, never on the
    Python stack. A nested table or array is put in its parent when it starts (the parent's key order is the
    wire order) and filled as its own level."""
    # each level: [container, position, end, keyed]
    stack: list[list[Any]] = [[root, pos, end, keyed]]
    while stack:
        level = stack[-1]
        container, pos, end, keyed = level
        if pos >= end:
            stack.pop()
            continue
        key = ""
        if keyed:
            key_start = pos + 1
            pos = key_start + data[pos]
            if pos > end:
                raise FieldError("truncated field table: key runs past the end")
            key = str(data[key_start:pos], "utf-8", "surrogateescape")
        if pos >= end:
            raise FieldError("truncated field: missing type tag")
        code = data[pos]
        pos += 1
        child: Table | list[Field] | None = None
        if code in (_F, _A):
            start, stop = _read_length(data, pos, end, "nested table" if code == _F else "array")
            child = {} if code == _F else []
            field: Field = ("F" if code == _F else "A", child)
            pos = stop
        else:
            field, pos = _decode_scalar(data, code, pos, end, finite)
        level[1] = pos
        if isinstance(container, dict):
            container[key] = field
        elif keyed:
            container.append((key, field))
        else:
            container.append(field)
        if child is not None:
            stack.append([child, start, stop, code == _F])


def _decode_value(data: _Buffer, pos: int, end: int) -> tuple[Field, int]:
    """Decode one tagged value at ``pos``; nothing may be read at or beyond ``end``."""
    if pos >= end:
        raise FieldError("truncated field: missing type tag")
    code = data[pos]
    pos += 1
    if code == _F:
        start, stop = _read_length(data, pos, end, "nested table")
        table: Table = {}
        _decode_body(data, start, stop, table, True)
        return ("F", table), stop
    if code == _A:
        start, stop = _read_length(data, pos, end, "array")
        items: list[Field] = []
        _decode_body(data, start, stop, items, False)
        return ("A", items), stop
    return _decode_scalar(data, code, pos, end)


def decode_table(
    data: bytes | bytearray | memoryview, offset: int = 0, *, end: int | None = None, finite: bool = False
) -> tuple[Table, int]:
    """Decode the 4-byte length-prefixed field table at ``offset``; return it and the offset after it.

    Nothing is read at or beyond ``end`` (default: the end of ``data``). With ``finite``, the table is read as
    RabbitMQ's parser (``rabbit_binary_parser:parse_table/1``) reads a client's table: like Erlang's binary
    float matching, it refuses a float or double that is NaN or infinite."""
    data = _as_buffer(data)
    if offset < 0:
        raise FieldError("negative offset")
    start, stop = _read_length(data, offset, len(data) if end is None else end, "field table")
    table: Table = {}
    _decode_body(data, start, stop, table, True, finite)
    return table, stop


def decode_table_pairs(
    data: bytes | bytearray | memoryview, offset: int = 0, *, finite: bool = False
) -> tuple[list[tuple[str, Field]], int]:
    """Like :func:`decode_table`, but the outermost table comes back as its (key, field) pairs in wire order,
    repeated keys included (RabbitMQ keeps a table as a list: ``lists:keyfind/3`` finds the first)."""
    data = _as_buffer(data)
    if offset < 0:
        raise FieldError("negative offset")
    start, stop = _read_length(data, offset, len(data), "field table")
    pairs: list[tuple[str, Field]] = []
    _decode_body(data, start, stop, pairs, True, finite)
    return pairs, stop


def decode_array(data: bytes | bytearray | memoryview, offset: int = 0) -> tuple[list[Field], int]:
    """Decode the 4-byte length-prefixed field array at ``offset``; return it and the offset after it."""
    data = _as_buffer(data)
    if offset < 0:
        raise FieldError("negative offset")
    start, stop = _read_length(data, offset, len(data), "array")
    items: list[Field] = []
    _decode_body(data, start, stop, items, False)
    return items, stop


def decode_field(data: bytes | bytearray | memoryview, offset: int = 0) -> tuple[Field, int]:
    """Decode one tagged field value (tag octet then value) at ``offset``."""
    data = _as_buffer(data)
    if offset < 0:
        raise FieldError("negative offset")
    return _decode_value(data, offset, len(data))


# --------------------------------------------------------------------------------------------------------
# encoding

_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
_INT_TAGS: Final = INTEGER_TAGS | {"T"}


def _self_reference() -> FieldError:
    return FieldError("field tables/arrays nested in themselves (self-referencing)")


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


def _encode_scalar_into(buf: bytearray, tag: str, value: Any) -> None:
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


def _split_field(field: Any) -> tuple[str, Any]:
    tag: Any
    value: Any
    try:
        tag, value = field
    except (TypeError, ValueError):
        raise FieldError(f"a field must be a (tag, value) pair, not {field!r}") from None
    if not isinstance(tag, str):
        raise FieldError(f"a field tag must be a str, not {tag!r}")
    return tag, value


def _table_key(key: object) -> bytes:
    if not isinstance(key, str):
        raise FieldError(f"field table keys must be str, not {type(key).__name__}")
    try:
        raw_key = key.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError as exc:
        raise FieldError(f"field table key is not encodable as UTF-8: {exc}") from None
    if len(raw_key) > 255:
        raise FieldError(f"field table key longer than 255 bytes: {key[:40]!r}...")
    return raw_key


def _encode_into(buf: bytearray, container: Any, keyed: bool) -> None:
    """Encode a table (``keyed``: a mapping of fields) or an array (a sequence of fields) with its length
    prefix. Iterative, like the decoder: nesting depth is not limited by the Python stack."""
    # each level: (items iterator, keyed, offset of the length prefix, id of the container)
    stack: list[tuple[Any, bool, int, int]] = []
    on_path: set[int] = set()

    def open_level(value: Any, is_table: bool) -> None:
        if id(value) in on_path:
            raise _self_reference()
        on_path.add(id(value))
        stack.append((iter(value.items()) if is_table else iter(value), is_table, len(buf), id(value)))
        buf.extend(b"\0\0\0\0")

    open_level(container, keyed)
    while stack:
        items, is_table, start, ident = stack[-1]
        item = next(items, _END)
        if item is _END:
            stack.pop()
            on_path.discard(ident)
            _pack_length(buf, start)
            continue
        if is_table:
            key, field = item
            raw_key = _table_key(key)
            buf.append(len(raw_key))
            buf += raw_key
        else:
            field = item
        tag, value = _split_field(field)
        if tag == "F":
            if not isinstance(value, Mapping):
                raise FieldError(f"table field needs a mapping, not {type(value).__name__}")
            buf.append(_F)
            open_level(value, True)
        elif tag == "A":
            if not isinstance(value, (list, tuple)):
                raise FieldError(f"array field needs a list, not {type(value).__name__}")
            buf.append(_A)
            open_level(value, False)
        else:
            _encode_scalar_into(buf, tag, value)


_END: Final[Any] = object()  # what next() gives for an exhausted level


def _pack_length(buf: bytearray, start: int) -> None:
    size = len(buf) - start - 4
    if size > 0xFFFFFFFF:
        raise FieldError(f"encoded table/array too long ({size} bytes)")
    _U32.pack_into(buf, start, size)


def encode_table(table: Mapping[str, Field]) -> bytes:
    """Encode a table with its 4-byte length prefix, keeping each field's tag and the key order."""
    if not isinstance(table, Mapping):
        raise FieldError(f"a table must be a mapping, not {type(table).__name__}")
    buf = bytearray()
    _encode_into(buf, table, True)
    return bytes(buf)


def encode_field(field: Field) -> bytes:
    """Encode one field as its tag octet followed by its value (array and table values length-prefixed)."""
    tag, value = _split_field(field)
    buf = bytearray()
    if tag == "F":
        if not isinstance(value, Mapping):
            raise FieldError(f"table field needs a mapping, not {type(value).__name__}")
        buf.append(_F)
        _encode_into(buf, value, True)
    elif tag == "A":
        if not isinstance(value, (list, tuple)):
            raise FieldError(f"array field needs a list, not {type(value).__name__}")
        buf.append(_A)
        _encode_into(buf, value, False)
    else:
        _encode_scalar_into(buf, tag, value)
    return bytes(buf)


# --------------------------------------------------------------------------------------------------------
# plain Python values


def _scalar_from_python(value: object) -> Field:
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


def _convert_tree(root: Any, root_is_map: bool, *, to_fields: bool) -> Any:
    """Walk nested mappings and lists without recursion, building plain values (``to_fields=False``: fields
    -> Python) or fields (``to_fields=True``: Python -> fields). Raises FieldError for a self-reference."""
    out_root: Any = {} if root_is_map else []
    # each level: (items iterator, output container, source id)
    stack: list[tuple[Any, Any, int]] = [(iter(root.items()) if root_is_map else iter(root), out_root, id(root))]
    on_path = {id(root)}
    while stack:
        items, out, ident = stack[-1]
        item = next(items, _END)
        if item is _END:
            stack.pop()
            on_path.discard(ident)
            continue
        if isinstance(out, dict):
            key, value = item
            if not isinstance(key, str):
                raise FieldError(f"field table keys must be str, not {type(key).__name__}")
        else:
            key, value = None, item
        child_src: Any = None
        child_is_map = False
        if to_fields:
            if isinstance(value, Mapping):
                child_src, child_is_map = value, True
            elif isinstance(value, (list, tuple)):
                child_src = value
            converted: Any = None if child_src is not None else _scalar_from_python(value)
        else:
            tag, inner = value
            if tag == "F":
                child_src, child_is_map = inner, True
            elif tag == "A":
                child_src = inner
            converted = None if child_src is not None else to_python(value)
        if child_src is not None:
            if id(child_src) in on_path:
                raise _self_reference()
            child_out: Any = {} if child_is_map else []
            converted = (("F" if child_is_map else "A"), child_out) if to_fields else child_out
            on_path.add(id(child_src))
            stack.append((iter(child_src.items()) if child_is_map else iter(child_src), child_out, id(child_src)))
        if key is not None:
            out[key] = converted
        else:
            out.append(converted)
    return out_root


def from_python(value: object) -> Field:
    """Build a field from a plain value, choosing tags the way pika does.

    str -> ``S``, bytes -> ``x``, bool -> ``t``, int -> ``I`` (if it fits signed 32 bits) else ``l``,
    float -> ``d``, Decimal -> ``D``, datetime -> ``T`` (whole seconds; naive means UTC), None -> ``V``,
    list/tuple -> ``A``, mapping -> ``F`` (recursively).
    """
    if isinstance(value, Mapping):
        return ("F", _convert_tree(value, True, to_fields=True))
    if isinstance(value, (list, tuple)):
        return ("A", _convert_tree(value, False, to_fields=True))
    return _scalar_from_python(value)


def table_from_python(values: Mapping[str, object]) -> Table:
    """Build a table from a mapping of plain values (see :func:`from_python`)."""
    table: Table = _convert_tree(values, True, to_fields=True)
    return table


def to_python(field: Field) -> Any:
    """The plain value of a field: ``T`` -> aware UTC datetime, ``A`` -> list, ``F`` -> dict, else as stored.

    A timestamp too large for ``datetime`` is returned as its raw integer.
    """
    tag, value = field
    if tag == "F":
        return _convert_tree(value, True, to_fields=False)
    if tag == "A":
        return _convert_tree(value, False, to_fields=False)
    if tag == "T":
        try:
            return datetime.fromtimestamp(value, UTC)
        except (OverflowError, ValueError, OSError):
            return value
    return value


def table_to_python(table: Mapping[str, Field]) -> dict[str, Any]:
    """A table as a dict of plain values (see :func:`to_python`)."""
    result: dict[str, Any] = _convert_tree(table, True, to_fields=False)
    return result
