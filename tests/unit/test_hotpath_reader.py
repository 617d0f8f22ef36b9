"""The reader's hot path (``Dispatcher._take_hot``: whole ``basic.publish`` messages and ``basic.ack`` methods
taken straight from the buffer) changes nothing a client or the broker can see: random streams of frames, good
and broken, cut into random chunks, are fed to two connections, one with the hot path and one without, and
everything they write, their state and the broker's (queues, unacked messages, the event log) must be the same.
"""

from __future__ import annotations

import asyncio
import random
import struct
from typing import Any

import pytest
from pika import spec

from fakerabbit.broker.properties import RawProperties
from tests.unit.protocol_harness import Client, frame, method

QUEUES = ["q1", "q2"]
PROPS = [
    b"\x00\x00",
    RawProperties().replace(content_type="text/plain").raw,
    RawProperties().replace(delivery_mode=2).raw,
    RawProperties().replace(delivery_mode=7).raw,
    RawProperties().replace(headers={"a": ("I", 1), "CC": ("A", [("S", b"q2")])}).raw,
    RawProperties().replace(expiration="0").raw,
    RawProperties().replace(expiration="bad").raw,
    RawProperties().replace(user_id="guest").raw,
    RawProperties().replace(user_id="other").raw,
    RawProperties().replace(reply_to="amq.rabbitmq.reply-to").raw,
    b"\x00\x03",  # flag bits 1 and 0 (cleared)
    b"\x80\x00",  # content-type flag, no value: malformed
    b"\x00\x00\x05",  # trailing octet: malformed
    b"",  # no flags at all
]


def _publish(rnd: random.Random, ch: int, frame_max: int) -> bytes:
    exchange = rnd.choice(["", "", "", "amq.direct", "missing", "amq.fanout"])
    rk = rnd.choice([*QUEUES, "nope", "", "q\udcff"]).encode("utf-8", "surrogateescape")
    bits = rnd.choice([0] * 20 + [1, 1, 1, 2, 3, 0xFC])
    args = struct.pack(">HB", 0, len(exchange)) + exchange.encode() + bytes([len(rk)]) + rk + bytes([bits])
    if rnd.random() < 0.01:
        args += b"\x00"  # not publish's layout
    out = frame(1, ch, struct.pack(">HH", 60, 40) + args)
    props = rnd.choice(PROPS) if rnd.random() < 0.3 else rnd.choice(PROPS[:3])
    size = rnd.choice([0, 1, 100, 100, 100, 100, 100, frame_max - 8, frame_max - 7, 3 * min(frame_max, 8192)])
    body = bytes(rnd.randrange(256) for _ in range(min(size, 50))) * (size // 50 + 1)
    body = body[:size]
    declared = size
    if rnd.random() < 0.02:
        declared = size + rnd.choice([-1, 1])
    head_ch = ch if rnd.random() > 0.01 else ch + 1
    weight, class_id = (0, 60) if rnd.random() > 0.01 else rnd.choice([(1, 60), (0, 50)])
    parts = [out, frame(2, head_ch, struct.pack(">HHQ", class_id, weight, max(declared, 0)) + props)]
    step = frame_max - 8 if size > 1000 or rnd.random() > 0.2 else rnd.randrange(1, 60)
    parts += [frame(3, ch, body[i : i + step]) for i in range(0, len(body), step)]
    return b"".join(parts)


def _ack(rnd: random.Random, ch: int, tags: dict[int, int]) -> bytes:
    if rnd.random() < 0.7:
        return frame(1, ch, struct.pack(">HHQB", 60, 80, 0, rnd.choice([1, 0xFF])))  # everything so far
    tag = rnd.choice([tags.get(ch, 1) - 1, tags.get(ch, 1), rnd.randrange(0, 8), 0])
    bits = rnd.choice([0, 0, 1, 0xFE])
    if rnd.random() < 0.02:
        return frame(1, ch, struct.pack(">HHQB", 60, 80, tag, bits) + b"\x00")  # not ack's layout
    return frame(1, ch, struct.pack(">HHQB", 60, 80, max(tag, 0), bits))


def _other(rnd: random.Random, ch: int) -> bytes:
    pick = rnd.randrange(10)
    if pick == 0:
        return method(ch, spec.Channel.Open())
    if pick == 1:
        return method(ch, spec.Channel.Close(reply_code=200, reply_text="", class_id=0, method_id=0))
    if pick == 2:
        return method(ch, spec.Channel.CloseOk())
    if pick == 3:
        return method(ch, spec.Confirm.Select())
    if pick == 4:
        return method(ch, spec.Basic.Qos(prefetch_count=rnd.choice([0, 1, 3])))
    if pick == 5:
        tag = f"c{ch}-{rnd.randrange(3)}"
        return method(ch, spec.Basic.Consume(queue=rnd.choice(QUEUES), consumer_tag=tag, no_ack=rnd.random() < 0.2))
    if pick == 6:
        return method(ch, spec.Basic.Cancel(consumer_tag=f"c{ch}-{rnd.randrange(3)}"))
    if pick == 7:
        return method(ch, spec.Basic.Nack(delivery_tag=rnd.randrange(5), multiple=rnd.random() < 0.5))
    if pick == 8:
        return method(ch, spec.Basic.Get(queue=rnd.choice(QUEUES)))
    return method(ch, spec.Tx.Select()) if rnd.random() < 0.5 else method(ch, spec.Tx.Commit())


def _fatal(rnd: random.Random, ch: int, frame_max: int) -> bytes:
    """Something that ends the connection."""
    pick = rnd.randrange(9)
    if pick == 8:  # a publish whose body frame is larger than frame_max
        body = b"b" * (frame_max + 1)
        out = frame(1, ch, struct.pack(">HHHBBB", 60, 40, 0, 0, 2, 113) + b"1\x00")
        return out + frame(2, ch, struct.pack(">HHQ", 60, 0, len(body)) + b"\x00\x00") + frame(3, ch, body)
    if pick >= 6:  # a publish with a bad end on its body frame, or on its header frame
        body = b"b" * rnd.randrange(1, 50)
        out = bytearray(frame(1, ch, struct.pack(">HHHBBB", 60, 40, 0, 0, 2, 113) + b"1\x00"))
        out += frame(2, ch, struct.pack(">HHQ", 60, 0, len(body)) + b"\x00\x00", end=b"\xce" if pick == 6 else b"\x00")
        return bytes(out + frame(3, ch, body, end=b"\xcf" if pick == 6 else b"\xce"))
    if pick == 4:
        return frame(8, ch, b"")  # a heartbeat on a channel
    if pick == 5:
        return frame(3, ch, b"stray body")
    if pick == 0:  # a bad frame end on a publish method frame (its content follows)
        bad = frame(1, ch, struct.pack(">HH", 60, 40) + b"\x00\x00\x00\x00\x00", end=b"\xcd")
        return bad + frame(2, ch, struct.pack(">HHQ", 60, 0, 1) + b"\x00\x00") + frame(3, ch, b"x")
    if pick == 1:
        return method(0, spec.Connection.Close(reply_code=200, reply_text="bye", class_id=0, method_id=0))
    junk = bytes(rnd.randrange(256) for _ in range(rnd.randrange(1, 30)))
    return frame(1, ch, struct.pack(">HH", 60, 40) + junk) if pick == 2 else junk


def _stream(rnd: random.Random, frame_max: int) -> bytes:
    out = [method(1, spec.Queue.Declare(queue=q)) for q in QUEUES]
    out.append(method(1, spec.Queue.Bind(queue="q1", exchange="amq.direct", routing_key="q1")))
    out.append(method(1, spec.Queue.Bind(queue="q2", exchange="amq.fanout")))
    tags: dict[int, int] = {}
    for _ in range(rnd.randrange(5, 60)):
        ch = rnd.choice([1, 1, 1, 2, 3])
        r = rnd.random()
        if r < 0.5:
            out.append(_publish(rnd, ch, frame_max))
        elif r < 0.75:
            tags[ch] = tags.get(ch, 0) + 1
            out.append(_ack(rnd, ch, tags))
        elif r < 0.985:
            out.append(_other(rnd, ch))
        else:
            out.append(_fatal(rnd, ch, frame_max))
    return b"".join(out)


def _state(c: Client) -> tuple[Any, ...]:
    vhost = c.broker.vhost("/")
    queues = {
        name: (
            [
                (e.msg.body, e.msg.props.raw, e.msg.exchange, e.msg.routing_keys, e.redelivered)
                for e in q.ready_entries()
            ],
            q.unacked,
        )
        for name, q in vhost.queues.items()
    }
    events = [(e.kind, e.message_id, e.details) for e in c.broker.events.snapshot()]
    return c.conn.state, c.conn.closed, c.conn.stopped, sorted(c.conn.channels), queues, events


async def _run(seed: int) -> int:
    rnd = random.Random(seed)
    frame_max = rnd.choice([8192, 8192, 131072])  # (4.3 refuses a frame_max under 8192)
    version = rnd.choice(["3.10", "4.0", "4.3"])
    hot, cold = Client(version).open(frame_max=frame_max), Client(version).open(frame_max=frame_max)
    taken = 0
    original = hot.conn.dispatcher._take_hot

    def counted() -> None:
        nonlocal taken
        before = len(hot.conn.dispatcher._pending)
        original()
        taken += len(hot.conn.dispatcher._pending) - before

    hot.conn.dispatcher._take_hot = counted  # type: ignore[method-assign]
    cold.conn.dispatcher._take_hot = lambda: None  # type: ignore[method-assign]
    for c in (hot, cold):
        c.channel(1)
        c.send(method(2, spec.Channel.Open()), method(3, spec.Channel.Open()))
        c.frames()
    data = _stream(rnd, frame_max)
    pos = 0
    while pos < len(data):
        step = rnd.choice([1, 7, 30, 200, 5000, len(data), len(data), len(data)])
        chunk = data[pos : pos + step]
        pos += step
        for c in (hot, cold):
            if not c.transport.closed:
                c.send(chunk)
        assert hot.transport.out == cold.transport.out, seed
        assert hot.conn.state == cold.conn.state, seed
        if hot.transport.closed or cold.transport.closed:
            await asyncio.sleep(0)  # connection_lost
    assert _state(hot) == _state(cold), seed
    return taken


async def _runs(seeds: range) -> int:
    return sum([await _run(seed) for seed in seeds])


@pytest.mark.parametrize("block", range(4))
def test_hot_path_is_invisible(block: int) -> None:
    taken = asyncio.run(_runs(range(block * 100, block * 100 + 100)))
    assert taken > 500  # the hot path was taken (and compared) often
