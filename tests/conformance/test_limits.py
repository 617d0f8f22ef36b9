"""Length limits, overflow behaviour and publisher confirms (``rabbit_amqqueue_process``,
``queue_length_limits_SUITE``, ``rabbit_quorum_queue:overflow/3``)."""

from __future__ import annotations

import time
from typing import Any

import pika
import pika.exceptions
import pytest
from pika.adapters.blocking_connection import BlockingChannel

from tests.conformance.conftest import Target, pump, settle
from tests.conformance.ttlhelpers import (
    anchored,
    bodies,
    channel_error,
    confirmed,
    death_reasons,
    eventually,
    publish_error,
    ready,
    with_dlq,
)
from tests.conformance.versions import for_versions

P = pika.BasicProperties


def acked(ch: BlockingChannel, exchange: str, rk: str, body: bytes, props: pika.BasicProperties | None = None) -> bool:
    """Publish on a confirm channel: True for basic.ack, False for basic.nack."""
    try:
        ch.basic_publish(exchange, rk, body, props)
    except pika.exceptions.NackError:
        return False
    return True


# -- what counts (RabbitMQ: rabbit_amqqueue_process:over_max_length/1) -------------------------------------------------


def test_ml1_unacked_messages_do_not_count(broker: Target, ch: BlockingChannel) -> None:
    """Java QueueSizeLimit.queueSizeUnacked."""
    q = broker.name()
    confirmed(ch)
    ch.queue_declare(q, arguments={"x-max-length": 2})
    for b in (b"1", b"2"):
        ch.basic_publish("", q, b)
    ch.basic_get(q)
    ch.basic_get(q)
    ch.basic_publish("", q, b"3")
    assert ready(ch, q) == 1
    assert bodies(ch, q) == [b"3"]


def test_ml1_bytes_limit_counts_bodies_only(broker: Target, ch: BlockingChannel) -> None:
    q = broker.name()
    confirmed(ch)
    ch.queue_declare(q, arguments={"x-max-length-bytes": 10})
    big_headers = P(headers={"h": "x" * 1000}, content_type="application/octet-stream")
    for b in (b"aaaaa", b"bbbbb"):
        ch.basic_publish("", q, b, big_headers)
    assert ready(ch, q) == 2  # 10 body bytes: exactly at the limit
    ch.basic_publish("", q, b"c")
    assert bodies(ch, q) == [b"bbbbb", b"c"]


@for_versions("3.10", "4.0", "4.3")
def test_ml1_quorum_bytes_limit_counts_the_property_block_from_43(broker: Target, ch: BlockingChannel) -> None:
    """A quorum queue of 4.3 counts the property block with the body (``mc:size/1``): a 2-byte body with
    ``content_type: text/plain`` counts 15 (2 flag octets + 1 + 10 + the body); 4.0.5 and 3.10.8 count bodies only.
    Also what the management API shows as ``message_bytes`` (tests/management)."""
    q = broker.name()
    confirmed(ch)
    ch.queue_declare(
        q, durable=True, arguments={"x-queue-type": "quorum", "x-max-length-bytes": 10, "x-overflow": "reject-publish"}
    )
    outcomes = [acked(ch, "", q, b"ab"), acked(ch, "", q, b"ab", P(content_type="text/plain"))]
    outcomes += [acked(ch, "", q, b"ab"), acked(ch, "", q, b"ab")]
    if broker.at_least("4.3"):
        assert outcomes == [True, True, False, False]  # 4 + 15 bytes: over 10 after the second
        assert ready(ch, q) == 2
    else:
        assert outcomes == [True, True, True, True]  # 8 body bytes
        assert ready(ch, q) == 4


def test_ml1_empty_bodies_never_exceed_a_bytes_limit(broker: Target, ch: BlockingChannel) -> None:
    q = broker.name()
    confirmed(ch)
    ch.queue_declare(q, arguments={"x-max-length-bytes": 0})
    for _ in range(3):
        ch.basic_publish("", q, b"")
    assert ready(ch, q) == 3


# -- combining arguments and policies (RabbitMQ: rabbit_quorum_queue:gather_policy_config) -----------------------------


@pytest.mark.parametrize(("arg", "policy"), [(1, 2), (2, 1)])
def test_ml2_smaller_max_length_wins(broker: Target, ch: BlockingChannel, arg: int, policy: int) -> None:
    q = broker.name()
    confirmed(ch)
    broker.set_policy(q + "-len", anchored(q), {"max-length": policy})
    ch.queue_declare(q, arguments={"x-max-length": arg})
    for b in (b"1", b"2", b"3"):
        ch.basic_publish("", q, b)
    assert bodies(ch, q) == [b"3"]


def test_ml2_smaller_max_length_bytes_wins(broker: Target, ch: BlockingChannel) -> None:
    q = broker.name()
    confirmed(ch)
    broker.set_policy(q + "-len", anchored(q), {"max-length-bytes": 2})
    ch.queue_declare(q, arguments={"x-max-length-bytes": 100})
    for b in (b"1", b"2", b"3"):
        ch.basic_publish("", q, b)
    assert bodies(ch, q) == [b"2", b"3"]


def test_ml2_whichever_limit_is_hit_first(broker: Target, ch: BlockingChannel) -> None:
    q = broker.name()
    confirmed(ch)
    ch.queue_declare(q, arguments={"x-max-length": 3, "x-max-length-bytes": 4})
    for b in (b"aa", b"bb", b"cc"):
        ch.basic_publish("", q, b)
    assert bodies(ch, q) == [b"bb", b"cc"]


def test_ml2_classic_overflow_argument_wins_over_policy(broker: Target, ch: BlockingChannel) -> None:
    q = broker.name()
    confirmed(ch)
    broker.set_policy(q + "-ovf", anchored(q), {"overflow": "drop-head"})
    ch.queue_declare(q, arguments={"x-max-length": 1, "x-overflow": "reject-publish"})
    assert acked(ch, "", q, b"1")
    assert not acked(ch, "", q, b"2")
    assert bodies(ch, q) == [b"1"]


def test_ml2_quorum_overflow_policy_wins_over_argument(broker: Target, ch: BlockingChannel) -> None:
    q = broker.name()
    confirmed(ch)
    broker.set_policy(q + "-ovf", anchored(q), {"overflow": "drop-head"})
    ch.queue_declare(
        q, durable=True, arguments={"x-queue-type": "quorum", "x-max-length": 1, "x-overflow": "reject-publish"}
    )
    for b in (b"1", b"2", b"3"):
        assert acked(ch, "", q, b)
    assert eventually(broker, lambda: ready(ch, q), lambda n: n == 1) == 1
    assert bodies(ch, q) == [b"3"]


# operator policies may set overflow from 3.13 (RabbitMQ: unit_operator_policy_SUITE:merge_operator_policy_definitions)
@pytest.mark.rabbitmq_version("3.13")
def test_ml2_operator_overflow_wins_over_user_policy(broker: Target, ch: BlockingChannel) -> None:
    q = broker.name()
    confirmed(ch)
    broker.set_policy(q + "-user", anchored(q), {"overflow": "drop-head", "max-length": 1})
    broker.set_policy(q + "-op", anchored(q), {"overflow": "reject-publish"}, operator=True)
    ch.queue_declare(q)
    assert acked(ch, "", q, b"1")
    assert not acked(ch, "", q, b"2")


def test_ml2_lowering_max_length_by_policy_drops_from_head_at_once(broker: Target, ch: BlockingChannel) -> None:
    confirmed(ch)
    q, dlq = with_dlq(broker, ch)
    for b in (b"1", b"2", b"3"):
        ch.basic_publish("", q, b)
    broker.set_policy(q + "-len", anchored(q), {"max-length": 1})
    assert eventually(broker, lambda: ready(ch, dlq), lambda n: n == 2) == 2
    assert ready(ch, q) == 1
    assert death_reasons(ch, dlq) == [(b"1", "maxlen", q), (b"2", "maxlen", q)]


# -- drop-head (RabbitMQ: queue_length_limits_SUITE:max_length_drop_head) ----------------------------------------------


@pytest.mark.parametrize("limit", ["x-max-length", "x-max-length-bytes"])
def test_ml3_drop_head_keeps_newest(broker: Target, ch: BlockingChannel, limit: str) -> None:
    q = broker.name()
    confirmed(ch)
    ch.queue_declare(q, arguments={limit: 1})
    for b in (b"1", b"2", b"3"):
        assert acked(ch, "", q, b)  # drop-head always acks
    assert bodies(ch, q) == [b"3"]


def test_ml3_drop_head_dead_letters_with_reason_maxlen(broker: Target, ch: BlockingChannel) -> None:
    confirmed(ch)
    q, dlq = with_dlq(broker, ch, {"x-max-length": 1})
    for b in (b"1", b"2", b"3"):
        ch.basic_publish("", q, b)
    assert eventually(broker, lambda: ready(ch, dlq), lambda n: n == 2) == 2
    assert death_reasons(ch, dlq) == [(b"1", "maxlen", q), (b"2", "maxlen", q)]
    assert bodies(ch, q) == [b"3"]


def test_ml3_max_length_zero_drops_everything_without_consumer(broker: Target, ch: BlockingChannel) -> None:
    q = broker.name()
    confirmed(ch)
    ch.queue_declare(q, arguments={"x-max-length": 0})
    assert acked(ch, "", q, b"1")
    assert ready(ch, q) == 0


def test_ml3_max_length_zero_still_delivers_to_waiting_consumer(broker: Target, conn: pika.BlockingConnection) -> None:
    q = broker.name()
    ch = confirmed(conn.channel())
    ch.queue_declare(q, arguments={"x-max-length": 0})
    got: list[bytes] = []
    ch.basic_consume(q, lambda c, m, p, b: got.append(b), auto_ack=True)
    ch.basic_publish("", q, b"live")
    pump(conn, lambda: got)
    assert got == [b"live"]


def test_ml3_requeue_over_the_limit_drops_requeued_head(broker: Target, ch: BlockingChannel) -> None:
    """Java QueueSizeLimit.requeue: requeued messages go back to the head, so they are the ones dropped."""
    confirmed(ch)
    q, dlq = with_dlq(broker, ch, {"x-max-length": 2})
    ch.basic_publish("", q, b"1")
    ch.basic_publish("", q, b"2")
    m1 = ch.basic_get(q)[0]
    ch.basic_publish("", q, b"3")
    assert ready(ch, q) == 2
    ch.basic_reject(m1.delivery_tag, requeue=True)
    assert eventually(broker, lambda: ready(ch, dlq), lambda n: n == 1) == 1
    assert death_reasons(ch, dlq) == [(b"1", "maxlen", q)]
    assert bodies(ch, q) == [b"2", b"3"]


# -- reject-publish (RabbitMQ: queue_length_limits_SUITE:max_length_reject_confirm) ------------------------------------


def test_ml4_reject_publish_nacks_until_there_is_room(broker: Target, ch: BlockingChannel) -> None:
    """queue_length_limits_SUITE:max_length_reject_confirm: ack, nack, nack, then after a get, ack."""
    q = broker.name()
    confirmed(ch)
    ch.queue_declare(q, arguments={"x-max-length": 1, "x-overflow": "reject-publish"})
    assert [acked(ch, "", q, b) for b in (b"1", b"2", b"3")] == [True, False, False]
    assert ch.basic_get(q, auto_ack=True)[2] == b"1"
    assert acked(ch, "", q, b"4")
    assert bodies(ch, q) == [b"4"]


def test_ml4_reject_publish_bytes(broker: Target, ch: BlockingChannel) -> None:
    q = broker.name()
    confirmed(ch)
    ch.queue_declare(q, arguments={"x-max-length-bytes": 5, "x-overflow": "reject-publish"})
    assert [acked(ch, "", q, b) for b in (b"abc", b"de", b"f")] == [True, True, False]


def test_ml4_without_confirms_the_message_is_silently_dropped(broker: Target, conn: pika.BlockingConnection) -> None:
    q = broker.name()
    ch = conn.channel()
    ch.queue_declare(q, arguments={"x-max-length": 1, "x-overflow": "reject-publish"})
    for b in (b"1", b"2"):
        ch.basic_publish("", q, b)
    settle(conn, 0.1)
    assert ch.is_open
    assert bodies(ch, q) == [b"1"]


def test_ml4_check_runs_even_with_a_waiting_consumer(broker: Target, conn: pika.BlockingConnection) -> None:
    q = broker.name()
    ch = confirmed(conn.channel())
    ch.queue_declare(q, arguments={"x-max-length": 0, "x-overflow": "reject-publish"})
    got: list[bytes] = []
    ch.basic_consume(q, lambda c, m, p, b: got.append(b), auto_ack=True)
    assert not acked(ch, "", q, b"m")
    settle(conn, 0.1)
    assert got == []


def test_ml4_requeue_may_exceed_the_limit_and_nothing_is_dropped(broker: Target, ch: BlockingChannel) -> None:
    q = broker.name()
    confirmed(ch)
    ch.queue_declare(q, arguments={"x-max-length": 1, "x-overflow": "reject-publish"})
    assert acked(ch, "", q, b"1")
    m1 = ch.basic_get(q)[0]
    assert acked(ch, "", q, b"2")
    ch.basic_reject(m1.delivery_tag, requeue=True)
    # (the real broker may answer the passive declare's stat, a priority call, before the requeue cast)
    assert eventually(broker, lambda: ready(ch, q), lambda n: n == 2) == 2
    assert not acked(ch, "", q, b"3")
    assert bodies(ch, q) == [b"1", b"2"]


def test_ml4_reject_publish_does_not_dead_letter(broker: Target, ch: BlockingChannel) -> None:
    confirmed(ch)
    q, dlq = with_dlq(broker, ch, {"x-max-length": 1, "x-overflow": "reject-publish"})
    assert [acked(ch, "", q, b) for b in (b"1", b"2")] == [True, False]
    settle(ch.connection, 0.1)
    assert ready(ch, dlq) == 0


# -- reject-publish-dlx (RabbitMQ: dead_lettering_SUITE:dead_letter_max_length_reject_publish_dlx) ---------------------


def test_ml5_reject_publish_dlx_dead_letters_the_new_message(broker: Target, ch: BlockingChannel) -> None:
    confirmed(ch)
    q, dlq = with_dlq(broker, ch, {"x-max-length": 1, "x-overflow": "reject-publish-dlx"})
    assert [acked(ch, "", q, b) for b in (b"P1", b"P2", b"P3")] == [True, False, False]
    assert eventually(broker, lambda: ready(ch, dlq), lambda n: n == 2) == 2
    assert death_reasons(ch, dlq) == [(b"P2", "maxlen", q), (b"P3", "maxlen", q)]
    assert bodies(ch, q) == [b"P1"]


# -- quorum queues (RabbitMQ: rabbit_quorum_queue:overflow/3) ----------------------------------------------------------


def quorum(ch: BlockingChannel, q: str, **args: object) -> None:
    ch.queue_declare(q, durable=True, arguments={"x-queue-type": "quorum", **args})


def test_ml6_quorum_reject_publish_accepts_one_over_the_limit(broker: Target, ch: BlockingChannel) -> None:
    q = broker.name()
    confirmed(ch)
    quorum(ch, q, **{"x-max-length": 1, "x-overflow": "reject-publish"})
    assert [acked(ch, "", q, b) for b in (b"1", b"2", b"3")] == [True, True, False]
    assert ready(ch, q) == 2
    assert bodies(ch, q) == [b"1", b"2"]
    assert acked(ch, "", q, b"4")  # ready 0 <= 0.8 * 1: accepting again


def test_ml6_quorum_reject_publish_resumes_below_soft_limit(broker: Target, ch: BlockingChannel) -> None:
    q = broker.name()
    confirmed(ch)
    quorum(ch, q, **{"x-max-length": 5, "x-overflow": "reject-publish"})
    results = [acked(ch, "", q, str(i).encode()) for i in range(7)]
    assert results == [True] * 6 + [False]
    for _ in range(2):  # 6 -> 4 ready: 4 <= 0.8 * 5
        ch.basic_get(q, auto_ack=True)
    assert eventually(broker, lambda: acked(ch, "", q, b"x"), lambda ok: ok)
    for _ in range(1):
        ch.basic_get(q, auto_ack=True)


def test_ml6_quorum_reject_publish_stays_blocked_above_soft_limit(broker: Target, ch: BlockingChannel) -> None:
    q = broker.name()
    confirmed(ch)
    quorum(ch, q, **{"x-max-length": 5, "x-overflow": "reject-publish"})
    assert [acked(ch, "", q, str(i).encode()) for i in range(7)] == [True] * 6 + [False]
    ch.basic_get(q, auto_ack=True)  # 5 ready > 0.8 * 5
    assert not acked(ch, "", q, b"x")


def test_ml6_quorum_reject_publish_dlx_behaves_as_drop_head(broker: Target, ch: BlockingChannel) -> None:
    q = broker.name()
    confirmed(ch)
    quorum(ch, q, **{"x-max-length": 1, "x-overflow": "reject-publish-dlx"})
    assert [acked(ch, "", q, b) for b in (b"1", b"2", b"3")] == [True, True, True]
    assert eventually(broker, lambda: ready(ch, q), lambda n: n == 1) == 1
    assert bodies(ch, q) == [b"3"]


def test_ml6_quorum_drop_head_dead_letters_maxlen(broker: Target, ch: BlockingChannel) -> None:
    confirmed(ch)
    q, dlq = with_dlq(broker, ch, {"x-max-length": 1}, qtype="quorum")
    for b in (b"1", b"2"):
        ch.basic_publish("", q, b)
    assert eventually(broker, lambda: ready(ch, dlq), lambda n: n == 1) == 1
    assert death_reasons(ch, dlq) == [(b"1", "maxlen", q)]


# -- one nacking queue nacks the whole publish (RabbitMQ: rabbit_channel:handle_queue_actions) -------------------------


def test_ml7_one_rejecting_queue_nacks_the_publish(broker: Target, ch: BlockingChannel) -> None:
    confirmed(ch)
    x = broker.exchange("fan")
    full, other = broker.name("full"), broker.name("other")
    ch.exchange_declare(x, "fanout")
    ch.queue_declare(full, arguments={"x-max-length": 1, "x-overflow": "reject-publish"})
    ch.queue_declare(other)
    ch.queue_bind(full, x)
    ch.queue_bind(other, x)
    assert acked(ch, x, "", b"1")
    assert not acked(ch, x, "", b"2")
    assert bodies(ch, full) == [b"1"]
    assert bodies(ch, other) == [b"1", b"2"]  # the other queue kept it


def test_ml7_single_nack_for_the_sequence_number(broker: Target, conn: pika.BlockingConnection) -> None:
    """Two full queues reject the same publish: the publisher sees one basic.nack for its sequence number.

    Live 3.10.8: a nack always goes through rabbit_channel's coalesce_and_send, so with nothing older
    unconfirmed it carries multiple=true (a lone ack does not)."""
    ch = conn.channel()
    frames: list[tuple[str, int, bool]] = []
    x = broker.exchange("fan")
    a, b = broker.name("a"), broker.name("b")
    ch.exchange_declare(x, "fanout")
    for q in (a, b):
        ch.queue_declare(q, arguments={"x-max-length": 0, "x-overflow": "reject-publish"})
        ch.queue_bind(q, x)
    selected: list[bool] = []
    ch._impl.confirm_delivery(
        lambda f: frames.append((type(f.method).__name__, f.method.delivery_tag, f.method.multiple)),
        callback=lambda _: selected.append(True),
    )
    pump(conn, lambda: selected)
    assert selected
    ch.basic_publish(x, "", b"m")
    pump(conn, lambda: frames)
    settle(conn, 0.1)
    assert frames == [("Nack", 1, True)]
    ch.basic_publish("amq.direct", "nowhere", b"unroutable")
    pump(conn, lambda: len(frames) == 2)
    assert frames[1] == ("Ack", 2, False)


# -- argument validation (RabbitMQ: rabbit_amqqueue:check_non_neg_int_arg/2) -------------------------------------------


@pytest.mark.parametrize(
    ("key", "value", "term"),
    [
        ("x-max-length", -5, "{value_negative,-5}"),
        ("x-max-length-bytes", -1, "{value_negative,-1}"),
        ("x-max-length", "10", '"expected integer, got longstr"'),
        ("x-overflow", "foo", "invalid_overflow"),
        ("x-overflow", 1, "{unacceptable_type,signedint}"),
    ],
)
def test_ml8_invalid_limit_arguments(broker: Target, ch: BlockingChannel, key: str, value: object, term: str) -> None:
    q = broker.name()
    code, text = channel_error(lambda: ch.queue_declare(q, arguments={key: value}))
    assert (code, text) == (406, f"PRECONDITION_FAILED - invalid arg '{key}' for queue '{q}' in vhost '/': {term}")


@pytest.mark.parametrize("overflow", ["drop-head", "reject-publish", "reject-publish-dlx"])
def test_ml8_zero_limits_and_overflow_values_accepted(broker: Target, ch: BlockingChannel, overflow: str) -> None:
    q = broker.name()
    ch.queue_declare(q, arguments={"x-max-length": 0, "x-max-length-bytes": 0, "x-overflow": overflow})
    assert ch.queue_declare(q, passive=True).method.queue == q


# -- publisher confirms (RabbitMQ: rabbit_channel (confirms)) ----------------------------------------------------------


def test_mi2_confirms_for_every_outcome(broker: Target, conn: pika.BlockingConnection) -> None:
    ch = confirmed(conn.channel())
    plain, ttl0, drop, reject = (broker.name(n) for n in ("plain", "ttl0", "drop", "reject"))
    ch.queue_declare(plain)
    ch.queue_declare(ttl0, arguments={"x-message-ttl": 0})
    ch.queue_declare(drop, arguments={"x-max-length": 0})
    ch.queue_declare(reject, arguments={"x-max-length": 0, "x-overflow": "reject-publish"})
    assert acked(ch, "amq.direct", "unroutable", b"m")
    assert acked(ch, "", plain, b"m")
    assert acked(ch, "", ttl0, b"m")
    assert acked(ch, "", drop, b"m")
    assert not acked(ch, "", reject, b"m")
    code, text = publish_error(ch, "", plain, b"m", P(expiration="x"))
    assert (code, text) == (406, "PRECONDITION_FAILED - invalid expiration 'x': no_integer")


def test_mi2_reject_publish_dlx_nacks(broker: Target, ch: BlockingChannel) -> None:
    q = broker.name()
    confirmed(ch)
    ch.queue_declare(q, arguments={"x-max-length": 0, "x-overflow": "reject-publish-dlx"})
    assert not acked(ch, "", q, b"m")


# -- message_count is the ready count (RabbitMQ: rabbit_channel (queue.declare-ok)) ------------------------------------


def test_mi3_message_count_excludes_unacked(broker: Target, ch: BlockingChannel) -> None:
    q = broker.name()
    confirmed(ch)
    ch.queue_declare(q)
    for b in (b"1", b"2", b"3"):
        ch.basic_publish("", q, b)
    m, _, _ = ch.basic_get(q)
    assert m.message_count == 2
    assert ch.queue_declare(q).method.message_count == 2
    assert ready(ch, q) == 2
    ch.basic_reject(m.delivery_tag, requeue=True)
    assert eventually(broker, lambda: ready(ch, q), lambda n: n == 3) == 3


def test_mi3_message_count_includes_expired_messages_not_at_head(broker: Target, ch: BlockingChannel) -> None:
    q = broker.name()
    confirmed(ch)
    ch.queue_declare(q)
    ch.basic_publish("", q, b"head")
    ch.basic_publish("", q, b"expired", P(expiration="10"))
    broker.advance(0.06)
    assert ready(ch, q) == 2


# -- quorum queues: TTL 0 and overflow together (issue 10) -----------------------------------------------------


@pytest.mark.parametrize(
    ("args", "items", "left", "dead"),
    [
        ({"x-message-ttl": 0}, [("a", None), ("b", None)], [], ["a", "b"]),
        ({}, [("a", None), ("b", "0"), ("c", None)], [("a", 1), ("c", 0)], ["b"]),
        (
            {"x-max-length": 1, "x-overflow": "reject-publish-dlx"},
            [("a", None), ("b", None), ("c", None)],
            [("c", 0)],
            ["a", "b"],
        ),
        (
            {"x-max-length": 1, "x-overflow": "reject-publish-dlx", "x-message-ttl": 0},
            [("a", None), ("b", None)],
            [],
            ["a", "b"],
        ),
        ({"x-max-length": 1}, [("a", "0"), ("b", None), ("c", "0")], [], ["a", "b", "c"]),
        (
            {"x-max-length": 2, "x-overflow": "reject-publish-dlx"},
            [("a", None), ("b", "0"), ("c", None), ("d", None)],
            [("c", 1), ("d", 0)],
            ["a", "b"],
        ),
    ],
    ids=["ttl0", "exp0-behind", "rpdlx", "rpdlx-ttl0", "drop-head-exp0", "rpdlx-exp0"],
)
def test_quorum_ttl0_and_overflow_route_and_count(
    broker: Target,
    ch: BlockingChannel,
    args: dict[str, Any],
    items: list[tuple[str, str | None]],
    left: list[tuple[str, int]],
    dead: list[str],
) -> None:
    """A quorum queue's reject-publish-dlx drops the head (dead-lettered as maxlen) and acks every publish; TTL-0
    messages die at once, or when they reach the head; get-ok counts what is left. Live 4.0.5 and 4.3.6."""
    if not broker.at_least("4.0"):
        pytest.skip("live 3.10.8 keeps TTL-0 messages in a quorum queue (seen with a ring of TTL-0 queues)")
    ch.confirm_delivery()
    dlq = broker.name("dlq")
    ch.queue_declare(dlq, durable=True)
    q = broker.name("qq")
    ch.queue_declare(
        q,
        durable=True,
        arguments={"x-queue-type": "quorum", "x-dead-letter-exchange": "", "x-dead-letter-routing-key": dlq, **args},
    )
    for body, expiration in items:
        ch.basic_publish("", q, body.encode(), pika.BasicProperties(expiration=expiration))  # every one is acked
    if not broker.is_fake:
        time.sleep(0.3)  # the quorum queue dead-letters asynchronously
    got: list[tuple[str, int]] = []
    while True:
        method, _, body = ch.basic_get(q, auto_ack=True)
        if method is None:
            break
        got.append((body.decode(), method.message_count))
    assert got == left
    dead_bodies = []
    while True:
        method, _, body = ch.basic_get(dlq, auto_ack=True)
        if method is None:
            break
        dead_bodies.append(body.decode())
    assert dead_bodies == dead
