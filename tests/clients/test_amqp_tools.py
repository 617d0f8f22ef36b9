"""Debian's ``amqp-tools`` (rabbitmq-c), the same on fakerabbit and on RabbitMQ. Skipped when the binaries are not
installed (``apt-get install amqp-tools``).

``tests/conformance/test_clients_cli.py`` covers the basics (declare, publish, get, line-buffered publish, consume
with a count, delete, that errors are reported). This session adds what a test suite driving the CLI relies on:
the properties and headers ``amqp-publish`` sets as another client sees them, exit statuses and RabbitMQ's exact
error texts on stderr, a dead-lettering round trip through a TTL queue, and the count ``amqp-delete-queue`` prints.
"""

from __future__ import annotations

import shutil
import subprocess

import pika
import pytest

from tests.clients.conftest import TTL_MS, ClientTarget, not_found

TOOLS = ("amqp-declare-queue", "amqp-publish", "amqp-get", "amqp-consume", "amqp-delete-queue")
pytestmark = pytest.mark.skipif(
    any(shutil.which(t) is None for t in TOOLS), reason="amqp-tools is not installed (apt-get install amqp-tools)"
)


def tool(broker: ClientTarget, name: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([name, "-u", broker.url, *args], capture_output=True, text=True, timeout=10)


def test_amqp_tools_session(broker: ClientTarget) -> None:
    q, ttl, dlq, missing = broker.name("q"), broker.name("ttl"), broker.name("dlq"), broker.name("missing")
    declared = tool(broker, "amqp-declare-queue", "-q", q)
    assert (declared.returncode, declared.stdout, declared.stderr) == (0, f"{q}\n", "")

    # amqp-publish's properties and headers (header values are always strings), as pika sees them
    published = tool(
        broker,
        "amqp-publish",
        "-r",
        q,
        "-b",
        "hello",
        "-C",
        "text/plain",
        "-E",
        "utf-8",
        "-t",
        "replies",
        "-p",
        "-H",
        "trace: abc",
        "-H",
        "n: 1",
    )
    assert (published.returncode, published.stderr) == (0, "")
    conn = pika.BlockingConnection(pika.URLParameters(broker.url))
    ch = conn.channel()
    method, props, body = ch.basic_get(q, auto_ack=True)
    assert (body, method.exchange, method.routing_key) == (b"hello", "", q)
    assert (props.content_type, props.content_encoding, props.reply_to, props.delivery_mode, props.headers) == (
        "text/plain",
        "utf-8",
        "replies",
        2,
        {"trace": "abc", "n": "1"},
    )
    empty = tool(broker, "amqp-get", "-q", q)
    assert (empty.returncode, empty.stdout, empty.stderr) == (2, "", "")  # 2: the queue is empty

    # a TTL queue (declared with arguments through pika) dead-letters what amqp-publish sent; amqp-get reads it
    ch.queue_declare(dlq)
    ch.queue_declare(
        ttl, arguments={"x-message-ttl": TTL_MS, "x-dead-letter-exchange": "", "x-dead-letter-routing-key": dlq}
    )
    assert tool(broker, "amqp-publish", "-r", ttl, "-b", "expiring").returncode == 0
    broker.expire()
    expired = broker.eventually(lambda: (r := tool(broker, "amqp-get", "-q", dlq)).returncode == 0 and r, "DLQ")
    assert expired.stdout == "expiring"
    assert ch.queue_declare(ttl, passive=True).method.message_count == 0

    # errors: exit status 1 and RabbitMQ's code and text on stderr
    err = tool(broker, "amqp-get", "-q", missing)
    assert (err.returncode, err.stdout, err.stderr) == (
        1,
        "",
        f"basic.get: server channel error 404, message: {not_found(missing)}\n",
    )
    err = tool(broker, "amqp-declare-queue", "-q", q, "-d")
    assert (err.returncode, err.stderr) == (
        1,
        f"queue.declare: server channel error 406, message: PRECONDITION_FAILED - inequivalent arg 'durable' "
        f"for queue '{q}' in vhost '/': received 'true' but current is 'false'\n",
    )
    no_exchange = broker.exchange("no-such-exchange")
    err = tool(broker, "amqp-publish", "-e", no_exchange, "-r", "k", "-b", "x")  # the error comes at channel close
    assert (err.returncode, err.stderr) == (
        1,
        f"closing channel: server channel error 404, message: NOT_FOUND - no exchange '{no_exchange}' in vhost '/'\n",
    )

    # amqp-consume with prefetch 1 acks what it handled; amqp-delete-queue prints how many messages were left
    for body in ("a", "b", "left behind"):
        assert tool(broker, "amqp-publish", "-r", q, "-b", body).returncode == 0
    consumed = tool(broker, "amqp-consume", "-q", q, "-c", "2", "-p", "1", "cat")
    assert (consumed.returncode, consumed.stdout) == (0, "ab")
    deleted = tool(broker, "amqp-delete-queue", "-q", q)
    assert (deleted.returncode, deleted.stdout) == (0, "1\n")
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as gone:
        ch.queue_declare(q, passive=True)
    assert (gone.value.reply_code, gone.value.reply_text) == (404, not_found(q))
    conn.close()
