"""py-amqp (``amqp``, kombu's transport): a whole session, the same on fakerabbit and on RabbitMQ."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any

import amqp
import amqp.exceptions
import pytest

from tests.clients.conftest import TTL_MS, ClientTarget, not_found

HEADERS: dict[str, Any] = {
    "int": 12,
    "max32": 2**31 - 1,  # py-amqp writes ints beyond 32 bits as "L": see test_py_amqp_64_bit_int_header
    "min32": -(2**31) + 1,
    "float": 0.1,  # py-amqp encodes a double ("d"): exact
    "dec": Decimal("3.14159"),
    "when": datetime(2025, 2, 3, 4, 5, 6),
    "str": "ünïcode",
    "bool": True,
    "list": [1, "two", 3.5],
    "table": {"inner": "yes"},
    "none": None,
}
PROPS: dict[str, Any] = {
    "content_type": "text/plain",
    "content_encoding": "utf-8",
    "delivery_mode": 2,
    "priority": 1,
    "correlation_id": "py-corr",
    "reply_to": "py-replies",
    "message_id": "py-1",
    "timestamp": 1738555506,  # py-amqp: an int property (header "T" values are datetimes)
    "type": "greeting",
    "user_id": "guest",
    "app_id": "py-amqp-app",
}


def connect(broker: ClientTarget) -> amqp.Connection:
    conn = amqp.Connection(
        host=f"{broker.host}:{broker.port}",
        userid=broker.userid,
        password=broker.password,
        virtual_host=broker.vhost,
        client_properties={"connection_name": "clients-py-amqp"},
        confirm_publish=True,
        connect_timeout=5,
    )
    conn.connect()
    return conn


def test_py_amqp_session(broker: ClientTarget) -> None:
    direct, work, retry = broker.exchange("direct"), broker.name("work"), broker.name("retry")
    conn = connect(broker)
    assert conn.server_properties["product"] == "RabbitMQ"
    ch = conn.channel()
    returned: list[tuple[int, str, bytes]] = []
    ch.events["basic_return"].add(lambda exc, exchange, key, msg: returned.append((exc.reply_code, key, msg.body)))

    # topology: work dead-letters into retry, which expires back into work (x-message-ttl): a retry loop
    ch.exchange_declare(direct, "direct", durable=False, auto_delete=False, arguments={"x-custom": "arg"})
    ok = ch.queue_declare(
        work,
        durable=False,
        auto_delete=False,
        arguments={"x-dead-letter-exchange": "", "x-dead-letter-routing-key": retry, "x-max-length": 50},
    )
    assert (ok.queue, ok.message_count, ok.consumer_count) == (work, 0, 0)
    ch.queue_declare(
        retry,
        durable=False,
        auto_delete=False,
        arguments={"x-message-ttl": TTL_MS, "x-dead-letter-exchange": direct, "x-dead-letter-routing-key": "work"},
    )
    ch.queue_bind(work, direct, "work", arguments={"x-bind": 1})

    # publish with confirms (py-amqp waits for each ack); mandatory and unroutable: returned, then acked
    ch.basic_publish(amqp.Message(b"hello", application_headers=dict(HEADERS), **PROPS), direct, "work")
    ch.basic_publish(amqp.Message(b"lost"), direct, "nowhere", mandatory=True)
    conn.drain_events(timeout=0) if not returned else None
    assert returned == [(312, "nowhere", b"lost")]

    # basic.get; reject with requeue -> redelivered
    msg = ch.basic_get(work)
    assert msg is not None and msg.body == "hello"  # py-amqp decodes the body by its content_encoding
    assert {k: msg.delivery_info[k] for k in ("exchange", "routing_key", "redelivered", "message_count")} == {
        "exchange": direct,
        "routing_key": "work",
        "redelivered": False,
        "message_count": 0,
    }
    assert {k: msg.properties[k] for k in PROPS} == PROPS
    assert msg.headers == HEADERS
    for key, value in HEADERS.items():
        assert type(msg.headers[key]) is type(value), key
    ch.basic_reject(msg.delivery_tag, requeue=True)
    msg = ch.basic_get(work)
    assert (msg.body, msg.delivery_info["redelivered"]) == ("hello", True)

    # the retry loop: reject without requeue (py-amqp has no basic_nack) -> retry queue -> TTL -> back to work,
    # with x-death counting the rounds
    for round_ in (1, 2):
        ch.basic_reject(msg.delivery_tag, requeue=False)
        broker.expire()
        msg = broker.eventually(lambda: ch.basic_get(work), f"the message back in work after round {round_}")
        deaths = {(d["queue"], d["reason"]): d["count"] for d in msg.headers["x-death"]}
        assert deaths == {(work, "rejected"): round_, (retry, "expired"): round_}
        assert (msg.delivery_info["exchange"], msg.delivery_info["routing_key"]) == (direct, "work")
    assert msg.headers["x-first-death-reason"] == "rejected" and msg.headers["x-first-death-queue"] == work
    assert {k: v for k, v in msg.headers.items() if not k.startswith("x-")} == HEADERS
    for key, value in HEADERS.items():
        assert type(msg.headers[key]) is type(value), key
    ch.basic_ack(msg.delivery_tag)

    # consume with prefetch 2 and manual ack
    for i in range(3):
        ch.basic_publish(amqp.Message(f"c{i}".encode(), priority=i), "", work)
    ch.basic_qos(prefetch_size=0, prefetch_count=2, a_global=False)
    got: list[amqp.Message] = []
    tag = ch.basic_consume(work, consumer_tag="py-1", callback=got.append)
    assert tag == "py-1"
    while len(got) < 2:
        conn.drain_events(timeout=5)
    assert ch.queue_declare(work, passive=True).message_count == 1
    assert [(m.body, m.delivery_info["consumer_tag"]) for m in got] == [(b"c0", "py-1"), (b"c1", "py-1")]
    ch.basic_ack(got[1].delivery_tag, multiple=True)
    conn.drain_events(timeout=5)
    assert [m.body for m in got] == [b"c0", b"c1", b"c2"]
    ch.basic_ack(got[2].delivery_tag)
    ch.basic_cancel(tag)

    # channel errors: py-amqp's exception classes carry RabbitMQ's code, text and the failing method
    missing = broker.name("missing")
    with pytest.raises(amqp.exceptions.NotFound) as err:
        ch.queue_declare(missing, passive=True)
    assert (err.value.reply_code, err.value.reply_text, err.value.method_sig) == (404, not_found(missing), (50, 10))
    ch = conn.channel()
    with pytest.raises(amqp.exceptions.NotFound) as err:
        ch.queue_bind(missing, direct, "x")
    assert (err.value.reply_code, err.value.reply_text, err.value.method_sig) == (404, not_found(missing), (50, 20))
    ch = conn.channel()
    with pytest.raises(amqp.exceptions.PreconditionFailed) as err:
        ch.queue_declare(work, durable=True)
    assert (err.value.reply_code, err.value.reply_text) == (
        406,
        f"PRECONDITION_FAILED - inequivalent arg 'durable' for queue '{work}' in vhost '/': received 'true' "
        "but current is 'false'",
    )

    ch = conn.channel()
    ch.queue_delete(work)
    ch.close()
    conn.close()
    assert not conn.connected


def test_py_amqp_64_bit_int_header(broker: ClientTarget) -> None:
    """py-amqp (so kombu and Celery) writes every int beyond 32 bits as field type ``L``. RabbitMQ takes it:
    delivers the client's bytes unchanged, matches it in headers-exchange bindings, and re-encodes it as a
    signed ``l`` when dead-lettering rewrites the headers (checked against 3.10.8)."""
    hx, matched, work, dlq = broker.exchange("hx"), broker.name("matched"), broker.name("work"), broker.name("dlq")
    conn = connect(broker)
    ch = conn.channel()
    ch.exchange_declare(hx, "headers", auto_delete=False)
    ch.queue_declare(matched, auto_delete=False)
    ch.queue_declare(dlq, auto_delete=False)
    ch.queue_declare(
        work, auto_delete=False, arguments={"x-dead-letter-exchange": "", "x-dead-letter-routing-key": dlq}
    )
    ch.queue_bind(matched, hx, arguments={"x-match": "all", "sent_at_ms": 1_700_000_000_000})
    headers = {"sent_at_ms": 1_700_000_000_000, "offset": -(2**40)}
    ch.basic_publish(amqp.Message(b"big", application_headers=headers), "", work)
    ch.basic_publish(amqp.Message(b"routed", application_headers=headers), hx, "")
    msg = ch.basic_get(matched, no_ack=True)
    assert msg is not None and (msg.body, msg.headers) == (b"routed", headers)
    msg = ch.basic_get(work)
    assert msg is not None and msg.headers == headers
    ch.basic_reject(msg.delivery_tag, requeue=False)
    msg = broker.eventually(lambda: ch.basic_get(dlq, no_ack=True), "the rejected message in the DLQ")
    assert {k: v for k, v in msg.headers.items() if not k.startswith("x-")} == headers
    conn.close()
