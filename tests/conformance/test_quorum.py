"""Quorum queues: delivery limit, ``x-delivery-count``, requeue position, dead-letter strategy and property
restrictions (``rabbit_quorum_queue``, ``rabbit_fifo``, ``quorum_queue_SUITE``).

Counting differs by version: the 3.x rules run against live 3.10.8 with the fake on the "3.12" profile, the 4.0 - 4.2
rules against live 4.0.5 and the 4.3 rules against live 4.3.6 (the 3.13 rules on the fake only). A quorum queue
returns and dead-letters asynchronously: counts read right after a return wait for it on the real broker.
"""

from __future__ import annotations

from typing import Any

import pika
import pytest
from pika.adapters.blocking_connection import BlockingChannel

from tests.conformance.conftest import Target, pump
from tests.conformance.ttlhelpers import (
    anchored,
    bodies,
    channel_error,
    confirmed,
    death_reasons,
    eventually,
    ready,
    with_dlq,
)


def quorum(broker: Target, ch: BlockingChannel, **args: Any) -> str:
    q = broker.name("qq")
    ch.queue_declare(q, durable=True, arguments={"x-queue-type": "quorum", **args})
    return q


def get(broker: Target, ch: BlockingChannel, q: str, auto_ack: bool = False) -> tuple[Any, Any, bytes]:
    """basic.get that waits briefly on the real broker (a quorum queue applies returns asynchronously)."""
    got = eventually(broker, lambda: ch.basic_get(q, auto_ack=auto_ack), lambda r: r[0] is not None)
    assert got[0] is not None, f"expected a message in {q}"
    return got


def returns(broker: Target, ch: BlockingChannel, q: str, n: int, how: str = "reject") -> list[Any]:
    """Get the head message and return it ``n`` times; returns the delivery headers seen, in order."""
    seen = []
    for _ in range(n):
        m, p, _ = get(broker, ch, q)
        seen.append((p.headers or {}).get("x-delivery-count"))
        if how == "reject":
            ch.basic_reject(m.delivery_tag, requeue=True)
        else:
            ch.basic_nack(m.delivery_tag, requeue=True)
    return seen


# -- setting the limit (RabbitMQ: rabbit_quorum_queue:resolve_delivery_limit/2) ----------------------------------------


@pytest.mark.rabbitmq_version("3.12")
@pytest.mark.parametrize(("arg", "policy"), [(1, 5), (5, 1), (1, None)])
def test_dlim1_smaller_of_argument_and_policy(
    broker: Target, ch: BlockingChannel, arg: int, policy: int | None
) -> None:
    confirmed(ch)
    q, dlq = with_dlq(broker, ch, {"x-delivery-limit": arg}, qtype="quorum")
    if policy is not None:
        broker.set_policy(q + "-dl", anchored(q), {"delivery-limit": policy}, apply_to="queues")
    ch.basic_publish("", q, b"poison")
    returns(broker, ch, q, 2)  # limit 1: the second return is one too many
    assert eventually(broker, lambda: ready(ch, dlq), lambda n: n == 1) == 1
    assert death_reasons(ch, dlq) == [(b"poison", "delivery_limit", q)]
    assert ready(ch, q) == 0


@pytest.mark.rabbitmq_version("3.12")
def test_dlim1_policy_alone(broker: Target, ch: BlockingChannel) -> None:
    confirmed(ch)
    q, dlq = with_dlq(broker, ch, qtype="quorum")
    broker.set_policy(q + "-dl", anchored(q), {"delivery-limit": 0})
    ch.basic_publish("", q, b"poison")
    returns(broker, ch, q, 1)
    assert eventually(broker, lambda: ready(ch, dlq), lambda n: n == 1) == 1


def test_dlim1_delivery_limit_policy_does_not_apply_to_classic_queues(broker: Target, ch: BlockingChannel) -> None:
    confirmed(ch)
    q, dlq = with_dlq(broker, ch)
    broker.set_policy(q + "-dl", anchored(q), {"delivery-limit": 0})
    ch.basic_publish("", q, b"m")
    for _ in range(3):
        m = ch.basic_get(q)[0]
        ch.basic_reject(m.delivery_tag, requeue=True)
    # RabbitMQ answers the passive declare's stat call (gen_server2 priority 7) before a requeue cast waiting in
    # the queue process's mailbox: on the real broker the count may lag the last reject for a moment.
    assert eventually(broker, lambda: ready(ch, q), lambda n: n == 1) == 1
    assert ready(ch, dlq) == 0


@pytest.mark.rabbitmq_version("4.0")
@pytest.mark.parametrize(("arg", "policy", "dead_after"), [(-1, 2, 3), (2, -1, 3), (1, 3, 2), (-1, -5, None)])
def test_dlim1_with_a_negative_value_the_larger_wins(
    broker: Target, ch: BlockingChannel, arg: int, policy: int, dead_after: int | None
) -> None:
    q, dlq = with_dlq(broker, ch, {"x-delivery-limit": arg}, qtype="quorum")
    broker.set_policy(q + "-dl", anchored(q), {"delivery-limit": policy})
    ch.basic_publish("", q, b"m")
    n = 30 if dead_after is None else dead_after
    returns(broker, ch, q, n)
    want = 0 if dead_after is None else 1
    # a quorum queue dead-letters asynchronously (a Ra effect): the real broker's count may lag the last return
    assert eventually(broker, lambda: ready(ch, dlq), lambda k: k == want) == want


# -- default limit (RabbitMQ: quorum_queue_SUITE:delivery_limit_policy_update) -----------------------------------------


@pytest.mark.rabbitmq_version("3.12")
def test_dlim2_no_default_limit_before_4(broker: Target, ch: BlockingChannel) -> None:
    confirmed(ch)
    q, dlq = with_dlq(broker, ch, qtype="quorum")
    ch.basic_publish("", q, b"m")
    returns(broker, ch, q, 25)
    _, _, body = get(broker, ch, q, auto_ack=True)
    assert body == b"m"
    assert ready(ch, dlq) == 0


@pytest.mark.rabbitmq_version("4.0")
def test_dlim2_default_limit_is_20_in_4x(broker: Target, ch: BlockingChannel) -> None:
    q, dlq = with_dlq(broker, ch, qtype="quorum")
    ch.basic_publish("", q, b"m")
    returns(broker, ch, q, 20)
    # returns are applied asynchronously by the real broker: wait for the 20th to land
    assert eventually(broker, lambda: ready(ch, q), lambda k: k == 1) == 1
    assert ready(ch, dlq) == 0
    returns(broker, ch, q, 1)  # the 21st return
    assert eventually(broker, lambda: ready(ch, dlq), lambda k: k == 1) == 1
    assert ready(ch, q) == 0
    assert death_reasons(ch, dlq) == [(b"m", "delivery_limit", q)]


# -- what counts (RabbitMQ: rabbit_fifo:return_one) --------------------------------------------------------------------


@pytest.mark.rabbitmq_version("3.12")
@pytest.mark.parametrize("limit", [0, 1, 3])
def test_dlim3_dead_lettered_when_count_exceeds_limit(broker: Target, ch: BlockingChannel, limit: int) -> None:
    confirmed(ch)
    q, dlq = with_dlq(broker, ch, {"x-delivery-limit": limit}, qtype="quorum")
    ch.basic_publish("", q, b"m")
    returns(broker, ch, q, limit)
    assert ready(ch, dlq) == 0
    returns(broker, ch, q, 1)
    assert eventually(broker, lambda: ready(ch, dlq), lambda n: n == 1) == 1
    assert death_reasons(ch, dlq) == [(b"m", "delivery_limit", q)]


@pytest.mark.rabbitmq_version("3.12")
@pytest.mark.parametrize("how", ["reject", "nack", "close"])
def test_dlim3_every_return_counts_in_3x(broker: Target, conn: pika.BlockingConnection, how: str) -> None:
    ch = confirmed(conn.channel())
    q, dlq = with_dlq(broker, ch, {"x-delivery-limit": 1}, qtype="quorum")
    ch.basic_publish("", q, b"m")
    for _ in range(2):
        if how == "close":
            ch2 = conn.channel()
            get(broker, ch2, q)
            ch2.close()
        else:
            returns(broker, ch, q, 1, how)
    assert eventually(broker, lambda: ready(ch, dlq), lambda n: n == 1) == 1


@pytest.mark.rabbitmq_version("4.3")
def test_dlim3_43_nack_requeue_does_not_count(broker: Target, conn: pika.BlockingConnection) -> None:
    ch = conn.channel()
    q, dlq = with_dlq(broker, ch, {"x-delivery-limit": 1}, qtype="quorum")
    ch.basic_publish("", q, b"m")
    returns(broker, ch, q, 10, "nack")
    assert ready(ch, dlq) == 0
    returns(broker, ch, q, 1, "reject")
    ch2 = conn.channel()
    get(broker, ch2, q)
    ch2.close()  # a consumer's channel going down counts too: 2 failed deliveries > 1
    assert eventually(broker, lambda: ready(ch, dlq), lambda k: k == 1) == 1


@pytest.mark.rabbitmq_version("4.0")
def test_dlim3_40_nack_requeue_counts(broker: Target, ch: BlockingChannel) -> None:
    q, dlq = with_dlq(broker, ch, {"x-delivery-limit": 1}, qtype="quorum")
    ch.basic_publish("", q, b"m")
    returns(broker, ch, q, 2, "nack")
    assert eventually(broker, lambda: ready(ch, dlq), lambda k: k == 1) == 1


# -- x-delivery-count (RabbitMQ: rabbit_fifo_client:add_delivery_count_header/2) ---------------------------------------


@pytest.mark.rabbitmq_version("3.12")
def test_dlim4_header_from_first_delivery_in_3x(broker: Target, ch: BlockingChannel) -> None:
    """Live 3.10.8: x-delivery-count is present from the first delivery, as 0 (a long)."""
    confirmed(ch)
    q = quorum(broker, ch)
    ch.basic_publish("", q, b"m", pika.BasicProperties(headers={"app": "x"}))
    seen = returns(broker, ch, q, 2, "reject") + returns(broker, ch, q, 1, "nack")
    m, p, _ = get(broker, ch, q, auto_ack=True)
    assert [*seen, p.headers["x-delivery-count"]] == [0, 1, 2, 3]
    assert p.headers["app"] == "x"
    assert m.redelivered is True


@pytest.mark.rabbitmq_version("3.13")
def test_dlim4_header_absent_on_first_delivery_in_313(broker: Target, ch: BlockingChannel) -> None:
    q = quorum(broker, ch)
    ch.basic_publish("", q, b"m")
    seen = returns(broker, ch, q, 2) + returns(broker, ch, q, 1, "nack")
    _, p, _ = get(broker, ch, q, auto_ack=True)
    assert [*seen, p.headers["x-delivery-count"]] == [None, 1, 2, 3]


@pytest.mark.rabbitmq_version("4.0")
def test_dlim4_header_counts_acquisitions_in_40(broker: Target, ch: BlockingChannel) -> None:
    q = quorum(broker, ch)
    ch.basic_publish("", q, b"m")
    seen = returns(broker, ch, q, 1, "nack") + returns(broker, ch, q, 1, "reject")
    _, p, _ = get(broker, ch, q, auto_ack=True)
    assert [*seen, p.headers["x-delivery-count"]] == [None, 1, 2]
    assert "x-acquired-count" not in p.headers


@pytest.mark.rabbitmq_version("4.3")
def test_dlim4_43_counts_failed_deliveries_and_adds_acquired_count(broker: Target, ch: BlockingChannel) -> None:
    q = quorum(broker, ch)
    ch.basic_publish("", q, b"m")
    returns(broker, ch, q, 2, "nack")
    m, p, _ = get(broker, ch, q)
    assert m.redelivered is True
    assert "x-delivery-count" not in p.headers  # only nacked: no failed delivery
    assert p.headers["x-acquired-count"] == 2
    ch.basic_reject(m.delivery_tag, requeue=True)
    m, p, _ = get(broker, ch, q, auto_ack=True)
    assert (p.headers["x-delivery-count"], p.headers["x-acquired-count"]) == (1, 3)


def test_dlim4_consumer_sees_increasing_delivery_count(broker: Target, conn: pika.BlockingConnection) -> None:
    ch = confirmed(conn.channel())
    q = quorum(broker, ch)
    ch.basic_publish("", q, b"m")
    seen: list[tuple[Any, bool]] = []

    def on(c: BlockingChannel, m: Any, p: pika.BasicProperties, b: bytes) -> None:
        seen.append(((p.headers or {}).get("x-delivery-count"), m.redelivered))
        if len(seen) < 3:
            c.basic_reject(m.delivery_tag, requeue=True)
        else:
            c.basic_ack(m.delivery_tag)

    ch.basic_consume(q, on)
    pump(conn, lambda: len(seen) >= 3)
    counts = [c for c, _ in seen]
    # 3.x (live 3.10.8 and the fake's default-for-3.x profiles) start at 0; 3.13+ leave the first one out.
    assert counts[1:] == [1, 2]
    assert counts[0] in (0, None)
    assert [r for _, r in seen] == [False, True, True]


def test_dlim4_classic_queues_never_add_the_header(broker: Target, ch: BlockingChannel) -> None:
    q = broker.name()
    confirmed(ch)
    ch.queue_declare(q)
    ch.basic_publish("", q, b"m")
    m, p, _ = ch.basic_get(q)
    ch.basic_reject(m.delivery_tag, requeue=True)
    m, p, _ = ch.basic_get(q, auto_ack=True)
    assert m.redelivered is True and p.headers is None


# -- where a returned message goes (RabbitMQ: rabbit_fifo:handle_aux) --------------------------------------------------


@pytest.mark.rabbitmq_version("3.12")
def test_dlim5_with_a_limit_returns_go_to_the_front(broker: Target, ch: BlockingChannel) -> None:
    confirmed(ch)
    q = quorum(broker, ch, **{"x-delivery-limit": 5})
    for b in (b"1", b"2", b"3"):
        ch.basic_publish("", q, b)
    returns(broker, ch, q, 1)
    assert [get(broker, ch, q, auto_ack=True)[2] for _ in range(3)] == [b"1", b"2", b"3"]


@pytest.mark.rabbitmq_version("3.12")
def test_dlim5_without_a_limit_returns_go_to_the_tail(broker: Target, ch: BlockingChannel) -> None:
    confirmed(ch)
    q = quorum(broker, ch)
    for b in (b"1", b"2", b"3"):
        ch.basic_publish("", q, b)
    m1 = get(broker, ch, q)[0]
    m2 = get(broker, ch, q)[0]
    ch.basic_nack(m2.delivery_tag, multiple=True, requeue=True)  # returned in tag order: 1, 2
    assert m1.delivery_tag < m2.delivery_tag
    assert [get(broker, ch, q, auto_ack=True)[2] for _ in range(3)] == [b"3", b"1", b"2"]


@pytest.mark.rabbitmq_version("4.0")
@pytest.mark.parametrize(("limit", "order"), [(None, [b"1", b"2", b"3"]), (-1, [b"2", b"3", b"1"])])
def test_dlim5_4x_default_limit_front_negative_tail(
    broker: Target, ch: BlockingChannel, limit: int | None, order: list[bytes]
) -> None:
    q = quorum(broker, ch, **({} if limit is None else {"x-delivery-limit": limit}))
    for b in (b"1", b"2", b"3"):
        ch.basic_publish("", q, b)
    returns(broker, ch, q, 1)
    assert bodies(ch, q) == order


# -- dead-letter strategy (RabbitMQ: rabbit_quorum_queue:dlh/5) --------------------------------------------------------


def test_dlim6_invalid_strategy(broker: Target, ch: BlockingChannel) -> None:
    q = broker.name()
    code, text = channel_error(
        lambda: ch.queue_declare(
            q, durable=True, arguments={"x-queue-type": "quorum", "x-dead-letter-strategy": "sometimes"}
        )
    )
    assert (code, text) == (
        406,
        f"PRECONDITION_FAILED - invalid arg 'x-dead-letter-strategy' for queue '{q}' in vhost '/': "
        "invalid_dlx_strategy",
    )


@pytest.mark.parametrize("strategy", ["at-most-once", "at-least-once"])
def test_dlim6_valid_strategies(broker: Target, ch: BlockingChannel, strategy: str) -> None:
    q = quorum(
        broker,
        ch,
        **{"x-dead-letter-strategy": strategy, "x-overflow": "reject-publish", "x-dead-letter-exchange": ""},
    )
    assert ch.queue_declare(q, passive=True).method.queue == q


def test_dlim6_strategy_is_a_quorum_only_argument(broker: Target, ch: BlockingChannel) -> None:
    q = broker.name()
    code, text = channel_error(lambda: ch.queue_declare(q, arguments={"x-dead-letter-strategy": "at-most-once"}))
    assert (code, text) == (
        406,
        f"PRECONDITION_FAILED - invalid arg 'x-dead-letter-strategy' for queue '{q}' in vhost '/' "
        "of queue type rabbit_classic_queue",
    )


def test_dlim6_at_least_once_still_dead_letters_on_delivery_limit(broker: Target, ch: BlockingChannel) -> None:
    confirmed(ch)
    q, dlq = with_dlq(
        broker,
        ch,
        {"x-delivery-limit": 0, "x-dead-letter-strategy": "at-least-once", "x-overflow": "reject-publish"},
        qtype="quorum",
    )
    ch.basic_publish("", q, b"m")
    returns(broker, ch, q, 1)
    assert eventually(broker, lambda: ready(ch, dlq), lambda n: n == 1) == 1
    assert death_reasons(ch, dlq) == [(b"m", "delivery_limit", q)]


# -- property restrictions (RabbitMQ: rabbit_queue_type_util:check_*) --------------------------------------------------


@pytest.mark.parametrize(
    ("durable", "exclusive", "auto_delete", "prop"),
    [
        (False, False, False, "non-durable"),
        (True, True, False, "exclusive-owner"),
        (True, False, True, "auto-delete"),
        (False, True, True, "auto-delete"),
        (False, True, False, "exclusive-owner"),
    ],
)
def test_dlim7_quorum_queue_property_restrictions(
    broker: Target, ch: BlockingChannel, durable: bool, exclusive: bool, auto_delete: bool, prop: str
) -> None:
    q = broker.name()
    code, text = channel_error(
        lambda: ch.queue_declare(
            q, durable=durable, exclusive=exclusive, auto_delete=auto_delete, arguments={"x-queue-type": "quorum"}
        )
    )
    assert (code, text) == (406, f"PRECONDITION_FAILED - invalid property '{prop}' for queue '{q}' in vhost '/'")


def test_dlim_x_delivery_limit_is_a_quorum_only_argument(broker: Target, ch: BlockingChannel) -> None:
    q = broker.name()
    code, text = channel_error(lambda: ch.queue_declare(q, arguments={"x-delivery-limit": 3}))
    assert (code, text) == (
        406,
        f"PRECONDITION_FAILED - invalid arg 'x-delivery-limit' for queue '{q}' in vhost '/' "
        "of queue type rabbit_classic_queue",
    )


# -- message priorities in quorum queues (4.x) -----------------------------------------------------------------

_PRIORITIES = [0, 1, 5, 9, 4, None, 6, 0, 10, 3]


def _priority_order(broker: Target, ch: BlockingChannel) -> list[int]:
    ch.confirm_delivery()
    q = quorum(broker, ch)
    for i, p in enumerate(_PRIORITIES):
        ch.basic_publish("", q, str(i).encode(), pika.BasicProperties(priority=p))
    order = []
    for _ in _PRIORITIES:
        _, _, body = get(broker, ch, q, auto_ack=True)
        order.append(int(body))
    return order


@pytest.mark.rabbitmq_version("3.12")
def test_quorum_priorities_3x_fifo(broker: Target, ch: BlockingChannel) -> None:
    assert _priority_order(broker, ch) == list(range(10))


@pytest.mark.rabbitmq_version("4.0")
def test_quorum_priorities_40_two_classes_taken_two_to_one(broker: Target, ch: BlockingChannel) -> None:
    """rabbit_fifo_q: priority > 4 is "high"; two high, then a normal one if it is older (live 4.0.5)."""
    assert _priority_order(broker, ch) == [2, 3, 0, 6, 8, 1, 4, 5, 7, 9]


@pytest.mark.rabbitmq_version("4.3")
def test_quorum_priorities_43_strict_with_default_4(broker: Target, ch: BlockingChannel) -> None:
    """rabbit_fifo_pq: 32 levels in strict order, no priority is 4 (live 4.3.6)."""
    assert _priority_order(broker, ch) == [8, 3, 6, 2, 4, 5, 9, 1, 0, 7]


@pytest.mark.rabbitmq_version("4.0")
def test_quorum_returns_come_before_higher_priorities_40(broker: Target, ch: BlockingChannel) -> None:
    _returns_first(broker, ch)


@pytest.mark.rabbitmq_version("4.3")
def test_quorum_returns_come_before_higher_priorities_43(broker: Target, ch: BlockingChannel) -> None:
    _returns_first(broker, ch)


def _returns_first(broker: Target, ch: BlockingChannel) -> None:
    ch.confirm_delivery()
    q = quorum(broker, ch)
    ch.basic_publish("", q, b"low", pika.BasicProperties(priority=0))
    method, _, _ = get(broker, ch, q)
    ch.basic_publish("", q, b"high", pika.BasicProperties(priority=9))
    ch.basic_nack(method.delivery_tag, requeue=True)
    eventually(broker, lambda: ready(ch, q), lambda n: n == 2)
    assert [get(broker, ch, q, auto_ack=True)[2] for _ in range(2)] == [b"low", b"high"]


def _returns_in_nack_order(broker: Target, ch: BlockingChannel) -> tuple[list[bytes], list[tuple[bytes, bool]]]:
    ch.confirm_delivery()
    q = quorum(broker, ch)
    for body, p in ((b"a", 1), (b"b", 5), (b"c", 1), (b"d", 9), (b"e", None)):
        ch.basic_publish("", q, body, pika.BasicProperties(priority=p))
    got = [get(broker, ch, q) for _ in range(3)]
    for i in (2, 0, 1):
        ch.basic_nack(got[i][0].delivery_tag, requeue=True)
    eventually(broker, lambda: ready(ch, q), lambda n: n == 5)
    after = []
    for _ in range(5):
        method, _, body = get(broker, ch, q, auto_ack=True)
        after.append((body, method.redelivered))
    return [g[2] for g in got], after


@pytest.mark.rabbitmq_version("3.12")
def test_quorum_returns_and_priorities_3x(broker: Target, ch: BlockingChannel) -> None:
    taken, after = _returns_in_nack_order(broker, ch)
    assert taken == [b"a", b"b", b"c"]
    # without a delivery limit a return goes to the back
    assert after == [(b"d", False), (b"e", False), (b"c", True), (b"a", True), (b"b", True)]


@pytest.mark.rabbitmq_version("4.0")
def test_quorum_returns_and_priorities_40(broker: Target, ch: BlockingChannel) -> None:
    taken, after = _returns_in_nack_order(broker, ch)
    assert taken == [b"b", b"d", b"a"]
    assert after == [(b"a", True), (b"b", True), (b"d", True), (b"c", False), (b"e", False)]


@pytest.mark.rabbitmq_version("4.3")
def test_quorum_returns_and_priorities_43(broker: Target, ch: BlockingChannel) -> None:
    taken, after = _returns_in_nack_order(broker, ch)
    assert taken == [b"d", b"b", b"e"]
    assert after == [(b"e", True), (b"d", True), (b"b", True), (b"a", False), (b"c", False)]
