"""Fault injection through the ``fakerabbit`` fixture, with real clients over TCP."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator

import aio_pika
import pika
import pika.exceptions
import pytest

from fakerabbit import FakeRabbit


def connect(url: str, name: str | None = None) -> pika.BlockingConnection:
    params = pika.URLParameters(url)
    if name is not None:
        params.client_properties = {"connection_name": name}
    return pika.BlockingConnection(params)


def pump_until(conn: pika.BlockingConnection, done: Callable[[], bool], timeout: float = 5.0) -> None:
    """Let pika read from its socket until ``done()`` (bounded by a real-time timeout, not the fake's clock)."""
    deadline = time.monotonic() + timeout
    while not done() and time.monotonic() < deadline:
        conn.process_data_events(time_limit=0.05)
    assert done()


@pytest.fixture
def conn(fakerabbit_url: str) -> Iterator[pika.BlockingConnection]:
    c = connect(fakerabbit_url)
    yield c
    if c.is_open:
        c.close()


def test_close_connections_sends_connection_close(fakerabbit: FakeRabbit, conn: pika.BlockingConnection) -> None:
    ch = conn.channel()
    ch.queue_declare("work")
    ch.basic_publish("", "work", b"m")
    method, _props, _body = ch.basic_get("work")
    assert method is not None

    assert fakerabbit.close_connections() == 1

    with pytest.raises(pika.exceptions.ConnectionClosedByBroker) as info:
        pump_until(conn, lambda: False, timeout=2)
    assert (info.value.reply_code, info.value.reply_text) == (320, "CONNECTION_FORCED - Closed via management plugin")
    q = fakerabbit.queue("work")
    assert (q.message_count, q.unacked_count) == (1, 0)  # the unacked message was requeued
    assert q.messages[0].redelivered


def test_close_connections_where_and_custom_text(fakerabbit: FakeRabbit, fakerabbit_url: str) -> None:
    keep, kill = connect(fakerabbit_url, "keep"), connect(fakerabbit_url, "kill")
    closed = fakerabbit.close_connections(reply_text="maintenance", where=lambda c: c.connection_name == "kill")
    assert closed == 1
    with pytest.raises(pika.exceptions.ConnectionClosedByBroker, match="CONNECTION_FORCED - maintenance"):
        pump_until(kill, lambda: False, timeout=2)
    assert [c.connection_name for c in fakerabbit.connections()] == ["keep"]
    keep.channel().queue_declare("still-works")
    keep.close()


def test_drop_connections_resets_the_socket(fakerabbit: FakeRabbit, conn: pika.BlockingConnection) -> None:
    ch = conn.channel()
    ch.queue_declare("excl", exclusive=True)
    assert fakerabbit.drop_connections() == 1
    with pytest.raises(pika.exceptions.AMQPConnectionError) as info:
        pump_until(conn, lambda: False, timeout=2)
    assert not isinstance(info.value, pika.exceptions.ConnectionClosedByBroker)  # no close frame: a reset
    assert fakerabbit.queues() == [] and fakerabbit.connections() == []


def test_restart_then_reconnect(fakerabbit: FakeRabbit, fakerabbit_url: str, conn: pika.BlockingConnection) -> None:
    ch = conn.channel()
    ch.queue_declare("jobs", durable=True)
    ch.queue_declare("scratch")
    ch.basic_publish("", "jobs", b"keep", pika.BasicProperties(delivery_mode=2))
    ch.basic_publish("", "jobs", b"lose")

    fakerabbit.restart()

    with pytest.raises(pika.exceptions.ConnectionClosedByBroker) as info:
        pump_until(conn, lambda: False, timeout=2)
    assert info.value.reply_text == "CONNECTION_FORCED - broker forced connection closure with reason 'shutdown'"
    again = connect(fakerabbit_url)
    ch2 = again.channel()
    assert ch2.queue_declare("jobs", passive=True).method.message_count == 1
    method, _props, body = ch2.basic_get("jobs", auto_ack=True)
    assert method is not None and body == b"keep"
    with pytest.raises(pika.exceptions.ChannelClosedByBroker, match="NOT_FOUND"):
        ch2.queue_declare("scratch", passive=True)
    again.close()


def test_block_and_unblock(fakerabbit: FakeRabbit, conn: pika.BlockingConnection) -> None:
    seen: list[str] = []
    conn.add_on_connection_blocked_callback(lambda _c, frame: seen.append(f"blocked:{frame.method.reason}"))
    conn.add_on_connection_unblocked_callback(lambda _c, _frame: seen.append("unblocked"))
    fakerabbit.block("low on disk")
    pump_until(conn, lambda: len(seen) == 1)
    fakerabbit.unblock()
    pump_until(conn, lambda: len(seen) == 2)
    assert seen == ["blocked:low on disk", "unblocked"]


def blocked_log(conn: pika.BlockingConnection) -> list[str]:
    seen: list[str] = []
    conn.add_on_connection_blocked_callback(lambda _c, frame: seen.append(f"blocked:{frame.method.reason}"))
    conn.add_on_connection_unblocked_callback(lambda _c, _frame: seen.append("unblocked"))
    return seen


def test_block_holds_back_a_connection_opened_later_once_it_publishes(
    fakerabbit: FakeRabbit, fakerabbit_url: str
) -> None:
    fakerabbit.block("low on disk")
    later = connect(fakerabbit_url)
    seen = blocked_log(later)
    ch = later.channel()
    ch.queue_declare("jobs")
    assert seen == []  # as under a memory alarm, a connection is told when it publishes (declare-ok came after)
    ch.basic_publish("", "jobs", b"held")
    pump_until(later, lambda: len(seen) == 1)
    assert seen == ["blocked:low on disk"]
    assert fakerabbit.queue("jobs").message_count == 0  # the broker stopped reading this connection
    fakerabbit.unblock()
    pump_until(later, lambda: len(seen) == 2)
    assert seen == ["blocked:low on disk", "unblocked"]
    assert fakerabbit.queue("jobs").bodies == [b"held"]  # read again: the held publish went in
    later.close()


def test_block_holds_back_a_connection_told_at_the_call_when_it_publishes(
    fakerabbit: FakeRabbit, conn: pika.BlockingConnection
) -> None:
    seen = blocked_log(conn)
    ch = conn.channel()
    ch.queue_declare("jobs")
    fakerabbit.block()
    pump_until(conn, lambda: len(seen) == 1)
    ch.basic_publish("", "jobs", b"held")
    assert fakerabbit.queue("jobs").message_count == 0
    fakerabbit.unblock()
    pump_until(conn, lambda: len(seen) == 2)
    assert seen == ["blocked:low on memory", "unblocked"]  # told once, however much it publishes
    assert fakerabbit.queue("jobs").bodies == [b"held"]


@pytest.mark.parametrize("how", ["block", "alarm"])
def test_reset_lifts_block(fakerabbit: FakeRabbit, fakerabbit_url: str, how: str) -> None:
    if how == "block":
        fakerabbit.block()
    else:
        fakerabbit.set_alarm("disk", True)
    fakerabbit.reset()
    later = connect(fakerabbit_url)
    seen = blocked_log(later)
    ch = later.channel()
    ch.queue_declare("jobs")
    ch.basic_publish("", "jobs", b"free")
    assert fakerabbit.queue("jobs").bodies == [b"free"]
    ch.queue_declare("jobs", passive=True)  # a round trip after the publish: a blocked frame would be in by now
    assert seen == []
    later.close()


async def test_aio_pika_robust_connection_recovers(fakerabbit: FakeRabbit, fakerabbit_url: str) -> None:
    connection = await aio_pika.connect_robust(fakerabbit_url, reconnect_interval=0.05)
    reconnected = asyncio.Event()
    connection.reconnect_callbacks.add(lambda *_: reconnected.set())
    try:
        channel = await connection.channel()
        queue = await channel.declare_queue("events", durable=True)
        fakerabbit.close_connections()
        await asyncio.wait_for(reconnected.wait(), timeout=5)
        await channel.default_exchange.publish(aio_pika.Message(b"after"), routing_key="events")
        msg = await queue.get(timeout=5)
        assert msg is not None and msg.body == b"after"
        await msg.ack()
        assert len(fakerabbit.connections()) == 1
    finally:
        await connection.close()


async def test_clock_advance_from_an_async_test(fakerabbit: FakeRabbit, fakerabbit_url: str) -> None:
    connection = await aio_pika.connect(fakerabbit_url)
    async with connection:
        channel = await connection.channel()
        dlq = await channel.declare_queue("retry.dlq")
        await channel.declare_queue(
            "retry",
            arguments={"x-message-ttl": 30_000, "x-dead-letter-exchange": "", "x-dead-letter-routing-key": "retry.dlq"},
        )
        await channel.default_exchange.publish(aio_pika.Message(b"later"), routing_key="retry")
        fakerabbit.clock.advance(29.999)
        assert fakerabbit.queue("retry.dlq").message_count == 0
        fakerabbit.clock.advance(0.001)  # blocks this loop while the server thread works: must not deadlock
        msg = await dlq.get(timeout=5)
        assert msg is not None and msg.body == b"later"
        assert msg.headers["x-death"][0]["reason"] == "expired"  # type: ignore[index,call-overload]
