"""Quorum-queue dead-lettering at-most-once: the delivery limit (``rabbit_fifo``); at-least-once is in its own file."""

from __future__ import annotations

from tests.conformance.conftest import Target
from tests.conformance.dlhelpers import get, pub, ready, setup, wait_ready


def test_dl6_delivery_limit_dead_letters(broker: Target, ch) -> None:
    """A quorum message returned more often than ``x-delivery-limit`` dies with ``delivery_limit`` (RabbitMQ:
    ``rabbit_fifo:return_one``; ``rabbit_dead_letter:reason()``)."""
    q, dlq, dlx = setup(broker, ch, "quorum", {"x-delivery-limit": 1})
    pub(ch, q, "m")
    for _ in range(2):
        method, _, _ = get(ch, q)
        ch.basic_reject(method.delivery_tag, requeue=True)
    wait_ready(broker, ch, dlq, 1)
    assert ready(ch, q) == 0
    method, props, body = get(ch, dlq)
    redelivered = broker.at_least("4.3")  # 4.3: the failed deliveries travel with the dead letter
    assert (body, method.exchange, method.routing_key, method.redelivered) == (b"m", dlx, dlq, redelivered)
    (death,) = props.headers["x-death"]
    assert (death["reason"], death["queue"], death["count"], death["routing-keys"]) == (
        "delivery_limit",
        q,
        1,
        [q],
    )


def test_dl6_delivery_limit_zero_dead_letters_on_first_return(broker: Target, ch) -> None:
    """With limit 0 the first return dead-letters (RabbitMQ: ``rabbit_fifo:return_one``)."""
    q, dlq, _ = setup(broker, ch, "quorum", {"x-delivery-limit": 0})
    pub(ch, q, "m")
    method, _, _ = get(ch, q)
    ch.basic_reject(method.delivery_tag, requeue=True)
    wait_ready(broker, ch, dlq, 1)
    _, props, _ = get(ch, dlq)
    assert props.headers["x-death"][0]["reason"] == "delivery_limit"


def test_dl6_channel_close_counts_as_a_return(broker: Target, conn) -> None:
    """Unacked messages of a closed channel count as returns towards the limit (RabbitMQ:
    ``rabbit_fifo:return_one``)."""
    ch = conn.channel()
    q, dlq, _ = setup(broker, ch, "quorum", {"x-delivery-limit": 0})
    pub(ch, q, "m")
    other = conn.channel()
    get(other, q)
    other.close()
    wait_ready(broker, ch, dlq, 1)
    _, props, _ = get(ch, dlq)
    assert props.headers["x-death"][0]["reason"] == "delivery_limit"
