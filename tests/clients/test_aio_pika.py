"""aio-pika: a whole application session, the same on fakerabbit (in its thread, and on the test's own loop with
``async with FakeRabbit()``) and on RabbitMQ."""

from __future__ import annotations

import asyncio
import json
import struct
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import aio_pika
import aiormq.exceptions
import pytest
from aio_pika import DeliveryMode, ExchangeType, Message
from pamqp import commands

from fakerabbit import FakeRabbit
from tests.clients.conftest import TTL_MS, ClientTarget, not_found

# aio-pika's typical header values. pamqp encodes a float as "f" (float32): 1.1 arrives as 1.100000023841858 on
# any broker, and dead-lettering must keep it a float32 (RabbitMQ re-encodes the table as it decoded it).
HEADERS: dict[str, Any] = {
    "float": 2.5,
    "lossy": 1.1,
    "price": Decimal("12.34"),
    "when": datetime(2024, 5, 1, 12, 30, 15, tzinfo=UTC),
    "int": 7,
    "big": 2**40,
    "negative": -5,
    "text": "héllo",
    "flag": True,
    "nothing": None,
    "list": [1, "a", 2.5],
    "nested": {"a": {"b": 1}},
}
RECEIVED = {**HEADERS, "lossy": struct.unpack(">f", struct.pack(">f", 1.1))[0]}
TIMEOUT = 5.0


def order(body: dict[str, Any]) -> Message:
    return Message(
        json.dumps(body).encode(),
        headers=dict(HEADERS),
        content_type="application/json",
        content_encoding="utf-8",
        delivery_mode=DeliveryMode.PERSISTENT,
        priority=4,
        correlation_id="corr-1",
        reply_to="replies",
        expiration=timedelta(seconds=60),
        message_id="msg-1",
        timestamp=datetime(2024, 5, 1, 12, 0, tzinfo=UTC),
        type="order.created",
        user_id="guest",
        app_id="shop",
    )


def assert_order(message: aio_pika.abc.AbstractIncomingMessage, *, dead: bool = False) -> None:
    info = message.info()
    want = {
        "content_type": "application/json",
        "content_encoding": "utf-8",
        "delivery_mode": DeliveryMode.PERSISTENT,
        "priority": 4,
        "correlation_id": "corr-1",
        "reply_to": "replies",
        "expiration": None if dead else 60.0,  # dead-lettering moves it to x-death's original-expiration
        "message_id": "msg-1",
        "timestamp": datetime(2024, 5, 1, 12, 0, tzinfo=UTC),
        "type": "order.created",
        "user_id": "guest",
        "app_id": "shop",
    }
    assert {k: info[k] for k in want} == want
    headers = dict(message.headers)
    if dead:
        headers = {k: v for k, v in headers.items() if not k.startswith("x-")}
    assert headers == RECEIVED
    for key, value in RECEIVED.items():
        assert type(headers[key]) is type(value), key


async def run_session(broker: ClientTarget) -> None:
    orders, dlx = broker.exchange("orders"), broker.exchange("dlx")
    work, delay, dlq, bounded = broker.name("work"), broker.name("delay"), broker.name("dlq"), broker.name("bounded")
    connection = await aio_pika.connect(broker.url, client_properties={"connection_name": "clients-aio-pika"})
    channel = await connection.channel(publisher_confirms=True)
    await channel.set_qos(prefetch_count=2)

    # topology
    x = await channel.declare_exchange(orders, ExchangeType.TOPIC, arguments={"x-note": "kept"})
    dead_x = await channel.declare_exchange(dlx, ExchangeType.FANOUT)
    work_q = await channel.declare_queue(work, arguments={"x-dead-letter-exchange": dlx, "x-max-length": 100})
    delay_q = await channel.declare_queue(delay, arguments={"x-dead-letter-exchange": dlx, "x-message-ttl": TTL_MS})
    dead_q = await channel.declare_queue(dlq)
    await channel.declare_queue(bounded, arguments={"x-max-length": 1, "x-overflow": "reject-publish"})
    await work_q.bind(x, "order.created", arguments={"x-binding-note": 1})
    await delay_q.bind(x, "order.delayed")
    await dead_q.bind(dead_x)

    # publisher confirms: ack, nack (queue full, reject-publish) and return (mandatory, unroutable)
    assert isinstance(await x.publish(order({"id": 1}), "order.created"), commands.Basic.Ack)
    assert isinstance(await channel.default_exchange.publish(Message(b"1"), bounded), commands.Basic.Ack)
    with pytest.raises(aiormq.exceptions.DeliveryError) as nacked:
        await channel.default_exchange.publish(Message(b"2"), bounded)
    assert isinstance(nacked.value.frame, commands.Basic.Nack)
    returned = await x.publish(Message(b"nowhere"), "no.binding")
    assert isinstance(returned.delivery, commands.Basic.Return)
    assert (returned.delivery.reply_code, returned.delivery.reply_text, returned.body) == (312, "NO_ROUTE", b"nowhere")

    # basic.get, nack with requeue (redelivered), reject into the DLX: properties and header types survive
    message = await work_q.get(timeout=TIMEOUT)
    assert (message.body, message.exchange, message.routing_key, message.redelivered) == (
        b'{"id": 1}',
        orders,
        "order.created",
        False,
    )
    assert_order(message)
    await message.nack(requeue=True)
    message = await work_q.get(timeout=TIMEOUT)
    assert (message.body, message.redelivered) == (b'{"id": 1}', True)
    await message.reject(requeue=False)
    message = await broker.eventually_async(lambda: dead_q.get(fail=False), "the rejected message in the DLQ")
    assert (message.body, message.exchange, message.routing_key) == (b'{"id": 1}', dlx, "order.created")
    assert_order(message, dead=True)
    (death,) = message.headers["x-death"]
    assert isinstance(death["time"], datetime)
    assert {k: v for k, v in death.items() if k != "time"} == {
        "count": 1,
        "reason": "rejected",
        "queue": work,
        "exchange": orders,
        "routing-keys": ["order.created"],
        "original-expiration": "60000",
    }
    await message.ack()

    # consume with manual ack and prefetch 2; a consumer on the DLQ waits for the TTL'd message
    for i in range(4):
        await x.publish(Message(f"m{i}".encode(), headers={"i": i}), "order.created")
    received: asyncio.Queue[aio_pika.abc.AbstractIncomingMessage] = asyncio.Queue()
    dead_letters: asyncio.Queue[aio_pika.abc.AbstractIncomingMessage] = asyncio.Queue()
    tag = await work_q.consume(received.put, consumer_tag="aio-1")
    await dead_q.consume(dead_letters.put)
    first = [await asyncio.wait_for(received.get(), TIMEOUT) for _ in range(2)]
    assert (await channel.declare_queue(work, passive=True)).declaration_result.message_count == 2
    assert received.empty()  # prefetch 2: nothing more until an ack
    # Requeued to the head and redelivered at once. (Acking m0 before the redelivery arrives would race on
    # RabbitMQ: m2 sometimes comes first. The fake always redelivers m1 first.)
    await first[1].reject(requeue=True)
    rest = [await asyncio.wait_for(received.get(), TIMEOUT)]
    await first[0].ack()
    rest.append(await asyncio.wait_for(received.get(), TIMEOUT))
    for m in rest:
        await m.ack()
    rest.append(await asyncio.wait_for(received.get(), TIMEOUT))
    await rest[-1].ack()
    assert [(m.body, m.redelivered, m.headers["i"], m.consumer_tag) for m in first + rest] == [
        (b"m0", False, 0, "aio-1"),
        (b"m1", False, 1, "aio-1"),
        (b"m1", True, 1, "aio-1"),
        (b"m2", False, 2, "aio-1"),
        (b"m3", False, 3, "aio-1"),
    ]
    await work_q.cancel(tag)

    # TTL: expires out of the delay queue into the DLX and is pushed to the waiting consumer
    await x.publish(Message(b"later", headers={"attempt": 1}, message_id="late-1"), "order.delayed")
    await broker.expire_async()
    late = await asyncio.wait_for(dead_letters.get(), TIMEOUT)
    (death,) = late.headers["x-death"]
    assert (late.body, late.message_id, late.headers["attempt"], late.routing_key) == (
        b"later",
        "late-1",
        1,
        "order.delayed",
    )
    assert (death["reason"], death["queue"], death["count"], death["routing-keys"]) == (
        "expired",
        delay,
        1,
        ["order.delayed"],
    )
    await late.ack()

    # channel errors surface as aiormq's exception types with RabbitMQ's text; the channel can be reopened
    missing = broker.name("missing")
    with pytest.raises(aiormq.exceptions.ChannelNotFoundEntity) as err:
        await channel.declare_queue(missing, passive=True)
    assert err.value.args == (not_found(missing),)
    assert channel.is_closed and not connection.is_closed
    await channel.reopen()
    with pytest.raises(aiormq.exceptions.ChannelPreconditionFailed) as err:
        await channel.declare_queue(work, arguments={"x-dead-letter-exchange": dlx, "x-max-length": 5})
    assert err.value.args == (
        f"PRECONDITION_FAILED - inequivalent arg 'x-max-length' for queue '{work}' in vhost '/': "
        "received '5' but current is '100'",
    )
    await channel.reopen()
    assert (await channel.declare_queue(dlq, passive=True)).declaration_result.message_count == 0

    await connection.close()
    assert connection.is_closed


async def test_aio_pika_session(broker: ClientTarget) -> None:
    await run_session(broker)


async def test_aio_pika_session_on_the_tests_loop() -> None:
    """The server on the test's own loop: ``rabbit.clock.advance()`` from the coroutine fires the TTL."""
    async with FakeRabbit() as rabbit:
        assert rabbit._loop is asyncio.get_running_loop()
        await run_session(ClientTarget("fake", rabbit.url, rabbit))
        assert [e.details["reason"] for e in rabbit.events.of_kind("dead-lettered")] == ["rejected", "expired"]
        assert rabbit.problems == []
