"""Queues: declare (server-named, passive, exclusive, auto-delete, names), delete (if-unused, if-empty), purge,
declare-ok counts, and the exclusive-queue lock on every operation of another connection."""

from __future__ import annotations

import re
from typing import Any

import pika
import pika.exceptions
import pytest
from pika import spec

from tests.conformance.conftest import Target, pump
from tests.conformance.dlhelpers import eventually
from tests.rawamqp import RawAMQP


def closed(conn: Any, fn: Any) -> tuple[int, str]:
    ch = conn.channel()
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as exc:
        fn(ch)
    return exc.value.reply_code, exc.value.reply_text


def test_server_named_queues(broker: Target, ch: Any) -> None:
    names = {ch.queue_declare("", exclusive=True).method.queue for _ in range(5)}
    assert len(names) == 5
    for name in names:
        assert re.fullmatch(r"amq\.gen-[A-Za-z0-9_-]{22}", name), name


@pytest.mark.parametrize("name", ["amq.mine", "amq.gen-abc", "amq."])
def test_amq_prefix_is_reserved(broker: Target, conn: Any, name: str) -> None:
    assert closed(conn, lambda ch: ch.queue_declare(name)) == (
        403,
        f"ACCESS_REFUSED - queue name '{name}' contains reserved prefix 'amq.*'",
    )
    assert closed(conn, lambda ch: ch.queue_declare(name, passive=True)) == (
        404,
        f"NOT_FOUND - no queue '{name}' in vhost '/'",
    )


def test_names_lose_cr_and_lf(broker: Target) -> None:
    q = broker.name("Mixed")
    c = RawAMQP.connect(broker.url)
    c.open_channel(1)
    f = c.rpc(1, spec.Queue.Declare(queue=q + "\r\n"), "Queue.DeclareOk")
    assert f.method.queue == q  # (pika would wait forever: it expects its own name back)
    assert c.rpc(1, spec.Queue.Declare(queue=q, passive=True), "Queue.DeclareOk").method.queue == q
    c.rpc(1, spec.Queue.Delete(queue=q + "\n"), "Queue.DeleteOk")
    c.send_method(1, spec.Queue.Declare(queue=q.lower(), passive=True))
    assert c.expect_close().reply_code == 404  # names are case-sensitive
    c.close()


def test_passive_declare_does_not_check_flags(broker: Target, ch: Any) -> None:
    q = broker.name()
    ch.queue_declare(q, durable=True)
    ok = ch.queue_declare(q, passive=True, durable=False, auto_delete=True, arguments={"x-message-ttl": 5})
    assert ok.method.queue == q


def test_declare_ok_counts_ready_messages_and_consumers(broker: Target, conn: Any) -> None:
    q = broker.name()
    ch = conn.channel()
    ch.queue_declare(q)
    ch.confirm_delivery()
    for i in range(5):
        ch.basic_publish("", q, str(i).encode())
    ok = ch.queue_declare(q, passive=True)
    assert (ok.method.message_count, ok.method.consumer_count) == (5, 0)
    ch.basic_get(q)  # unacked: not counted
    consumer = conn.channel()
    consumer.basic_qos(prefetch_count=1)
    got: list[int] = []
    consumer.basic_consume(q, lambda c, m, p, b: got.append(m.delivery_tag))
    pump(conn, lambda: got)
    ok = ch.queue_declare(q)
    assert (ok.method.message_count, ok.method.consumer_count) == (3, 1)


def test_delete_if_unused_and_if_empty(broker: Target, conn: Any) -> None:
    q = broker.name()
    ch = conn.channel()
    ch.queue_declare(q)
    ch.basic_consume(q, lambda *a: None)
    assert closed(conn, lambda ch: ch.queue_delete(q, if_unused=True)) == (
        406,
        f"PRECONDITION_FAILED - queue '{q}' in vhost '/' in use",
    )
    ch.confirm_delivery()
    q2 = broker.name("q2")
    ch.queue_declare(q2)
    ch.basic_publish("", q2, b"x")
    assert closed(conn, lambda ch: ch.queue_delete(q2, if_empty=True)) == (
        406,
        f"PRECONDITION_FAILED - queue '{q2}' in vhost '/' not empty",
    )
    assert conn.channel().queue_delete(q2).method.message_count == 1
    assert conn.channel().queue_delete(q2).method.message_count == 0  # missing: fine


def test_delete_if_unused_if_empty_on_an_idle_queue(broker: Target, ch: Any) -> None:
    q = broker.name()
    ch.queue_declare(q)
    assert ch.queue_delete(q, if_unused=True, if_empty=True).method.message_count == 0


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        ({"if_unused": True}, "if-unused"),
        ({"if_empty": True}, "if-empty"),
        ({"if_unused": True, "if_empty": True}, "if-unused"),
    ],
)
def test_quorum_delete_with_a_condition_is_not_implemented(
    broker: Target, conn: Any, flags: dict[str, bool], named: str
) -> None:
    """Quorum queues refuse conditional deletes: a connection error 540, even on an idle empty queue (live
    3.10.8, 4.0.5 and 4.3.6 alike; if-unused is named when both are set). The queue stays."""
    q = broker.name()
    conn.channel().queue_declare(q, durable=True, arguments={"x-queue-type": "quorum"})
    c = RawAMQP.connect(broker.url)
    c.open_channel(1)
    c.send_method(1, spec.Queue.Delete(queue=q, **flags))
    close = c.expect_close()
    assert (close.channel, close.reply_code, close.reply_text, close.class_id, close.method_id) == (
        0,
        540,
        f"NOT_IMPLEMENTED - cannot delete queue '{q}' in vhost '/'. queue.delete operations with {named} flag "
        "set are not supported by quorum queues",
        50,
        40,
    )
    c.sock.close()
    conn.channel().queue_declare(q, passive=True)
    assert conn.channel().queue_delete(q).method.message_count == 0


def test_purge_counts_ready_not_unacked(broker: Target, conn: Any) -> None:
    q = broker.name()
    ch = conn.channel()
    ch.queue_declare(q)
    ch.confirm_delivery()
    for i in range(5):
        ch.basic_publish("", q, str(i).encode())
    ch.basic_get(q)
    ch.basic_get(q)
    assert ch.queue_purge(q).method.message_count == 3
    ch.basic_recover(requeue=True)  # the two unacked come back after the purge

    def two_ready() -> None:  # (RabbitMQ's passive declare may overtake the requeue: its stat call has priority)
        assert ch.queue_declare(q, passive=True).method.message_count == 2

    eventually(broker, two_ready)
    assert closed(conn, lambda ch: ch.queue_purge(broker.name("nope")))[0] == 404


def test_auto_delete_queue_survives_until_a_consumer_came_and_went(broker: Target, conn: Any) -> None:
    q = broker.name()
    ch = conn.channel()
    ch.queue_declare(q, auto_delete=True)
    ch.queue_declare(q, passive=True)  # never consumed: still there
    tag = ch.basic_consume(q, lambda *a: None)
    tag2 = ch.basic_consume(q, lambda *a: None)
    ch.basic_cancel(tag)
    ch.queue_declare(q, passive=True)  # one consumer left
    ch.basic_cancel(tag2)
    assert closed(conn, lambda ch: ch.queue_declare(q, passive=True))[0] == 404


def test_auto_delete_queue_goes_when_its_consumer_channel_closes(broker: Target, conn: Any) -> None:
    q = broker.name()
    ch = conn.channel()
    ch.queue_declare(q, auto_delete=True)
    ch.basic_consume(q, lambda *a: None)
    ch.close()
    assert closed(conn, lambda ch: ch.queue_declare(q, passive=True))[0] == 404


def test_exclusive_queue_is_locked_for_every_operation_of_another_connection(broker: Target, conn: Any) -> None:
    q = broker.name()
    owner = conn.channel()
    owner.queue_declare(q, exclusive=True)
    owner.queue_bind(q, "amq.direct", "bound")
    locked = (
        405,
        f"RESOURCE_LOCKED - cannot obtain exclusive access to locked queue '{q}' in vhost '/'. It could be "
        "originally declared on another connection or the exclusive property value does not match that of the "
        "original declaration.",
    )
    other = broker.connect()
    try:
        for op in (
            lambda ch: ch.queue_declare(q, passive=True),
            lambda ch: ch.queue_declare(q, exclusive=True),
            lambda ch: ch.queue_declare(q),
            lambda ch: ch.basic_consume(q, lambda *a: None),
            lambda ch: ch.basic_get(q),
            lambda ch: ch.queue_purge(q),
            lambda ch: ch.queue_delete(q),
            lambda ch: ch.queue_bind(q, "amq.direct", "k"),
            lambda ch: ch.queue_unbind(q, "amq.direct", "bound"),
        ):
            assert closed(other, op) == locked
        other.channel().queue_unbind(q, "amq.direct", "never-bound")  # a binding that does not exist: fine
        pub = other.channel()
        pub.confirm_delivery()
        pub.basic_publish("", q, b"publishing is not an access")
    finally:
        other.close()
    assert owner.basic_get(q, auto_ack=True)[2] == b"publishing is not an access"
    assert closed(conn, lambda ch: ch.queue_declare(q)) == locked  # redeclare as non-exclusive by the owner


def test_exclusive_queue_goes_with_its_connection_not_its_channel(broker: Target, conn: Any) -> None:
    q = broker.name()
    ch = conn.channel()
    ch.queue_declare(q, exclusive=True)
    ch.close()
    conn.channel().queue_declare(q, passive=True)


def test_max_priority_argument(broker: Target, conn: Any) -> None:
    q = broker.name()
    ch = conn.channel()
    ch.queue_declare(q, arguments={"x-max-priority": 10})
    ch.confirm_delivery()
    for body, prio in ((b"p1", 1), (b"p10", 10), (b"p200", 200), (b"none", None), (b"p5", 5)):
        ch.basic_publish("", q, body, pika.BasicProperties(priority=prio))
    got = [ch.basic_get(q, auto_ack=True)[2] for _ in range(5)]
    assert got == [b"p10", b"p200", b"p5", b"p1", b"none"]  # priorities above the max count as the max


def test_single_active_consumer(broker: Target, conn: Any) -> None:
    q = broker.name()
    ch = conn.channel()
    ch.queue_declare(q, arguments={"x-single-active-consumer": True})
    a: list[bytes] = []
    b: list[bytes] = []
    tag_a = ch.basic_consume(q, lambda c, m, p, body: a.append(body), auto_ack=True)
    ch.basic_consume(q, lambda c, m, p, body: b.append(body), auto_ack=True)
    for i in range(3):
        ch.basic_publish("", q, str(i).encode())
    pump(conn, lambda: len(a) == 3)
    assert (a, b) == ([b"0", b"1", b"2"], [])
    ch.basic_cancel(tag_a)
    ch.basic_publish("", q, b"3")
    pump(conn, lambda: b)
    assert b == [b"3"]


@pytest.mark.parametrize(
    ("kwargs", "text"),
    [
        ({"exclusive": True}, "invalid property 'exclusive-owner'"),
        ({"durable": False}, "invalid property 'non-durable'"),
        ({"auto_delete": True}, "invalid property 'auto-delete'"),
    ],
)
def test_quorum_declare_rules(broker: Target, conn: Any, kwargs: dict[str, Any], text: str) -> None:
    q = broker.name()
    args: dict[str, Any] = {"durable": True, **kwargs}
    assert closed(conn, lambda ch: ch.queue_declare(q, arguments={"x-queue-type": "quorum"}, **args)) == (
        406,
        f"PRECONDITION_FAILED - {text} for queue '{q}' in vhost '/'",
    )


def test_quorum_queue_cannot_be_server_named(broker: Target) -> None:
    c = RawAMQP.connect(broker.url)
    c.open_channel(1)
    c.send_method(1, spec.Queue.Declare(queue="", durable=True, arguments={"x-queue-type": "quorum"}))
    close = c.expect_close()
    assert (close.reply_code, close.reply_text) == (
        406,
        "PRECONDITION_FAILED - Cannot declare a server-named queue for type rabbit_quorum_queue",
    )
    c.close()


def test_quorum_queue_refuses_global_qos(broker: Target, conn: Any) -> None:
    q = broker.name()
    conn.channel().queue_declare(q, durable=True, arguments={"x-queue-type": "quorum"})
    c = RawAMQP.connect(broker.url)
    c.open_channel(1)
    c.rpc(1, spec.Basic.Qos(0, 5, True), "Basic.QosOk")
    if broker.at_least("4.3"):
        # 4.3.0 denies the deprecated feature global_qos by default: the qos is per consumer, consume is fine
        c.rpc(1, spec.Basic.Consume(queue=q), "Basic.ConsumeOk")
        c.close()
        return
    c.send_method(1, spec.Basic.Consume(queue=q))
    close = c.expect_close()
    assert (close.channel, close.reply_code, close.reply_text, close.class_id, close.method_id) == (
        0,
        540,
        f"NOT_IMPLEMENTED - queue '{q}' in vhost '/' does not support global qos",
        60,
        20,
    )
    c.sock.close()
