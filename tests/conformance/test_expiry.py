"""Queue expiry: ``x-expires`` and the ``expires`` policy (``rabbit_amqqueue_process``'s expiry timer,
``rabbit_amqqueue:check_expires_arg/2``)."""

from __future__ import annotations

import pika
import pytest
from pika.adapters.blocking_connection import BlockingChannel

from fakerabbit.broker.policy import PolicyError
from tests.conformance.conftest import Target
from tests.conformance.ttlhelpers import anchored, channel_error, confirmed, ready, with_dlq
from tests.realbrokers import PolicyRefused


def exists(conn: pika.BlockingConnection, q: str) -> bool:
    """Passive declare on a fresh channel (a 404 closes that channel only). Note: it resets the countdown."""
    ch = conn.channel()
    try:
        ch.queue_declare(q, passive=True)
    except pika.exceptions.ChannelClosedByBroker as exc:
        assert exc.reply_code == 404
        return False
    ch.close()
    return True


# -- when a queue expires (RabbitMQ: rabbit_amqqueue_process:ensure_expiry_timer) --------------------------------------


def test_qx1_unused_queue_expires(broker: Target, conn: pika.BlockingConnection) -> None:
    q = broker.name()
    conn.channel().queue_declare(q, arguments={"x-expires": 100})
    broker.advance(0.2)
    assert not exists(conn, q)


@pytest.mark.fake_only  # exact instants need the virtual clock
def test_qx1_expires_exactly_after_n_ms(broker: Target, ch: BlockingChannel) -> None:
    q = broker.name()
    ch.queue_declare(q, arguments={"x-expires": 1000})
    fake = broker.fake
    assert fake is not None
    broker.advance(0.999)
    assert fake._call(lambda: q in fake._broker.vhost("/").queues)
    broker.advance(0.001)
    assert not fake._call(lambda: q in fake._broker.vhost("/").queues)


@pytest.mark.parametrize("how", ["redeclare", "passive", "get"])
def test_qx1_declare_and_get_restart_the_countdown(broker: Target, conn: pika.BlockingConnection, how: str) -> None:
    q = broker.name()
    ch = conn.channel()
    ch.queue_declare(q, arguments={"x-expires": 300})
    broker.advance(0.2)
    if how == "redeclare":
        ch.queue_declare(q, arguments={"x-expires": 300})
    elif how == "passive":
        ch.queue_declare(q, passive=True)
    else:
        assert ch.basic_get(q) == (None, None, None)  # even on an empty queue
    broker.advance(0.2)  # 0.4 s after creation, 0.2 s after the reset
    assert exists(conn, q)  # (this resets it again)
    broker.advance(0.4)
    assert not exists(conn, q)


def test_qx1_publishing_does_not_restart_the_countdown(broker: Target, conn: pika.BlockingConnection) -> None:
    q = broker.name()
    ch = confirmed(conn.channel())
    ch.queue_declare(q, arguments={"x-expires": 300})
    broker.advance(0.2)
    ch.basic_publish("", q, b"m")
    broker.advance(0.2)
    assert not exists(conn, q)


def test_qx1_queue_with_consumer_never_expires_then_expires_after_cancel(
    broker: Target, conn: pika.BlockingConnection
) -> None:
    q = broker.name()
    ch = conn.channel()
    ch.queue_declare(q, arguments={"x-expires": 200})
    tag = ch.basic_consume(q, lambda *a: None)
    broker.advance(0.4)
    assert exists(conn, q)
    ch.basic_cancel(tag)  # last consumer gone: the countdown starts now
    broker.advance(0.1)
    assert exists(conn, q)
    broker.advance(0.4)
    assert not exists(conn, q)


def test_qx1_consumer_channel_closing_starts_the_countdown(broker: Target, conn: pika.BlockingConnection) -> None:
    q = broker.name()
    conn.channel().queue_declare(q, arguments={"x-expires": 200})
    cch = conn.channel()
    cch.basic_consume(q, lambda *a: None)
    broker.advance(0.3)
    cch.close()
    broker.advance(0.1)
    assert exists(conn, q)
    broker.advance(0.4)
    assert not exists(conn, q)


def test_qx1_expired_queue_is_not_dead_lettered(broker: Target, conn: pika.BlockingConnection) -> None:
    ch = confirmed(conn.channel())
    q, dlq = with_dlq(broker, ch, {"x-expires": 100})
    for b in (b"1", b"2"):
        ch.basic_publish("", q, b)
    broker.advance(0.25)
    assert not exists(conn, q)
    # an expiring queue dead-letters nothing (rabbit_amqqueue_process:handle_info/2)
    assert ready(conn.channel(), dlq) == 0


def test_qx1_expired_queue_loses_its_bindings(broker: Target, conn: pika.BlockingConnection) -> None:
    q = broker.name()
    x = broker.exchange()
    ch = confirmed(conn.channel())
    ch.exchange_declare(x, "fanout")
    ch.queue_declare(q, arguments={"x-expires": 100})
    ch.queue_bind(q, x)
    broker.advance(0.25)
    ch.queue_declare(q)  # a new queue of the same name, without the binding
    ch.basic_publish(x, "", b"m")
    assert ready(ch, q) == 0


# -- x-expires values and the expires policy (RabbitMQ: rabbit_amqqueue:check_expires_arg/2) ---------------------------


@pytest.mark.parametrize(("value", "term"), [(0, "{value_zero,0}"), (-10, "{value_negative,-10}")])
def test_qx2_invalid_x_expires(broker: Target, ch: BlockingChannel, value: int, term: str) -> None:
    q = broker.name()
    code, text = channel_error(lambda: ch.queue_declare(q, arguments={"x-expires": value}))
    assert (code, text) == (406, f"PRECONDITION_FAILED - invalid arg 'x-expires' for queue '{q}' in vhost '/': {term}")


def test_qx2_x_expires_range(broker: Target, ch: BlockingChannel) -> None:
    ok, too_big = broker.name("ok"), broker.name("big")
    ch.queue_declare(ok, arguments={"x-expires": 315_360_000_000})
    code, text = channel_error(lambda: ch.queue_declare(too_big, arguments={"x-expires": 315_360_000_001}))
    assert (code, text) == (
        406,
        f"PRECONDITION_FAILED - invalid arg 'x-expires' for queue '{too_big}' in vhost '/': "
        "{value_too_large,315360000001}",
    )


@pytest.mark.parametrize("value", [0, -1])
def test_qx2_invalid_expires_policy(broker: Target, value: int) -> None:
    q = broker.name()
    expected = f"{value} is not a valid queue expiry"
    if broker.is_fake:
        with pytest.raises(PolicyError) as exc:
            broker.set_policy(q + "-exp", anchored(q), {"expires": value})
        assert str(exc.value) == expected
    else:
        with pytest.raises(PolicyRefused) as refused:
            broker.set_policy(q + "-exp", anchored(q), {"expires": value})
        assert str(refused.value) == expected


@pytest.mark.parametrize(("arg", "policy"), [(100, 60000), (60000, 100)])
def test_qx2_smaller_of_argument_and_policy_wins(
    broker: Target, conn: pika.BlockingConnection, arg: int, policy: int
) -> None:
    q = broker.name()
    broker.set_policy(q + "-exp", anchored(q), {"expires": policy})
    conn.channel().queue_declare(q, arguments={"x-expires": arg})
    broker.advance(0.25)
    assert not exists(conn, q)


def test_qx2_policy_alone_expires_queue(broker: Target, conn: pika.BlockingConnection) -> None:
    q = broker.name()
    conn.channel().queue_declare(q)
    broker.set_policy(q + "-exp", anchored(q), {"expires": 100})  # the countdown starts when it applies
    broker.advance(0.25)
    assert not exists(conn, q)


# -- after expiry (RabbitMQ: rabbit_amqqueue_process:handle_info/2 (maybe_expire)) -------------------------------------


def test_qx3_passive_declare_of_expired_queue_is_404(broker: Target, ch: BlockingChannel) -> None:
    q = broker.name()
    ch.queue_declare(q, arguments={"x-expires": 100})
    broker.advance(0.25)
    code, text = channel_error(lambda: ch.queue_declare(q, passive=True))
    assert (code, text) == (404, f"NOT_FOUND - no queue '{q}' in vhost '/'")
