"""Transactions: publishes and settlements are held until tx.commit, dropped by tx.rollback."""

from __future__ import annotations

from typing import Any

import pika
import pika.exceptions
import pytest
from pika import spec

from tests.conformance.conftest import Target
from tests.rawamqp import RawAMQP


def count(ch: Any, q: str) -> int:
    return int(ch.queue_declare(q, passive=True).method.message_count)


def test_publishes_wait_for_commit(broker: Target, conn: Any) -> None:
    q = broker.name()
    ch = conn.channel()
    ch.queue_declare(q)
    ch.tx_select()
    for i in range(3):
        ch.basic_publish("", q, str(i).encode())
    observer = conn.channel()
    assert count(observer, q) == 0
    ch.tx_commit()
    assert count(observer, q) == 3
    assert [observer.basic_get(q, auto_ack=True)[2] for _ in range(3)] == [b"0", b"1", b"2"]


def test_rollback_drops_publishes_and_restores_acks(broker: Target, conn: Any) -> None:
    q = broker.name()
    ch = conn.channel()
    ch.queue_declare(q)
    ch.basic_publish("", q, b"kept")
    ch.tx_select()
    ch.basic_publish("", q, b"dropped")
    m, _, _ = ch.basic_get(q)
    ch.basic_ack(m.delivery_tag)
    ch.tx_rollback()
    assert count(ch, q) == 0  # the message is still unacked on this channel
    ch.basic_ack(m.delivery_tag)  # the rolled-back ack can be made again
    ch.tx_commit()
    ch.basic_recover(requeue=True)
    assert count(ch, q) == 0


def test_reject_with_requeue_waits_for_commit(broker: Target, conn: Any) -> None:
    q = broker.name()
    ch = conn.channel()
    ch.queue_declare(q)
    ch.confirm_delivery()
    ch.basic_publish("", q, b"m")
    tx = conn.channel()
    tx.tx_select()
    m, _, _ = tx.basic_get(q)
    tx.basic_reject(m.delivery_tag, requeue=True)
    assert count(ch, q) == 0
    tx.tx_commit()
    got = ch.basic_get(q, auto_ack=True)
    assert got[2] == b"m" and got[0].redelivered


def test_a_transaction_can_be_used_again(broker: Target, ch: Any) -> None:
    q = broker.name()
    ch.queue_declare(q)
    ch.tx_select()
    ch.tx_select()  # twice is fine
    for round_ in range(3):
        ch.basic_publish("", q, str(round_).encode())
        ch.tx_commit()
    ch.basic_publish("", q, b"x")
    ch.tx_rollback()
    assert count(ch, q) == 3


def test_mandatory_return_is_sent_at_commit(broker: Target) -> None:
    c = RawAMQP.connect(broker.url)
    c.open_channel(1)
    c.rpc(1, spec.Tx.Select(), "Tx.SelectOk")
    c.publish(1, "amq.direct", "nowhere", b"r", mandatory=True)
    assert c.quiet(0.3) == []
    c.send_method(1, spec.Tx.Commit())
    ret = c.wait("Basic.Return")
    assert ret.method.reply_code == 312
    assert c.get_message(1).body == b"r"
    assert c.wait("Tx.CommitOk").name == "Tx.CommitOk"
    c.close()


@pytest.mark.parametrize("method", [spec.Tx.Commit(), spec.Tx.Rollback()], ids=["commit", "rollback"])
def test_commit_or_rollback_without_select(broker: Target, method: Any) -> None:
    c = RawAMQP.connect(broker.url)
    c.open_channel(1)
    c.send_method(1, method)
    close = c.expect_close()
    assert (close.channel, close.reply_code, close.reply_text) == (
        1,
        406,
        "PRECONDITION_FAILED - channel is not transactional",
    )
    c.close()


def test_pika_tx_commit_and_rollback(broker: Target, ch: Any) -> None:
    q = broker.name()
    ch.queue_declare(q)
    ch.tx_select()
    ch.basic_publish("", q, b"a", pika.BasicProperties(message_id="1"))
    ch.tx_rollback()
    ch.basic_publish("", q, b"b", pika.BasicProperties(message_id="2"))
    ch.tx_commit()
    _, props, body = ch.basic_get(q, auto_ack=True)
    assert (body, props.message_id) == (b"b", "2")
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as exc:
        ch.confirm_delivery()
    assert exc.value.reply_code == 406
