"""The queue's TTL, expiry and length-limit bookkeeping on the broker model alone (no sockets, virtual clock),
the deferred rendering of dead-lettered copies, and a smoke run of ``benchmarks/bench_expiry.py``."""

from __future__ import annotations

import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from fakerabbit.broker.broker import Broker
from fakerabbit.broker.fields import table_from_python
from fakerabbit.broker.properties import DeferredProperties, RawProperties, build_properties
from fakerabbit.broker.queue import Queue
from fakerabbit.broker.session import Session
from fakerabbit.clock import VirtualClock

ROOT = Path(__file__).resolve().parents[2]


class Sink:
    def __init__(self) -> None:
        self.confirms: list[tuple[bool, int, bool]] = []

    def send_deliver(self, *args: Any) -> None: ...
    def send_return(self, *args: Any) -> None: ...

    def send_confirm(self, ack: bool, tag: int, multiple: bool) -> None:
        self.confirms.append((ack, tag, multiple))

    def send_cancel(self, *args: Any) -> None: ...


@pytest.fixture
def world() -> tuple[Broker, VirtualClock, Session]:
    clock = VirtualClock()
    broker = Broker(clock)
    conn = broker.open_connection("guest", "/", client_properties={})
    return broker, clock, Session(conn, 1, broker.vhost("/"), Sink())


def declare(broker: Broker, name: str, **args: Any) -> Queue:
    return broker.vhost("/").declare_queue(
        None,
        name,
        passive=False,
        durable=True,
        exclusive=False,
        auto_delete=False,
        arguments=table_from_python({k.replace("_", "-"): v for k, v in args.items()}),
    )


def publish(s: Session, q: str, body: bytes = b"m", **props: Any) -> None:
    s.publish("", q, False, False, build_properties(**props), body)


def bodies(q: Queue) -> list[bytes]:
    return [e.msg.body for e in q.ready_entries()]


def test_batch_expiry_keeps_counts_and_bytes(world: tuple[Broker, VirtualClock, Session]) -> None:
    broker, clock, s = world
    q = declare(broker, "q", x_message_ttl=1000)
    for i in range(5):
        publish(s, "q", b"x" * (i + 1))
    clock.advance(0.5)
    publish(s, "q", b"late")
    assert (q.ready_count, q.ready_bytes) == (6, 15 + 4)
    clock.advance(0.5)
    assert (q.ready_count, q.ready_bytes, bodies(q)) == (1, 4, [b"late"])
    clock.advance(0.5)
    assert (q.ready_count, q.ready_bytes) == (0, 0)
    assert broker.vhost("/").queues["q"] is q and q.ready_entries() == []


def test_priority_queue_checks_expiry_only_when_rabbitmq_does(world: tuple[Broker, VirtualClock, Session]) -> None:
    """deliver_or_enqueue arms the TTL timer only when the queue was empty (or something was dropped): high-short
    becomes the head of a non-empty priority queue without a timer, stays counted after its expiry and is what
    basic.get hands out (fetch/2 takes the head, then drops what became expired). Live 3.10.8, 4.0.5, 4.3.6 all
    answer 4, then high-short (3), high-long (2), low-long (0)."""
    broker, clock, s = world
    q = declare(broker, "q", x_max_priority=5)
    publish(s, "q", b"low-long", priority=1, expiration="10000")
    publish(s, "q", b"high-short", priority=5, expiration="100")
    publish(s, "q", b"high-long", priority=5, expiration="10000")
    publish(s, "q", b"low-short", priority=1, expiration="100")
    clock.advance(0.3)
    assert bodies(q) == [b"high-short", b"high-long", b"low-long", b"low-short"]
    assert q.ready_count == 4
    got = []
    while (e := q.fetch()) is not None:
        got.append((e.msg.body, q.ready_count))
    assert got == [(b"high-short", 3), (b"high-long", 2), (b"low-long", 0)]  # low-short exposed and dropped


def test_head_timer_follows_the_head(world: tuple[Broker, VirtualClock, Session]) -> None:
    broker, clock, s = world
    q = declare(broker, "q")
    publish(s, "q", b"a", expiration="300")
    publish(s, "q", b"b", expiration="100")
    assert clock.pending() == 1  # only the head is timed
    assert clock.next_deadline() == clock.now() + timedelta(milliseconds=300)
    clock.advance(0.3)  # a goes; b (due at 0.1) is dropped as it reaches the head
    assert q.ready_count == 0 and clock.pending() == 0


def test_ttl_zero_shortcut_and_per_message_zero(world: tuple[Broker, VirtualClock, Session]) -> None:
    broker, _clock, s = world
    q0 = declare(broker, "q0", x_message_ttl=0)
    publish(s, "q0")
    assert q0.ready_count == 0
    q = declare(broker, "q")
    publish(s, "q", b"head")
    publish(s, "q", b"zero", expiration="0")
    assert bodies(q) == [b"head", b"zero"]  # waits behind the live head
    q.fetch()
    assert q.ready_count == 0


def test_drop_head_and_reject_publish_confirms(world: tuple[Broker, VirtualClock, Session]) -> None:
    broker, _clock, s = world
    s.confirm_select()
    declare(broker, "drop", x_max_length=1)
    declare(broker, "reject", x_max_length=1, x_overflow="reject-publish")
    for q in ("drop", "drop", "reject", "reject"):
        publish(s, q)
    sink = s.sink
    assert isinstance(sink, Sink)
    assert sink.confirms == [(True, 1, False), (True, 2, False), (True, 3, False), (False, 4, True)]


def test_expiry_dead_letters_with_deferred_properties(world: tuple[Broker, VirtualClock, Session]) -> None:
    broker, clock, s = world
    declare(broker, "dlq")
    declare(broker, "q", x_message_ttl=1000, x_dead_letter_exchange="", x_dead_letter_routing_key="dlq")
    publish(s, "q", b"m", content_type="text/plain", headers=table_from_python({"a": 1}))
    clock.advance(1)
    dlq = broker.vhost("/").queues["dlq"]
    copy = dlq.ready_entries()[0].msg
    props = copy.props
    assert isinstance(props, DeferredProperties)
    assert props._rendered is None  # routing through the default exchange did not build it
    headers = props.headers
    assert headers is not None and headers["x-death"][1][0][1]["reason"] == ("S", "expired")
    assert props._rendered is None  # reading the headers does not encode them
    eager = RawProperties(build_properties(content_type="text/plain", headers=headers))
    assert props.raw == eager.raw and props.content_type == "text/plain"
    assert props == eager


def test_routing_through_a_headers_exchange_builds_the_headers(world: tuple[Broker, VirtualClock, Session]) -> None:
    broker, clock, s = world
    v = broker.vhost("/")
    v.declare_exchange(
        None, "hx", "headers", passive=False, durable=True, auto_delete=False, internal=False, arguments={}
    )
    declare(broker, "expired")
    v.bind(
        None,
        "queue",
        "expired",
        "hx",
        "",
        table_from_python({"x-match": "any-with-x", "x-first-death-reason": "expired"}),
    )
    declare(broker, "q", x_message_ttl=10, x_dead_letter_exchange="hx")
    publish(s, "q")
    clock.advance(0.01)
    assert v.queues["expired"].ready_count == 1


def test_bench_expiry_smoke() -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_expiry.py"), "--quick", "-n", "2000"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "advance, one instant" in proc.stdout and "memory per queued 100-byte message" in proc.stdout
