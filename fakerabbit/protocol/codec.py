"""pamqp, adapted for a server.

- pamqp validates names on ``Queue.DeclareOk``, ``Basic.Deliver``, ``Basic.GetOk`` and ``Basic.Return`` as a
  client would (a strict regex, 127-char exchanges); RabbitMQ accepts any UTF-8 name up to 255 bytes, so the
  subclasses here skip that validation.
- :func:`decode_args` decodes a client method's arguments exactly as RabbitMQ's generated Erlang decoder does
  (pamqp is more lenient: it ignores trailing octets, for instance), so malformed input gets RabbitMQ's
  reaction: 501 ``cannot decode`` for a bad argument layout, a dead connection for a malformed field table.
  Field tables are decoded once, by fakerabbit's tag-preserving decoder (:mod:`fakerabbit.broker.fields`),
  because RabbitMQ's checks and error texts depend on the wire type (``signedint`` vs ``long`` vs ``longstr``)
  that pamqp's decoder throws away: a method's table arguments hold typed tables (:func:`arguments_of`).
- Content-header property blocks are read by :mod:`fakerabbit.broker.properties` alone
  (``RawProperties.validate`` is RabbitMQ's decoder).
"""

from __future__ import annotations

import struct

from pamqp import base as base  # re-exported: the rest of protocol/ reaches pamqp only through here
from pamqp import commands as commands
from pamqp import encode

from fakerabbit.broker.fields import FieldError, Table, decode_table, encode_table


class _NoValidate(base.Frame):
    """Skips pamqp's client-side validation; a shortstr may carry a client's octets that are not UTF-8 (as
    surrogate escapes: basic.publish's exchange and routing key are not checked by RabbitMQ) and goes out as
    those octets."""

    def validate(self) -> None:
        return None

    def marshal(self) -> bytes:
        out: list[bytes] = []
        bits, nbits = 0, -1
        for argument in self.__slots__:
            kind = self.amqp_type(argument)
            value = getattr(self, argument, 0)
            if kind == "bit":
                if nbits < 0 or nbits == 8:
                    if nbits == 8:
                        out.append(bytes([bits]))
                    bits, nbits = 0, 0
                bits |= (1 << nbits) if value else 0
                nbits += 1
                continue
            if nbits >= 0:
                out.append(bytes([bits]))
                bits, nbits = 0, -1
            if kind == "shortstr":
                raw = str(value or "").encode("utf-8", "surrogateescape")
                out.append(bytes([len(raw)]) + raw)
            else:
                out.append(encode.by_type(value, kind))
        if nbits >= 0:
            out.append(bytes([bits]))
        return b"".join(out)


class DeclareOk(_NoValidate, commands.Queue.DeclareOk):
    pass


class Deliver(_NoValidate, commands.Basic.Deliver):
    pass


class GetOk(_NoValidate, commands.Basic.GetOk):
    pass


class Return(_NoValidate, commands.Basic.Return):
    pass


class ConsumeOk(_NoValidate, commands.Basic.ConsumeOk):
    pass


class Cancel(_NoValidate, commands.Basic.Cancel):
    pass


class CancelOk(_NoValidate, commands.Basic.CancelOk):
    pass


class ChannelOpenOk(_NoValidate, commands.Channel.OpenOk):
    """RabbitMQ sends an empty channel-id (pamqp insists on "0")."""


def arguments_of(method: base.Frame, field: str = "arguments") -> Table:
    """A table argument (``arguments`` unless ``field`` names another) of a method :func:`decode_args` decoded,
    with its wire types kept; ``{}`` if the method has none."""
    table = getattr(method, field, None)
    return table if isinstance(table, dict) else {}


def strip_cr_lf(name: str) -> str:
    """rabbit_channel:strip_cr_lf/1, applied to exchange and queue names."""
    return name.replace("\r", "").replace("\n", "") if ("\r" in name or "\n" in name) else name


def encode_connection_start(properties: list[tuple[str, str, object]], mechanisms: bytes, locales: bytes) -> bytes:
    """``connection.start`` 0-9 with server-properties in the given key order (pamqp would sort the keys)."""
    table = encode_table({key: (tag, value) for key, tag, value in properties})
    payload = struct.pack(">HHBB", 10, 10, 0, 9) + table
    payload += struct.pack(">I", len(mechanisms)) + mechanisms + struct.pack(">I", len(locales)) + locales
    return struct.pack(">BHI", 1, 0, len(payload)) + payload + b"\xce"


_u32 = struct.Struct(">I")


class MethodDecodeError(Exception):
    """A client method's arguments do not decode as RabbitMQ's framing decodes them."""

    def __init__(self, kind: str) -> None:
        super().__init__(kind)
        #: ``"undecodable"``: the layout does not match (501 ``cannot decode <<...>>`` for the method);
        #: ``"utf8"``: a shortstr is not UTF-8 (501 ``Malformed UTF-8 in shortstr``);
        #: ``"table"``: a field table does not parse (RabbitMQ's reader crashes: the socket just closes).
        self.kind = kind


_LAYOUT_CACHE: dict[type, tuple[tuple[str, str], ...]] = {}


def _layout(cls: type[base.Frame]) -> tuple[tuple[str, str], ...]:
    layout = _LAYOUT_CACHE.get(cls)
    if layout is None:
        layout = _LAYOUT_CACHE[cls] = tuple((a, cls.amqp_type(a)) for a in cls.__slots__)
    return layout


_PUBLISH = commands.Basic.Publish
_ACK = commands.Basic.Ack
_ack_args = struct.Struct(">QB")
_short = struct.Struct(">H")


def _publish_str(raw: bytes | bytearray) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        # RabbitMQ decodes basic.publish with a hand-written clause that takes any octets
        return raw.decode("utf-8", "surrogateescape")


def publish_fields(buf: bytes | bytearray, start: int, end: int) -> tuple[str, str, int] | None:
    """``basic.publish``'s exchange, routing key and bits octet (mandatory 1, immediate 2), decoded from its
    arguments at ``buf[start:end]`` when they have exactly that layout (ticket, two shortstrs, one octet of bits);
    None otherwise."""
    if end - start < 5:
        return None
    rk_at = start + 3 + buf[start + 2]
    if rk_at >= end:
        return None
    bits_at = rk_at + 1 + buf[rk_at]
    if bits_at + 1 != end:
        return None
    exchange = _publish_str(buf[start + 3 : rk_at]) if rk_at > start + 3 else ""
    routing_key = _publish_str(buf[rk_at + 1 : bits_at]) if bits_at > rk_at + 1 else ""
    return exchange, routing_key, buf[bits_at]


def _decode_publish(args: bytes) -> commands.Basic.Publish | None:
    """``basic.publish`` (ticket, exchange, routing key, mandatory and immediate bits) when the payload is
    exactly that long; None otherwise."""
    fields = publish_fields(args, 0, len(args))
    if fields is None:
        return None
    method = _PUBLISH.__new__(_PUBLISH)
    method.ticket = _short.unpack_from(args, 0)[0]
    method.exchange, method.routing_key, bits = fields
    method.mandatory = bool(bits & 1)
    method.immediate = bool(bits & 2)
    return method


def decode_args(cls: type[base.Frame], args: bytes) -> base.Frame:
    """Decode a client method's arguments exactly as ``rabbit_framing_amqp_0_9_1:decode_method_fields/2``.

    pamqp is more lenient (it ignores trailing octets, for one), so fakerabbit decodes client methods itself
    and only builds pamqp's objects. Raises :class:`MethodDecodeError`.

    ``basic.publish`` and ``basic.ack`` (a message's hot path) take a shortcut when their layout is exact; any
    other payload of theirs goes the general way (and gets its error from there).
    """
    if cls is _PUBLISH:
        publish = _decode_publish(args)
        if publish is not None:
            return publish
    elif cls is _ACK and len(args) == 9:
        ack = _ACK.__new__(_ACK)
        tag, bits = _ack_args.unpack(args)
        ack.delivery_tag, ack.multiple = tag, bool(bits & 1)
        return ack
    end = len(args)
    pos = 0
    bit = 0
    values: list[tuple[str, str, int, int]] = []  # (attribute, kind, start, stop)
    for name, kind in _layout(cls):
        if kind == "bit":
            if bit == 0:
                pos += 1
                if pos > end:
                    raise MethodDecodeError("undecodable")
            values.append((name, kind, pos - 1, bit))
            bit = (bit + 1) % 8
            continue
        bit = 0
        start = pos
        if kind == "octet":
            pos += 1
        elif kind == "short":
            pos += 2
        elif kind == "long":
            pos += 4
        elif kind == "longlong":
            pos += 8
        elif kind == "shortstr":
            if pos >= end:
                raise MethodDecodeError("undecodable")
            start = pos + 1
            pos = start + args[pos]
        else:  # longstr, table
            if pos + 4 > end:
                raise MethodDecodeError("undecodable")
            start = pos + 4
            pos = start + _u32.unpack_from(args, pos)[0]
        if pos > end:
            raise MethodDecodeError("undecodable")
        values.append((name, kind, start, pos))
    if pos != end:
        raise MethodDecodeError("undecodable")
    method: base.Frame = cls.__new__(cls)
    for name, kind, start, stop in values:
        value: object
        if kind == "bit":
            value = bool(args[start] & (1 << stop))
        elif kind == "octet":
            value = args[start]
        elif kind == "short":
            value = struct.unpack_from(">H", args, start)[0]
        elif kind == "long":
            value = _u32.unpack_from(args, start)[0]
        elif kind == "longlong":
            value = struct.unpack_from(">Q", args, start)[0]
        elif kind == "shortstr":
            try:
                value = args[start:stop].decode("utf-8")
            except UnicodeDecodeError:
                if cls is not commands.Basic.Publish:
                    raise MethodDecodeError("utf8") from None
                # RabbitMQ decodes basic.publish with a hand-written clause that takes any octets
                value = args[start:stop].decode("utf-8", "surrogateescape")
        elif kind == "longstr":
            value = args[start:stop]
        else:  # a table, as RabbitMQ's parser reads it (typed: see arguments_of)
            try:
                value = decode_table(args, start - 4, end=stop, finite=True)[0]
            except FieldError:
                raise MethodDecodeError("table") from None
        setattr(method, name, value)
    return method
