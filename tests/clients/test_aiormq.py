"""aiormq (the low-level asyncio client under aio-pika): a whole session, the same on fakerabbit (in its thread and
on the test's own loop) and on RabbitMQ."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import aiormq
import aiormq.exceptions
import pytest
from aiormq.abc import DeliveredMessage
from pamqp import commands
from pamqp.commands import Basic

from fakerabbit import FakeRabbit
from tests.clients.conftest import TTL_MS, ClientTarget, not_found

HEADERS: dict[str, Any] = {
    "kind": "order",
    "region": "eu",
    "amount": Decimal("-0.05"),
    "ratio": 0.75,
    "at": datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC),
    "count": 3,
    "huge": -(2**50),
    "ok": False,
    "tags": ["a", 1, {"b": None}],
}
TIMEOUT = 5.0


async def get(channel: aiormq.abc.AbstractChannel, queue: str, no_ack: bool = False) -> DeliveredMessage | None:
    message = await channel.basic_get(queue, no_ack=no_ack)
    return message if isinstance(message.delivery, Basic.GetOk) else None


async def run_session(broker: ClientTarget) -> None:
    hdrs, work, vip = broker.exchange("hdrs"), broker.name("work"), broker.name("vip")
    delay, dlq = broker.name("delay"), broker.name("dlq")
    connection = await aiormq.connect(broker.url, client_properties={"connection_name": "clients-aiormq"})
    assert connection.server_properties["product"] == "RabbitMQ"
    assert connection.server_capabilities["publisher_confirms"] is True
    channel = await connection.channel(publisher_confirms=True)

    # topology: a headers exchange whose bindings match on arguments; a TTL queue dead-lettering by routing key
    assert isinstance(await channel.exchange_declare(hdrs, exchange_type="headers"), commands.Exchange.DeclareOk)
    ok = await channel.queue_declare(work, arguments={"x-max-priority": 5})
    assert (ok.queue, ok.message_count, ok.consumer_count) == (work, 0, 0)
    await channel.queue_declare(vip)
    await channel.queue_declare(dlq)
    dl = {"x-dead-letter-exchange": "", "x-dead-letter-routing-key": dlq, "x-message-ttl": TTL_MS}
    await channel.queue_declare(delay, arguments=dl)
    await channel.queue_bind(work, hdrs, arguments={"x-match": "all", "kind": "order", "region": "eu"})
    await channel.queue_bind(vip, hdrs, arguments={"x-match": "any", "vip": True, "region": "apac"})

    # publish with confirms; the properties come back as sent, the header types preserved
    props = Basic.Properties(
        content_type="text/plain",
        headers=HEADERS,
        delivery_mode=2,
        priority=2,
        correlation_id="c-9",
        message_id="m-9",
        timestamp=datetime(2030, 1, 2, tzinfo=UTC),
        message_type="t",
        app_id="aiormq-app",
    )
    assert isinstance(await channel.basic_publish(b"order", exchange=hdrs, properties=props), Basic.Ack)
    vip_props = Basic.Properties(headers={"vip": True, "region": "us"})
    assert isinstance(await channel.basic_publish(b"vip", exchange=hdrs, properties=vip_props), Basic.Ack)
    # a headers exchange routes nothing for {"region": "us"} alone: mandatory -> basic.return, then the ack
    returned: list[DeliveredMessage] = []
    channel.on_return_callbacks.add(returned.append)
    nobody = Basic.Properties(headers={"region": "us"})
    with pytest.raises(aiormq.exceptions.PublishError) as publish_error:
        await channel.basic_publish(b"nobody", exchange=hdrs, properties=nobody, mandatory=True)
    assert isinstance(publish_error.value.message.delivery, Basic.Return)
    assert (publish_error.value.message.delivery.reply_code, publish_error.value.message.delivery.reply_text) == (
        312,
        "NO_ROUTE",
    )
    message = await get(channel, work)
    assert message is not None
    assert (message.body, message.delivery.exchange, message.delivery.routing_key, message.delivery.redelivered) == (
        b"order",
        hdrs,
        "",
        False,
    )
    assert message.header.properties == props
    for key, value in HEADERS.items():
        assert type(message.header.properties.headers[key]) is type(value), key
    # nack with requeue -> redelivered; then a plain ack
    await channel.basic_nack(message.delivery.delivery_tag, requeue=True)
    message = await get(channel, work)
    assert message is not None and (message.body, message.delivery.redelivered) == (b"order", True)
    await channel.basic_ack(message.delivery.delivery_tag)
    assert await get(channel, work) is None
    message = await get(channel, vip, no_ack=True)
    assert message is not None and (message.body, message.header.properties.headers) == (b"vip", vip_props.headers)

    # consume with manual ack and prefetch 1; reject with requeue comes back redelivered
    for i in range(3):
        await channel.basic_publish(str(i).encode(), exchange=hdrs, properties=Basic.Properties(headers=HEADERS))
    await channel.basic_qos(prefetch_count=1)
    deliveries: asyncio.Queue[DeliveredMessage] = asyncio.Queue()

    async def on_message(message: DeliveredMessage) -> None:
        await deliveries.put(message)

    consume_ok = await channel.basic_consume(work, on_message, no_ack=False, consumer_tag="aiormq-1")
    assert consume_ok.consumer_tag == "aiormq-1"
    seen = []
    for step in range(4):
        message = await asyncio.wait_for(deliveries.get(), TIMEOUT)
        assert deliveries.empty()  # prefetch 1
        seen.append((message.body, message.delivery.redelivered, message.delivery.consumer_tag))
        if step == 0:
            await channel.basic_reject(message.delivery.delivery_tag, requeue=True)
        else:
            await channel.basic_ack(message.delivery.delivery_tag)
    assert seen == [
        (b"0", False, "aiormq-1"),
        (b"0", True, "aiormq-1"),
        (b"1", False, "aiormq-1"),
        (b"2", False, "aiormq-1"),
    ]
    assert isinstance(await channel.basic_cancel("aiormq-1"), Basic.CancelOk)

    # TTL: the queue's x-message-ttl expires the message into the DLQ (dead-letter routing key)
    await channel.basic_publish(b"expire me", routing_key=delay, properties=Basic.Properties(headers=HEADERS))
    await broker.expire_async()
    message = await broker.eventually_async(lambda: get(channel, dlq), "the expired message in the DLQ")
    headers = message.header.properties.headers
    (death,) = headers["x-death"]
    assert (message.body, message.delivery.routing_key) == (b"expire me", dlq)
    assert {k: v for k, v in death.items() if k != "time"} == {
        "count": 1,
        "reason": "expired",
        "queue": delay,
        "exchange": "",
        "routing-keys": [delay],
    }
    assert {k: v for k, v in headers.items() if not k.startswith("x-")} == HEADERS
    for key, value in HEADERS.items():
        assert type(headers[key]) is type(value), key
    await channel.basic_ack(message.delivery.delivery_tag)

    # channel errors: aiormq's exception types, RabbitMQ's texts; each closes the channel only
    missing = broker.name("missing")
    with pytest.raises(aiormq.exceptions.ChannelNotFoundEntity) as err:
        await channel.queue_declare(missing, passive=True)
    assert err.value.args == (not_found(missing),)
    channel = await connection.channel()
    with pytest.raises(aiormq.exceptions.ChannelPreconditionFailed) as err:
        await channel.basic_publish(b"x", routing_key=work, properties=Basic.Properties(user_id="mallory"))
    assert err.value.args == (
        "PRECONDITION_FAILED - user_id property set to 'mallory' but authenticated user was 'guest'",
    )
    channel = await connection.channel()
    await channel.basic_publish(b"keep", routing_key=work)
    with pytest.raises(aiormq.exceptions.ChannelPreconditionFailed) as err:
        await channel.queue_delete(work, if_empty=True)
    assert err.value.args == (f"PRECONDITION_FAILED - queue '{work}' in vhost '/' not empty",)
    channel = await connection.channel()
    missing_x = broker.exchange("missing-x")
    with pytest.raises(aiormq.exceptions.ChannelNotFoundEntity) as err:
        await channel.exchange_declare(missing_x, passive=True)
    assert err.value.args == (f"NOT_FOUND - no exchange '{missing_x}' in vhost '/'",)

    # transactions: a rolled-back publish never arrives
    channel = await connection.channel(publisher_confirms=False)
    await channel.tx_select()
    await channel.basic_publish(b"rolled back", routing_key=dlq)
    await channel.tx_rollback()
    await channel.basic_publish(b"committed", routing_key=dlq)
    await channel.tx_commit()
    message = await get(channel, dlq, no_ack=True)
    assert message is not None and message.body == b"committed"
    assert await get(channel, dlq) is None

    await connection.close()
    assert connection.is_closed


async def test_aiormq_session(broker: ClientTarget) -> None:
    await run_session(broker)


async def test_aiormq_session_on_the_tests_loop() -> None:
    """The server on the test's own loop: ``rabbit.clock.advance()`` from the coroutine fires the TTL."""
    async with FakeRabbit() as rabbit:
        await run_session(ClientTarget("fake", rabbit.url, rabbit))
        (expired,) = rabbit.events.of_kind("dead-lettered")
        assert expired.details["reason"] == "expired"
        assert rabbit.problems == []
