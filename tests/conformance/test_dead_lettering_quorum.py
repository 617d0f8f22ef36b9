"""Quorum-queue dead-lettering (at-most-once): the delivery limit (DL-6) and at-least-once (documented gap)."""

from __future__ import annotations

import pytest

from tests.conformance.conftest import Target
from tests.conformance.dlhelpers import get, pub, ready, setup, wait_ready


def test_dl6_delivery_limit_dead_letters(broker: Target, ch) -> None:
    """DL-6, DL-8: a quorum message returned more often than ``x-delivery-limit`` dies with ``delivery_limit``."""
    q, dlq, dlx = setup(broker, ch, "quorum", {"x-delivery-limit": 1})
    pub(ch, q, "m")
    for _ in range(2):
        method, _, _ = get(ch, q)
        ch.basic_reject(method.delivery_tag, requeue=True)
    wait_ready(broker, ch, dlq, 1)
    assert ready(ch, q) == 0
    method, props, body = get(ch, dlq)
    assert (body, method.exchange, method.routing_key, method.redelivered) == (b"m", dlx, dlq, False)
    (death,) = props.headers["x-death"]
    assert (death["reason"], death["queue"], death["count"], death["routing-keys"]) == (
        "delivery_limit",
        q,
        1,
        [q],
    )


def test_dl6_delivery_limit_zero_dead_letters_on_first_return(broker: Target, ch) -> None:
    """DLIM-3, DL-6: with limit 0 the first return dead-letters."""
    q, dlq, _ = setup(broker, ch, "quorum", {"x-delivery-limit": 0})
    pub(ch, q, "m")
    method, _, _ = get(ch, q)
    ch.basic_reject(method.delivery_tag, requeue=True)
    wait_ready(broker, ch, dlq, 1)
    _, props, _ = get(ch, dlq)
    assert props.headers["x-death"][0]["reason"] == "delivery_limit"


def test_dl6_channel_close_counts_as_a_return(broker: Target, conn) -> None:
    """DLIM-3: unacked messages of a closed channel count as returns towards the limit."""
    ch = conn.channel()
    q, dlq, _ = setup(broker, ch, "quorum", {"x-delivery-limit": 0})
    pub(ch, q, "m")
    other = conn.channel()
    get(other, q)
    other.close()
    wait_ready(broker, ch, dlq, 1)
    _, props, _ = get(ch, dlq)
    assert props.headers["x-death"][0]["reason"] == "delivery_limit"


@pytest.mark.fake_only
def test_at_least_once_is_reported_as_unsupported(broker: Target, ch) -> None:
    """DLIM-6, DR-1 exception: at-least-once dead-lettering is not modelled; the fake dead-letters at-most-once
    and records a problem (which the pytest plugin raises at teardown) instead of pretending."""
    assert broker.fake is not None
    q, dlq, _ = setup(broker, ch, "quorum", {"x-dead-letter-strategy": "at-least-once", "x-overflow": "reject-publish"})
    pub(ch, q, "m")
    method, _, _ = get(ch, q)
    ch.basic_reject(method.delivery_tag, requeue=False)
    assert ready(ch, dlq) == 1
    problems = broker.fake.call(lambda: list(broker.fake.broker.problems))
    assert len(problems) == 1 and "at-least-once" in problems[0]
    broker.fake.call(broker.fake.broker.problems.clear)
