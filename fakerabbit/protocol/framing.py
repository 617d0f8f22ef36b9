"""AMQP 0-9-1 framing: split the byte stream into frames, build outgoing frames.

We do our own framing (pamqp raises on partial buffers and does not enforce ``frame_max``) and let pamqp decode
and encode exactly one method at a time. Content header and body frames carry the client's raw bytes: the
property block is stored and re-sent unchanged, so it never passes through pamqp's lossy property codec.

Checks follow ``rabbit_reader:handle_input/3``: the size in a frame header is checked against ``frame_max``
before the payload is read (RabbitMQ allows a payload of up to ``frame_max`` octets, eight more than the spec,
and reports the limit as ``frame_max - 8``); the frame-end octet is checked once the payload is in. The texts
RabbitMQ's reader gives about a frame it does not take are :func:`frame_error_text` and
:func:`unexpected_frame_text`.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

from pamqp import base, commands
from pamqp import frame as pamqp_frame

from fakerabbit.broker.erlterm import Format, Term

PROTOCOL_HEADER = b"AMQP\x00\x00\x09\x01"
#: Headers RabbitMQ answers with a 0-9-1 connection.start: 0-9-1 itself and the 0-9 header (AMQP 1 1 0 9).
ACCEPTED_HEADERS = (PROTOCOL_HEADER, b"AMQP\x01\x01\x00\x09")
FRAME_METHOD, FRAME_HEADER, FRAME_BODY, FRAME_HEARTBEAT = 1, 2, 3, 8
FRAME_END = 0xCE
FRAME_MIN_SIZE = 4096
EMPTY_FRAME_SIZE = 8
HEARTBEAT_FRAME = b"\x08\x00\x00\x00\x00\x00\x00\xce"

#: What 4.x answers a header it does not take with (AMQP 1.0 with SASL: its native protocol).
AMQP_SASL_HEADER = b"AMQP\x03\x01\x00\x00"


def refusal_header(header: bytes, *, sasl: bool) -> bytes:
    """``rabbit_reader:refuse_connection``: the header offered to a client whose header is refused. Up to 3.13
    always 0-9-1; from 4.0 the AMQP 1.0 SASL header unless the client sent ``AMQP 0 0 Minor _`` with
    Minor >= 9. (An ``AMQP 3 1 0 0`` header starts an AMQP 1.0 session on 4.x: fakerabbit, which speaks only
    0-9-1, answers with the header and closes.)"""
    if not sasl or (header[:6] == b"AMQP\x00\x00" and header[6] >= 9):
        return PROTOCOL_HEADER
    return AMQP_SASL_HEADER


_frame_head = struct.Struct(">BHI")
_method_id = struct.Struct(">I")
_content_head = struct.Struct(">HHQ")
_close_ids = struct.Struct(">HHH")
_short2 = struct.Struct(">HH")


class FrameTooLarge(Exception):
    """A frame header announced a payload larger than ``frame_max`` (RabbitMQ: ``{frame_too_large, ...}``)."""

    def __init__(self, ftype: int, channel: int, size: int, limit: int) -> None:
        super().__init__(f"frame_too_large {size} {limit}")
        self.type, self.channel, self.size, self.limit = ftype, channel, size, limit


class BadFrameEnd(Exception):
    """The octet after a payload is not 0xCE (RabbitMQ: ``{invalid_frame_end_marker, Octet}``)."""

    def __init__(self, ftype: int, channel: int, payload: bytes, end: int) -> None:
        super().__init__(f"invalid_frame_end_marker {end}")
        self.type, self.channel, self.payload, self.end = ftype, channel, payload, end


class UnknownMethod(Exception):
    """A method frame whose class/method id RabbitMQ's framing does not know: its reader crashes and the
    socket is closed without a close frame."""


class FrameReader:
    """Accumulates bytes and yields complete frames; raises :class:`FrameTooLarge` / :class:`BadFrameEnd`."""

    __slots__ = ("_buf", "_pos", "frame_max")

    def __init__(self, frame_max: int) -> None:
        self._buf = bytearray()
        self._pos = 0
        self.frame_max = frame_max

    def feed(self, data: bytes) -> None:
        if self._pos:
            del self._buf[: self._pos]
            self._pos = 0
        self._buf += data

    def next_frame(self) -> tuple[int, int, bytes] | None:
        """The next complete frame as (type, channel, payload), or None."""
        buf, pos = self._buf, self._pos
        if len(buf) - pos < 7:
            return None
        ftype, channel, size = _frame_head.unpack_from(buf, pos)
        if self.frame_max and size > self.frame_max:
            raise FrameTooLarge(ftype, channel, size, self.frame_max - EMPTY_FRAME_SIZE)
        end = pos + 7 + size
        if len(buf) < end + 1:
            return None
        payload = bytes(buf[pos + 7 : end])
        if buf[end] != FRAME_END:
            raise BadFrameEnd(ftype, channel, payload, buf[end])
        self._pos = end + 1
        if self._pos > 65536:
            del buf[: self._pos]
            self._pos = 0
        return ftype, channel, payload

    def clear(self) -> None:
        """Drop whatever is buffered (the connection is gone)."""
        self._buf = bytearray()
        self._pos = 0

    def pending(self) -> int:
        return len(self._buf) - self._pos


def method_index(payload: bytes) -> int:
    return int(_method_id.unpack_from(payload, 0)[0])


class _Extension(base.Frame):
    """A method RabbitMQ's framing knows and pamqp does not (decoded by fakerabbit's own decoder).

    ``__slots__`` lists the arguments in wire order, as pamqp's classes do: keep it unsorted."""


class AccessRequest(_Extension):
    """access.request (30.10), deprecated: RabbitMQ answers with access.request-ok, ticket 1."""

    __slots__ = ("realm", "exclusive", "passive", "active", "write", "read")  # noqa: RUF023 (wire order)
    frame_id, index, name = 10, 0x001E000A, "Access.Request"
    _realm, _exclusive, _passive, _active, _write, _read = "shortstr", "bit", "bit", "bit", "bit", "bit"


class AccessRequestOk(_Extension):
    __slots__ = ("ticket",)
    frame_id, index, name = 11, 0x001E000B, "Access.RequestOk"
    _ticket = "short"


class BasicCredit(_Extension):
    """basic.credit (60.200), RabbitMQ's credit-flow extension (used by its AMQP 1.0 plugin)."""

    __slots__ = ("consumer_tag", "credit", "drain")  # wire order
    frame_id, index, name = 200, 0x003C00C8, "Basic.Credit"
    _consumer_tag, _credit, _drain = "shortstr", "long", "bit"


class BasicCreditOk(_Extension):
    __slots__ = ("available",)
    frame_id, index, name = 201, 0x003C00C9, "Basic.CreditOk"
    _available = "long"


class BasicCreditDrained(_Extension):
    __slots__ = ("consumer_tag", "credit_drained")  # wire order
    frame_id, index, name = 202, 0x003C00CA, "Basic.CreditDrained"
    _consumer_tag, _credit_drained = "shortstr", "long"


EXTENSION_METHODS: dict[int, type[base.Frame]] = {
    cls.index: cls for cls in (AccessRequest, AccessRequestOk, BasicCredit, BasicCreditOk, BasicCreditDrained)
}
#: access.request-ok with ticket 1, as RabbitMQ sends it
ACCESS_REQUEST_OK = struct.pack(">IH", 0x001E000B, 1)


#: Every known method class by its class and method ids as they are on the wire (pamqp's first).
_BY_WIRE_ID: dict[bytes, type[base.Frame]] = {
    _method_id.pack(index): cls for index, cls in {**EXTENSION_METHODS, **commands.INDEX_MAPPING}.items()
}


def method_class(payload: bytes) -> type[base.Frame]:
    """The pamqp class for a method frame payload (at least 4 octets); unknown ids raise :class:`UnknownMethod`."""
    cls = _BY_WIRE_ID.get(payload[:4])
    if cls is None:
        index = method_index(payload)
        raise UnknownMethod(f"unknown method class {index >> 16} method {index & 0xFFFF}")
    return cls


def encode_raw_method(channel: int, payload: bytes) -> bytes:
    """A method frame around an already encoded method payload (class and method ids included)."""
    return _frame_head.pack(FRAME_METHOD, channel, len(payload)) + payload + b"\xce"


#: (channel, method class, argument values) -> the encoded frame: replies such as channel.open-ok, close-ok,
#: qos-ok or a queue's declare-ok repeat, and pamqp's marshal is most of their cost
_method_frames: dict[tuple[object, ...], bytes] = {}
_METHOD_FRAMES = 256


def encode_method(channel: int, method: base.Frame) -> bytes:
    """pamqp's encoding of ``method`` on ``channel``, cached when its arguments are hashable (no tables)."""
    cls = type(method)
    key = (channel, cls, *[getattr(method, name) for name in cls.__slots__])
    try:
        frame = _method_frames.get(key)
    except TypeError:  # a table argument
        return pamqp_frame.marshal(method, channel)
    if frame is None:
        frame = pamqp_frame.marshal(method, channel)
        if len(_method_frames) >= _METHOD_FRAMES:
            _method_frames.clear()
        _method_frames[key] = frame
    return frame


_DELIVER_ID = _method_id.pack(commands.Basic.Deliver.index)
_deliver_fixed = struct.Struct(">qB")  # pamqp packs a longlong signed


def encode_deliver(
    channel: int, consumer_tag: str, delivery_tag: int, redelivered: bool, exchange: str, routing_key: str
) -> bytes | None:
    """The ``basic.deliver`` method frame, byte for byte what pamqp marshals for
    ``codec.Deliver(consumer_tag, delivery_tag, redelivered, exchange, routing_key)`` (pamqp's class id, method id
    and argument order; shortstrs as UTF-8 with surrogate escapes), without building pamqp's object. None when a
    shortstr is longer than 255 octets (the caller takes pamqp's path, which raises)."""
    tag = consumer_tag.encode("utf-8", "surrogateescape")
    ex = exchange.encode("utf-8", "surrogateescape")
    rk = routing_key.encode("utf-8", "surrogateescape")
    ltag, lex, lrk = len(tag), len(ex), len(rk)
    if ltag > 255 or lex > 255 or lrk > 255:
        return None
    size = 16 + ltag + lex + lrk  # ids 4, 3 lengths, delivery tag 8, bits 1
    return b"".join(
        (
            _frame_head.pack(FRAME_METHOD, channel, size),
            _DELIVER_ID,
            bytes((ltag,)),
            tag,
            _deliver_fixed.pack(delivery_tag, 1 if redelivered else 0),
            bytes((lex,)),
            ex,
            bytes((lrk,)),
            rk,
            b"\xce",
        )
    )


_ack_frame = struct.Struct(">BHIIqBB")  # frame head, ids, delivery tag (signed, as pamqp), bits, frame end
_ACK_INDEX, _NACK_INDEX = commands.Basic.Ack.index, commands.Basic.Nack.index


def encode_ack(channel: int, delivery_tag: int, multiple: bool) -> bytes:
    """``basic.ack`` from the server (a publisher confirm), as pamqp marshals ``Basic.Ack(tag, multiple)``."""
    return _ack_frame.pack(FRAME_METHOD, channel, 13, _ACK_INDEX, delivery_tag, 1 if multiple else 0, FRAME_END)


def encode_nack(channel: int, delivery_tag: int, multiple: bool, requeue: bool) -> bytes:
    """``basic.nack``, as pamqp marshals ``Basic.Nack(tag, multiple, requeue)``."""
    bits = (1 if multiple else 0) | (2 if requeue else 0)
    return _ack_frame.pack(FRAME_METHOD, channel, 13, _NACK_INDEX, delivery_tag, bits, FRAME_END)


#: shortstr encodings (length octet + UTF-8 with surrogate escapes) of the names deliveries carry
_shortstrs: dict[str, bytes] = {}
_SHORTSTR_ENTRIES = 4096


def _shortstr(name: str) -> bytes | None:
    out = _shortstrs.get(name)
    if out is None:
        raw = name.encode("utf-8", "surrogateescape")
        if len(raw) > 255:
            return None
        if len(_shortstrs) >= _SHORTSTR_ENTRIES:
            _shortstrs.clear()
        out = _shortstrs[name] = bytes((len(raw),)) + raw
    return out


#: (consumer tag, exchange, routing key, property block size) -> the packer of a delivery of that shape on one
#: channel and the parts of it that depend on the shape alone. Each channel keeps its own (it goes with the
#: channel, so connection churn leaves nothing behind), at most ``DELIVERY_SHAPES`` entries.
DeliveryShapes = dict[tuple[str, str, str, int], tuple[Callable[..., bytes], bytes, bytes, bytes]]
DELIVERY_SHAPES = 256


def encode_delivery(
    channel: int,
    consumer_tag: str,
    delivery_tag: int,
    redelivered: bool,
    exchange: str,
    routing_key: str,
    props: bytes,
    body: bytes,
    shapes: DeliveryShapes,
) -> bytes | None:
    """``encode_small_content(encode_deliver(...), channel, props, body)`` in one step, for a body of at most
    4088 octets; None when that does not apply (a longer body, a name over 255 octets).

    The frames up to the body are packed by one ``struct`` per shape (channel, names, property block size),
    made once and cached with the octets that depend on the shape alone; the delivery tag, redelivered flag,
    property block and body sizes are packed into it per delivery."""
    n = len(body)
    if n > 4088:
        return None
    key = (consumer_tag, exchange, routing_key, len(props))
    shape = shapes.get(key)
    if shape is None:
        tag, ex, rk = _shortstr(consumer_tag), _shortstr(exchange), _shortstr(routing_key)
        if tag is None or ex is None or rk is None:
            return None
        size = 13 + len(tag) + len(ex) + len(rk)
        head = _frame_head.pack(FRAME_METHOD, channel, size) + _DELIVER_ID + tag
        fmt = f">{len(head)}sqB{len(ex) + len(rk) + 1}s7sHHQ{len(props)}sBBHI"
        if len(shapes) >= DELIVERY_SHAPES:
            shapes.clear()
        shape = shapes[key] = (
            struct.Struct(fmt).pack,
            head,
            ex + rk + b"\xce",
            _frame_head.pack(FRAME_HEADER, channel, 12 + len(props)),
        )
    pack, head, names, content = shape
    if not n:
        # no body frame: the content header ends the delivery
        return pack(head, delivery_tag, 1 if redelivered else 0, names, content, 60, 0, 0, props, FRAME_END, 0, 0, 0)[
            :-7
        ]
    return b"".join(
        (
            pack(
                head, delivery_tag, 1 if redelivered else 0, names, content, 60, 0, n, props, FRAME_END, 3, channel, n
            ),
            body,
            b"\xce",
        )
    )


def encode_close(channel: int, reply_code: int, reply_text: bytes, class_id: int, method_id: int) -> bytes:
    """``connection.close`` (channel 0) or ``channel.close``, with the reply text as raw bytes (RabbitMQ's
    texts may hold Latin-1 octets that are not UTF-8, e.g. from a printed binary)."""
    if len(reply_text) > 255:
        reply_text = reply_text[:252] + b"..."
    ids = (10, 50) if channel == 0 else (20, 40)
    payload = (
        _close_ids.pack(ids[0], ids[1], reply_code)
        + bytes([len(reply_text)])
        + reply_text
        + _short2.pack(class_id, method_id)
    )
    return _frame_head.pack(FRAME_METHOD, channel, len(payload)) + payload + b"\xce"


def parse_content_header(payload: bytes) -> tuple[int, int, int, bytes] | None:
    """(class_id, weight, body_size, raw property block), or None if the payload is shorter than 12 octets."""
    if len(payload) < 12:
        return None
    class_id, weight, body_size = _content_head.unpack_from(payload, 0)
    return class_id, weight, body_size, payload[12:]


def encode_small_content(method_frame: bytes, channel: int, props: bytes, body: bytes) -> bytes:
    """``method_frame`` followed by what :func:`encode_content` gives, as one bytes object, for a body that
    fits one body frame under any ``frame_max`` (at most 4088 octets)."""
    n = len(body)
    if not n:
        return b"".join(
            (
                method_frame,
                _frame_head.pack(FRAME_HEADER, channel, 12 + len(props)),
                _content_head.pack(60, 0, 0),
                props,
                b"\xce",
            )
        )
    return b"".join(
        (
            method_frame,
            _frame_head.pack(FRAME_HEADER, channel, 12 + len(props)),
            _content_head.pack(60, 0, n),
            props,
            b"\xce",
            _frame_head.pack(FRAME_BODY, channel, n),
            body,
            b"\xce",
        )
    )


def encode_content(channel: int, props: bytes, body: bytes, frame_max: int) -> list[bytes]:
    """Content header frame and body frames (split to fit ``frame_max``) carrying raw bytes."""
    header_payload = _content_head.pack(60, 0, len(body)) + props
    out = [_frame_head.pack(FRAME_HEADER, channel, len(header_payload)), header_payload, b"\xce"]
    chunk = (frame_max - EMPTY_FRAME_SIZE) if frame_max else len(body) or 1
    for i in range(0, len(body), chunk):
        part = body[i : i + chunk]
        out += (_frame_head.pack(FRAME_BODY, channel, len(part)), part, b"\xce")
    return out


# -- the reader's texts about frames ---------------------------------------------------------------------------


def _snippet(payload: bytes) -> tuple[str, bytes]:
    """``rabbit_reader:payload_snippet/1``: the whole payload up to 16 octets, else the first 16."""
    if len(payload) <= 16:
        return "all", payload
    return "first 16", payload[:16]


def frame_error_text(ftype: int, payload: bytes, error: Term, *, unicode: bool = False) -> str:
    """``type ~p, ~s octets = ~p: ~p`` (without the ``FRAME_ERROR - `` prefix); ``~tp`` when ``unicode``."""
    which, data = _snippet(payload)
    return str(Format(unicode=unicode).s("type ").p(ftype).s(f", {which} octets = ").p(data).s(": ").p(error))


def unexpected_frame_text(ftype: int, payload: bytes, *, unicode: bool = False) -> str:
    """``type ~p, ~s octets = ~p`` (without the ``UNEXPECTED_FRAME - `` prefix); ``~tp`` when ``unicode``."""
    which, data = _snippet(payload)
    return str(Format(unicode=unicode).s("type ").p(ftype).s(f", {which} octets = ").p(data))
