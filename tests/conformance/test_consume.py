"""Consumers and settlement: qos (per consumer and global), consume/cancel, exclusive consumers, priorities,
cancel notifications, ack/nack/reject (multiple), recover, redelivery order, get, direct reply-to."""

from __future__ import annotations

import re
from typing import Any

import pika
import pika.exceptions
import pytest
from pika import spec

from tests.conformance.conftest import Target, pump, settle
from tests.rawamqp import RawAMQP


def fill(ch: Any, q: str, n: int, prefix: str = "m") -> list[bytes]:
    """Declare ``q`` and publish n messages with confirms (so they are enqueued when this returns)."""
    ch.queue_declare(q)
    ch.confirm_delivery()
    bodies = [f"{prefix}{i}".encode() for i in range(n)]
    for b in bodies:
        ch.basic_publish("", q, b)
    return bodies


# -- consume / cancel ---------------------------------------------------------------------------------------------


def test_server_generated_consumer_tag(broker: Target, ch: Any) -> None:
    q = broker.name()
    ch.queue_declare(q)
    tag = ch.basic_consume(q, lambda *a: None, consumer_tag="")
    # pika generates its own tag when given ""; a raw consume with "" gets RabbitMQ's amq.ctag-...
    assert tag
    c = RawAMQP.connect(broker.url)
    c.open_channel(1)
    f = c.rpc(1, spec.Basic.Consume(queue=q, consumer_tag=""), "Basic.ConsumeOk")
    assert re.fullmatch(r"amq\.ctag-[A-Za-z0-9_-]{22}", f.method.consumer_tag), f.method.consumer_tag
    c.close()


def test_cancel_unknown_tag_is_ok(broker: Target) -> None:
    c = RawAMQP.connect(broker.url)
    c.open_channel(1)
    f = c.rpc(1, spec.Basic.Cancel(consumer_tag="nope"), "Basic.CancelOk")
    assert f.name == "Basic.CancelOk" and f.method.consumer_tag == "nope"
    c.close()


def test_consume_missing_queue(broker: Target, ch: Any) -> None:
    q = broker.name("missing")
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as exc:
        ch.basic_consume(q, lambda *a: None)
    assert (exc.value.reply_code, exc.value.reply_text) == (404, f"NOT_FOUND - no queue '{q}' in vhost '/'")


def test_cancelled_consumer_gets_nothing_more(broker: Target, conn: Any) -> None:
    ch = conn.channel()
    q = broker.name()
    ch.queue_declare(q)
    got: list[bytes] = []
    tag = ch.basic_consume(q, lambda c, m, p, b: got.append(b), auto_ack=True)
    ch.basic_publish("", q, b"1")
    pump(conn, lambda: got)
    ch.basic_cancel(tag)
    ch.basic_publish("", q, b"2")
    settle(conn)
    assert got == [b"1"]
    assert ch.basic_get(q, auto_ack=True)[2] == b"2"


def test_cancel_notification_when_queue_deleted_has_nowait(broker: Target) -> None:
    q = broker.name()
    c = RawAMQP.connect(broker.url)
    c.open_channel(1)
    c.open_channel(2)
    c.rpc(1, spec.Queue.Declare(queue=q), "Queue.DeclareOk")
    c.rpc(1, spec.Basic.Consume(queue=q, consumer_tag="ct"), "Basic.ConsumeOk")
    c.send_method(2, spec.Queue.Delete(queue=q))
    frames = [c.wait("Basic.Cancel", "Queue.DeleteOk") for _ in range(2)]
    assert sorted(str(f.name) for f in frames) == ["Basic.Cancel", "Queue.DeleteOk"]  # order: channels race
    f = next(f for f in frames if f.name == "Basic.Cancel")
    assert (f.channel, f.method.consumer_tag, f.method.nowait) == (1, "ct", True)
    c.send_method(1, spec.Basic.Cancel(consumer_tag="ct"))  # the consumer is gone already: still cancel-ok
    assert c.wait("Basic.CancelOk").name == "Basic.CancelOk"
    c.close()


# -- exclusive consumers ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("first_exclusive", "second_exclusive"), [(False, True), (True, False), (True, True)])
def test_exclusive_consumer(broker: Target, conn: Any, first_exclusive: bool, second_exclusive: bool) -> None:
    q = broker.name()
    ch = conn.channel()
    ch.queue_declare(q)
    ch.basic_consume(q, lambda *a: None, exclusive=first_exclusive)
    ch2 = conn.channel()
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as exc:
        ch2.basic_consume(q, lambda *a: None, exclusive=second_exclusive)
    assert (exc.value.reply_code, exc.value.reply_text) == (
        403,
        f"ACCESS_REFUSED - queue '{q}' in vhost '/' in exclusive use",
    )


# -- qos ------------------------------------------------------------------------------------------------------------


def test_per_consumer_prefetch_applies_to_consumers_created_after(broker: Target, conn: Any) -> None:
    q1, q2 = broker.name("a"), broker.name("b")
    pub = conn.channel()
    fill(pub, q1, 5)
    fill(pub, q2, 5)
    ch = conn.channel()
    ch.basic_qos(prefetch_count=2)
    got1: list[int] = []
    got2: list[int] = []
    ch.basic_consume(q1, lambda c, m, p, b: got1.append(m.delivery_tag))
    ch.basic_qos(prefetch_count=3)  # the first consumer keeps 2
    ch.basic_consume(q2, lambda c, m, p, b: got2.append(m.delivery_tag))
    pump(conn, lambda: len(got1) >= 2 and len(got2) >= 3)
    settle(conn)
    assert (len(got1), len(got2)) == (2, 3)


def test_global_prefetch_is_shared_by_the_channel(broker: Target, conn: Any) -> None:
    q1, q2 = broker.name("a"), broker.name("b")
    pub = conn.channel()
    fill(pub, q1, 5)
    fill(pub, q2, 5)
    ch = conn.channel()
    ch.basic_qos(prefetch_count=3, global_qos=True)
    got: list[int] = []
    ch.basic_consume(q1, lambda c, m, p, b: got.append(m.delivery_tag))
    ch.basic_consume(q2, lambda c, m, p, b: got.append(m.delivery_tag))
    if not broker.at_least("4.3"):
        pump(conn, lambda: len(got) >= 3)
        settle(conn)
        assert len(got) == 3
        ch.basic_ack(got[0])
        pump(conn, lambda: len(got) >= 4)
        settle(conn)
        assert len(got) == 4
        return
    # 4.3: the deprecated feature global_qos is denied by default; global=true is handled as a per-consumer
    # prefetch, so each consumer gets 3 (live 4.3.6)
    pump(conn, lambda: len(got) >= 6)
    settle(conn)
    assert len(got) == 6


def test_two_consumers_under_a_global_prefetch_of_two(broker: Target, conn: Any) -> None:
    """Issue 10: 2 deliveries per channel up to 4.2 (channel-wide limit), 2 per consumer (4 in all) on 4.3."""
    _two_consumers_under_a_global_prefetch_of_two(broker, conn)


@pytest.mark.rabbitmq_version("4.0")
def test_two_consumers_under_a_global_prefetch_of_two_40(broker: Target, conn: Any) -> None:
    """The same on the fake's 4.0 profile (channel-wide) and live 4.0.5."""
    _two_consumers_under_a_global_prefetch_of_two(broker, conn)


def _two_consumers_under_a_global_prefetch_of_two(broker: Target, conn: Any) -> None:
    q = broker.name()
    pub = conn.channel()
    fill(pub, q, 10)
    ch = conn.channel()
    ch.basic_qos(prefetch_count=2, global_qos=True)
    got: list[int] = []
    ch.basic_consume(q, lambda c, m, p, b: got.append(m.delivery_tag))
    ch.basic_consume(q, lambda c, m, p, b: got.append(m.delivery_tag))
    want = 4 if broker.at_least("4.3") else 2
    pump(conn, lambda: len(got) >= want)
    settle(conn)
    assert len(got) == want


def test_global_and_per_consumer_prefetch_together(broker: Target, conn: Any) -> None:
    q = broker.name()
    pub = conn.channel()
    fill(pub, q, 10)
    ch = conn.channel()
    ch.basic_qos(prefetch_count=5, global_qos=True)
    ch.basic_qos(prefetch_count=2)
    got: list[int] = []
    ch.basic_consume(q, lambda c, m, p, b: got.append(m.delivery_tag))
    pump(conn, lambda: len(got) >= 2)
    settle(conn)
    assert len(got) == 2  # the tighter limit wins


def test_raising_prefetch_releases_more(broker: Target, conn: Any) -> None:
    q = broker.name()
    pub = conn.channel()
    fill(pub, q, 6)
    ch = conn.channel()
    ch.basic_qos(prefetch_count=1, global_qos=True)
    got: list[int] = []
    ch.basic_consume(q, lambda c, m, p, b: got.append(m.delivery_tag))
    pump(conn, lambda: got)
    settle(conn)
    assert len(got) == 1
    ch.basic_qos(prefetch_count=4, global_qos=True)
    if broker.at_least("4.3"):
        # 4.3: global qos is a per-consumer prefetch for consumers started later; the running one keeps 1
        settle(conn)
        assert len(got) == 1
        return
    pump(conn, lambda: len(got) >= 4)
    settle(conn)
    assert len(got) == 4


def test_no_ack_consumer_ignores_prefetch(broker: Target, conn: Any) -> None:
    q = broker.name()
    pub = conn.channel()
    fill(pub, q, 5)
    ch = conn.channel()
    ch.basic_qos(prefetch_count=1)
    got: list[bytes] = []
    ch.basic_consume(q, lambda c, m, p, b: got.append(b), auto_ack=True)
    pump(conn, lambda: len(got) == 5)
    assert len(got) == 5


# -- priorities and round robin ------------------------------------------------------------------------------


def test_consumer_priority(broker: Target, conn: Any) -> None:
    q = broker.name()
    ch = conn.channel()
    ch.queue_declare(q)
    hi: list[bytes] = []
    lo: list[bytes] = []
    ch.basic_consume(q, lambda c, m, p, b: lo.append(b), auto_ack=True)
    ch.basic_consume(q, lambda c, m, p, b: hi.append(b), auto_ack=True, arguments={"x-priority": 10})
    for i in range(4):
        ch.basic_publish("", q, str(i).encode())
    pump(conn, lambda: len(hi) + len(lo) == 4)
    assert (hi, lo) == ([b"0", b"1", b"2", b"3"], [])


def test_consumer_priority_must_be_an_integer(broker: Target, conn: Any) -> None:
    q = broker.name()
    conn.channel().queue_declare(q)
    ch = conn.channel()
    ch.basic_consume(q, lambda *a: None, arguments={"x-priority": 2**40})  # any integer type will do
    ch = conn.channel()
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as exc:
        ch.basic_consume(q, lambda *a: None, arguments={"x-priority": "high"})
    assert (exc.value.reply_code, exc.value.reply_text) == (
        406,
        f"PRECONDITION_FAILED - invalid arg 'x-priority' for queue '{q}' in vhost '/': "
        '"expected integer, got longstr"',
    )


def test_lower_priority_consumer_gets_messages_when_higher_is_full(broker: Target, conn: Any) -> None:
    q = broker.name()
    ch = conn.channel()
    ch.queue_declare(q)
    ch.basic_qos(prefetch_count=1)
    hi: list[bytes] = []
    lo: list[bytes] = []
    ch.basic_consume(q, lambda c, m, p, b: lo.append(b))
    ch.basic_consume(q, lambda c, m, p, b: hi.append(b), arguments={"x-priority": 5})
    for i in range(3):
        ch.basic_publish("", q, str(i).encode())
    pump(conn, lambda: len(hi) + len(lo) == 2)
    settle(conn)
    assert (hi, lo) == ([b"0"], [b"1"])


# -- settlement -------------------------------------------------------------------------------------------------


def test_ack_multiple(broker: Target, ch: Any) -> None:
    q = broker.name()
    fill(ch, q, 4)
    tags = [ch.basic_get(q)[0].delivery_tag for _ in range(4)]
    assert tags == [1, 2, 3, 4]
    ch.basic_ack(3, multiple=True)
    ch.basic_ack(4)
    ch.basic_recover(requeue=True)
    assert ch.basic_get(q) == (None, None, None)


def test_nack_multiple_requeues_in_order(broker: Target, ch: Any) -> None:
    q = broker.name()
    fill(ch, q, 3)
    for _ in range(3):
        ch.basic_get(q)
    ch.basic_nack(3, multiple=True, requeue=True)
    got = [ch.basic_get(q, auto_ack=True) for _ in range(3)]
    assert [b for _, _, b in got] == [b"m0", b"m1", b"m2"]
    assert all(m.redelivered for m, _, _ in got)


def test_ack_zero_multiple_acks_everything(broker: Target, ch: Any) -> None:
    q = broker.name()
    fill(ch, q, 3)
    for _ in range(3):
        ch.basic_get(q)
    ch.basic_ack(0, multiple=True)
    ch.basic_recover(requeue=True)
    assert ch.basic_get(q) == (None, None, None)


def test_ack_zero_single_is_unknown(broker: Target, ch: Any) -> None:
    ch.basic_ack(0)
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as exc:
        ch.basic_qos(prefetch_count=1)
    assert (exc.value.reply_code, exc.value.reply_text) == (406, "PRECONDITION_FAILED - unknown delivery tag 0")


def test_reject_unknown_tag(broker: Target, ch: Any) -> None:
    ch.basic_reject(7)
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as exc:
        ch.basic_qos(prefetch_count=1)
    assert (exc.value.reply_code, exc.value.reply_text) == (406, "PRECONDITION_FAILED - unknown delivery tag 7")


def test_nack_multiple_unknown_tag(broker: Target, ch: Any) -> None:
    q = broker.name()
    fill(ch, q, 1)
    ch.basic_get(q)
    ch.basic_nack(5, multiple=True)
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as exc:
        ch.basic_qos(prefetch_count=1)
    assert exc.value.reply_text == "PRECONDITION_FAILED - unknown delivery tag 5"


def test_reject_without_requeue_drops(broker: Target, ch: Any) -> None:
    q = broker.name()
    fill(ch, q, 1)
    m, _, _ = ch.basic_get(q)
    ch.basic_reject(m.delivery_tag, requeue=False)
    assert ch.basic_get(q) == (None, None, None)


def test_recover_redelivers_to_the_consumer(broker: Target, conn: Any) -> None:
    q = broker.name()
    ch = conn.channel()
    fill(ch, q, 2)
    seen: list[tuple[bytes, bool]] = []
    ch.basic_consume(q, lambda c, m, p, b: seen.append((b, m.redelivered)))
    pump(conn, lambda: len(seen) == 2)
    ch.basic_recover(requeue=True)
    pump(conn, lambda: len(seen) == 4)
    assert seen == [(b"m0", False), (b"m1", False), (b"m0", True), (b"m1", True)]


def test_unacked_messages_return_to_their_place_when_the_channel_closes(broker: Target, conn: Any) -> None:
    q = broker.name()
    ch = conn.channel()
    fill(ch, q, 5)
    other = conn.channel()
    other.basic_get(q)  # m0
    other.basic_get(q)  # m1
    ch.basic_get(q, auto_ack=True)  # m2 consumed for good
    other.close()
    got = [ch.basic_get(q, auto_ack=True) for _ in range(4)]
    assert [b for _, _, b in got] == [b"m0", b"m1", b"m3", b"m4"]
    assert [m.redelivered for m, _, _ in got] == [True, True, False, False]


def test_unacked_messages_come_back_when_the_connection_drops(broker: Target) -> None:
    q = broker.name()
    c1 = broker.connect()
    ch1 = c1.channel()
    fill(ch1, q, 3)
    got: list[bytes] = []
    ch1.basic_consume(q, lambda c, m, p, b: got.append(b))
    pump(c1, lambda: len(got) == 3)
    c1._impl._transport._sock.close()  # a crash: no connection.close
    c2 = broker.connect()
    try:
        ch2 = c2.channel()
        again: list[tuple[bytes, bool]] = []
        ch2.basic_consume(q, lambda c, m, p, b: again.append((b, m.redelivered)), auto_ack=True)
        pump(c2, lambda: len(again) == 3, timeout=5)
        assert again == [(b"m0", True), (b"m1", True), (b"m2", True)]
    finally:
        c2.close()


def test_round_robin_over_three_consumers(broker: Target, conn: Any) -> None:
    q = broker.name()
    ch = conn.channel()
    ch.queue_declare(q)
    seen: dict[str, list[bytes]] = {"a": [], "b": [], "c": []}
    for tag in seen:
        ch.basic_consume(q, lambda c, m, p, b, tag=tag: seen[tag].append(b), auto_ack=True, consumer_tag=tag)
    for i in range(6):
        ch.basic_publish("", q, str(i).encode())
    pump(conn, lambda: sum(map(len, seen.values())) == 6)
    assert seen == {"a": [b"0", b"3"], "b": [b"1", b"4"], "c": [b"2", b"5"]}


# -- basic.get ------------------------------------------------------------------------------------------------


def test_get_empty_and_get_ok_fields(broker: Target) -> None:
    q = broker.name()
    c = RawAMQP.connect(broker.url)
    c.open_channel(1)
    c.rpc(1, spec.Queue.Declare(queue=q), "Queue.DeclareOk")
    f = c.rpc(1, spec.Basic.Get(queue=q), "Basic.GetEmpty")
    assert f.name == "Basic.GetEmpty"
    c.rpc(1, spec.Confirm.Select(), "Confirm.SelectOk")
    c.publish(1, "", q, b"one")
    c.publish(1, "", q, b"two", spec.BasicProperties(content_type="text/plain"))
    c.wait("Basic.Ack")
    f = c.rpc(1, spec.Basic.Get(queue=q), "Basic.GetOk")
    assert (f.method.delivery_tag, f.method.redelivered, f.method.exchange, f.method.routing_key) == (1, False, "", q)
    assert f.method.message_count == 1
    assert c.get_message(1).body == b"one"
    c.send_method(1, spec.Queue.Delete(queue=q))
    c.close()


def test_empty_queue_name_is_the_last_declared_queue(broker: Target) -> None:
    c = RawAMQP.connect(broker.url)
    c.open_channel(1)
    for method in (spec.Basic.Get(queue=""), spec.Basic.Consume(queue=""), spec.Queue.Purge(queue="")):
        c.send_method(1, method)
        close = c.expect_close()
        assert (close.channel, close.reply_code, close.reply_text) == (
            1,
            404,
            "NOT_FOUND - no previously declared queue",
        )
        c.close_ok(1)
        c.open_channel(1)
    name = c.rpc(1, spec.Queue.Declare(queue="", exclusive=True), "Queue.DeclareOk").method.queue
    c.rpc(1, spec.Queue.Bind(queue="", exchange="amq.direct", routing_key=""), "Queue.BindOk")
    c.rpc(1, spec.Confirm.Select(), "Confirm.SelectOk")
    c.publish(1, "amq.direct", name, b"via the shortcut binding")
    assert c.wait("Basic.Ack").name == "Basic.Ack"
    f = c.rpc(1, spec.Basic.Get(queue="", no_ack=True), "Basic.GetOk")
    assert f.method.routing_key == name and c.get_message(1).body == b"via the shortcut binding"
    assert c.rpc(1, spec.Queue.Purge(queue=""), "Queue.PurgeOk").method.message_count == 0
    c.close()


# -- direct reply-to -----------------------------------------------------------------------------------------------


def test_direct_reply_to_rules(broker: Target) -> None:
    c = RawAMQP.connect(broker.url)
    c.open_channel(1)
    f = c.rpc(1, spec.Queue.Declare(queue="amq.rabbitmq.reply-to", passive=True), "Queue.DeclareOk")
    assert (f.method.queue, f.method.message_count, f.method.consumer_count) == ("amq.rabbitmq.reply-to", 0, 1)
    c.publish(1, "", "whatever", b"x", spec.BasicProperties(reply_to="amq.rabbitmq.reply-to"))
    close = c.expect_close()
    assert (close.reply_code, close.reply_text) == (406, "PRECONDITION_FAILED - fast reply consumer does not exist")
    c.close_ok(1)
    c.open_channel(1)
    c.send_method(1, spec.Basic.Consume(queue="amq.rabbitmq.reply-to", no_ack=False))
    close = c.expect_close()
    assert (close.reply_code, close.reply_text) == (406, "PRECONDITION_FAILED - reply consumer cannot acknowledge")
    c.close()


def test_direct_reply_to_round_trip(broker: Target, conn: Any) -> None:
    ch = conn.channel()
    replies: list[tuple[bytes, str]] = []
    ch.basic_consume("amq.rabbitmq.reply-to", lambda c, m, p, b: replies.append((b, m.routing_key)), auto_ack=True)
    server_q = broker.name("rpc")
    ch.queue_declare(server_q)
    ch.basic_publish("", server_q, b"ping", pika.BasicProperties(reply_to="amq.rabbitmq.reply-to"))
    server = conn.channel()
    _, props, body = server.basic_get(server_q, auto_ack=True)
    assert body == b"ping" and props.reply_to.startswith("amq.rabbitmq.reply-to.")
    server.basic_publish("", props.reply_to, b"pong")
    pump(conn, lambda: replies)
    assert replies == [(b"pong", props.reply_to)]


def test_queue_deleted_on_the_consumers_own_channel_replies_first(broker: Target) -> None:
    q = broker.name()
    c = RawAMQP.connect(broker.url)
    c.open_channel(1)
    c.rpc(1, spec.Queue.Declare(queue=q), "Queue.DeclareOk")
    c.rpc(1, spec.Basic.Consume(queue=q, consumer_tag="own"), "Basic.ConsumeOk")
    c.send_method(1, spec.Queue.Delete(queue=q))
    frames = [c.wait("Queue.DeleteOk", "Basic.Cancel") for _ in range(2)]
    assert [f.name for f in frames] == ["Queue.DeleteOk", "Basic.Cancel"]
    c.close()


def test_no_cancel_notification_without_the_capability(broker: Target) -> None:
    q = broker.name()
    c = RawAMQP.connect(broker.url, client_properties={"product": "old client"})
    c.open_channel(1)
    c.rpc(1, spec.Queue.Declare(queue=q), "Queue.DeclareOk")
    c.rpc(1, spec.Basic.Consume(queue=q, consumer_tag="quiet"), "Basic.ConsumeOk")
    c.rpc(1, spec.Queue.Delete(queue=q), "Queue.DeleteOk")
    assert c.quiet(0.3) == []
    c.close()


def test_per_consumer_qos_lifts_the_channel_limit(broker: Target, conn: Any) -> None:
    q1, q2 = broker.name("a"), broker.name("b")
    pub = conn.channel()
    fill(pub, q1, 10)
    fill(pub, q2, 10)
    ch = conn.channel()
    ch.basic_qos(prefetch_count=3, global_qos=True)
    ch.basic_qos(prefetch_count=2)  # global=false: also removes the channel-wide 3
    got: dict[str, list[int]] = {"a": [], "b": []}
    ch.basic_consume(q1, lambda c, m, p, b: got["a"].append(m.delivery_tag))
    ch.basic_consume(q2, lambda c, m, p, b: got["b"].append(m.delivery_tag))
    pump(conn, lambda: len(got["a"]) + len(got["b"]) >= 4)
    settle(conn)
    assert (len(got["a"]), len(got["b"])) == (2, 2)


def test_replies_reuse_the_next_delivery_tag(broker: Target) -> None:
    _replies_and_delivery_tags(broker)


@pytest.mark.rabbitmq_version("4.0")
def test_replies_reuse_the_next_delivery_tag_40(broker: Target) -> None:
    _replies_and_delivery_tags(broker)


def _replies_and_delivery_tags(broker: Target) -> None:
    q = broker.name()
    c = RawAMQP.connect(broker.url)
    c.open_channel(1)
    c.rpc(1, spec.Basic.Consume(queue="amq.rabbitmq.reply-to", no_ack=True, consumer_tag="rpc"), "Basic.ConsumeOk")
    c.rpc(1, spec.Queue.Declare(queue=q), "Queue.DeclareOk")
    c.rpc(1, spec.Confirm.Select(), "Confirm.SelectOk")
    c.publish(1, "", q, b"request", spec.BasicProperties(reply_to="amq.rabbitmq.reply-to"))
    c.wait("Basic.Ack")
    c.rpc(1, spec.Basic.Get(queue=q, no_ack=True), "Basic.GetOk")
    reply_to = c.get_message(1).properties.reply_to
    assert reply_to.startswith("amq.rabbitmq.reply-to.") and reply_to.count(".") == 4
    tags = []
    for body in (b"r1", b"r2"):
        c.publish(1, "", reply_to, body)
        f = c.wait("Basic.Deliver")
        tags.append(f.method.delivery_tag)
        assert c.get_message(1).body == body
    c.publish(1, "", q, b"normal")
    c.rpc(1, spec.Basic.Get(queue=q), "Basic.GetOk")
    if broker.at_least("4.3"):
        # 4.3: direct reply-to is a volatile queue; each reply takes a delivery tag (live 4.3.6)
        assert tags == [2, 3]
        assert c.seen[-1].method.delivery_tag == 4
    else:
        # the get above took tag 2; both replies showed 2 before it was used
        assert tags == [2, 2]
        assert c.seen[-1].method.delivery_tag == 2
    c.close()


def _methods(frames: list[Any]) -> list[str]:
    return [f.name for f in frames if f.type == 1]


def test_mandatory_direct_replies(broker: Target) -> None:
    """Issue 10: up to 4.2 a mandatory reply is always returned (NO_ROUTE), even when it is delivered; on 4.3 a
    reply to a channel of the node is routed - no return, even when the requester has gone."""
    _mandatory_direct_replies(broker)


@pytest.mark.rabbitmq_version("4.0")
def test_mandatory_direct_replies_40(broker: Target) -> None:
    _mandatory_direct_replies(broker)


def _mandatory_direct_replies(broker: Target) -> None:
    c = RawAMQP.connect(broker.url)
    c.open_channel(1)
    c.rpc(1, spec.Basic.Consume(queue="amq.rabbitmq.reply-to", no_ack=True, consumer_tag="rpc"), "Basic.ConsumeOk")
    q = broker.name()
    c.rpc(1, spec.Queue.Declare(queue=q), "Queue.DeclareOk")
    c.publish(1, "", q, b"request", spec.BasicProperties(reply_to="amq.rabbitmq.reply-to"))
    c.rpc(1, spec.Basic.Get(queue=q, no_ack=True), "Basic.GetOk")
    reply_to = c.get_message(1).properties.reply_to
    c.rpc(1, spec.Confirm.Select(), "Confirm.SelectOk")
    legacy = not broker.at_least("4.3")
    c.publish(1, "", reply_to, b"own", mandatory=True)
    frames = c.quiet(0.3)
    assert _methods(frames) == (["Basic.Return"] if legacy else []) + ["Basic.Ack", "Basic.Deliver"]
    s = RawAMQP.connect(broker.url)
    s.open_channel(1)
    s.rpc(1, spec.Confirm.Select(), "Confirm.SelectOk")
    s.publish(1, "", reply_to, b"other", mandatory=True)
    assert _methods(s.quiet(0.3)) == (["Basic.Return"] if legacy else []) + ["Basic.Ack"]
    assert _methods(c.quiet(0.2)) == ["Basic.Deliver"]
    c.close()
    s.publish(1, "", reply_to, b"late", mandatory=True)  # the requester has gone
    assert _methods(s.quiet(0.3)) == (["Basic.Return"] if legacy else []) + ["Basic.Ack"]
    for rk in ("amq.rabbitmq.reply-to", "amq.rabbitmq.reply-to.", "amq.rabbitmq.reply-to.abc"):
        s.publish(1, "", rk, b"nowhere", mandatory=True)
        frames = s.quiet(0.3)
        assert _methods(frames) == ["Basic.Return", "Basic.Ack"], rk
        assert (frames[0].method.reply_code, frames[0].method.routing_key) == (312, rk)
    s.publish(1, "", "amq.rabbitmq.reply-to.abc.def", b"bad", mandatory=True)
    if legacy:
        # two parts, the first no encoded pid: decode_reply_to_v1's binary_to_term crashes the connection
        close = s.expect_close()
        assert (close.channel, close.reply_code, close.reply_text) == (0, 541, "INTERNAL_ERROR")
    else:
        assert _methods(s.quiet(0.3)) == ["Basic.Return", "Basic.Ack"]
    s.sock.close()


def test_stream_offset_on_a_classic_queue(broker: Target, conn: Any) -> None:
    q = broker.name()
    conn.channel().queue_declare(q)
    ch = conn.channel()
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as exc:
        ch.basic_consume(q, lambda *a: None, arguments={"x-stream-offset": "first"})
    assert (exc.value.reply_code, exc.value.reply_text) == (
        406,
        f"PRECONDITION_FAILED - invalid arg 'x-stream-offset' for queue '{q}' in vhost '/' of queue type "
        "rabbit_classic_queue",
    )


def test_basic_credit_and_access_request(broker: Target) -> None:
    import struct

    from tests.rawamqp import frame

    c = RawAMQP.connect(broker.url)
    c.open_channel(1)
    c.send(frame(1, 1, struct.pack(">HHB", 30, 10, 1) + b"/" + b"\x1f"))  # access.request
    f = c.read_frame()
    assert f is not None and f.payload == struct.pack(">HHH", 30, 11, 1)  # access.request-ok, ticket 1
    c.send(frame(1, 1, struct.pack(">HHB", 60, 200, 2) + b"zz" + struct.pack(">IB", 10, 0)))  # basic.credit
    close = c.expect_close()
    if broker.at_least("4.0"):  # rabbit_channel no longer handles basic.credit (credit flow is AMQP 1.0's)
        assert (close.channel, close.reply_code, close.reply_text, close.class_id, close.method_id) == (
            0,
            503,
            "COMMAND_INVALID - unimplemented method",
            60,
            200,
        )
        c.sock.close()
        return
    assert (close.channel, close.reply_code, close.reply_text, close.class_id, close.method_id) == (
        1,
        406,
        "PRECONDITION_FAILED - unknown consumer tag 'zz'",
        60,
        200,
    )
    c.close_ok(1)
    c.open_channel(1)
    c.send(frame(1, 1, struct.pack(">HHI", 60, 201, 5)))  # basic.credit-ok from a client
    close = c.expect_close()
    assert (close.channel, close.reply_code, close.class_id, close.method_id) == (0, 503, 60, 201)
    c.sock.close()


# -- single active consumer and consumer priorities (issue 10 sweep) --------------------------------------------


@pytest.mark.parametrize("qtype", ["classic", "quorum"])
def test_single_active_consumer_and_a_higher_priority_newcomer(broker: Target, conn: Any, qtype: str) -> None:
    """4.x quorum queues: a waiting consumer of higher priority takes over once the active one has acked what it
    holds (the active one gets nothing more meanwhile); classic queues and 3.10 keep the first consumer."""
    _sac_newcomer(broker, conn, qtype)


@pytest.mark.rabbitmq_version("3.12")
def test_single_active_consumer_and_a_higher_priority_newcomer_3x(broker: Target, conn: Any) -> None:
    _sac_newcomer(broker, conn, "quorum")


def _sac_newcomer(broker: Target, conn: Any, qtype: str) -> None:
    q = broker.name()
    args: dict[str, Any] = {"x-single-active-consumer": True}
    if qtype == "quorum":
        args["x-queue-type"] = "quorum"
    pub = conn.channel()
    pub.queue_declare(q, durable=True, arguments=args)
    pub.confirm_delivery()
    for i in range(6):
        pub.basic_publish("", q, f"m{i}".encode())
    got: list[tuple[str, str]] = []
    tags: dict[str, list[int]] = {"A": [], "B": []}

    def on(name: str) -> Any:
        def cb(c: Any, m: Any, p: Any, b: bytes) -> None:
            got.append((name, b.decode()))
            tags[name].append(m.delivery_tag)

        return cb

    ca, cb = conn.channel(), conn.channel()
    ca.basic_qos(prefetch_count=1)
    cb.basic_qos(prefetch_count=1)
    ca.basic_consume(q, on("A"))
    pump(conn, lambda: got)
    cb.basic_consume(q, on("B"), arguments={"x-priority": 10})
    settle(conn)
    ca.basic_ack(tags["A"][-1])
    pump(conn, lambda: len(got) >= 2)
    settle(conn)
    takes_over = qtype == "quorum" and broker.at_least("4.0")
    assert got == [("A", "m0"), ("B" if takes_over else "A", "m1")]
    if takes_over:
        cb.basic_ack(tags["B"][-1])
        pump(conn, lambda: len(got) >= 3)
        cb.basic_cancel(cb.consumer_tags[0])  # B keeps its unacked m2; A is active again
        pump(conn, lambda: len(got) >= 4)
        settle(conn)
        assert got[2:] == [("B", "m2"), ("A", "m3")]
