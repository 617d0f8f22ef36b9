"""The hot-path shortcuts of the protocol layer give exactly what the general paths give: ``basic.deliver``
frames byte for byte as pamqp marshals them, ``basic.publish`` and ``basic.ack`` decoded as the general
decoder decodes them (values and errors), and the header-sorting shortcut."""

from __future__ import annotations

import random
import struct

import pytest

from fakerabbit.broker.properties import RawProperties
from fakerabbit.protocol import codec, framing
from fakerabbit.protocol.codec import Deliver, commands

NAMES = ["", "q", "amq.topic", "é\udcff", "x" * 255, "a.b.c", "\udcc3\udca9"]


@pytest.mark.parametrize("tag", [0, 1, 255, 2**32, 2**63 - 1])
@pytest.mark.parametrize("redelivered", [False, True])
def test_encode_deliver_is_pamqps_frame(tag: int, redelivered: bool) -> None:
    rnd = random.Random(tag)
    for _ in range(20):
        args = (rnd.choice(NAMES), tag, redelivered, rnd.choice(NAMES), rnd.choice(NAMES))
        ch = rnd.choice([1, 2, 65535])
        assert framing.encode_deliver(ch, *args) == framing.encode_method(ch, Deliver(*args))


def test_encode_deliver_refuses_long_names() -> None:
    assert framing.encode_deliver(1, "t" * 256, 1, False, "", "q") is None
    assert framing.encode_deliver(1, "t", 1, False, "e" * 256, "q") is None
    assert framing.encode_deliver(1, "t", 1, False, "", "\u00e9" * 128) is None


def _general(cls: type[codec.base.Frame], args: bytes) -> tuple[object, ...]:
    saved = codec._PUBLISH, codec._ACK
    codec._PUBLISH = codec._ACK = None  # type: ignore[assignment]
    try:
        return _outcome(cls, args)
    finally:
        codec._PUBLISH, codec._ACK = saved


def _outcome(cls: type[codec.base.Frame], args: bytes) -> tuple[object, ...]:
    try:
        m = codec.decode_args(cls, args)
    except codec.MethodDecodeError as exc:
        return ("error", exc.kind)
    return ("ok", type(m), tuple(getattr(m, a) for a in cls.__slots__))


def _random_args(rnd: random.Random, cls: type[codec.base.Frame]) -> bytes:
    if cls is commands.Basic.Publish and rnd.random() < 0.6:
        ex = bytes(rnd.choice(b"ab.\xff\xc3\xa9") for _ in range(rnd.randrange(4)))
        rk = bytes(rnd.choice(b"ab.\xff\xc3\xa9") for _ in range(rnd.randrange(5)))
        args = struct.pack(">H", rnd.randrange(65536)) + bytes([len(ex)]) + ex + bytes([len(rk)]) + rk
        args += bytes([rnd.randrange(256)])
        if rnd.random() < 0.3:
            args = args[: rnd.randrange(len(args) + 1)] + bytes(rnd.randrange(256) for _ in range(rnd.randrange(3)))
        return args
    return bytes(rnd.randrange(256) for _ in range(rnd.randrange(12)))


@pytest.mark.parametrize("cls", [commands.Basic.Publish, commands.Basic.Ack])
def test_decode_shortcuts_match_the_general_decoder(cls: type[codec.base.Frame]) -> None:
    rnd = random.Random(15)
    ok = 0
    for _ in range(20000):
        args = _random_args(rnd, cls)
        fast = _outcome(cls, args)
        assert fast == _general(cls, args), args
        ok += fast[0] == "ok"
    assert ok > 1000  # the shortcut was exercised


@pytest.mark.parametrize("size", [0, 1, 100, 4087, 4088])
@pytest.mark.parametrize("frame_max", [0, 4096, 131072])
def test_small_content_is_encode_content_joined(size: int, frame_max: int) -> None:
    props = RawProperties().replace(content_type="text/plain", headers={"a": ("S", b"b")}).raw
    body = bytes(range(256)) * (size // 256) + bytes(size % 256)
    method = framing.encode_deliver(3, "ctag", 9, True, "ex", "rk")
    assert method is not None
    expected = method + b"".join(framing.encode_content(3, props, body, frame_max))
    assert framing.encode_small_content(method, 3, props, body) == expected


@pytest.mark.parametrize("size", [0, 1, 100, 4088, 4089])
def test_encode_delivery_is_deliver_and_content(size: int) -> None:
    blocks = [
        RawProperties().replace(message_id="m", headers={"a": ("S", b"b")}).raw,
        b"\x00\x00",
        RawProperties().replace(delivery_mode=2).raw,
    ]
    body = b"z" * size
    rnd = random.Random(size)
    shapes_of: dict[int, framing.DeliveryShapes] = {}  # each channel's own cache
    for _ in range(200):  # (the shapes repeat: the cached packers are checked too)
        args = (rnd.choice(NAMES), rnd.randrange(2**63), rnd.random() < 0.5, rnd.choice(NAMES), rnd.choice(NAMES))
        ch, props = rnd.choice([1, 5, 65535]), rnd.choice(blocks)
        got = framing.encode_delivery(ch, *args, props, body, shapes_of.setdefault(ch, {}))
        if size > 4088:
            assert got is None
            continue
        assert got == framing.encode_method(ch, Deliver(*args)) + b"".join(
            framing.encode_content(ch, props, body, 4096)
        )
    assert framing.encode_delivery(5, "t" * 256, 1, False, "", "q", blocks[0], b"", {}) is None


@pytest.mark.parametrize("tag", [0, 1, 2**31, 2**63 - 1])
@pytest.mark.parametrize("multiple", [False, True])
def test_encode_ack_and_nack_are_pamqps_frames(tag: int, multiple: bool) -> None:
    for ch in (1, 300, 65535):
        assert framing.encode_ack(ch, tag, multiple) == framing.encode_method(ch, commands.Basic.Ack(tag, multiple))
        for requeue in (False, True):
            assert framing.encode_nack(ch, tag, multiple, requeue) == framing.encode_method(
                ch, commands.Basic.Nack(tag, multiple, requeue)
            )
