"""Publisher confirms come in batches, as RabbitMQ's channel sends them: it collects the confirms of its queues
and flushes them when its mailbox is empty, so a burst of pipelined publishes is acked with few frames, most
with ``multiple=true`` (4.3.6: 126 frames for 500 publishes, 77 multiple; 3.10.8: 300/78). amqplib's own suite
depends on it. fakerabbit flushes once per batch of input read from the socket, with RabbitMQ's
``coalesce_and_send`` rule (acks first, each kind coalesced below the oldest of the other kind)."""

from __future__ import annotations

import struct

import pytest
from pika import spec

from tests.conformance.conftest import Target
from tests.rawamqp import RawAMQP, body_frame, frame, method_frame


def settle(c: RawAMQP, count: int) -> tuple[dict[int, str], list[tuple[str, int, bool]]]:
    """Read ack/nack frames until ``count`` publishes are settled; every tag must be settled exactly once."""
    settled: dict[int, str] = {}
    frames: list[tuple[str, int, bool]] = []
    while len(settled) < count:
        f = c.wait("Basic.Ack", "Basic.Nack", timeout=10)
        assert f.name in ("Basic.Ack", "Basic.Nack"), f
        kind = "ack" if f.name == "Basic.Ack" else "nack"
        tag, multiple = f.method.delivery_tag, bool(f.method.multiple)
        frames.append((kind, tag, multiple))
        covered = [t for t in range(1, tag + 1) if t not in settled] if multiple else [tag]
        assert covered and all(t not in settled for t in covered), (kind, tag, multiple, settled.get(tag))
        for t in covered:
            settled[t] = kind
    assert c.quiet(0.2) == []  # nothing settled twice
    return settled, frames


def pipelined_publishes(channel: int, routing_key: str, count: int) -> bytes:
    one = (
        method_frame(channel, spec.Basic.Publish(exchange="", routing_key=routing_key))
        + frame(2, channel, struct.pack(">HHQ", 60, 0, 1) + b"\x00\x00")
        + body_frame(channel, b"m")
    )
    return one * count


@pytest.mark.parametrize("routed", [True, False], ids=["to a queue", "unroutable"])
def test_a_burst_of_publishes_is_acked_in_batches(broker: Target, routed: bool) -> None:
    q = broker.name()
    c = RawAMQP.connect(broker.url)
    c.open_channel(1)
    c.rpc(1, spec.Queue.Declare(queue=q), "Queue.DeclareOk")
    c.rpc(1, spec.Confirm.Select(), "Confirm.SelectOk")
    c.send(pipelined_publishes(1, q if routed else broker.name("nowhere"), 500))
    settled, frames = settle(c, 500)
    assert set(settled) == set(range(1, 501)) and set(settled.values()) == {"ack"}
    if routed or broker.is_fake:
        # RabbitMQ acks an unroutable publish right after handling it: coalescing needs queues (or the fake)
        assert len(frames) < 500
        assert any(multiple for _, _, multiple in frames)
    c.send_method(1, spec.Queue.Delete(queue=q))
    c.close()


def test_acks_and_nacks_of_a_batch_never_cover_each_other(broker: Target) -> None:
    """A queue that rejects publishes beyond its length: tags 1-2 acked, 3-6 nacked, in one burst."""
    q = broker.name()
    c = RawAMQP.connect(broker.url)
    c.open_channel(1)
    args = {"x-max-length": 2, "x-overflow": "reject-publish"}
    c.rpc(1, spec.Queue.Declare(queue=q, arguments=args), "Queue.DeclareOk")
    c.rpc(1, spec.Confirm.Select(), "Confirm.SelectOk")
    c.send(pipelined_publishes(1, q, 6))
    settled, frames = settle(c, 6)
    assert settled == {1: "ack", 2: "ack", 3: "nack", 4: "nack", 5: "nack", 6: "nack"}
    if broker.is_fake:  # one batch: the acks coalesced below the first nack, then each nack alone
        assert frames == [
            ("ack", 2, True),
            ("nack", 3, False),
            ("nack", 4, False),
            ("nack", 5, False),
            ("nack", 6, False),
        ]
    c.send_method(1, spec.Queue.Delete(queue=q))
    c.close()


def test_a_lone_publish_is_acked_without_multiple(broker: Target) -> None:
    q = broker.name()
    c = RawAMQP.connect(broker.url)
    c.open_channel(1)
    c.rpc(1, spec.Queue.Declare(queue=q), "Queue.DeclareOk")
    c.rpc(1, spec.Confirm.Select(), "Confirm.SelectOk")
    for tag in (1, 2, 3):
        c.send(pipelined_publishes(1, q, 1))
        assert settle(c, 1)[1] == [("ack", tag, False)]  # send_confirms([MsgSeqNo]): never multiple
    c.send_method(1, spec.Queue.Delete(queue=q))
    c.close()
