"""AMQP 0-9-1 framing: split the byte stream into frames, build outgoing frames.

We do our own framing (pamqp raises on partial buffers and does not enforce ``frame_max``) and let pamqp decode
and encode exactly one method at a time. Content header and body frames carry the client's raw bytes: the
property block is stored and re-sent unchanged, so it never passes through pamqp's lossy property codec.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from pamqp import base, commands
from pamqp import frame as pamqp_frame
from pamqp.exceptions import UnmarshalingException

from fakerabbit.broker import errors

PROTOCOL_HEADER = b"AMQP\x00\x00\x09\x01"
FRAME_METHOD, FRAME_HEADER, FRAME_BODY, FRAME_HEARTBEAT = 1, 2, 3, 8
FRAME_END = 0xCE
FRAME_MIN_SIZE = 4096
HEARTBEAT_FRAME = b"\x08\x00\x00\x00\x00\x00\x00\xce"

_frame_head = struct.Struct(">BHI")
_method_id = struct.Struct(">I")
_content_head = struct.Struct(">HHQ")


@dataclass(slots=True)
class RawFrame:
    type: int
    channel: int
    payload: bytes


class FrameReader:
    """Accumulates bytes and yields complete frames; malformed framing raises a hard :class:`AMQPError`."""

    __slots__ = ("_buf", "frame_max")

    def __init__(self, frame_max: int) -> None:
        self._buf = bytearray()
        self.frame_max = frame_max

    def feed(self, data: bytes) -> None:
        self._buf += data

    def next_frame(self) -> RawFrame | None:
        buf = self._buf
        if len(buf) < 7:
            return None
        ftype, channel, size = _frame_head.unpack_from(buf, 0)
        if ftype not in (FRAME_METHOD, FRAME_HEADER, FRAME_BODY, FRAME_HEARTBEAT):
            raise errors.FrameError(f"unknown frame type {ftype}")
        if self.frame_max and size + 8 > self.frame_max:
            raise errors.FrameError(f"frame size {size + 8} larger than negotiated maximum {self.frame_max}")
        end = 7 + size
        if len(buf) < end + 1:
            return None
        if buf[end] != FRAME_END:
            raise errors.FrameError(f"invalid frame end byte {buf[end]}")
        payload = bytes(buf[7:end])
        del buf[: end + 1]
        return RawFrame(ftype, channel, payload)

    def pending(self) -> int:
        return len(self._buf)


def method_index(payload: bytes) -> int:
    if len(payload) < 4:
        raise errors.FrameError("method frame too short")
    return int(_method_id.unpack_from(payload, 0)[0])


def decode_method(payload: bytes) -> base.Frame:
    """Decode one method frame's payload with pamqp; unknown or malformed methods are 501/503 errors."""
    index = method_index(payload)
    cls = commands.INDEX_MAPPING.get(index)
    if cls is None:
        raise errors.CommandInvalid(f"unknown method class {index >> 16} method {index & 0xFFFF}")
    method: base.Frame = cls()
    try:
        method.unmarshal(payload[4:])
    except (UnmarshalingException, struct.error, ValueError, TypeError, IndexError, KeyError) as exc:
        raise errors.FrameError(f"cannot decode {method.name}: {exc}") from exc
    return method


def encode_method(channel: int, method: base.Frame) -> bytes:
    return pamqp_frame.marshal(method, channel)


def decode_content_header(payload: bytes) -> tuple[int, int, bytes]:
    """Returns (class_id, body_size, raw property block)."""
    if len(payload) < 14:
        raise errors.FrameError("content header frame too short")
    class_id, _weight, body_size = _content_head.unpack_from(payload, 0)
    return class_id, body_size, payload[12:]


def encode_content(channel: int, props: bytes, body: bytes, frame_max: int) -> list[bytes]:
    """Content header frame and body frames (split to fit ``frame_max``) carrying raw bytes."""
    header_payload = _content_head.pack(60, 0, len(body)) + props
    out = [_frame_head.pack(FRAME_HEADER, channel, len(header_payload)), header_payload, b"\xce"]
    chunk = (frame_max - 8) if frame_max else len(body) or 1
    for i in range(0, len(body), chunk):
        part = body[i : i + chunk]
        out += (_frame_head.pack(FRAME_BODY, channel, len(part)), part, b"\xce")
    return out
