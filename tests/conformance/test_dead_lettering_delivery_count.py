"""Failed deliveries travel with a dead letter in 4.3 (mc annotation ``delivery_count``), and dead-lettering
never recurses (issue 10).

Live 4.3.6: ``basic.reject`` (requeue false or true) and a consumer's channel going down are failed deliveries;
``basic.nack`` is not. A copy dead-lettered with failed deliveries is delivered as redelivered from the queue it
lands in; a quorum queue also shows the count as ``x-delivery-count`` and ``x-acquired-count`` and counts its
delivery limit on from it. Up to 4.2 a dead-lettered copy is never redelivered.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.conformance.conftest import Target
from tests.conformance.dlhelpers import eventually, get, pub, ready, wait_ready
from tests.conformance.versions import for_versions


def _pair(broker: Target, ch: Any, qtype: str, target_args: dict[str, Any] | None = None) -> tuple[str, str]:
    q, dlq = broker.name("q"), broker.name("dlq")
    src: dict[str, Any] = {"x-dead-letter-exchange": "", "x-dead-letter-routing-key": dlq}
    if qtype == "quorum":
        src["x-queue-type"] = "quorum"
    ch.queue_declare(q, durable=True, arguments=src)
    ch.queue_declare(dlq, durable=True, arguments=target_args or {})
    return q, dlq


@pytest.mark.parametrize("qtype", ["classic", "quorum"])
@pytest.mark.parametrize(("how", "failed"), [("reject", True), ("nack", False)])
def test_reject_is_a_failed_delivery_nack_is_not(broker: Target, ch: Any, qtype: str, how: str, failed: bool) -> None:
    q, dlq = _pair(broker, ch, qtype)
    pub(ch, q, "m")
    method, _, _ = get(ch, q)
    if how == "reject":
        ch.basic_reject(method.delivery_tag, requeue=False)
    else:
        ch.basic_nack(method.delivery_tag, requeue=False)
    wait_ready(broker, ch, dlq, 1)
    method, props, _ = get(ch, dlq)
    assert method.redelivered is (failed and broker.at_least("4.3"))
    assert "x-delivery-count" not in (props.headers or {})


@pytest.mark.parametrize("qtype", ["classic", "quorum"])
def test_an_expired_message_carries_its_earlier_failures(broker: Target, ch: Any, qtype: str) -> None:
    q, dlq = _pair(broker, ch, qtype)
    pub(ch, q, "m")
    method, _, _ = get(ch, q)
    ch.basic_reject(method.delivery_tag, requeue=True)  # a failed delivery
    wait_ready(broker, ch, q, 1)
    method, _, _ = get(ch, q)
    ch.basic_nack(method.delivery_tag, requeue=False)  # not one
    wait_ready(broker, ch, dlq, 1)
    method, _, _ = get(ch, dlq)
    assert method.redelivered is broker.at_least("4.3")


def test_a_quorum_target_counts_on_from_the_dead_letters_failures(broker: Target, ch: Any) -> None:
    q, dlq = _pair(broker, ch, "classic", {"x-queue-type": "quorum", "x-delivery-limit": 2})
    pub(ch, q, "m")
    method, _, _ = get(ch, q)
    ch.basic_reject(method.delivery_tag, requeue=False)
    wait_ready(broker, ch, dlq, 1)
    method, props, _ = get(ch, dlq)
    headers = props.headers or {}
    if broker.at_least("4.3"):
        assert method.redelivered is True
        assert (headers.get("x-delivery-count"), headers.get("x-acquired-count")) == (1, 1)
        ch.basic_reject(method.delivery_tag, requeue=True)  # 2 failed deliveries: not over the limit yet
        wait_ready(broker, ch, dlq, 1)
        method, props, _ = get(ch, dlq)
        assert ((props.headers or {}).get("x-delivery-count"), (props.headers or {}).get("x-acquired-count")) == (
            2,
            1,
        )
        ch.basic_reject(method.delivery_tag, requeue=True)  # 3 > 2: dropped (no DLX)
        assert ready(ch, dlq) == 0
    else:
        assert method.redelivered is False
        assert "x-acquired-count" not in headers
        ch.basic_ack(method.delivery_tag)


@for_versions()
@pytest.mark.parametrize("qtype", ["classic", "quorum"])
def test_a_long_loop_of_ttl0_queues_does_not_recurse(broker: Target, conn: Any, qtype: str) -> None:
    """A reject into a ring of TTL-0 queues: each copy dies in the next queue, round the ring. RabbitMQ keeps
    serving; so must the fake, however long the ring (dead-lettering is iterative).

    3.13+ drop the copy when it would die in the first queue again (a cycle of automatic deaths) and the sink gets
    one copy. 3.10-3.12 miss that cycle: their x-death grouping reverses the older entries at every death, so the
    reject lands between the newest entry and the first queue's, and a cycle with a reject in it is no cycle
    (live 3.10.8: 2934 copies in the sink of a ring of 10 after a second). The copy goes round for ever, one more
    in the sink each lap, until the ring is broken."""
    if qtype == "quorum" and not broker.at_least("4.0"):
        pytest.skip("3.10.8 does not expire TTL-0 messages in a quorum queue at once (seen live)")
    endless = not broker.at_least("3.13")
    ch = conn.channel()
    n = 400 if broker.is_fake and not endless else 60
    names = [broker.name(f"r{i}") for i in range(n)]
    sink = broker.name("sink")
    ch.queue_declare(sink, durable=True)
    extra: dict[str, Any] = {"x-queue-type": "quorum"} if qtype == "quorum" else {}
    for i, name in enumerate(names):
        args = {
            **extra,
            "x-message-ttl": 0,
            "x-dead-letter-exchange": "",
            "x-dead-letter-routing-key": names[(i + 1) % n],
        }
        if i == n - 1:
            # the last one dead-letters into the first (the ring) and, through a fanout, into the sink
            fan = broker.exchange("fan")
            ch.exchange_declare(fan, "fanout")
            ch.queue_bind(sink, fan)
            ch.queue_bind(names[0], fan)
            args["x-dead-letter-exchange"] = fan
        ch.queue_declare(name, durable=True, arguments=args)
    src = broker.name("src")
    ch.queue_declare(src, durable=True, arguments={"x-dead-letter-exchange": "", "x-dead-letter-routing-key": names[0]})
    pub(ch, src, "m")
    method, _, _ = get(ch, src)
    ch.basic_reject(method.delivery_tag, requeue=False)
    laps = 2 if endless else 1

    def arrived() -> None:
        # (on failure: where the copy is, the queues of the ring that hold it)
        held = ready(ch, sink)
        assert held >= laps, f"sink {held}; ring queues holding it: { ({q: c for q in names if (c := ready(ch, q))}) }"

    if broker.is_fake and endless:
        # the fake goes round the loop between client commands: each check is a round trip (no sleep)
        for _ in range(1000):
            if ready(ch, sink) >= laps:
                break
    # 60 hops of asynchronous dead-lettering take about 20 ms on a quiet node; a loaded machine may take longer
    eventually(broker, arrived, timeout=20.0)
    for lap in range(1, laps + 1):
        _, props, _ = get(ch, sink)
        deaths = props.headers["x-death"]
        assert len(deaths) == n + 1
        seen = sorted((d["queue"], d["reason"], d["count"]) for d in deaths)
        assert seen == sorted([(src, "rejected", 1)] + [(q, "expired", lap) for q in names])
    if not endless:
        assert ready(ch, sink) == 0
        assert ready(ch, names[0]) == 0
        assert conn.is_open
        return
    # the node serves other work meanwhile
    other = conn.channel()
    plain = broker.name("plain")
    other.queue_declare(plain)
    pub(other, plain, "served")
    assert get(other, plain)[2] == b"served"
    # breaking the ring ends the loop: the copy reaches the sink at most once more
    before = ready(ch, sink)
    ch.queue_delete(names[0])
    _wait_for_background(broker)
    after = ready(ch, sink)
    assert before <= after <= before + 2
    _wait_for_background(broker)
    assert ready(ch, sink) == after
    assert conn.is_open


def _wait_for_background(broker: Target) -> None:
    """Real broker: a moment for in-flight dead letters. Fake: until it has no dead letters waiting for a turn
    of its loop (each check is a round trip to the server's loop, which runs a turn in between; no sleep)."""
    if broker.fake is None:
        time.sleep(0.3)
        return
    rabbit = broker.fake
    for _ in range(10_000):
        if not rabbit._call(lambda: rabbit._broker.dead_letters.pending):
            return
    raise AssertionError("the fake's dead letters still wait after 10,000 turns")


@pytest.mark.parametrize("qtype", ["classic", "quorum"])
@pytest.mark.parametrize("how", ["recover", "close"])
def test_recover_is_no_failed_delivery_a_closed_channel_is(broker: Target, conn: Any, qtype: str, how: str) -> None:
    """4.3: ``basic.recover`` gives the message back without counting a failed delivery; a channel going down
    counts one. Seen in the quorum delivery headers and in the redelivered flag of the dead-lettered copy."""
    ch = conn.channel()
    q, dlq = _pair(broker, ch, qtype)
    pub(ch, q, "m")
    other = conn.channel()
    get(other, q)
    if how == "recover":
        other.basic_recover(requeue=True)
    else:
        other.close()
    wait_ready(broker, ch, q, 1)
    method, props, _ = get(ch, q)
    headers = props.headers or {}
    failed = how == "close"
    if qtype == "quorum":
        if broker.at_least("4.3"):
            want = {"x-acquired-count": 1, **({"x-delivery-count": 1} if failed else {})}
            assert list(headers.items()) == list(want.items())  # (in this order)
        elif broker.at_least("4.0"):
            assert headers == {"x-delivery-count": 1}
    ch.basic_nack(method.delivery_tag, requeue=False)
    wait_ready(broker, ch, dlq, 1)
    method, _, _ = get(ch, dlq)
    assert method.redelivered is (failed and broker.at_least("4.3"))


@pytest.mark.parametrize("target", ["classic", "quorum"])
def test_a_waiting_consumer_of_a_classic_queue_gets_it_fresh(broker: Target, conn: Any, target: str) -> None:
    """A classic queue hands a message to a waiting consumer with the publish's own flag (attempt_delivery), so
    the counted dead letter arrives not redelivered there; a quorum queue always shows the count (4.3)."""
    _waiting_consumer(broker, conn, target)


@pytest.mark.rabbitmq_version("3.12")
def test_a_waiting_quorum_consumer_3x(broker: Target, conn: Any) -> None:
    """3.10.8: a consumer's first delivery from a quorum queue has no x-delivery-count (basic.get shows 0)."""
    _waiting_consumer(broker, conn, "quorum")


def _waiting_consumer(broker: Target, conn: Any, target: str) -> None:
    from tests.conformance.conftest import pump

    ch = conn.channel()
    q, dlq = _pair(broker, ch, "classic", {"x-queue-type": "quorum"} if target == "quorum" else None)
    got: list[tuple[bool, Any]] = []
    consumer = conn.channel()
    consumer.basic_consume(
        dlq, lambda c, m, p, b: got.append((m.redelivered, (p.headers or {}).get("x-delivery-count"))), auto_ack=True
    )
    pub(ch, q, "m")
    method, _, _ = get(ch, q)
    ch.basic_reject(method.delivery_tag, requeue=False)
    pump(conn, lambda: got)
    if target == "quorum" and broker.at_least("4.3"):
        assert got == [(True, 1)]
    else:
        assert got == [(False, None)]


@pytest.mark.parametrize(("how", "failed"), [("reject", True), ("nack", False), ("limit", True)])
def test_at_least_once_dead_letters_carry_the_count_too(broker: Target, ch: Any, how: str, failed: bool) -> None:
    """The at-least-once worker forwards what the quorum queue recorded (4.3.6: redelivered from the DLQ after a
    reject or the delivery limit, not after a nack)."""
    dlq = broker.name("dlq")
    ch.queue_declare(dlq, durable=True)
    q = broker.name("q")
    args: dict[str, Any] = {
        "x-queue-type": "quorum",
        "x-dead-letter-strategy": "at-least-once",
        "x-overflow": "reject-publish",
        "x-dead-letter-exchange": "",
        "x-dead-letter-routing-key": dlq,
    }
    if how == "limit":
        args["x-delivery-limit"] = 0
    ch.queue_declare(q, durable=True, arguments=args)
    pub(ch, q, "m")
    method, _, _ = get(ch, q)
    if how == "nack":
        ch.basic_nack(method.delivery_tag, requeue=False)
    else:
        ch.basic_reject(method.delivery_tag, requeue=how == "limit")
    wait_ready(broker, ch, dlq, 1)
    method, _, _ = get(ch, dlq)
    assert method.redelivered is (failed and broker.at_least("4.3"))
