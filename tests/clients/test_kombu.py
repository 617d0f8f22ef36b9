"""kombu over py-amqp: ``SimpleQueue``, ``Producer``/``Consumer`` with an exchange, and a Celery-free retry loop
through a TTL queue, the same on fakerabbit and on RabbitMQ."""

from __future__ import annotations

import socket
import uuid
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import amqp.exceptions
import kombu
import pytest
from kombu import Consumer, Exchange, Producer, Queue

from tests.clients.conftest import TTL_MS, ClientTarget, not_found

# kombu's json serializer round-trips these through its own type markers.
PAYLOAD: dict[str, Any] = {
    "id": 7,
    "price": Decimal("9.99"),
    "at": datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC),
    "ref": uuid.UUID("12345678-1234-5678-1234-567812345678"),
    "items": ["a", {"n": 1.5}],
    "ok": None,
}
TIMEOUT = 5.0


def connect(broker: ClientTarget) -> kombu.Connection:
    conn = kombu.Connection(broker.url, transport_options={"confirm_publish": True}, connect_timeout=5)
    conn.connect()
    return conn


def drain_until(conn: kombu.Connection, until: Any) -> None:
    """Read frames until ``until()`` (the broker's pushes, never its clock)."""
    while not until():
        try:
            conn.drain_events(timeout=TIMEOUT)
        except TimeoutError:  # socket.timeout
            raise AssertionError("nothing arrived") from None


def test_kombu_simple_queue(broker: ClientTarget) -> None:
    name = broker.name("simple")
    with connect(broker) as conn:
        q = conn.SimpleQueue(name, serializer="json", queue_opts={"durable": False}, queue_args={"x-max-length": 10})
        q.put(PAYLOAD, headers={"source": "kombu"}, priority=3)
        q.put({"compressed": "x" * 1000}, compression="zlib")
        q.put(b"\x00raw", serializer="pickle")
        assert q.qsize() == 3
        q.consumer.qos(prefetch_count=1)  # one in flight: a requeued message comes back next

        message = q.get(timeout=TIMEOUT)
        assert message.payload == PAYLOAD
        assert (message.content_type, message.content_encoding) == ("application/json", "utf-8")
        assert message.headers == {"source": "kombu"}
        assert (message.properties["priority"], message.delivery_info["redelivered"]) == (3, False)
        message.requeue()  # basic.reject(requeue=True)
        message = q.get(timeout=TIMEOUT)
        assert (message.payload, message.delivery_info["redelivered"]) == (PAYLOAD, True)
        message.ack()

        message = q.get(timeout=TIMEOUT)
        assert message.payload == {"compressed": "x" * 1000}
        assert message.headers["compression"] == "application/x-gzip"
        message.ack()
        q.consumer.accept = {"application/x-python-serialize"}
        message = q.get(timeout=TIMEOUT)
        assert (message.content_type, message.payload) == ("application/x-python-serialize", b"\x00raw")
        message.ack()
        with pytest.raises(q.Empty):
            q.get(block=False)
        q.close()


def test_kombu_producer_consumer_and_retry_loop(broker: ClientTarget) -> None:
    """A topic exchange, a work queue dead-lettering into a TTL retry queue that routes back: a consumer
    rejects a failing message twice and parks it on the third attempt, counting attempts from x-death."""
    tasks = Exchange(broker.exchange("tasks"), type="topic", durable=False)
    retry_x = Exchange(broker.exchange("retry"), type="fanout", durable=False)
    work = Queue(
        broker.name("work"),
        tasks,
        routing_key="task.#",
        durable=False,
        queue_arguments={"x-dead-letter-exchange": retry_x.name},  # keeps the routing key: back to work later
        binding_arguments={"x-note": "kombu"},
    )
    retry = Queue(
        broker.name("retry-q"),
        retry_x,
        durable=False,
        queue_arguments={"x-message-ttl": TTL_MS, "x-dead-letter-exchange": tasks.name},
    )
    parked = Queue(broker.name("parked"), tasks, routing_key="parked", durable=False)

    with connect(broker) as conn:
        producer = Producer(conn, exchange=tasks, serializer="json")
        for q in (work, retry, parked):
            q(conn.default_channel).declare()
        producer.publish({"task": "ok", **PAYLOAD}, routing_key="task.ok", headers={"attempt": 0}, declare=[work])
        producer.publish({"task": "flaky"}, routing_key="task.flaky", correlation_id="flaky-1", priority=2)

        handled: list[tuple[str, int, bool]] = []

        def on_message(body: dict[str, Any], message: kombu.Message) -> None:
            attempts = sum(d["count"] for d in message.headers.get("x-death", []) if d["reason"] == "rejected")
            handled.append((body["task"], attempts, message.delivery_info["redelivered"]))
            if body["task"] == "ok":
                assert body == {"task": "ok", **PAYLOAD}
                message.ack()
            elif attempts < 2:
                message.reject()  # -> retry queue -> TTL -> back to work
            else:
                producer.publish(body, routing_key="parked", headers={"attempts": attempts + 1})
                message.ack()

        with Consumer(conn, queues=[work], callbacks=[on_message], accept=["json"], prefetch_count=2) as consumer:
            assert consumer.queues[0].name == work.name
            drain_until(conn, lambda: len(handled) == 2)
            for round_ in (1, 2):
                broker.expire()  # the rejected message waits out the retry queue's TTL
                drain_until(conn, lambda round_=round_: len(handled) == 2 + round_)
        assert handled == [("ok", 0, False), ("flaky", 0, False), ("flaky", 1, False), ("flaky", 2, False)]

        parked_q = conn.SimpleQueue(parked, no_ack=True)
        message = parked_q.get(timeout=TIMEOUT)
        assert (message.payload, message.headers) == ({"task": "flaky"}, {"attempts": 3})
        parked_q.close()

        # a channel error: kombu raises py-amqp's exception, one of the connection's channel_errors
        missing = broker.name("missing")
        channel = conn.channel()
        with pytest.raises(amqp.exceptions.NotFound) as err:
            Queue(missing, channel=channel).queue_declare(passive=True)
        assert isinstance(err.value, conn.channel_errors)
        assert (err.value.reply_code, err.value.reply_text) == (404, not_found(missing))
        # the connection survives; a new channel works
        assert Queue(work.name, channel=conn.channel()).queue_declare(passive=True).message_count == 0
    assert not conn.connected


def test_kombu_publish_retry_policy_reaches_broker(broker: ClientTarget) -> None:
    """``Producer.publish(retry=True)`` with ``ensure_connection``: a plain round trip through kombu's retry
    machinery, and its connection errors (``conn.connection_errors``) include socket errors."""
    name = broker.name("ensure")
    with connect(broker) as conn:
        assert socket.error in conn.connection_errors or OSError in conn.connection_errors
        queue = Queue(name, durable=False)
        producer = conn.Producer(serializer="json")
        publish = conn.ensure(producer, producer.publish, max_retries=3)
        publish({"n": 1}, routing_key=name, declare=[queue], retry=True, retry_policy={"max_retries": 2})
        with conn.SimpleQueue(queue, no_ack=True) as q:
            assert q.get(timeout=TIMEOUT).payload == {"n": 1}
