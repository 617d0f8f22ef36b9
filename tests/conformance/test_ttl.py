"""Message TTL (``rabbit_amqqueue_process``, ``rabbit_basic:parse_expiration/1``), against fakerabbit and, when
configured, a real RabbitMQ.

TTLs are tens to hundreds of milliseconds so that the real broker can run them; on the fake
``broker.advance`` moves the virtual clock instead of sleeping.
"""

from __future__ import annotations

import pika
import pytest
from pika.adapters.blocking_connection import BlockingChannel

from fakerabbit.broker.policy import PolicyError
from tests.conformance.conftest import Target, pump, settle
from tests.conformance.ttlhelpers import (
    anchored,
    bodies,
    confirmed,
    death_reasons,
    eventually,
    publish_error,
    ready,
    with_dlq,
)
from tests.realbrokers import PolicyRefused

P = pika.BasicProperties


# -- queue TTL from argument and policy, smaller wins (RabbitMQ: rabbit_amqqueue_process:process_args_policy) ----------


def test_ttl1_policy_smaller_than_argument_wins_until_cleared(broker: Target, ch: BlockingChannel) -> None:
    q = broker.name()
    confirmed(ch)
    ch.queue_declare(q, arguments={"x-message-ttl": 300})
    broker.set_policy(q + "-ttl", anchored(q), {"message-ttl": 50})
    ch.basic_publish("", q, b"under-policy")
    broker.advance(0.12)
    assert ready(ch, q) == 0
    broker.clear_policy(q + "-ttl")
    ch.basic_publish("", q, b"under-argument")
    broker.advance(0.12)
    assert ready(ch, q) == 1  # 300 ms argument TTL again
    broker.advance(0.25)
    assert ready(ch, q) == 0


def test_ttl1_argument_smaller_than_policy_wins(broker: Target, ch: BlockingChannel) -> None:
    q = broker.name()
    confirmed(ch)
    ch.queue_declare(q, arguments={"x-message-ttl": 50})
    broker.set_policy(q + "-ttl", anchored(q), {"message-ttl": 60000})
    ch.basic_publish("", q, b"m")
    broker.advance(0.12)
    assert ready(ch, q) == 0


def test_ttl1_policy_alone_sets_queue_ttl(broker: Target, ch: BlockingChannel) -> None:
    q = broker.name()
    confirmed(ch)
    ch.queue_declare(q)
    broker.set_policy(q + "-ttl", anchored(q), {"message-ttl": 50})
    ch.basic_publish("", q, b"m")
    assert ready(ch, q) == 1
    broker.advance(0.12)
    assert ready(ch, q) == 0


@pytest.mark.fake_only  # operator policies would leak into other engineers' runs on the shared broker
def test_ttl1_operator_policy_combined_with_min(broker: Target, ch: BlockingChannel) -> None:
    q = broker.name()
    confirmed(ch)
    ch.queue_declare(q, arguments={"x-message-ttl": 60000})
    broker.set_policy(q + "-user", anchored(q), {"message-ttl": 30000})
    broker.set_policy(q + "-op", anchored(q), {"message-ttl": 50}, operator=True)
    ch.basic_publish("", q, b"m")
    broker.advance(0.049)
    assert ready(ch, q) == 1
    broker.advance(0.001)
    assert ready(ch, q) == 0


# -- per-message TTL; min(queue, message); expiry fixed at enqueue -----------------------------------------------------
# (RabbitMQ: rabbit_amqqueue_process:calculate_msg_expiry/2)


def test_ttl2_per_message_expiration(broker: Target, ch: BlockingChannel) -> None:
    q = broker.name()
    confirmed(ch)
    ch.queue_declare(q)
    ch.basic_publish("", q, b"short", P(expiration="50"))
    assert ready(ch, q) == 1
    broker.advance(0.12)
    assert ready(ch, q) == 0


@pytest.mark.parametrize(("queue_ttl", "message_ttl"), [(50, "60000"), (60000, "50")])
def test_ttl2_smaller_of_queue_and_message_ttl_wins(
    broker: Target, ch: BlockingChannel, queue_ttl: int, message_ttl: str
) -> None:
    q = broker.name()
    confirmed(ch)
    ch.queue_declare(q, arguments={"x-message-ttl": queue_ttl})
    ch.basic_publish("", q, b"m", P(expiration=message_ttl))
    broker.advance(0.12)
    assert ready(ch, q) == 0


@pytest.mark.fake_only  # exact instants need the virtual clock
def test_ttl2_expiry_instant_is_enqueue_time_plus_ttl(broker: Target, ch: BlockingChannel) -> None:
    q = broker.name()
    ch.queue_declare(q, arguments={"x-message-ttl": 1000})
    ch.basic_publish("", q, b"a")
    broker.advance(0.4)
    ch.basic_publish("", q, b"b", P(expiration="700"))  # min(1000, 700): due at 0.4 + 0.7 = 1.1 s
    broker.advance(0.599)
    assert ready(ch, q) == 2
    broker.advance(0.001)  # t = 1.0 s: a is due
    assert ready(ch, q) == 1
    broker.advance(0.099)
    assert ready(ch, q) == 1
    broker.advance(0.001)  # t = 1.1 s: b is due
    assert ready(ch, q) == 0


# -- a TTL change does not touch messages already queued (RabbitMQ: policy_SUITE:operator_retroactive_policy_ttl) ------


def test_ttl3_new_policy_ttl_is_not_retroactive(broker: Target, ch: BlockingChannel) -> None:
    q = broker.name()
    confirmed(ch)
    ch.queue_declare(q)
    ch.basic_publish("", q, b"old")
    broker.set_policy(q + "-ttl", anchored(q), {"message-ttl": 20})
    ch.basic_publish("", q, b"new")
    broker.advance(0.1)
    assert ready(ch, q) == 2  # "new" expired but waits behind the head
    assert bodies(ch, q) == [b"old"]


def test_ttl3_lowering_the_ttl_keeps_the_old_expiry(broker: Target, ch: BlockingChannel) -> None:
    q = broker.name()
    confirmed(ch)
    ch.queue_declare(q)
    broker.set_policy(q + "-ttl", anchored(q), {"message-ttl": 60000})
    ch.basic_publish("", q, b"m")
    broker.set_policy(q + "-ttl", anchored(q), {"message-ttl": 10})  # rabbitmqctl itself takes ~1 s
    broker.advance(0.1)
    assert ready(ch, q) == 1
    if broker.is_fake:
        broker.advance(60)
        assert ready(ch, q) == 0


# -- classic queues expire only at the head, but never deliver an expired message --------------------------------------
# (RabbitMQ: rabbit_amqqueue_process:drop_expired_msgs)


def test_ttl4_expired_message_behind_head_is_counted_but_never_delivered(broker: Target, ch: BlockingChannel) -> None:
    q = broker.name()
    confirmed(ch)
    ch.queue_declare(q)
    ch.basic_publish("", q, b"long", P(expiration="60000"))
    ch.basic_publish("", q, b"short", P(expiration="20"))
    ch.basic_publish("", q, b"none")
    broker.advance(0.1)
    assert ready(ch, q) == 3  # "short" has expired but is still counted (message_count is the ready count)
    method, _, body = ch.basic_get(q, auto_ack=True)
    assert body == b"long"
    # The fetch exposed "short" at the head: it is dropped before get-ok's message_count is taken.
    assert method.message_count == 1
    method, _, body = ch.basic_get(q, auto_ack=True)
    assert body == b"none"
    assert method.message_count == 0


def test_ttl4_consumer_late_to_the_party(broker: Target, conn: pika.BlockingConnection) -> None:
    """Java PerMessageTTL.expiryWhenConsumerIsLateToTheParty."""
    q = broker.name()
    ch = confirmed(conn.channel())
    ch.queue_declare(q)
    ch.basic_publish("", q, b"A", P(expiration="60000"))
    ch.basic_publish("", q, b"B", P(expiration="50"))
    broker.advance(0.12)
    got: list[bytes] = []
    ch.basic_consume(q, lambda c, m, p, b: got.append(b), auto_ack=True)
    pump(conn, lambda: got)
    settle(conn)
    assert got == [b"A"]
    assert ready(ch, q) == 0


def test_ttl4_expired_head_is_dead_lettered_without_consumers(broker: Target, ch: BlockingChannel) -> None:
    confirmed(ch)
    q, dlq = with_dlq(broker, ch, {"x-message-ttl": 50})
    ch.basic_publish("", q, b"m")
    broker.advance(0.12)
    assert eventually(broker, lambda: ready(ch, dlq), lambda n: n == 1) == 1
    assert ready(ch, q) == 0
    assert death_reasons(ch, dlq) == [(b"m", "expired", q)]


def test_ttl4_expired_messages_reaching_the_head_are_dead_lettered_in_order(
    broker: Target, ch: BlockingChannel
) -> None:
    confirmed(ch)
    q, dlq = with_dlq(broker, ch)
    ch.basic_publish("", q, b"head", P(expiration="60000"))
    ch.basic_publish("", q, b"e1", P(expiration="20"))
    ch.basic_publish("", q, b"e2", P(expiration="30"))
    ch.basic_publish("", q, b"tail")
    broker.advance(0.1)
    assert ready(ch, dlq) == 0  # nothing reached the head yet
    assert bodies(ch, q, 1) == [b"head"]
    assert eventually(broker, lambda: ready(ch, dlq), lambda n: n == 2) == 2
    assert [b for b, _, _ in death_reasons(ch, dlq)] == [b"e1", b"e2"]
    assert bodies(ch, q) == [b"tail"]


# -- requeue keeps the original expiry and position (RabbitMQ: Java TTLHandling.expiryWithRequeue) ---------------------


def test_ttl5_requeued_messages_keep_expiry(broker: Target, conn: pika.BlockingConnection) -> None:
    """Java TTLHandling.expiryWithRequeue (queue TTL 400 ms)."""
    q = broker.name()
    ch = confirmed(conn.channel())
    ch.queue_declare(q, arguments={"x-message-ttl": 400})
    ch.basic_publish("", q, b"A")
    broker.advance(0.2)
    ch.basic_publish("", q, b"B")
    ch.basic_publish("", q, b"C")
    ch2 = conn.channel()
    m, _, body = ch2.basic_get(q)
    assert (body, m.message_count) == (b"A", 2)
    m, _, body = ch2.basic_get(q)
    assert (body, m.message_count) == (b"B", 1)
    ch2.close()  # A and B are requeued with their original expiry
    broker.advance(0.3)  # A (0.4 s) has expired, B and C (0.6 s) have not
    m, _, body = ch.basic_get(q, auto_ack=True)
    assert (body, m.message_count, m.redelivered) == (b"B", 1, True)
    m, _, body = ch.basic_get(q, auto_ack=True)
    assert (body, m.message_count, m.redelivered) == (b"C", 0, False)


def test_ttl5_requeue_goes_back_to_original_position(broker: Target, ch: BlockingChannel) -> None:
    q = broker.name()
    confirmed(ch)
    ch.queue_declare(q, arguments={"x-message-ttl": 60000})
    for b in (b"1", b"2", b"3", b"4"):
        ch.basic_publish("", q, b)
    m1 = ch.basic_get(q)[0]
    m2 = ch.basic_get(q)[0]
    ch.basic_reject(m2.delivery_tag, requeue=True)
    ch.basic_reject(m1.delivery_tag, requeue=True)
    assert bodies(ch, q) == [b"1", b"2", b"3", b"4"]


def test_ttl5_requeued_after_expiry_is_dead_lettered_not_redelivered(broker: Target, ch: BlockingChannel) -> None:
    confirmed(ch)
    q, dlq = with_dlq(broker, ch)
    ch.basic_publish("", q, b"A", P(expiration="100"))
    ch.basic_publish("", q, b"B")
    ma = ch.basic_get(q)[0]
    mb = ch.basic_get(q)[0]
    broker.advance(0.2)
    ch.basic_nack(mb.delivery_tag, multiple=True, requeue=True)
    assert ma.delivery_tag < mb.delivery_tag
    m, _, body = ch.basic_get(q, auto_ack=True)
    assert (body, m.redelivered, m.message_count) == (b"B", True, 0)
    assert eventually(broker, lambda: ready(ch, dlq), lambda n: n == 1) == 1
    assert death_reasons(ch, dlq) == [(b"A", "expired", q)]


# -- TTL 0 (RabbitMQ: rabbit_amqqueue_process:deliver_or_enqueue) ------------------------------------------------------


def test_ttl6_zero_ttl_without_consumer_is_dropped(broker: Target, ch: BlockingChannel) -> None:
    q = broker.name()
    confirmed(ch)
    ch.queue_declare(q, arguments={"x-message-ttl": 0})
    ch.basic_publish("", q, b"m", mandatory=True)  # acked, not returned (RabbitMQ: rabbit_channel (confirms))
    assert ready(ch, q) == 0
    assert ch.basic_get(q) == (None, None, None)


def test_ttl6_zero_ttl_is_delivered_to_a_waiting_consumer_and_not_redelivered(
    broker: Target, conn: pika.BlockingConnection
) -> None:
    q = broker.name()
    ch = confirmed(conn.channel())
    ch.queue_declare(q, arguments={"x-message-ttl": 0})
    got: list[tuple[bytes, bool]] = []

    def on(c: BlockingChannel, m: pika.spec.Basic.Deliver, p: pika.BasicProperties, b: bytes) -> None:
        got.append((b, m.redelivered))
        if len(got) == 1:
            c.basic_reject(m.delivery_tag, requeue=True)

    ch.basic_consume(q, on)
    ch.basic_publish("", q, b"m")
    pump(conn, lambda: got)
    settle(conn)
    assert got == [(b"m", False)]  # the requeued copy expired at once
    assert ready(ch, q) == 0


def test_ttl6_zero_ttl_is_dead_lettered_at_once(broker: Target, ch: BlockingChannel) -> None:
    confirmed(ch)
    q, dlq = with_dlq(broker, ch, {"x-message-ttl": 0})
    ch.basic_publish("", q, b"m")
    assert eventually(broker, lambda: ready(ch, dlq), lambda n: n == 1) == 1
    assert death_reasons(ch, dlq) == [(b"m", "expired", q)]


def test_ttl6_per_message_zero_at_the_head_expires_at_once(broker: Target, ch: BlockingChannel) -> None:
    confirmed(ch)
    q, dlq = with_dlq(broker, ch)
    ch.basic_publish("", q, b"m", P(expiration="0"))
    assert ready(ch, q) == 0
    assert eventually(broker, lambda: ready(ch, dlq), lambda n: n == 1) == 1


def test_ttl6_per_message_zero_behind_the_head_waits_for_the_head(broker: Target, ch: BlockingChannel) -> None:
    """Live 3.10.8: an ``expiration="0"`` message queued behind a live head is counted until it reaches the
    head (``rabbit_amqqueue_process:drop_expired_msgs``), where it is dropped without being delivered."""
    q = broker.name()
    confirmed(ch)
    ch.queue_declare(q)
    ch.basic_publish("", q, b"m1")
    ch.basic_publish("", q, b"m2", P(expiration="0"))
    assert ready(ch, q) == 2
    assert bodies(ch, q) == [b"m1"]


# -- in a transaction the TTL starts at commit (RabbitMQ: Java TTLHandling.transactionalPublishWithGet) ----------------


def test_ttl7_ttl_starts_at_commit(broker: Target, ch: BlockingChannel) -> None:
    q = broker.name()
    ch.queue_declare(q)
    ch.tx_select()
    ch.basic_publish("", q, b"m", P(expiration="100"))
    broker.advance(0.2)  # longer than the TTL, but not yet committed
    ch.tx_commit()
    _, _, body = ch.basic_get(q, auto_ack=True)
    assert body == b"m"
    ch.basic_publish("", q, b"n", P(expiration="100"))
    ch.tx_commit()
    assert ready(ch, q) == 1
    broker.advance(0.2)
    assert ready(ch, q) == 0


# -- the expiration property (RabbitMQ: rabbit_basic:parse_expiration/1) -----------------------------------------------


@pytest.mark.parametrize(
    ("raw", "term"),
    [
        ("abc", "no_integer"),
        ("", "no_integer"),
        (" 10", "no_integer"),
        ("foobar", "no_integer"),
        ("-1", "{value_negative,-1}"),
        ("-10", "{value_negative,-10}"),
        ("1.5", '{leftover_string,".5"}'),
        ("10 ", '{leftover_string," "}'),
        ("1e3", '{leftover_string,"e3"}'),
        ("0x10", '{leftover_string,"x10"}'),
        ("10000foobar", '{leftover_string,"foobar"}'),
        ("315360000001", "{value_too_large,315360000001}"),
    ],
)
def test_ttl8_invalid_expiration_is_a_channel_error(broker: Target, ch: BlockingChannel, raw: str, term: str) -> None:
    q = broker.name()
    ch.queue_declare(q)
    code, text = publish_error(ch, "", q, b"m", P(expiration=raw))
    assert (code, text) == (406, f"PRECONDITION_FAILED - invalid expiration '{raw}': {term}")


def test_ttl8_invalid_expiration_fails_even_when_unroutable(broker: Target, ch: BlockingChannel) -> None:
    code, text = publish_error(ch, "amq.direct", "nowhere", b"m", P(expiration="abc"))
    assert (code, text) == (406, "PRECONDITION_FAILED - invalid expiration 'abc': no_integer")


def test_ttl8_invalid_expiration_is_not_routed(broker: Target, conn: pika.BlockingConnection) -> None:
    q = broker.name()
    ch = conn.channel()
    ch.queue_declare(q)
    publish_error(ch, "", q, b"bad", P(expiration="-5"))
    assert ready(conn.channel(), q) == 0


@pytest.mark.parametrize("raw", ["0", "007", "+10", "315360000000", "60000"])
def test_ttl8_valid_expirations(broker: Target, ch: BlockingChannel, raw: str) -> None:
    q = broker.name()
    confirmed(ch)
    ch.queue_declare(q)
    ch.basic_publish("", q, b"m", P(expiration=raw))
    if raw == "0":
        assert ready(ch, q) == 0
    else:
        assert ready(ch, q) == 1


@pytest.mark.rabbitmq_version("3.12")
def test_ttl8_legacy_delivers_expiration_as_published(broker: Target, ch: BlockingChannel) -> None:
    q = broker.name()
    confirmed(ch)
    ch.queue_declare(q)
    ch.basic_publish("", q, b"m", P(expiration="+0600000"))
    assert ch.basic_get(q, auto_ack=True)[1].expiration == "+0600000"


@pytest.mark.rabbitmq_version("4.0")
def test_ttl8_mc_delivers_expiration_normalised(broker: Target, ch: BlockingChannel) -> None:
    q = broker.name()
    confirmed(ch)
    ch.queue_declare(q)
    ch.basic_publish("", q, b"m", P(expiration="+0600000"))
    assert ch.basic_get(q, auto_ack=True)[1].expiration == "600000"


def test_ttl8_expiration_exactly_at_due_time(broker: Target, ch: BlockingChannel) -> None:
    """An ``expiration="100"`` message is gone 100 ms after it was enqueued, not before."""
    q = broker.name()
    confirmed(ch)
    ch.queue_declare(q)
    ch.basic_publish("", q, b"m", P(expiration="300"))
    broker.advance(0.15)
    assert ready(ch, q) == 1
    broker.advance(0.25)
    assert ready(ch, q) == 0


# -- x-message-ttl types and range (RabbitMQ: rabbit_amqqueue:check_message_ttl_arg/2) ---------------------------------


@pytest.mark.parametrize("ttl", [0, 1, 315_360_000_000])
def test_ttl9_accepted_values(broker: Target, ch: BlockingChannel, ttl: int) -> None:
    q = broker.name()
    ch.queue_declare(q, arguments={"x-message-ttl": ttl})
    assert ch.queue_declare(q, passive=True).method.queue == q


# (invalid values and the byte/short/long types: test_declare_args.py)


# -- the message-ttl policy (RabbitMQ: rabbit_policies:validate_policy0) -----------------------------------------------


@pytest.mark.parametrize(("value", "shown"), [(-1, "-1"), ("10", '<<"10">>'), (1.5, "1.5")])
def test_ttl10_invalid_message_ttl_policy_is_refused(broker: Target, value: object, shown: str) -> None:
    q = broker.name()
    if broker.is_fake:
        with pytest.raises(PolicyError) as exc:
            broker.set_policy(q + "-ttl", anchored(q), {"message-ttl": value})
        assert str(exc.value) == f"{shown} is not a valid message TTL"
    else:
        with pytest.raises(PolicyRefused) as refused:
            broker.set_policy(q + "-ttl", anchored(q), {"message-ttl": value})
        assert str(refused.value) == f"{shown} is not a valid message TTL"


def test_ttl10_policy_has_no_upper_bound(broker: Target, ch: BlockingChannel) -> None:
    """The policy validator accepts more than ten years (live 3.10.8: the queue then crashes as soon as a
    message is published, so the publish half runs on the fake only)."""
    q = broker.name()
    confirmed(ch)
    ch.queue_declare(q)
    broker.set_policy(q + "-ttl", anchored(q), {"message-ttl": 10**15})
    assert ready(ch, q) == 0
    if broker.is_fake:
        ch.basic_publish("", q, b"m")
        broker.advance(86400 * 365)
        assert ready(ch, q) == 1


# -- each queue expires its copy independently (RabbitMQ: rabbit_amqqueue_process:calculate_msg_expiry/2) --------------


def test_ttl11_each_queue_is_independent(broker: Target, ch: BlockingChannel) -> None:
    confirmed(ch)
    x = broker.exchange("fan")
    short, long_, none = broker.name("short"), broker.name("long"), broker.name("none")
    ch.exchange_declare(x, "fanout")
    ch.queue_declare(short, arguments={"x-message-ttl": 50})
    ch.queue_declare(long_, arguments={"x-message-ttl": 400})
    ch.queue_declare(none)
    for q in (short, long_, none):
        ch.queue_bind(q, x)
    ch.basic_publish(x, "", b"m", P(expiration="60000"))
    broker.advance(0.12)
    assert [ready(ch, q) for q in (short, long_, none)] == [0, 1, 1]
    broker.advance(0.35)
    assert [ready(ch, q) for q in (short, long_, none)] == [0, 0, 1]


# -- classic queues check expiry when RabbitMQ does (issue 10) -------------------------------------------------


def test_ttl6_zero_ttl_at_the_head_of_a_priority_queue_stays_and_is_handed_out(
    broker: Target, conn: pika.BlockingConnection
) -> None:
    """deliver_or_enqueue checks expiry after a publish only if the queue had been empty or something was dropped:
    a TTL-0 message that becomes the head of a non-empty priority queue stays counted, a later publish does not
    remove it, and ``basic.get`` (``fetch/2``: head first, expiry after) hands it out. Live 3.10.8, 4.0.5, 4.3.6."""
    ch = conn.channel()
    ch.confirm_delivery()
    q = broker.name()
    ch.queue_declare(q, arguments={"x-max-priority": 10})
    ch.basic_publish("", q, b"A", pika.BasicProperties(priority=0))
    ch.basic_publish("", q, b"B", pika.BasicProperties(priority=5, expiration="0"))
    assert ready(ch, q) == 2
    ch.basic_publish("", q, b"C", pika.BasicProperties(priority=0))
    assert ready(ch, q) == 3
    method, _, body = ch.basic_get(q, auto_ack=True)
    assert (body, method.message_count) == (b"B", 2)
    # behind a higher priority the same message waits, counted, and expires when it is exposed
    q2 = broker.name("behind")
    ch.queue_declare(q2, arguments={"x-max-priority": 10})
    ch.basic_publish("", q2, b"A", pika.BasicProperties(priority=5))
    ch.basic_publish("", q2, b"B", pika.BasicProperties(priority=0, expiration="0"))
    assert ready(ch, q2) == 2
    method, _, body = ch.basic_get(q2, auto_ack=True)
    assert (body, method.message_count) == (b"A", 0)


def test_ttl6_expired_head_of_a_priority_queue_goes_to_a_new_consumer(
    broker: Target, conn: pika.BlockingConnection
) -> None:
    """A consumer gets the expired head too (deliver_from_queue_deliver uses fetch/2)."""
    ch = conn.channel()
    ch.confirm_delivery()
    q = broker.name()
    ch.queue_declare(q, arguments={"x-max-priority": 10})
    ch.basic_publish("", q, b"A", pika.BasicProperties(priority=0))
    ch.basic_publish("", q, b"B", pika.BasicProperties(priority=5, expiration="0"))
    got: list[bytes] = []
    ch.basic_consume(q, lambda c, m, p, b: got.append(b), auto_ack=True)
    pump(conn, lambda: len(got) >= 2)
    settle(conn)
    assert got == [b"B", b"A"]
