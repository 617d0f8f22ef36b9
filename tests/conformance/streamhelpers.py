"""Helpers for the stream conformance tests (test_streams.py, test_streams_log.py)."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import pika
import pika.exceptions
import pytest
from pika import spec
from pika.adapters.blocking_connection import BlockingChannel

from fakerabbit.broker.properties import RawProperties
from tests.conformance.conftest import Target, pump, settle
from tests.rawamqp import RawAMQP

STREAM = {"x-queue-type": "stream"}


def rs(q: str) -> str:
    return f"queue '{q}' in vhost '/'"


def declare_stream(broker: Target, ch: BlockingChannel, base: str = "s", **args: Any) -> str:
    q = broker.name(base)
    ch.queue_declare(q, durable=True, arguments={**STREAM, **args})
    return q


def publish_each(ch: BlockingChannel, q: str, bodies: list[bytes], props: Any = None) -> None:
    """Publish on a confirm channel: each message is confirmed before the next (a chunk of its own)."""
    for b in bodies:
        ch.basic_publish("", q, b, props)


def burst(broker: Target, q: str, messages: list[tuple[bytes, Any]]) -> None:
    """Publish without confirms on a fresh connection (one chunk on the fake; on RabbitMQ whatever the writer
    batches), then wait until they are all in (a consumer from ``first`` on the real broker would see them)."""
    conn = broker.connect()
    ch = conn.channel()
    for body, props in messages:
        ch.basic_publish("", q, body, props)
    ch.queue_declare(q, passive=True)  # a round trip: the publishes were handled
    conn.close()
    if not broker.is_fake:
        time.sleep(0.3)


def collect(
    broker: Target, q: str, args: dict[str, Any] | None, *, n: int = 100, prefetch: int = 100, wait: float = 0.5
) -> list[tuple[int, bytes]]:
    """Consume ``q`` on a new connection and return (x-stream-offset, body) of what arrives."""
    conn = broker.connect()
    ch = conn.channel()
    got: list[tuple[int, bytes]] = []
    ch.basic_qos(prefetch_count=prefetch)
    ch.basic_consume(q, lambda _c, m, p, b: got.append(((p.headers or {}).get("x-stream-offset"), b)), arguments=args)
    pump(conn, lambda: len(got) >= n, timeout=0.3 if broker.is_fake else 2.0)
    settle(conn, wait if not broker.is_fake else 0.1)
    conn.close()
    return got


def bodies_from(broker: Target, q: str, args: dict[str, Any] | None, **kw: Any) -> list[bytes]:
    return [b for _, b in collect(broker, q, args, **kw)]


def now(broker: Target) -> datetime:
    """The broker's current time (the virtual clock on the fake)."""
    if broker.fake is not None:
        return broker.fake.clock.now()  # type: ignore[no-any-return,union-attr]
    return datetime.now(UTC)


def connection_error(fn: Any) -> tuple[int, str]:
    with pytest.raises(pika.exceptions.ConnectionClosedByBroker) as exc:
        fn()
    return exc.value.reply_code, exc.value.reply_text


def channel_error(fn: Any) -> tuple[int, str]:
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as exc:
        fn()
    return exc.value.reply_code, exc.value.reply_text


def consume_error(broker: Target, q: str, args: dict[str, Any] | None = None, **kw: Any) -> tuple[str, int, str]:
    """Consume (prefetch 10 unless ``prefetch=``) and return how the broker refused: ("channel"|"connection",
    code, text); ("ok", 0, "") when it did not."""
    conn = broker.connect()
    ch = conn.channel()
    prefetch = kw.pop("prefetch", 10)
    try:
        if prefetch is not None:
            ch.basic_qos(prefetch_count=prefetch, global_qos=kw.pop("global_qos", False))
        ch.basic_consume(q, lambda *a: None, arguments=args, **kw)
        pump(conn, lambda: not conn.is_open, timeout=0.3 if broker.is_fake else 0.6)
        ch.queue_declare(q, passive=True)
    except pika.exceptions.ChannelClosedByBroker as exc:
        return ("channel", exc.reply_code, exc.reply_text)
    except (pika.exceptions.ConnectionClosedByBroker, pika.exceptions.StreamLostError) as exc:
        if isinstance(exc, pika.exceptions.ConnectionClosedByBroker):
            return ("connection", exc.reply_code, exc.reply_text)
        raise
    finally:
        if conn.is_open:
            conn.close()
    return ("ok", 0, "")


class StreamReader:
    """A raw connection (channel 1) that consumes: deliveries with their property block exactly as received."""

    def __init__(self, url: str) -> None:
        self.conn = RawAMQP.with_channel(url)

    def __enter__(self) -> StreamReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.conn.close()

    def _wait(self, name: str) -> Any:
        f = self.conn.wait(name)
        if f.name in ("Connection.Close", "Channel.Close"):
            raise RuntimeError(f"broker closed: {f.method.reply_code} {f.method.reply_text}")
        return f

    def qos(self, n: int) -> None:
        self.conn.send_method(1, spec.Basic.Qos(prefetch_count=n))
        self._wait("Basic.QosOk")

    def sync(self) -> None:
        """A round trip: every method sent before it has been handled (raises if the broker closed)."""
        self.qos(0)

    def confirm(self) -> None:
        self.conn.send_method(1, spec.Confirm.Select())
        self._wait("Confirm.SelectOk")

    def publish(self, exchange: str, routing_key: str, props: bytes, body: bytes) -> None:
        self.conn.publish(1, exchange, routing_key, body, props)

    def publish_confirmed(self, q: str, props: bytes, body: bytes) -> None:
        self.publish("", q, props, body)
        self._wait("Basic.Ack")

    def consume(self, q: str, args: dict[str, Any]) -> None:
        self.conn.send_method(1, spec.Basic.Consume(queue=q, consumer_tag="c", arguments=args))
        self._wait("Basic.ConsumeOk")

    def delivery(self) -> tuple[Any, RawProperties, bytes]:
        method = self._wait("Basic.Deliver").method
        head, body = self.conn._content(1, 5.0)
        return method, RawProperties(head.payload[12:]), body

    def delete(self, q: str) -> None:
        self.conn.send_method(1, spec.Queue.Delete(queue=q))
        self._wait("Queue.DeleteOk")
