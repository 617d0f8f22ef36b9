"""Dead-letter cycle detection (``rabbit_dead_letter:detect_cycles/3``; ``dead_lettering_SUITE`` cycle cases; Java
client ``DeadLetterExchange.deadLetterTwice/Self/Cycle``)."""

from __future__ import annotations

import pytest

from tests.conformance.conftest import Target
from tests.conformance.dlhelpers import QUEUE_TYPES, declare, drain, get, pub, quiet, ready, wait_ready


@pytest.mark.parametrize("qtype", QUEUE_TYPES)
def test_q20_cycle_max_length(broker: Target, ch, qtype: str) -> None:
    """A message dropped by max-length back into its own queue is a cycle: dropped (RabbitMQ:
    ``dead_lettering_SUITE:dead_letter_routing_key_cycle_max_length``; ``rabbit_dead_letter:detect_cycles/3``)."""
    q = broker.name("q")
    declare(ch, q, qtype, x_max_length=1, x_dead_letter_exchange="")
    pub(ch, q, "m1")
    pub(ch, q, "m2")
    quiet(broker)
    method, _, body = get(ch, q)
    assert body == b"m2"
    ch.basic_ack(method.delivery_tag)
    quiet(broker)
    assert ready(ch, q) == 0
    if broker.fake is not None:
        whys = [e.details["why"] for e in broker.fake._broker.events if e.kind == "dropped"]
        assert whys == ["dead-letter cycle"]


@pytest.mark.parametrize("qtype", QUEUE_TYPES)
def test_q21_cycle_ttl(broker: Target, ch, qtype: str) -> None:
    """A message expiring back into its own queue is dropped; the queue ends up empty (RabbitMQ:
    ``dead_lettering_SUITE:dead_letter_routing_key_cycle_ttl``; ``rabbit_dead_letter:detect_cycles/3``)."""
    q = broker.name("q")
    declare(ch, q, qtype, x_message_ttl=1, x_dead_letter_exchange="")
    pub(ch, q, "m1")
    pub(ch, q, "m2")
    broker.advance(0.1)
    quiet(broker)
    assert ready(ch, q) == 0
    broker.advance(0.1)
    assert ready(ch, q) == 0


@pytest.mark.parametrize("qtype", QUEUE_TYPES)
def test_q22_cycle_with_reject(broker: Target, ch, qtype: str) -> None:
    """Reason ``rejected`` is never a cycle: the message comes back every time, count grows (RabbitMQ:
    ``dead_lettering_SUITE:dead_letter_routing_key_cycle_with_reject``; ``rabbit_dead_letter:detect_cycles/3``)."""
    q = broker.name("q")
    declare(ch, q, qtype, x_dead_letter_exchange="")
    pub(ch, q, "m")
    for expected in (1, 2):
        method, _, _ = get(ch, q)
        ch.basic_nack(method.delivery_tag, requeue=False)
        method, props, body = get(ch, q)
        assert body == b"m"
        assert [(d["queue"], d["reason"], d["count"]) for d in props.headers["x-death"]] == [(q, "rejected", expected)]
        ch.basic_nack(method.delivery_tag, requeue=True)
        wait_ready(broker, ch, q, 1)


def _q06_topology(broker: Target, ch, qtype: str) -> tuple[str, str, str]:
    b, a2, a3 = broker.name("b"), broker.name("a2"), broker.name("a3")
    declare(ch, b, qtype, x_dead_letter_exchange="", x_dead_letter_routing_key=a2)
    declare(ch, a2, qtype, x_dead_letter_exchange="", x_dead_letter_routing_key=a3, x_message_ttl=5)
    declare(ch, a3, qtype, x_dead_letter_exchange="", x_dead_letter_routing_key=b, x_message_ttl=5)
    pub(ch, b, "m")
    return b, a2, a3


def _lap(broker: Target, ch, b: str) -> list[tuple[str, str, int]]:
    method, props, body = get(ch, b)
    assert body == b"m"
    ch.basic_reject(method.delivery_tag, requeue=False)
    broker.advance(0.05)
    quiet(broker)
    return [(d["queue"], d["reason"], d["count"]) for d in (props.headers or {}).get("x-death", [])]


@pytest.mark.fake_only
@pytest.mark.rabbitmq_version("4.0")
@pytest.mark.parametrize("qtype", QUEUE_TYPES)
def test_q06_reject_expire_expire(broker: Target, ch, qtype: str) -> None:
    """MC, 3.13.3+: b (reject) -> a2 (TTL) -> a3 (TTL) -> b keeps cycling: each lap has a rejected death, so b is never
    a cycle (RabbitMQ: ``dead_lettering_SUITE:dead_letter_reject_expire_expire``;
    ``rabbit_dead_letter:detect_cycles/3``)."""
    b, a2, a3 = _q06_topology(broker, ch, qtype)
    assert _lap(broker, ch, b) == []
    assert ready(ch, b) == 1
    assert _lap(broker, ch, b) == [(a3, "expired", 1), (a2, "expired", 1), (b, "rejected", 1)]
    assert ready(ch, b) == 1
    _, props, _ = get(ch, b)
    deaths = [(d["queue"], d["reason"], d["count"]) for d in props.headers["x-death"]]
    assert deaths == [(a3, "expired", 2), (a2, "expired", 2), (b, "rejected", 2)]


@pytest.mark.rabbitmq_version("3.12")
@pytest.mark.parametrize("qtype", QUEUE_TYPES)
def test_q06_legacy_drops_on_the_second_lap(broker: Target, ch, qtype: str) -> None:
    """``dead_letter_reject_expire_expire`` on ≤3.12 (seen on the live 3.10.8; the test above is 3.13.3+): LEGACY
    re-groups ``x-death`` in
    reverse order at each death, so on the second lap a2's entry sits right before a3's with no ``rejected``
    between them, and the copy for a3 is dropped as a cycle."""
    b, a2, a3 = _q06_topology(broker, ch, qtype)
    assert _lap(broker, ch, b) == []
    wait_ready(broker, ch, b, 1)
    assert _lap(broker, ch, b) == [(a3, "expired", 1), (b, "rejected", 1), (a2, "expired", 1)]
    assert ready(ch, b) == 0 and ready(ch, a2) == 0 and ready(ch, a3) == 0


def test_cy1_two_queue_expiry_loop_is_dropped(broker: Target, ch) -> None:
    """Java deadLetterCycle: q1 -TTL-> q2 -TTL-> q1 is fully automatic: dropped on the way back (RabbitMQ:
    ``rabbit_dead_letter:detect_cycles/3``)."""
    q1, q2 = broker.name("q1"), broker.name("q2")
    declare(ch, q1, x_dead_letter_exchange="", x_dead_letter_routing_key=q2, x_message_ttl=10)
    declare(ch, q2, x_dead_letter_exchange="", x_dead_letter_routing_key=q1, x_message_ttl=10)
    pub(ch, q1, "m")
    broker.advance(0.1)
    quiet(broker)
    broker.advance(0.1)
    assert ready(ch, q1) == 0 and ready(ch, q2) == 0


def test_java_dead_letter_self(broker: Target, ch) -> None:
    """Java deadLetterSelf: a TTL queue that dead-letters to itself through a direct DLX loses them all (RabbitMQ:
    ``rabbit_dead_letter:detect_cycles/3``)."""
    dlx = broker.exchange("dlx")
    q = broker.name("q")
    ch.exchange_declare(dlx, "direct")
    declare(ch, q, x_dead_letter_exchange=dlx, x_message_ttl=1)
    ch.queue_bind(q, dlx, routing_key=q)
    for i in range(10):
        pub(ch, q, str(i))
    broker.advance(0.1)
    quiet(broker)
    assert ready(ch, q) == 0


def test_java_dead_letter_twice(broker: Target, ch) -> None:
    """Cycles are per target (Java deadLetterTwice; ``rabbit_dead_letter:detect_cycles/3``): DLQ2 gets each message
    twice (from Q, then from DLQ); the
    DLQ -> DLQ loop is dropped."""
    dlx = broker.exchange("dlx")
    q, dlq, dlq2 = broker.name("q"), broker.name("dlq"), broker.name("dlq2")
    ch.exchange_declare(dlx, "direct")
    declare(ch, q, x_message_ttl=1, x_dead_letter_exchange=dlx)
    declare(ch, dlq, x_message_ttl=1, x_dead_letter_exchange=dlx)
    declare(ch, dlq2)
    ch.queue_bind(dlq, dlx, routing_key=q)
    ch.queue_bind(dlq2, dlx, routing_key=q)
    for i in range(5):
        pub(ch, q, str(i))
    broker.advance(0.1)
    broker.advance(0.1)
    wait_ready(broker, ch, dlq2, 10)
    assert ready(ch, dlq) == 0
    copies: dict[bytes, list[list[str]]] = {}
    for _ in range(10):
        method, props, body = get(ch, dlq2)
        copies.setdefault(body, []).append([d["queue"] for d in props.headers["x-death"]])
        ch.basic_ack(method.delivery_tag)
    assert sorted(copies) == [str(i).encode() for i in range(5)]
    for paths in copies.values():
        assert sorted(paths, key=len) == [[q], [dlq, q]]
    assert drain(ch, dlq2) == []


def test_cy1_rejected_anywhere_in_the_loop_is_no_cycle(broker: Target, ch) -> None:
    """q1 -TTL-> q2 (consumer rejects) -> q1: the reject in between keeps it alive (RabbitMQ:
    ``rabbit_dead_letter:detect_cycles/3``)."""
    q1, q2 = broker.name("q1"), broker.name("q2")
    declare(ch, q1, x_dead_letter_exchange="", x_dead_letter_routing_key=q2, x_message_ttl=10)
    declare(ch, q2, x_dead_letter_exchange="", x_dead_letter_routing_key=q1)
    pub(ch, q1, "m")
    broker.advance(0.05)
    method, _, _ = get(ch, q2)
    ch.basic_reject(method.delivery_tag, requeue=False)
    broker.advance(0.05)
    method, props, _ = get(ch, q2)
    assert [(d["queue"], d["reason"], d["count"]) for d in props.headers["x-death"]] == [
        (q1, "expired", 2),
        (q2, "rejected", 1),
    ]
