"""Quorum queues with ``x-dead-letter-strategy: at-least-once`` (``rabbit_quorum_queue:dlh/5``, ``rabbit_fifo_dlx``).

A dead letter stays in the source queue until every queue the DLX routes it to accepted it. RabbitMQ retries
what it holds when the queue's policy changes (at once) and every ``dead_letter_worker_publisher_confirm_timeout``
(180 s): the policy path runs against both brokers, the 180 s timer only on the fake's virtual clock.
Scenarios follow ``rabbit_fifo_dlx_integration_SUITE``; every one was also run by hand against 3.10.8.

The second half covers the edges: CC and BCC keys on the dead letter and on its retries (per version), which
policy changes retry and which do not, a DLX given by policy, what purge, delete and a switch to drop-head do to
what is held, a target that refuses, exchange-to-exchange bindings and an alternate exchange on the DLX, and
delivery-limit dead letters. Only immediate effects and policy-change retries are checked on the real broker (its
retry timer is 180 s); the timer is checked on the fake's virtual clock.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pika
import pika.exceptions
import pytest
from pika.adapters.blocking_connection import BlockingChannel

from tests.conformance.conftest import Target
from tests.conformance.dlhelpers import (
    ALO,
    anchored,
    drain,
    eventually,
    get,
    held,
    pub,
    quiet,
    ready,
    still_empty,
    wait_ready,
)


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
    """``rabbit_fifo_dlx_integration_SUITE:dlx_missing``: the DLX does not exist; the message is kept, not dropped.
    Declaring the exchange and
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
    """DLX "" and no DLRK route an expired message back to its own queue: a cycle. At-most-once drops it; at-least-once
    keeps it until a policy gives a dead-letter routing key to another queue (RabbitMQ:
    ``rabbit_fifo_dlx_integration_SUITE:cycle``)."""
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
    """rabbit_fifo:is_over_limit counts the discards: with x-max-length 1 and nothing to route to, two expired messages
    fill the queue (quorum queues accept one over the limit, ``rabbit_fifo``'s soft limit), the third publish is nacked;
    once the dead letters are delivered, publishing works again."""
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
    quiet(broker)  # the live worker tries m2 (refused: the target is full) before room is made
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


# -- edges: CC/BCC, policy retries, purge and delete, refusing targets ----------------------------------------


def queue(ch: BlockingChannel, name: str, **arguments: Any) -> str:
    ch.queue_declare(name, durable=True, arguments=arguments or None)
    return name


def touch_policy(broker: Target, q: str, value: int = 1_000_000) -> None:
    """A policy change on ``q`` that changes nothing it does (RabbitMQ's worker retries on it)."""
    broker.set_policy(broker.name("touch", kind="policy"), anchored(q), {"max-length-bytes": value})


# -- CC and BCC -----------------------------------------------------------------------------------------------
def _cc_bcc_topology(broker: Target, ch: BlockingChannel, *, declare_dlx: bool) -> tuple[str, str, str, str, str]:
    """Source bound to exchange ``in`` with key ``k``; DLX (direct) binds qk<-k, qc<-kc, qb<-kb. No DLRK."""
    ingress = broker.exchange("in")
    dlx = broker.exchange("dlx")
    ch.exchange_declare(ingress, "direct")
    q = queue(ch, broker.name("src"), **ALO, **{"x-dead-letter-exchange": dlx})
    ch.queue_bind(q, ingress, "k")
    qk, qc, qb = (queue(ch, broker.name(n)) for n in ("qk", "qc", "qb"))
    if declare_dlx:
        _bind_dlx(ch, dlx, qk, qc, qb)
    return ingress, q, qk, qc, qb


def _bind_dlx(ch: BlockingChannel, dlx: str, qk: str, qc: str, qb: str) -> None:
    ch.exchange_declare(dlx, "direct")
    ch.queue_bind(qk, dlx, "k")
    ch.queue_bind(qc, dlx, "kc")
    ch.queue_bind(qb, dlx, "kb")


def test_cc_and_bcc_keys_route_the_dead_letter_at_once(broker: Target, ch: BlockingChannel) -> None:
    """No DLRK: the dead letter goes out with the routing key, CC and BCC keys; x-death records key + CC only,
    the CC header stays, BCC is never seen."""
    ingress, q, qk, qc, qb = _cc_bcc_topology(broker, ch, declare_dlx=True)
    pub(ch, "k", "m", exchange=ingress, expiration="0", headers={"CC": ["kc"], "BCC": ["kb"]})
    for target in (qk, qc, qb):
        wait_ready(broker, ch, target, 1)
    for target in (qk, qc, qb):
        method, props, body = get(ch, target)
        assert (body, method.routing_key) == (b"m", "k")
        assert props.headers["CC"] == ["kc"]
        assert "BCC" not in props.headers
        (death,) = props.headers["x-death"]
        assert (death["routing-keys"], death["exchange"], death["queue"]) == (["k", "kc"], ingress, q)
    assert held(broker, q) in (0, None)


@pytest.mark.rabbitmq_version("3.10")
def test_a_held_dead_letter_is_retried_without_its_bcc_keys(broker: Target, ch: BlockingChannel) -> None:
    """The DLX is missing when the message dies; declared later, a policy change retries the message with the
    routing keys recorded in x-death (key + CC): the BCC queue, reached by an immediate dead letter, is not."""
    ingress, q, qk, qc, qb = _cc_bcc_topology(broker, ch, declare_dlx=False)
    dlx = broker.exchange("dlx")
    pub(ch, "k", "m", exchange=ingress, expiration="0", headers={"CC": ["kc"], "BCC": ["kb"]})
    quiet(broker)
    assert held(broker, q) in (1, None)
    _bind_dlx(ch, dlx, qk, qc, qb)
    touch_policy(broker, q)
    wait_ready(broker, ch, qk, 1)
    wait_ready(broker, ch, qc, 1)
    _, props, _ = get(ch, qc)
    assert props.headers["x-death"][0]["routing-keys"] == ["k", "kc"]
    still_empty(broker, ch, qb)
    assert held(broker, q) in (0, None)


@pytest.mark.rabbitmq_version("3.10")
def test_a_retry_routes_by_the_routing_keys_of_the_newest_x_death_entry(broker: Target, ch: BlockingChannel) -> None:
    """A message already carrying an x-death entry for (this queue, expired) keeps that entry's routing-keys
    when it dies again (count 2). Its first forwarding (DLX "", no DLRK) cycles back to the queue and is held; the
    retry on a policy change routes by the entry's routing-keys, here another queue, which gets it."""
    other = queue(ch, broker.name("other"))
    q = queue(ch, broker.name("src"), **ALO, **{"x-dead-letter-exchange": ""})
    old = datetime(2020, 1, 1, tzinfo=UTC)
    death = {"queue": q, "reason": "expired", "count": 1, "exchange": "", "routing-keys": [other], "time": old}
    pub(ch, q, "m", expiration="0", headers={"x-death": [death]})
    still_empty(broker, ch, other)
    assert held(broker, q) in (1, None)
    touch_policy(broker, q)
    wait_ready(broker, ch, other, 1)
    method, props, body = get(ch, other)
    assert (body, method.routing_key) == (b"m", other)
    (recorded,) = props.headers["x-death"]
    assert (recorded["count"], recorded["routing-keys"], recorded["queue"]) == (2, [other], q)


@pytest.mark.fake_only
@pytest.mark.rabbitmq_version("4.0")
def test_from_313_a_retry_keeps_the_bcc_keys(broker: Target, ch: BlockingChannel) -> None:
    """3.13+ (``mc``): the worker keeps the message's own routing keys (key, CC, BCC) for retries
    (``#pending.original_routing_keys``), so the BCC queue gets the retried dead letter too."""
    ingress, q, qk, qc, qb = _cc_bcc_topology(broker, ch, declare_dlx=False)
    dlx = broker.exchange("dlx")
    pub(ch, "k", "m", exchange=ingress, expiration="0", headers={"CC": ["kc"], "BCC": ["kb"]})
    assert held(broker, q) == 1
    _bind_dlx(ch, dlx, qk, qc, qb)
    touch_policy(broker, q)
    assert [ready(ch, n) for n in (qk, qc, qb)] == [1, 1, 1]
    _, props, _ = get(ch, qb)
    assert props.headers["x-death"][0]["routing-keys"] == ["k", "kc"] and "BCC" not in props.headers


# -- policy changes -------------------------------------------------------------------------------------------
def test_setting_an_identical_policy_again_does_not_retry(broker: Target, ch: BlockingChannel) -> None:
    """Only a change of the queue's policy tells the worker; setting the same policy again changes nothing."""
    dlx = broker.exchange("dlx")
    dlq = queue(ch, broker.name("dlq"))
    q = queue(ch, broker.name("src"), **ALO, **{"x-dead-letter-exchange": dlx, "x-dead-letter-routing-key": "k"})
    pol = broker.name("pol", kind="policy")
    broker.set_policy(pol, anchored(q), {"max-length-bytes": 1_000_000})
    pub(ch, q, "m", expiration="0")
    quiet(broker)
    ch.exchange_declare(dlx, "direct")
    ch.queue_bind(dlq, dlx, "k")
    broker.set_policy(pol, anchored(q), {"max-length-bytes": 1_000_000})
    still_empty(broker, ch, dlq)
    assert held(broker, q) in (1, None)
    broker.set_policy(pol, anchored(q), {"max-length-bytes": 1_000_001})
    wait_ready(broker, ch, dlq, 1)


def test_a_policy_on_another_queue_does_not_retry(broker: Target, ch: BlockingChannel) -> None:
    dlx = broker.exchange("dlx")
    dlq = queue(ch, broker.name("dlq"))
    q = queue(ch, broker.name("src"), **ALO, **{"x-dead-letter-exchange": dlx, "x-dead-letter-routing-key": "k"})
    other = queue(ch, broker.name("other"), **ALO, **{"x-dead-letter-exchange": dlx})
    pub(ch, q, "m", expiration="0")
    quiet(broker)
    ch.exchange_declare(dlx, "direct")
    ch.queue_bind(dlq, dlx, "k")
    touch_policy(broker, other)
    still_empty(broker, ch, dlq)
    touch_policy(broker, q)
    wait_ready(broker, ch, dlq, 1)


def test_a_dlx_given_by_policy_can_be_changed_and_the_held_message_follows(broker: Target, ch: BlockingChannel) -> None:
    """The DLX comes from a policy; it names a missing exchange, then an existing one: the held message goes out
    through the new DLX (with the new routing key), x-death still names the exchange it was published to."""
    dlx2 = broker.exchange("dlx2")
    ch.exchange_declare(dlx2, "direct")
    target = queue(ch, broker.name("target"))
    ch.queue_bind(target, dlx2, "k2")
    q = queue(ch, broker.name("src"), **ALO)
    pol = broker.name("pol", kind="policy")
    broker.set_policy(pol, anchored(q), {"dead-letter-exchange": broker.exchange("missing")})
    pub(ch, q, "m", expiration="0")
    quiet(broker)
    assert held(broker, q) in (1, None)
    assert ready(ch, q) == 0
    broker.set_policy(pol, anchored(q), {"dead-letter-exchange": dlx2, "dead-letter-routing-key": "k2"})
    wait_ready(broker, ch, target, 1)
    method, props, body = get(ch, target)
    assert (body, method.exchange, method.routing_key) == (b"m", dlx2, "k2")
    (death,) = props.headers["x-death"]
    assert (death["exchange"], death["routing-keys"], death["reason"]) == ("", [q], "expired")


def test_clearing_the_policy_that_gave_the_dlx_deletes_what_is_held(broker: Target, ch: BlockingChannel) -> None:
    """Without a DLX there is no at-least-once: clearing the policy that gave it deletes the held messages."""
    target = queue(ch, broker.name("target"))
    q = queue(ch, broker.name("src"), **ALO)
    pol = broker.name("pol", kind="policy")
    broker.set_policy(pol, anchored(q), {"dead-letter-exchange": "", "dead-letter-routing-key": "nowhere"})
    pub(ch, q, "m1", expiration="0")
    pub(ch, q, "m2", expiration="0")
    quiet(broker)
    assert held(broker, q) in (2, None)
    broker.clear_policy(pol)
    quiet(broker)
    assert held(broker, q) in (0, None)
    broker.set_policy(pol, anchored(q), {"dead-letter-exchange": "", "dead-letter-routing-key": target})
    still_empty(broker, ch, target)
    pub(ch, q, "m3", expiration="0")
    wait_ready(broker, ch, target, 1)
    assert drain(ch, target) == [b"m3"]


def test_switching_overflow_to_drop_head_deletes_what_is_held(broker: Target, ch: BlockingChannel) -> None:
    """At-least-once needs reject-publish: a policy switching the overflow to drop-head falls back to
    at-most-once and deletes the held messages; switching back does not bring them back."""
    target = queue(ch, broker.name("target"))
    args = {"x-queue-type": "quorum", "x-dead-letter-strategy": "at-least-once", "x-dead-letter-exchange": ""}
    q = queue(ch, broker.name("src"), **args)
    pol = broker.name("pol", kind="policy")
    broker.set_policy(pol, anchored(q), {"overflow": "reject-publish", "dead-letter-routing-key": "nowhere"})
    pub(ch, q, "m1", expiration="0")
    quiet(broker)
    assert held(broker, q) in (1, None)
    broker.set_policy(pol, anchored(q), {"overflow": "drop-head", "dead-letter-routing-key": "nowhere"})
    quiet(broker)
    assert held(broker, q) in (0, None)
    broker.set_policy(pol, anchored(q), {"overflow": "reject-publish", "dead-letter-routing-key": target})
    still_empty(broker, ch, target)


# -- purge and delete -----------------------------------------------------------------------------------------
def test_purge_leaves_the_held_dead_letters(broker: Target, ch: BlockingChannel) -> None:
    """queue.purge removes ready messages only; held dead letters are still delivered."""
    _purge_leaves_the_held_dead_letters(broker, ch)


@pytest.mark.rabbitmq_version("4.0")
def test_purge_leaves_the_held_dead_letters_40(broker: Target, ch: BlockingChannel) -> None:
    _purge_leaves_the_held_dead_letters(broker, ch)


def _purge_leaves_the_held_dead_letters(broker: Target, ch: BlockingChannel) -> None:
    dlx = broker.exchange("dlx")
    dlq = queue(ch, broker.name("dlq"))
    q = queue(ch, broker.name("src"), **ALO, **{"x-dead-letter-exchange": dlx, "x-dead-letter-routing-key": "k"})
    pub(ch, q, "d1", expiration="0")
    pub(ch, q, "d2", expiration="0")
    pub(ch, q, "r1")
    quiet(broker)
    wait_ready(broker, ch, q, 1)
    # 4.3 purges the two held dead letters too and counts them in purge-ok (live 4.3.6: 3; 4.0.5 and 3.10.8: 1):
    # the queue forgets them (messages_dlx 0), but its worker still holds them and delivers them below
    assert ch.queue_purge(q).method.message_count == (3 if broker.at_least("4.3") else 1)
    assert held(broker, q) in (0 if broker.at_least("4.3") else 2, None)
    ch.exchange_declare(dlx, "direct")
    ch.queue_bind(dlq, dlx, "k")
    touch_policy(broker, q)
    wait_ready(broker, ch, dlq, 2)
    assert drain(ch, dlq) == [b"d1", b"d2"]


def test_delete_ok_counts_only_ready_messages(broker: Target, ch: BlockingChannel) -> None:
    dlx = broker.exchange("dlx")
    q = queue(ch, broker.name("src"), **ALO, **{"x-dead-letter-exchange": dlx})
    pub(ch, q, "d1", expiration="0")
    pub(ch, q, "d2", expiration="0")
    pub(ch, q, "r1")
    quiet(broker)
    wait_ready(broker, ch, q, 1)
    assert ch.queue_delete(q).method.message_count == 1


# -- targets --------------------------------------------------------------------------------------------------
def test_a_refused_message_is_not_retried_by_a_policy_change_until_its_timeout(
    broker: Target, ch: BlockingChannel
) -> None:
    """A target with reject-publish refused the message just now: a policy change retries only what was never
    published or whose last attempt is 180 s old, so it is not sent again yet (the fake then shows the timer)."""
    target = queue(ch, broker.name("target"), **{"x-max-length": 1, "x-overflow": "reject-publish"})
    q = queue(ch, broker.name("src"), **ALO, **{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": target})
    pub(ch, q, "m1", expiration="0")
    pub(ch, q, "m2", expiration="0")
    wait_ready(broker, ch, target, 1)
    quiet(broker)  # the live worker tries m2 (refused: the target is full) before room is made
    assert drain(ch, target) == [b"m1"]
    touch_policy(broker, q)
    still_empty(broker, ch, target)
    assert held(broker, q) in (1, None)
    if broker.fake is None:
        return
    broker.advance(100)
    touch_policy(broker, q, 999)
    assert ready(ch, target) == 0
    broker.advance(80)  # 180 s after the refusal: the timer
    assert drain(ch, target) == [b"m2"]


def test_with_two_targets_only_the_refusing_one_gets_the_retry(broker: Target, ch: BlockingChannel) -> None:
    dlx = broker.exchange("dlx")
    ch.exchange_declare(dlx, "fanout")
    ok = queue(ch, broker.name("ok"))
    full = queue(ch, broker.name("full"), **{"x-max-length": 1, "x-overflow": "reject-publish"})
    ch.queue_bind(ok, dlx)
    ch.queue_bind(full, dlx)
    pub(ch, full, "filler")
    q = queue(ch, broker.name("src"), **ALO, **{"x-dead-letter-exchange": dlx})
    pub(ch, q, "m", expiration="0")
    wait_ready(broker, ch, ok, 1)
    quiet(broker)
    assert drain(ch, full) == [b"filler"]
    assert held(broker, q) in (1, None)
    touch_policy(broker, q)
    still_empty(broker, ch, full)
    assert ready(ch, ok) == 1
    if broker.fake is None:
        return
    broker.advance(180)
    assert drain(ch, full) == [b"m"]
    assert drain(ch, ok) == [b"m"]
    assert held(broker, q) == 0


def test_exchange_to_exchange_binding_and_alternate_exchange_on_the_dlx(broker: Target, ch: BlockingChannel) -> None:
    ae = broker.exchange("ae")
    dlx = broker.exchange("dlx")
    inner = broker.exchange("inner")
    ch.exchange_declare(ae, "fanout")
    ch.exchange_declare(dlx, "direct", arguments={"alternate-exchange": ae})
    ch.exchange_declare(inner, "direct")
    ch.exchange_bind(inner, dlx, "k")
    via_e2e = queue(ch, broker.name("e2e"))
    via_ae = queue(ch, broker.name("ae"))
    ch.queue_bind(via_e2e, inner, "k")
    ch.queue_bind(via_ae, ae)
    q = queue(ch, broker.name("src"), **ALO, **{"x-dead-letter-exchange": dlx})
    pub(ch, q, "m1", expiration="0", headers={"CC": ["k"]})
    pub(ch, q, "m2", expiration="0")
    wait_ready(broker, ch, via_e2e, 1)
    wait_ready(broker, ch, via_ae, 1)
    assert drain(ch, via_e2e) == [b"m1"]
    assert drain(ch, via_ae) == [b"m2"]
    assert held(broker, q) in (0, None)


def test_delivery_limit_dead_letters_are_held_too(broker: Target, ch: BlockingChannel) -> None:
    dlx = broker.exchange("dlx")
    dlq = queue(ch, broker.name("dlq"))
    q = queue(
        ch,
        broker.name("src"),
        **ALO,
        **{"x-dead-letter-exchange": dlx, "x-dead-letter-routing-key": "k", "x-delivery-limit": 1},
    )
    pub(ch, q, "m")
    for _ in range(2):
        method, _, _ = get(ch, q)
        ch.basic_reject(method.delivery_tag, requeue=True)
    quiet(broker)
    assert ready(ch, q) == 0
    assert held(broker, q) in (1, None)
    ch.exchange_declare(dlx, "direct")
    ch.queue_bind(dlq, dlx, "k")
    touch_policy(broker, q)
    wait_ready(broker, ch, dlq, 1)
    _, props, _ = get(ch, dlq)
    (death,) = props.headers["x-death"]
    assert (death["reason"], death["queue"]) == ("delivery_limit", q)
