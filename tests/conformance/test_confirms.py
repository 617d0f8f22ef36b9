"""Publisher confirms: sequence numbers, acks for routed and unroutable messages, returns before acks, nacks,
mode switching, and the pika / raw-client views of them."""

from __future__ import annotations

from typing import Any

import pika
import pika.exceptions
import pytest
from pika import spec

from tests.conformance.conftest import Target, pump
from tests.rawamqp import RawAMQP


def confirmed_tags(c: RawAMQP, upto: int) -> set[int]:
    """Collect basic.ack frames until every tag up to ``upto`` is confirmed (acks may be multiple)."""
    tags: set[int] = set()
    while len(tags) < upto:
        f = c.wait("Basic.Ack", "Basic.Nack")
        assert f.name == "Basic.Ack", f
        tag = f.method.delivery_tag
        tags |= set(range(1, tag + 1)) if f.method.multiple else {tag}
    return tags


def test_every_publish_is_confirmed_in_order(broker: Target) -> None:
    q = broker.name()
    c = RawAMQP.connect(broker.url)
    c.open_channel(1)
    c.rpc(1, spec.Queue.Declare(queue=q), "Queue.DeclareOk")
    assert c.rpc(1, spec.Confirm.Select(), "Confirm.SelectOk").name == "Confirm.SelectOk"
    for i in range(50):
        c.publish(1, "", q if i % 2 else "nowhere-at-all", str(i).encode())
    assert confirmed_tags(c, 50) == set(range(1, 51))
    f = c.rpc(1, spec.Queue.Declare(queue=q, passive=True), "Queue.DeclareOk")
    assert f.method.message_count == 25
    c.send_method(1, spec.Queue.Delete(queue=q))
    c.close()


def test_confirm_select_nowait_and_twice(broker: Target) -> None:
    c = RawAMQP.connect(broker.url)
    c.open_channel(1)
    c.send_method(1, spec.Confirm.Select(nowait=True))
    assert c.rpc(1, spec.Confirm.Select(), "Confirm.SelectOk").name == "Confirm.SelectOk"
    c.publish(1, "amq.direct", "nowhere")
    f = c.wait("Basic.Ack")
    assert (f.method.delivery_tag, f.method.multiple) == (1, False)
    c.close()


def test_mandatory_return_comes_before_the_ack(broker: Target) -> None:
    c = RawAMQP.connect(broker.url)
    c.open_channel(1)
    c.rpc(1, spec.Confirm.Select(), "Confirm.SelectOk")
    c.publish(1, "amq.direct", "nowhere", b"back to you", mandatory=True)
    ret = c.wait("Basic.Return")
    assert (ret.method.reply_code, ret.method.reply_text, ret.method.exchange, ret.method.routing_key) == (
        312,
        "NO_ROUTE",
        "amq.direct",
        "nowhere",
    )
    assert c.get_message(1).body == b"back to you"
    ack = c.wait("Basic.Ack")
    assert (ack.method.delivery_tag, ack.method.multiple) == (1, False)
    c.close()


def test_mandatory_without_confirms(broker: Target, conn: Any) -> None:
    ch = conn.channel()
    returned: list[tuple[int, str, bytes]] = []
    ch.add_on_return_callback(lambda c, m, p, b: returned.append((m.reply_code, m.reply_text, b)))
    ch.basic_publish("", "no-queue-by-this-name-z", b"r", mandatory=True)
    ch.basic_publish("amq.fanout", "", b"r2", mandatory=True)
    pump(conn, lambda: len(returned) >= 2)
    assert returned == [(312, "NO_ROUTE", b"r"), (312, "NO_ROUTE", b"r2")]


def test_nack_when_the_queue_refuses(broker: Target, ch: Any) -> None:
    q = broker.name()
    ch.queue_declare(q, arguments={"x-max-length": 1, "x-overflow": "reject-publish"})
    ch.confirm_delivery()
    ch.basic_publish("", q, b"fits")
    with pytest.raises(pika.exceptions.NackError):
        ch.basic_publish("", q, b"does not fit")
    assert ch.queue_declare(q, passive=True).method.message_count == 1


def test_publish_to_a_missing_exchange_closes_the_channel_without_confirm(broker: Target) -> None:
    c = RawAMQP.connect(broker.url)
    c.open_channel(1)
    c.rpc(1, spec.Confirm.Select(), "Confirm.SelectOk")
    c.publish(1, "no-such-exchange-z", "k")
    f = c.wait("Basic.Ack")
    assert f.name == "Channel.Close" and f.method.reply_code == 404
    c.close()


@pytest.mark.parametrize(
    ("first", "second", "ids", "text"),
    [
        (
            spec.Tx.Select(),
            spec.Confirm.Select(),
            (85, 10),
            "PRECONDITION_FAILED - cannot switch from tx to confirm mode",
        ),
        (
            spec.Confirm.Select(),
            spec.Tx.Select(),
            (90, 10),
            "PRECONDITION_FAILED - cannot switch from confirm to tx mode",
        ),
    ],
)
def test_confirm_and_tx_do_not_mix(broker: Target, first: Any, second: Any, ids: tuple[int, int], text: str) -> None:
    c = RawAMQP.connect(broker.url)
    c.open_channel(1)
    c.rpc(1, first, "Tx.SelectOk", "Confirm.SelectOk")
    c.send_method(1, second)
    close = c.expect_close()
    assert (close.channel, close.reply_code, close.reply_text, (close.class_id, close.method_id)) == (1, 406, text, ids)
    c.close()


def test_sequence_numbers_are_per_channel(broker: Target) -> None:
    c = RawAMQP.connect(broker.url)
    for ch in (1, 2):
        c.open_channel(ch)
        c.rpc(ch, spec.Confirm.Select(), "Confirm.SelectOk")
    c.publish(1, "amq.direct", "a")
    c.publish(1, "amq.direct", "a")
    c.publish(2, "amq.direct", "b")
    acks: dict[int, set[int]] = {1: set(), 2: set()}
    while len(acks[1]) < 2 or len(acks[2]) < 1:
        f = c.wait("Basic.Ack")
        tag = f.method.delivery_tag
        acks[f.channel] |= set(range(1, tag + 1)) if f.method.multiple else {tag}
    assert acks == {1: {1, 2}, 2: {1}}
    c.close()


def test_pika_confirm_delivery_with_many_messages(broker: Target, ch: Any) -> None:
    q = broker.name()
    ch.queue_declare(q)
    ch.confirm_delivery()
    for i in range(200):
        ch.basic_publish("", q, str(i).encode(), pika.BasicProperties(delivery_mode=2))
    assert ch.queue_declare(q, passive=True).method.message_count == 200


def test_nack_sets_requeue(broker: Target) -> None:
    c = RawAMQP.connect(broker.url)
    c.open_channel(1)
    q = c.rpc(
        1,
        spec.Queue.Declare(queue="", exclusive=True, arguments={"x-max-length": 0, "x-overflow": "reject-publish"}),
        "Queue.DeclareOk",
    ).method.queue
    c.rpc(1, spec.Confirm.Select(), "Confirm.SelectOk")
    c.publish(1, "", q)
    f = c.wait("Basic.Nack")
    assert f.name == "Basic.Nack"
    assert (f.method.delivery_tag, f.method.requeue) == (1, True)
    c.close()
