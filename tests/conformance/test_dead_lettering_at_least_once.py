"""Quorum queues with ``x-dead-letter-strategy: at-least-once`` (DLIM-6, DR-1's exception, CY-3).

A dead letter stays in the source queue until every queue the DLX routes it to accepted it. RabbitMQ retries
what it holds when the queue's policy changes (at once) and every ``dead_letter_worker_publisher_confirm_timeout``
(180 s): the policy path runs against both brokers, the 180 s timer only on the fake's virtual clock.
Scenarios follow ``rabbit_fifo_dlx_integration_SUITE``; every one was also run by hand against 3.10.8.
"""

from __future__ import annotations

from typing import Any

import pika
import pika.exceptions
import pytest
from pika.adapters.blocking_connection import BlockingChannel

from tests.conformance.conftest import Target
from tests.conformance.dlhelpers import ALO, anchored, drain, eventually, get, held, pub, quiet, ready, still_empty


def source(broker: Target, ch: BlockingChannel, **arguments: Any) -> str:
    q = broker.name("src")
    ch.queue_declare(q, durable=True, arguments={**ALO, **arguments})
    return q


def confirm_publish(ch: BlockingChannel, q: str, body: bytes, **props: Any) -> bool:
    try:
        ch.basic_publish("", q, body, pika.BasicProperties(**props) if props else None)
    except pika.exceptions.NackError:
        return False
    return True


def test_alo_routes_like_at_most_once_when_the_route_exists(broker: Target, ch: BlockingChannel) -> None:
    dlx = broker.exchange("dlx")
    dlq = broker.name("dlq")
    ch.exchange_declare(dlx, "direct")
    ch.queue_declare(dlq, durable=True)
    ch.queue_bind(dlq, dlx, "k1")
    q = source(broker, ch, **{"x-dead-letter-exchange": dlx, "x-dead-letter-routing-key": "k1"})
    pub(ch, q, "m")
    method, _, _ = get(ch, q)
    ch.basic_nack(method.delivery_tag, requeue=False)
    method, props, body = get(ch, dlq)
    assert (body, method.exchange, method.routing_key) == (b"m", dlx, "k1")
    (death,) = props.headers["x-death"]
    assert (death["reason"], death["queue"], death["count"], death["routing-keys"]) == ("rejected", q, 1, [q])
    assert held(broker, q) in (0, None)


def test_dr1_missing_dlx_holds_the_message_until_the_policy_changes(broker: Target, ch: BlockingChannel) -> None:
    """DR-1 exception: the DLX does not exist; the message is kept, not dropped. Declaring the exchange and
    binding is not enough (RabbitMQ's worker is not told); the next policy change of the queue retries it."""
    dlx = broker.exchange("dlx")
    dlq = broker.name("dlq")
    q = source(broker, ch, **{"x-dead-letter-exchange": dlx, "x-dead-letter-routing-key": "k1"})
    ch.queue_declare(dlq, durable=True)
    pub(ch, q, "m1", expiration="0")
    quiet(broker)
    assert ready(ch, q) == 0  # held dead letters are not ready messages
    assert held(broker, q) in (1, None)
    ch.exchange_declare(dlx, "direct")
    ch.queue_bind(dlq, dlx, "k1")
    still_empty(broker, ch, dlq)
    broker.set_policy(broker.name("pol"), anchored(q), {"max-length-bytes": 1_000_000})

    def arrived() -> None:
        assert ready(ch, dlq) == 1

    eventually(broker, arrived)
    method, props, body = get(ch, dlq)
    assert (body, method.exchange, props.expiration) == (b"m1", dlx, None)
    assert props.headers["x-death"][0]["reason"] == "expired"
    assert props.headers["x-death"][0]["original-expiration"] == "0"
    assert held(broker, q) in (0, None)


def test_cy3_a_cycling_dead_letter_is_held_until_the_route_changes(broker: Target, ch: BlockingChannel) -> None:
    """CY-3: DLX "" and no DLRK route an expired message back to its own queue: a cycle. At-most-once drops it;
    at-least-once keeps it until a policy gives a dead-letter routing key to another queue."""
    q = source(broker, ch, **{"x-dead-letter-exchange": ""})
    target = broker.name("target")
    ch.queue_declare(target, durable=True)
    pub(ch, q, "m", expiration="0")
    quiet(broker)
    assert ready(ch, q) == 0
    assert held(broker, q) in (1, None)
    broker.set_policy(broker.name("pol"), anchored(q), {"dead-letter-routing-key": target})

    def arrived() -> None:
        assert ready(ch, target) == 1

    eventually(broker, arrived)
    method, props, body = get(ch, target)
    assert (body, method.exchange, method.routing_key) == (b"m", "", target)
    (death,) = props.headers["x-death"]
    assert (death["reason"], death["queue"], death["routing-keys"]) == ("expired", q, [q])


def test_held_dead_letters_count_towards_the_length_limit(broker: Target, ch: BlockingChannel) -> None:
    """rabbit_fifo:is_over_limit counts the discards: with x-max-length 1 and nothing to route to, two expired
    messages fill the queue (quorum queues accept one over the limit, ML-6), the third publish is nacked; once
    the dead letters are delivered, publishing works again."""
    ch.confirm_delivery()
    target = broker.name("target")
    ch.queue_declare(target, durable=True)
    pol = broker.name("pol")
    q = broker.name("src")
    broker.set_policy(pol, anchored(q), {"dead-letter-routing-key": "nowhere"})
    ch.queue_declare(
        q, durable=True, arguments={**ALO, "x-dead-letter-exchange": "", "x-message-ttl": 0, "x-max-length": 1}
    )
    assert confirm_publish(ch, q, b"m1")
    assert confirm_publish(ch, q, b"m2")
    quiet(broker)
    assert held(broker, q) in (2, None)
    assert not confirm_publish(ch, q, b"m3")
    broker.set_policy(pol, anchored(q), {"dead-letter-routing-key": target})

    def delivered() -> None:
        assert ready(ch, target) == 2

    eventually(broker, delivered)
    assert confirm_publish(ch, q, b"m4")

    def all_four_minus_the_nacked() -> None:
        assert ready(ch, target) == 3

    eventually(broker, all_four_minus_the_nacked)
    assert drain(ch, target) == [b"m1", b"m2", b"m4"]


def test_switching_to_at_most_once_deletes_what_is_held(broker: Target, ch: BlockingChannel) -> None:
    """rabbit_fifo_dlx:update_config: leaving at-least-once deletes the discards (they are not dead-lettered)."""
    target = broker.name("target")
    ch.queue_declare(target, durable=True)
    pol = broker.name("pol")
    q = broker.name("src")
    ch.queue_declare(
        q,
        durable=True,
        arguments={"x-queue-type": "quorum", "x-overflow": "reject-publish", "x-dead-letter-exchange": ""},
    )
    broker.set_policy(pol, anchored(q), {"dead-letter-strategy": "at-least-once", "dead-letter-routing-key": "none"})
    for i in range(3):
        pub(ch, q, f"m{i}", expiration="0")
    quiet(broker)
    assert held(broker, q) in (3, None)
    broker.set_policy(pol, anchored(q), {"dead-letter-strategy": "at-most-once", "dead-letter-routing-key": "none"})
    assert held(broker, q) in (0, None)
    broker.set_policy(pol, anchored(q), {"dead-letter-strategy": "at-least-once", "dead-letter-routing-key": target})
    still_empty(broker, ch, target)
    pub(ch, q, "after", expiration="0")

    def arrived() -> None:
        assert ready(ch, target) == 1

    eventually(broker, arrived)
    assert drain(ch, target) == [b"after"]


def test_a_refusing_target_gets_the_message_at_the_next_retry(broker: Target, ch: BlockingChannel) -> None:
    """A target with reject-publish refuses the second dead letter; it stays held when room is made, and is
    delivered by the worker's next retry, 180 s after it became pending (virtual time on the fake)."""
    target = broker.name("target")
    ch.queue_declare(target, durable=True, arguments={"x-max-length": 1, "x-overflow": "reject-publish"})
    q = source(broker, ch, **{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": target})
    pub(ch, q, "m1", expiration="0")
    pub(ch, q, "m2", expiration="0")

    def one() -> None:
        assert ready(ch, target) == 1

    eventually(broker, one)
    assert held(broker, q) in (1, None)
    assert drain(ch, target) == [b"m1"]
    still_empty(broker, ch, target)
    if broker.fake is None:
        return  # RabbitMQ retries after 180 s; the fake shows it on the virtual clock
    broker.advance(179)
    assert ready(ch, target) == 0
    broker.advance(1)
    assert drain(ch, target) == [b"m2"]
    assert held(broker, q) == 0


@pytest.mark.fake_only
def test_the_retry_timer_delivers_once_the_exchange_exists(broker: Target, ch: BlockingChannel) -> None:
    """The worker retries every 180 s while it holds something; x-death keeps the time the message died."""
    assert broker.fake is not None
    dlx = broker.exchange("dlx")
    dlq = broker.name("dlq")
    q = source(broker, ch, **{"x-dead-letter-exchange": dlx, "x-dead-letter-routing-key": "k"})
    ch.queue_declare(dlq, durable=True)
    died_at = broker.fake.clock.now()
    pub(ch, q, "m", expiration="0")
    broker.advance(200)  # the first retry (at 180 s) finds no exchange
    ch.exchange_declare(dlx, "direct")
    ch.queue_bind(dlq, dlx, "k")
    broker.advance(150)
    assert ready(ch, dlq) == 0
    broker.advance(10)  # 360 s: the second retry
    _, props, body = get(ch, dlq)
    assert body == b"m"
    assert int(props.headers["x-death"][0]["time"].timestamp()) == int(died_at.timestamp())
    story = broker.fake.events.of_kind("dead-letter-buffered", "dead-letter-held", "dead-lettered").for_queue(q)
    assert story.kinds()[:2] == ["dead-letter-buffered", "dead-letter-held"]
    assert story.kinds()[-1] == "dead-lettered"
