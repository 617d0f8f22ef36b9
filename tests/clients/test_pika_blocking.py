"""pika's BlockingConnection: a whole application session, the same on fakerabbit and on RabbitMQ."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pika
import pika.exceptions
import pytest

from tests.clients.conftest import TTL_MS, ClientTarget, not_found

# Every type pika's table encoder knows (it has no float): I, l, S, x, t, D, T, F, A, V.
HEADERS: dict[str, Any] = {
    "int": 7,
    "negative": -42,
    "big": 2**40,
    "text": "héllo",
    "raw": b"\x00\xff",
    "flag": True,
    "price": Decimal("12.34"),
    "when": datetime(2024, 5, 1, 12, 30, 15, tzinfo=UTC),
    "nested": {"k": [1, "two", {"deep": False}]},
    "list": [1, "a", b"b"],
    "nothing": None,
}


def props(**extra: Any) -> pika.BasicProperties:
    return pika.BasicProperties(
        content_type="application/json",
        content_encoding="utf-8",
        headers=dict(HEADERS),
        delivery_mode=pika.DeliveryMode.Persistent,
        priority=5,
        correlation_id="corr-1",
        reply_to="replies",
        message_id="msg-1",
        timestamp=1714566615,
        type="order.created",
        user_id="guest",
        app_id="shop",
        **extra,
    )


def assert_props(got: pika.BasicProperties, *, headers: dict[str, Any] | None = None) -> None:
    want = props()
    for name in (
        "content_type",
        "content_encoding",
        "delivery_mode",
        "priority",
        "correlation_id",
        "reply_to",
        "message_id",
        "timestamp",
        "type",
        "user_id",
        "app_id",
    ):
        assert getattr(got, name) == getattr(want, name), name
    assert got.headers == (HEADERS if headers is None else headers)
    # wire types survive: "I" decodes to int, "l" to pika's long, "t" to bool, "D" to Decimal, "T" to datetime
    assert type(got.headers["int"]) is int and type(got.headers["big"]) is pika.compat.long
    assert type(got.headers["flag"]) is bool
    assert isinstance(got.headers["price"], Decimal) and isinstance(got.headers["when"], datetime)


def pump(conn: pika.BlockingConnection, until: Any, timeout: float = 5.0) -> None:
    """Process I/O until ``until()`` (waiting for frames, never for broker time)."""
    deadline = time.monotonic() + timeout
    while not until():
        assert time.monotonic() < deadline, "timed out waiting for deliveries"
        conn.process_data_events(time_limit=0.02)


def test_pika_blocking_session(broker: ClientTarget) -> None:
    events, unrouted, dlx = broker.exchange("events"), broker.exchange("unrouted"), broker.exchange("dlx")
    work, lost, dead = broker.name("work"), broker.name("lost"), broker.name("dead")
    params = pika.URLParameters(broker.url)
    params.client_properties = {"connection_name": "clients-pika-blocking"}
    conn = pika.BlockingConnection(params)
    ch = conn.channel()
    ch.confirm_delivery()

    # topology: a topic exchange with an alternate exchange, a queue with a DLX, bindings with arguments
    ch.exchange_declare(unrouted, "fanout")
    ch.exchange_declare(events, "topic", arguments={"alternate-exchange": unrouted})
    ch.exchange_declare(dlx, "direct")
    ok = ch.queue_declare(work, arguments={"x-dead-letter-exchange": dlx, "x-max-priority": 10, "x-max-length": 100})
    assert (ok.method.queue, ok.method.message_count, ok.method.consumer_count) == (work, 0, 0)
    ch.queue_declare(lost)
    ch.queue_declare(dead)
    ch.queue_bind(work, events, "order.*", arguments={"x-note": "ignored by topic exchanges"})
    ch.queue_bind(lost, unrouted)
    ch.queue_bind(dead, dlx, "order.created")  # no x-dead-letter-routing-key: the original key is kept

    # publish with confirms: routed, alternate-exchanged, and unroutable-mandatory (returned, then acked)
    ch.basic_publish(events, "order.created", b'{"id": 1}', props())
    ch.basic_publish(events, "invoice.sent", b"to the AE", pika.BasicProperties(headers={"n": 1}))
    with pytest.raises(pika.exceptions.UnroutableError) as returned:
        ch.basic_publish("", broker.name("nobody-here"), b"lost", mandatory=True)
    (ret,) = returned.value.messages
    assert (ret.method.reply_code, ret.method.reply_text, ret.body) == (312, "NO_ROUTE", b"lost")

    # basic.get, nack with requeue -> redelivered; properties and headers come back with their types
    method, got, body = ch.basic_get(work)
    assert (body, method.exchange, method.routing_key, method.redelivered, method.message_count) == (
        b'{"id": 1}',
        events,
        "order.created",
        False,
        0,
    )
    assert_props(got)
    ch.basic_nack(method.delivery_tag, requeue=True)
    method, got, body = ch.basic_get(work)
    assert (body, method.redelivered) == (b'{"id": 1}', True)
    assert_props(got)
    # reject without requeue -> dead-lettered (reason rejected) to the DLX with the original routing key
    ch.basic_reject(method.delivery_tag, requeue=False)
    method, got, body = broker.eventually(lambda: get(ch, dead), "the rejected message in the DLQ")
    assert (body, method.exchange, method.routing_key, method.redelivered) == (
        b'{"id": 1}',
        dlx,
        "order.created",
        _at_least_43(broker),  # 4.3: the reject is a failed delivery the dead letter carries (redelivered)
    )
    (death,) = got.headers["x-death"]
    assert isinstance(death["time"], datetime) and isinstance(death["count"], int)
    assert {k: v for k, v in death.items() if k != "time"} == {
        "count": 1,
        "reason": "rejected",
        "queue": work,
        "exchange": events,
        "routing-keys": ["order.created"],
    }
    assert (got.headers["x-first-death-reason"], got.headers["x-first-death-queue"]) == ("rejected", work)
    # dead-lettering rewrote the headers table: every original value kept its type
    assert_props(got, headers={**HEADERS, **{k: v for k, v in got.headers.items() if k.startswith("x-")}})
    ch.basic_ack(method.delivery_tag)

    # the alternate exchange caught the unroutable publish
    method, got, body = ch.basic_get(lost, auto_ack=True)
    assert (body, method.exchange, method.routing_key, got.headers) == (b"to the AE", events, "invoice.sent", {"n": 1})

    # per-message TTL: expires into the DLX, the expiration property moves into x-death
    ch.basic_publish(events, "order.created", b"too late", pika.BasicProperties(expiration=str(TTL_MS)))
    broker.expire()
    method, got, body = broker.eventually(lambda: get(ch, dead), "the expired message in the DLQ")
    (death,) = got.headers["x-death"]
    assert (body, got.expiration) == (b"too late", None)
    assert {k: v for k, v in death.items() if k != "time"} == {
        "count": 1,
        "reason": "expired",
        "queue": work,
        "exchange": events,
        "routing-keys": ["order.created"],
        "original-expiration": str(TTL_MS),
    }
    ch.basic_ack(method.delivery_tag)

    # consume with manual ack and prefetch 2: five messages, two in flight until acked
    for i in range(5):
        ch.basic_publish(events, "order.paid", f"m{i}".encode(), pika.BasicProperties(priority=1))
    ch.basic_qos(prefetch_count=2)
    received: list[tuple[int, bytes, bool]] = []
    tag = ch.basic_consume(
        work, lambda _ch, m, _p, b: received.append((m.delivery_tag, b, m.redelivered)), consumer_tag="ctag-1"
    )
    assert tag == "ctag-1"
    pump(conn, lambda: len(received) == 2)
    assert ch.queue_declare(work, passive=True).method.message_count == 3  # prefetch held the other three back
    conn.process_data_events(time_limit=0)
    assert [b for _, b, _ in received] == [b"m0", b"m1"]
    ch.basic_ack(received[1][0], multiple=True)
    pump(conn, lambda: len(received) == 4)
    ch.basic_nack(received[3][0], requeue=True)  # m3 back to its place at the head: redelivered at once
    pump(conn, lambda: len(received) == 5)
    ch.basic_ack(received[2][0])  # (acking before the redelivery arrives races on RabbitMQ: m4 may come first)
    pump(conn, lambda: len(received) == 6)
    assert [(b, r) for _, b, r in received] == [
        (b"m0", False),
        (b"m1", False),
        (b"m2", False),
        (b"m3", False),
        (b"m3", True),
        (b"m4", False),
    ]
    ch.basic_ack(received[5][0])
    ch.basic_ack(received[4][0])
    ch.basic_cancel(tag)
    assert ch.queue_declare(work, passive=True).method.message_count == 0

    # a channel error: passive declare of a missing queue closes the channel with 404; the connection lives on
    missing = broker.name("missing")
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as err:
        ch.queue_declare(missing, passive=True)
    assert (err.value.reply_code, err.value.reply_text) == (404, not_found(missing))
    assert ch.is_closed and conn.is_open
    ch2 = conn.channel()
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as err:
        ch2.exchange_declare(events, "direct")  # redeclared with another type
    assert (err.value.reply_code, err.value.reply_text) == (
        406,
        f"PRECONDITION_FAILED - inequivalent arg 'type' for exchange '{events}' in vhost '/': "
        "received 'direct' but current is 'topic'",
    )

    conn.close()
    assert conn.is_closed


def get(ch: Any, queue: str) -> tuple[Any, pika.BasicProperties, bytes] | None:
    method, got, body = ch.basic_get(queue)
    return None if method is None else (method, got, body)


def _at_least_43(broker: Any) -> bool:
    """The version the target behaves as (the client harness's real side knows only its URL)."""
    if broker.is_fake:
        return bool(broker.at_least("4.3"))
    from tests.realbrokers import server_version

    return tuple(int(x) for x in server_version(broker.url).split(".")[:2]) >= (4, 3)
