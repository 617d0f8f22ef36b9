"""Client code with TLS settings, unchanged, against ``FakeRabbit(tls=True)``: pika (``SSLOptions``), aio-pika and
aiormq (an ``amqps://`` URL with ``cafile``), py-amqp and kombu (``ssl=...``) connect to the amqps listener,
verify the generated certificate against ``rabbit.ca_file``, and publish and get; mutual TLS with
``rabbit.client_cert``; the virtual clock reads what a client sent over TLS before time moves.

Fake only: the live brokers have no TLS listener (``ss -ltnp``: 5672, 5674, 5675 only) and are not reconfigured
for these tests; what RabbitMQ reports of a TLS connection is taken from its source (see test_tls_management.py).
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Iterator
from urllib.parse import quote

import aio_pika
import aiormq
import amqp
import kombu
import pika
import pika.exceptions
import pytest

from fakerabbit import FakeRabbit

BODY = b"over TLS"


@pytest.fixture(scope="module")
def rabbit() -> Iterator[FakeRabbit]:
    with FakeRabbit(tls=True) as r:
        yield r


@pytest.fixture(autouse=True)
def fresh(request: pytest.FixtureRequest) -> None:
    if "rabbit" in request.fixturenames:
        request.getfixturevalue("rabbit").reset()


def client_context(rabbit: FakeRabbit, *, client_cert: bool = False) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=rabbit.ca_file)
    if client_cert:
        ctx.load_cert_chain(rabbit.client_cert, rabbit.client_key)
    return ctx


def pika_params(rabbit: FakeRabbit, ctx: ssl.SSLContext, host: str = "localhost") -> pika.ConnectionParameters:
    params = pika.URLParameters(rabbit.amqps_url)
    params.ssl_options = pika.SSLOptions(ctx, host)
    return params


def test_the_urls_and_the_plain_listener(rabbit: FakeRabbit) -> None:
    assert rabbit.amqps_url == f"amqps://guest:guest@127.0.0.1:{rabbit.tls_port}/%2F"
    assert rabbit.url == f"amqp://guest:guest@127.0.0.1:{rabbit.port}/%2F"
    assert rabbit.tls_port not in (0, rabbit.port)
    conn = pika.BlockingConnection(pika.URLParameters(rabbit.url))  # RabbitMQ serves 5672 and 5671 side by side
    assert conn.is_open
    conn.close()


def test_pika_blocking_over_tls(rabbit: FakeRabbit) -> None:
    conn = pika.BlockingConnection(pika_params(rabbit, client_context(rabbit)))
    ch = conn.channel()
    ch.queue_declare("tls.pika")
    ch.confirm_delivery()
    ch.basic_publish("", "tls.pika", BODY)
    method, _props, body = ch.basic_get("tls.pika", auto_ack=True)
    assert (method.message_count, body) == (0, BODY)
    conn.close()


def test_pika_with_a_client_certificate(rabbit: FakeRabbit) -> None:
    conn = pika.BlockingConnection(pika_params(rabbit, client_context(rabbit, client_cert=True)))
    ch = conn.channel()
    ch.queue_declare("tls.mutual")
    ch.basic_publish("", "tls.mutual", BODY)
    assert rabbit.queue("tls.mutual").message_count == 1
    conn.close()


REFUSED = (pika.exceptions.AMQPConnectionError, ssl.SSLError)


def test_a_client_that_does_not_trust_the_ca_is_refused(rabbit: FakeRabbit) -> None:
    with pytest.raises(REFUSED, match="CERTIFICATE_VERIFY_FAILED"):
        pika.BlockingConnection(pika_params(rabbit, ssl.create_default_context()))


def test_a_certificate_for_another_name_fails_hostname_verification(rabbit: FakeRabbit) -> None:
    with pytest.raises(REFUSED, match="Hostname mismatch"):
        pika.BlockingConnection(pika_params(rabbit, client_context(rabbit), host="rabbit.example"))


def test_plain_amqp_on_the_tls_port_gets_no_amqp(rabbit: FakeRabbit) -> None:
    with socket.create_connection(("127.0.0.1", rabbit.tls_port), timeout=5) as s:
        s.sendall(b"AMQP\x00\x00\x09\x01")
        reply = s.recv(64)
    assert not reply.startswith(b"AMQP")  # a TLS alert, or the connection closed


async def test_aio_pika_amqps_url_with_cafile(rabbit: FakeRabbit) -> None:
    url = f"{rabbit.amqps_url}?cafile={quote(rabbit.ca_file)}"
    async with await aio_pika.connect(url) as connection:
        channel = await connection.channel()
        queue = await channel.declare_queue("tls.aio_pika")
        await channel.default_exchange.publish(aio_pika.Message(BODY), routing_key="tls.aio_pika")
        message = await queue.get(timeout=5)
        assert message.body == BODY
        await message.ack()


async def test_aio_pika_with_client_certificate_in_the_url(rabbit: FakeRabbit) -> None:
    query = f"cafile={quote(rabbit.ca_file)}&certfile={quote(rabbit.client_cert)}&keyfile={quote(rabbit.client_key)}"
    async with await aio_pika.connect(f"{rabbit.amqps_url}?{query}") as connection:
        channel = await connection.channel()
        await channel.declare_queue("tls.aio_pika.mutual")
    assert rabbit.queue("tls.aio_pika.mutual").message_count == 0


async def test_aiormq_amqps(rabbit: FakeRabbit) -> None:
    connection = await aiormq.connect(f"{rabbit.amqps_url}?cafile={quote(rabbit.ca_file)}")
    channel = await connection.channel()
    await channel.queue_declare("tls.aiormq")
    await channel.basic_publish(BODY, routing_key="tls.aiormq")
    got = await channel.basic_get("tls.aiormq", no_ack=True)
    assert got.body == BODY
    await connection.close()


def test_py_amqp_ssl_options(rabbit: FakeRabbit) -> None:
    sslopts = {"ca_certs": rabbit.ca_file, "cert_reqs": ssl.CERT_REQUIRED, "server_hostname": "localhost"}
    conn = amqp.Connection(f"127.0.0.1:{rabbit.tls_port}", ssl=sslopts, connect_timeout=5)
    conn.connect()
    ch = conn.channel()
    ch.queue_declare("tls.py_amqp", auto_delete=False)
    ch.basic_publish(amqp.Message(BODY), "", "tls.py_amqp")
    assert ch.basic_get("tls.py_amqp", no_ack=True).body == BODY
    conn.close()


def test_kombu_amqps(rabbit: FakeRabbit) -> None:
    sslopts = {
        "ca_certs": rabbit.ca_file,
        "cert_reqs": ssl.CERT_REQUIRED,
        "certfile": rabbit.client_cert,
        "keyfile": rabbit.client_key,
    }
    with kombu.Connection(rabbit.amqps_url, ssl=sslopts, connect_timeout=5) as conn:
        q = conn.SimpleQueue("tls.kombu")
        q.put({"over": "tls"})
        message = q.get(timeout=5)
        assert message.payload == {"over": "tls"}
        message.ack()
        q.close()


async def test_the_virtual_clock_reads_what_was_sent_over_tls_before_moving() -> None:
    """As with plain AMQP (test_clock_server.py): publishes the loop has not read yet are read, decrypted and
    handled at the old time by ``advance()``, then the TTL runs out."""
    async with FakeRabbit(tls=True) as rabbit:
        connection = await aio_pika.connect(f"{rabbit.amqps_url}?cafile={quote(rabbit.ca_file)}")
        channel = await connection.channel(publisher_confirms=False)
        dlq = await channel.declare_queue("dlq")
        await channel.declare_queue(
            "q", arguments={"x-message-ttl": 5000, "x-dead-letter-exchange": "", "x-dead-letter-routing-key": "dlq"}
        )
        for i in range(3):
            await channel.default_exchange.publish(aio_pika.Message(str(i).encode()), routing_key="q")
        q = rabbit._broker.vhost("/").queues["q"]
        # the client has written the encrypted publishes; the server on this loop has not read (all of) them ...
        assert q.ready_count < 3
        # ... advance() reads them through the TLS layer at the old time, then moves time and expires them
        assert rabbit.clock.advance(5) == 1
        assert q.ready_count == 0
        bodies = []
        for _ in range(3):
            message = await dlq.get(timeout=5)
            bodies.append(message.body)
            await message.ack()
        assert bodies == [b"0", b"1", b"2"]
        await connection.close()


def test_tls_needs_asking_for() -> None:
    rabbit = FakeRabbit()
    for attribute in ("amqps_url", "ca_file", "client_cert", "client_key", "management_https_url"):
        with pytest.raises(RuntimeError, match="use FakeRabbit"):
            getattr(rabbit, attribute)


def test_the_tls_port_can_be_chosen_and_a_taken_one_is_a_listen_error() -> None:
    from fakerabbit import ListenError

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(ListenError) as info:
            FakeRabbit(tls=True, tls_port=port).start()
        assert info.value.address == f"127.0.0.1:{port}"
    with FakeRabbit(tls=True, tls_port=port) as rabbit:
        assert rabbit.tls_port == port


def test_tls_dir_keeps_the_files_where_asked(tmp_path: object) -> None:
    from pathlib import Path

    directory = Path(str(tmp_path)) / "certs"
    with FakeRabbit(tls=True, tls_dir=directory) as rabbit:
        assert Path(rabbit.ca_file).parent == directory
        conn = pika.BlockingConnection(pika_params(rabbit, client_context(rabbit)))
        conn.close()


def test_asyncio_loop_is_not_left_with_tls_errors(rabbit: FakeRabbit, caplog: pytest.LogCaptureFixture) -> None:
    """A refused TLS handshake is the client's problem: nothing is logged at ERROR by the server's loop."""
    with pytest.raises(REFUSED):
        pika.BlockingConnection(pika_params(rabbit, ssl.create_default_context()))
    rabbit.reset()  # a round trip through the server's loop after the failed handshake
    assert [r for r in caplog.records if r.levelname == "ERROR" and r.name == "asyncio"] == []
