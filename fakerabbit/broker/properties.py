"""The basic class content-header property block, kept as the client's raw bytes.

The block is the part of a content-header frame payload after class-id (2), weight (2) and body-size (8):
16-bit property-flag words (bit 0 set means another flags word follows), then each present property's
value, in order. Basic has 14 properties, flag bit 15 downwards:

content_type (shortstr), content_encoding (shortstr), headers (table), delivery_mode (octet),
priority (octet), correlation_id (shortstr), reply_to (shortstr), expiration (shortstr),
message_id (shortstr), timestamp (64-bit), type (shortstr), user_id (shortstr), app_id (shortstr),
cluster_id (shortstr).

The broker stores :class:`RawProperties` and delivers ``.raw`` unchanged. It finds where each value starts
the first time a property is read, then decodes single values on demand. When it must change the headers or
the expiration (dead-lettering, CC/BCC stripping) it uses :meth:`RawProperties.replace`, which copies every
other property's bytes unchanged.

A publish validates its block (:meth:`RawProperties.validate`, RabbitMQ's decoder: the only walk of the
grammar) and then reads expiration, user-id, reply-to and the headers, and a test suite tends to send the same
few blocks over and over. So the layout (where each value starts: a tuple, shared by every block of the same
shape) and the decoded headers table of recently seen small blocks are kept in module-level caches keyed by the block's
bytes: a block is scanned and its headers decoded once, not once per read and per message.
"""

from __future__ import annotations

import calendar
import enum
import struct
from collections.abc import Callable
from datetime import datetime
from typing import Any, Final

from fakerabbit.broker import texts
from fakerabbit.broker.fields import (
    FieldError,
    Table,
    decode_table,
    encode_table,
    table_to_python,
)

__all__ = [
    "EMPTY_PROPERTIES",
    "PROPERTY_NAMES",
    "UNSET",
    "DeferredProperties",
    "PropertiesError",
    "RawProperties",
    "build_properties",
]

#: The 14 basic properties, in flag order (bit 15 first).
PROPERTY_NAMES: Final = (
    "content_type",
    "content_encoding",
    "headers",
    "delivery_mode",
    "priority",
    "correlation_id",
    "reply_to",
    "expiration",
    "message_id",
    "timestamp",
    "type",
    "user_id",
    "app_id",
    "cluster_id",
)

#: A property block with no properties: one zero flags word.
EMPTY_PROPERTIES: Final = b"\x00\x00"

_CONTENT_TYPE, _CONTENT_ENCODING, _HEADERS, _DELIVERY_MODE, _PRIORITY = 0, 1, 2, 3, 4
_CORRELATION_ID, _REPLY_TO, _EXPIRATION, _MESSAGE_ID, _TIMESTAMP = 5, 6, 7, 8, 9
_TYPE, _USER_ID, _APP_ID, _CLUSTER_ID = 10, 11, 12, 13

# Value kinds, indexed like PROPERTY_NAMES.
_SHORTSTR, _TABLE, _OCTET, _U64 = 0, 1, 2, 3
_KINDS: Final = (
    _SHORTSTR,
    _SHORTSTR,
    _TABLE,
    _OCTET,
    _OCTET,
    _SHORTSTR,
    _SHORTSTR,
    _SHORTSTR,
    _SHORTSTR,
    _U64,
    _SHORTSTR,
    _SHORTSTR,
    _SHORTSTR,
    _SHORTSTR,
)
_N = len(PROPERTY_NAMES)
_BITS: Final = tuple(0x8000 >> i for i in range(_N))
#: The flags of the properties a publish reads (headers, delivery-mode, reply-to, expiration, user-id): a block
#: with none of them set gives ``None`` for each, so a publish need not read them.
PUBLISH_READ_FLAGS: Final = (
    _BITS[_HEADERS] | _BITS[_DELIVERY_MODE] | _BITS[_REPLY_TO] | _BITS[_EXPIRATION] | _BITS[_USER_ID]
)
_KNOWN_FLAGS: Final = 0xFFFC  # bits 15..2; bit 1 is unused and bit 0 means "another flags word follows"

_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_U64_STRUCT = struct.Struct(">Q")


class PropertiesError(ValueError):
    """A content-header property block is malformed, or a property value cannot be encoded."""


class _Unset(enum.Enum):
    UNSET = 0


#: Default of :meth:`RawProperties.replace` arguments: keep the property as it is.
UNSET: Final = _Unset.UNSET


def _scan(raw: bytes) -> tuple[int, ...]:
    """Offsets where each property's encoded value starts (-1 if absent); validates the layout."""
    size = len(raw)
    if size < 2:
        raise PropertiesError("truncated content header: missing property flags")
    flags = (raw[0] << 8) | raw[1]
    if flags & 0x0002:
        raise PropertiesError(f"unknown property flag bit 1 set in property flags 0x{flags:04x}")
    pos = 2
    word = flags
    while word & 1:
        if pos + 2 > size:
            raise PropertiesError("truncated content header: missing continuation property flags word")
        word = (raw[pos] << 8) | raw[pos + 1]
        pos += 2
        if word & 0xFFFE:
            raise PropertiesError(f"unknown property flags 0x{word:04x} in continuation flags word")
    starts = [-1] * _N
    for i in range(_N):
        if flags & _BITS[i]:
            starts[i] = pos
            kind = _KINDS[i]
            if kind == _SHORTSTR:
                if pos >= size:
                    raise PropertiesError(f"truncated content header: missing {PROPERTY_NAMES[i]}")
                pos += 1 + raw[pos]
            elif kind == _TABLE:
                if pos + 4 > size:
                    raise PropertiesError(f"truncated content header: missing {PROPERTY_NAMES[i]}")
                pos += 4 + _U32.unpack_from(raw, pos)[0]
            elif kind == _OCTET:
                pos += 1
            else:
                pos += 8
            if pos > size:
                raise PropertiesError(f"truncated content header: {PROPERTY_NAMES[i]} runs past the end")
    if pos != size:
        raise PropertiesError(f"malformed content header: {size - pos} unexpected bytes after the properties")
    return tuple(starts)


#: Blocks up to this size are cached (larger ones, with big headers tables, are scanned per object).
_CACHE_BLOCK_MAX = 512
#: Entries per cache; a full cache is emptied (a test suite's working set is far smaller).
_CACHE_ENTRIES = 4096
_ABSENT: Final = (-1,) * _N
#: raw block -> layout (offsets where each value starts, -1 if absent); only valid blocks get in
_layouts: dict[bytes, tuple[int, ...]] = {EMPTY_PROPERTIES: _ABSENT}
#: layout -> the same layout: blocks of the same shape (same properties, same lengths) share one tuple
_shapes: dict[tuple[int, ...], tuple[int, ...]] = {_ABSENT: _ABSENT}
#: raw block -> its decoded headers table (shared and read-only, like :attr:`RawProperties.headers`)
_tables: dict[bytes, Table] = {}


def _layout_of(raw: bytes) -> tuple[int, ...]:
    """:func:`_scan`, cached for small blocks."""
    starts = _layouts.get(raw)
    if starts is not None:
        return starts
    starts = _scan(raw)
    if len(raw) <= _CACHE_BLOCK_MAX:
        if len(_layouts) >= _CACHE_ENTRIES:
            _layouts.clear()
            _layouts[EMPTY_PROPERTIES] = _ABSENT
        if len(_shapes) >= _CACHE_ENTRIES:
            _shapes.clear()
        starts = _shapes.setdefault(starts, starts)
        _layouts[raw] = starts
    return starts


def _decode_headers(raw: bytes, start: int, *, finite: bool = False) -> Table:
    """The headers table at ``start`` (cached for small blocks); raises :class:`PropertiesError`.

    Only tables RabbitMQ's parser takes (``finite``: no NaN or infinite float) are cached; a table that holds one
    (a block fakerabbit built, e.g. from the management API's JSON) is decoded again at each read, or refused
    with ``finite``."""
    table = _tables.get(raw)
    if table is not None:
        return table
    try:
        table = decode_table(raw, start, finite=True)[0]
    except FieldError as exc:
        if finite:
            raise PropertiesError(texts.invalid_headers_table(exc)) from None
        try:
            return decode_table(raw, start)[0]
        except FieldError as exc2:
            raise PropertiesError(texts.invalid_headers_table(exc2)) from None
    if len(raw) <= _CACHE_BLOCK_MAX:
        if len(_tables) >= _CACHE_ENTRIES:
            _tables.clear()
        _tables[raw] = table
    return table


def _encode_shortstr(name: str, value: object) -> bytes:
    if not isinstance(value, str):
        raise PropertiesError(f"property {name} must be a str, not {type(value).__name__}")
    try:
        data = value.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError as exc:
        raise PropertiesError(f"property {name} is not encodable as UTF-8: {exc}") from None
    if len(data) > 255:
        raise PropertiesError(f"property {name} is longer than 255 bytes")
    return bytes((len(data),)) + data


def _encode_property(index: int, value: object) -> bytes:
    name = PROPERTY_NAMES[index]
    kind = _KINDS[index]
    if kind == _SHORTSTR:
        return _encode_shortstr(name, value)
    if kind == _TABLE:
        if not isinstance(value, dict):
            raise PropertiesError(f"property {name} must be a Table, not {type(value).__name__}")
        try:
            return encode_table(value)
        except FieldError as exc:
            raise PropertiesError(f"property {name}: {exc}") from None
    if kind == _OCTET:
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 255:
            raise PropertiesError(f"property {name} must be an int from 0 to 255, not {value!r}")
        return bytes((value,))
    if isinstance(value, datetime):
        value = calendar.timegm(value.utctimetuple())
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 0xFFFFFFFFFFFFFFFF:
        raise PropertiesError(f"property {name} must be an unsigned 64-bit int or a datetime, not {value!r}")
    return _U64_STRUCT.pack(value)


def _build(values: tuple[object, ...]) -> bytes:
    flags = 0
    parts = [b""]
    for i, value in enumerate(values):
        if value is not None:
            flags |= _BITS[i]
            parts.append(_encode_property(i, value))
    parts[0] = _U16.pack(flags)
    return b"".join(parts)


class RawProperties:
    """A message's content-header property block, stored as raw bytes and decoded lazily.

    Constructing one does not look at the bytes. The first property access (or :meth:`validate`) scans the
    flags and value lengths once; a malformed block then raises :class:`PropertiesError`. Property
    accessors return ``None`` for absent properties. Short strings decode as UTF-8 with
    ``surrogateescape``, so non-UTF-8 bytes survive :meth:`replace` and re-encoding.

    :attr:`headers` is decoded once and cached. The cached table is shared by every caller and must be
    treated as read-only. Copy it before changing it, then pass the copy to :meth:`replace`.
    """

    __slots__ = ("_headers", "_headers_decoded", "_starts", "raw")

    raw: bytes
    _starts: tuple[int, ...] | None
    _headers: Table | None
    _headers_decoded: bool

    def __init__(self, raw: bytes | bytearray | memoryview = EMPTY_PROPERTIES) -> None:
        self.raw = raw if type(raw) is bytes else bytes(raw)
        self._starts = None
        self._headers = None
        self._headers_decoded = False

    def __repr__(self) -> str:
        return f"RawProperties({self.raw!r})"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, RawProperties):
            return self.raw == other.raw
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.raw)

    def _layout(self) -> tuple[int, ...]:
        starts = self._starts
        if starts is None:
            starts = self._starts = _layout_of(self.raw)
        return starts

    def _start(self, index: int) -> int:
        starts = self._starts
        if starts is None:
            starts = self._starts = _layout_of(self.raw)
        return starts[index]

    def _shortstr(self, index: int) -> str | None:
        starts = self._starts
        if starts is None:
            starts = self._starts = _layout_of(self.raw)
        start = starts[index]
        if start < 0:
            return None
        raw = self.raw
        return raw[start + 1 : start + 1 + raw[start]].decode("utf-8", "surrogateescape")

    def _octet(self, index: int) -> int | None:
        starts = self._starts
        if starts is None:
            starts = self._starts = _layout_of(self.raw)
        start = starts[index]
        return None if start < 0 else self.raw[start]

    def validate(self) -> None:
        """Check the whole block as RabbitMQ decodes a client's (``rabbit_framing_amqp_0_9_1:decode_properties``):
        the layout (nothing may follow the last property), and the headers table as its parser reads a table
        (a NaN or infinite float does not parse). Raises :class:`PropertiesError`."""
        starts = self._starts
        if starts is None:
            starts = self._starts = _layout_of(self.raw)
        start = starts[_HEADERS]
        if start >= 0 and not self._headers_decoded:
            self._headers = _decode_headers(self.raw, start, finite=True)
            self._headers_decoded = True

    @property
    def headers(self) -> Table | None:
        """The headers table (cached and shared: do not mutate it), or ``None`` if absent."""
        if not self._headers_decoded:
            start = self._start(_HEADERS)
            if start >= 0:
                self._headers = _decode_headers(self.raw, start)
            self._headers_decoded = True
        return self._headers

    @property
    def content_type(self) -> str | None:
        return self._shortstr(_CONTENT_TYPE)

    @property
    def content_encoding(self) -> str | None:
        return self._shortstr(_CONTENT_ENCODING)

    @property
    def delivery_mode(self) -> int | None:
        return self._octet(_DELIVERY_MODE)

    @property
    def priority(self) -> int | None:
        return self._octet(_PRIORITY)

    @property
    def correlation_id(self) -> str | None:
        return self._shortstr(_CORRELATION_ID)

    @property
    def reply_to(self) -> str | None:
        return self._shortstr(_REPLY_TO)

    @property
    def expiration(self) -> str | None:
        """The raw expiration string, unvalidated (the broker checks that it is a TTL)."""
        return self._shortstr(_EXPIRATION)

    @property
    def message_id(self) -> str | None:
        return self._shortstr(_MESSAGE_ID)

    @property
    def timestamp(self) -> int | None:
        """Raw unsigned 64-bit seconds."""
        start = self._start(_TIMESTAMP)
        return None if start < 0 else int(_U64_STRUCT.unpack_from(self.raw, start)[0])

    @property
    def type(self) -> str | None:
        return self._shortstr(_TYPE)

    @property
    def user_id(self) -> str | None:
        return self._shortstr(_USER_ID)

    @property
    def app_id(self) -> str | None:
        return self._shortstr(_APP_ID)

    @property
    def cluster_id(self) -> str | None:
        return self._shortstr(_CLUSTER_ID)

    def to_dict(self) -> dict[str, Any]:
        """The present properties as plain values, in flag order.

        Headers go through :func:`~fakerabbit.broker.fields.table_to_python`; ``timestamp`` stays an int.
        """
        result: dict[str, Any] = {}
        for i, name in enumerate(PROPERTY_NAMES):
            if self._start(i) >= 0:
                value = getattr(self, name)
                result[name] = table_to_python(value) if i == _HEADERS else value
        return result

    def replace(
        self,
        *,
        content_type: str | _Unset | None = UNSET,
        content_encoding: str | _Unset | None = UNSET,
        headers: Table | _Unset | None = UNSET,
        delivery_mode: int | _Unset | None = UNSET,
        priority: int | _Unset | None = UNSET,
        correlation_id: str | _Unset | None = UNSET,
        reply_to: str | _Unset | None = UNSET,
        expiration: str | _Unset | None = UNSET,
        message_id: str | _Unset | None = UNSET,
        timestamp: int | datetime | _Unset | None = UNSET,
        type: str | _Unset | None = UNSET,
        user_id: str | _Unset | None = UNSET,
        app_id: str | _Unset | None = UNSET,
        cluster_id: str | _Unset | None = UNSET,
    ) -> RawProperties:
        """A copy with some properties replaced (a value), removed (``None``) or kept (not given).

        The broker uses it for ``headers`` and ``expiration`` (and ``reply_to`` for direct reply-to).
        Every kept property's bytes are copied unchanged; the flags are rewritten as one word.
        Raises :class:`PropertiesError` if this block is malformed or a new value cannot be encoded.
        """
        changes = (
            content_type,
            content_encoding,
            headers,
            delivery_mode,
            priority,
            correlation_id,
            reply_to,
            expiration,
            message_id,
            timestamp,
            type,
            user_id,
            app_id,
            cluster_id,
        )
        if all(change is UNSET for change in changes):
            return self
        raw = self.raw
        starts = self._layout()
        flags = 0
        parts = [b""]
        end = len(raw)
        # Walk backwards so that each present property ends where the next present one starts.
        for i in range(_N - 1, -1, -1):
            start = starts[i]
            change = changes[i]
            if change is not UNSET:
                if change is not None:
                    flags |= _BITS[i]
                    parts.append(_encode_property(i, change))
            elif start >= 0:
                flags |= _BITS[i]
                parts.append(raw[start:end])
            if start >= 0:
                end = start
        parts.append(_U16.pack(flags))
        parts.reverse()
        return RawProperties(b"".join(parts))


class DeferredProperties(RawProperties):
    """A property block built on first use: ``base`` with its headers replaced by ``make_headers(*args)`` and,
    with ``drop_expiration``, without ``expiration``.

    Dead-lettering copies every message it moves, and most copies are not looked at property by property
    before they are delivered (many never are: they expire again, or a test only counts them). The headers
    table is built on the first access to :attr:`headers`, the bytes on the first access to :attr:`raw` or to
    any other property; the result is exactly ``base.replace(headers=..., expiration=None)``. ``make_headers``
    must be pure (it may run at any later time) and return a table built by the broker, which encodes.
    (``make_headers`` and its ``args`` tuple rather than a ``functools.partial``: one object fewer per copy for
    the garbage collector; both are let go once the headers are built.)
    """

    __slots__ = ("_args", "_base", "_drop_expiration", "_make_headers", "_rendered")

    def __init__(
        self,
        base: RawProperties,
        make_headers: Callable[..., Table],
        args: tuple[Any, ...] = (),
        *,
        drop_expiration: bool = False,
    ) -> None:  # RawProperties.__init__ is not called: there are no bytes yet
        self._base: RawProperties | None = base
        self._make_headers: Callable[..., Table] | None = make_headers
        self._args: tuple[Any, ...] = args
        self._drop_expiration = drop_expiration
        self._rendered: bytes | None = None
        self._starts = None
        self._headers = None
        self._headers_decoded = False

    @property
    def raw(self) -> bytes:
        """The encoded block (built now if it was not yet)."""
        rendered = self._rendered
        if rendered is None:
            base = self._base
            assert base is not None
            expiration: str | _Unset | None = None if self._drop_expiration else UNSET
            rendered = base.replace(headers=self.headers, expiration=expiration).raw
            self._rendered = rendered
            self._base = None
        return rendered

    @raw.setter
    def raw(self, value: bytes) -> None:
        self._rendered = bytes(value)
        self._base = None
        self._starts = None

    @property
    def headers(self) -> Table | None:
        """The new headers table (built on first access; shared: do not mutate it)."""
        if not self._headers_decoded:
            make_headers = self._make_headers
            assert make_headers is not None
            self._headers = make_headers(*self._args)
            self._headers_decoded = True
            self._make_headers, self._args = None, ()
        return self._headers


def build_properties(
    *,
    content_type: str | None = None,
    content_encoding: str | None = None,
    headers: Table | None = None,
    delivery_mode: int | None = None,
    priority: int | None = None,
    correlation_id: str | None = None,
    reply_to: str | None = None,
    expiration: str | None = None,
    message_id: str | None = None,
    timestamp: int | datetime | None = None,
    type: str | None = None,
    user_id: str | None = None,
    app_id: str | None = None,
    cluster_id: str | None = None,
) -> bytes:
    """Encode a property block from plain values (``None`` = absent), as a client would send it.

    ``headers`` is a :data:`~fakerabbit.broker.fields.Table` (see ``table_from_python``); ``timestamp`` is
    raw seconds or a datetime (naive means UTC). Raises :class:`PropertiesError` for unencodable values.
    """
    return _build(
        (
            content_type,
            content_encoding,
            headers,
            delivery_mode,
            priority,
            correlation_id,
            reply_to,
            expiration,
            message_id,
            timestamp,
            type,
            user_id,
            app_id,
            cluster_id,
        )
    )
