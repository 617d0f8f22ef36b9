"""fakerabbit-only parts of the management API: the clock, reset and events endpoints, robustness against bad
requests, HTTP details, users and definitions round trips, and the API on the caller's event loop."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Iterator
from datetime import UTC, datetime

import aio_pika
import pika
import pytest
from freezegun import freeze_time

from fakerabbit import FakeRabbit
from fakerabbit.management.definitions import password_hash
from tests.management.conftest import Answer, http, q

START = datetime(2030, 1, 1, tzinfo=UTC)


@pytest.fixture
def rabbit() -> Iterator[FakeRabbit]:
    with FakeRabbit(management=True, start_time=START) as r:
        yield r


def req(rabbit: FakeRabbit, method: str, path: str, body: object = None, **kw: object) -> Answer:
    return http(rabbit.management_url, method, path, body, **kw)  # type: ignore[arg-type]


def publish(rabbit: FakeRabbit, routing_key: str, payload: str, **props: object) -> Answer:
    body = {"properties": props, "routing_key": routing_key, "payload": payload, "payload_encoding": "string"}
    return req(rabbit, "POST", "/api/exchanges/%2F/amq.default/publish", body)


# -- clock, events, reset --------------------------------------------------------------------------------------------
def test_clock_advance_expires_messages_and_events_tell(rabbit: FakeRabbit) -> None:
    req(rabbit, "PUT", "/api/queues/%2F/work", {"arguments": {"x-message-ttl": 30000}})
    publish(rabbit, "work", "soon gone")
    clock = req(rabbit, "GET", "/api/fakerabbit/clock").body
    assert clock == {"type": "virtual", "now": "2030-01-01T00:00:00Z", "now_ms": 1893456000000, "pending_timers": 1}
    after = req(rabbit, "POST", "/api/fakerabbit/clock/advance", {"seconds": 29.5}).body
    assert after["now_ms"] == 1893456029500
    assert req(rabbit, "GET", "/api/queues/%2F/work").body["messages"] == 1
    req(rabbit, "POST", "/api/fakerabbit/clock/advance", {"seconds": 1})
    assert req(rabbit, "GET", "/api/queues/%2F/work").body["messages"] == 0
    expired = req(rabbit, "GET", "/api/fakerabbit/events?kind=expired").body
    assert [(e["kind"], e["details"], e["time"]) for e in expired] == [
        ("expired", {"queue": "work"}, "2030-01-01T00:00:30Z")
    ]
    story = req(rabbit, "GET", f"/api/fakerabbit/events?message_id={expired[0]['message_id']}").body
    assert [e["kind"] for e in story] == ["published", "routed", "expired", "dropped"]


def test_clock_advance_to_a_time(rabbit: FakeRabbit) -> None:
    a = req(rabbit, "POST", "/api/fakerabbit/clock/advance", {"to": "2030-01-01T01:00:00Z"})
    assert (a.status, a.body["now"]) == (200, "2030-01-01T01:00:00Z")
    back = req(rabbit, "POST", "/api/fakerabbit/clock/advance", {"to": "2029-01-01T00:00:00Z"})
    assert (back.status, back.reason) == (400, "to: cannot move a clock backwards")


@pytest.mark.parametrize("body", [{}, {"seconds": -1}, {"seconds": "ten"}, {"seconds": True}, [1]])
def test_clock_advance_bad_bodies(rabbit: FakeRabbit, body: object) -> None:
    a = req(rabbit, "POST", "/api/fakerabbit/clock/advance", body)
    assert a.status == 400 and a.body["error"] == "bad_request"


def test_system_clock_cannot_be_advanced() -> None:
    with FakeRabbit(management=True, clock="system") as r:
        a = req(r, "POST", "/api/fakerabbit/clock/advance", {"seconds": 1})
        assert a.status == 400 and "--clock virtual" in a.reason
        assert req(r, "GET", "/api/fakerabbit/clock").body["type"] == "system"


def test_frozen_clock_is_reported_as_frozen_and_follows_freezegun() -> None:
    with freeze_time("2030-06-01") as frozen, FakeRabbit(management=True, clock="frozen") as r:
        req(r, "PUT", "/api/queues/%2F/work", {"arguments": {"x-message-ttl": 30000}})
        publish(r, "work", "waits for the frozen time to move")
        clock = req(r, "GET", "/api/fakerabbit/clock").body
        assert clock == {"type": "frozen", "now": "2030-06-01T00:00:00Z", "now_ms": 1906502400000, "pending_timers": 1}
        frozen.tick(30)
        assert req(r, "GET", "/api/fakerabbit/clock").body["now"] == "2030-06-01T00:00:30Z"
        assert req(r, "GET", "/api/overview").body["fakerabbit"]["clock"]["type"] == "frozen"
        a = req(r, "POST", "/api/fakerabbit/clock/advance", {"seconds": 1})
        assert a.status == 400 and "freezegun" in a.reason and "system clock" not in a.reason


def test_reset_drops_state_and_connections(rabbit: FakeRabbit) -> None:
    conn = pika.BlockingConnection(pika.URLParameters(rabbit.url))
    conn.channel().queue_declare("q1")
    req(rabbit, "PUT", "/api/policies/%2F/p", {"pattern": ".*", "definition": {"message-ttl": 1}})
    assert req(rabbit, "POST", "/api/fakerabbit/reset").status == 204
    assert req(rabbit, "GET", "/api/queues").body == []
    assert req(rabbit, "GET", "/api/policies").body == []
    assert req(rabbit, "GET", "/api/connections").body == []
    assert req(rabbit, "GET", "/api/fakerabbit/events").body == []
    with pytest.raises(pika.exceptions.AMQPConnectionError):
        for _ in range(20):
            conn.process_data_events(time_limit=0.05)


def test_reset_restores_the_initial_vhosts_users_and_permissions() -> None:
    """Whatever the management API did to vhosts, users, tags and permissions, reset() brings back what the
    constructor gave (deleting ``/`` then resetting used to leave no vhost: ``rabbit.url`` raised StopIteration)."""
    with FakeRabbit(management=True, users={"guest": "guest", "app": "secret"}, vhosts=("/", "tenant")) as r:
        before = {path: req(r, "GET", path).body for path in ("/api/vhosts", "/api/users", "/api/permissions")}
        assert req(r, "DELETE", "/api/vhosts/%2F").status == 204
        assert req(r, "DELETE", "/api/vhosts/tenant").status == 204
        assert req(r, "PUT", "/api/vhosts/extra", {}).status == 201
        assert req(r, "DELETE", "/api/users/app").status == 204
        assert req(r, "PUT", "/api/users/intruder", {"password": "x", "tags": "administrator"}).status == 201
        assert req(r, "PUT", "/api/users/guest", {"password": "changed", "tags": "monitoring"}).status == 204
        assert req(r, "GET", "/api/vhosts", auth=("guest", "changed")).body[0]["name"] == "extra"
        r.reset()
        after = {path: req(r, "GET", path).body for path in ("/api/vhosts", "/api/users", "/api/permissions")}
        assert after == before
        assert [v["name"] for v in after["/api/vhosts"]] == ["/", "tenant"]
        assert r.url.endswith("/%2F")  # (was StopIteration with no vhost left)
        conn = pika.BlockingConnection(
            pika.URLParameters(r.url.replace("/%2F", "/tenant").replace("guest:guest", "app:secret"))
        )
        conn.channel().queue_declare("works")
        conn.close()
        assert req(r, "GET", "/api/overview", auth=("intruder", "x")).status == 401


def test_reset_through_the_api_restores_a_deleted_default_vhost(rabbit: FakeRabbit) -> None:
    assert req(rabbit, "DELETE", "/api/vhosts/%2F").status == 204
    assert req(rabbit, "GET", "/api/vhosts").body == []
    assert req(rabbit, "POST", "/api/fakerabbit/reset").status == 204
    assert [v["name"] for v in req(rabbit, "GET", "/api/vhosts").body] == ["/"]
    assert req(rabbit, "GET", "/api/permissions").body == [
        {"user": "guest", "vhost": "/", "configure": ".*", "write": ".*", "read": ".*"}
    ]
    pika.BlockingConnection(pika.URLParameters(rabbit.url)).close()


def test_what_a_client_just_published_is_counted(rabbit: FakeRabbit) -> None:
    conn = pika.BlockingConnection(pika.URLParameters(rabbit.url))
    ch = conn.channel()
    ch.queue_declare("fresh")
    for i in range(20):
        ch.basic_publish("", "fresh", f"m{i}".encode())
    assert req(rabbit, "GET", "/api/queues/%2F/fresh").body["messages"] == 20  # no stats delay, no polling
    conn.close()


def test_unacked_messages_are_counted_with_their_bytes(rabbit: FakeRabbit) -> None:
    conn = pika.BlockingConnection(pika.URLParameters(rabbit.url))
    ch = conn.channel()
    ch.queue_declare("u")
    ch.basic_publish("", "u", b"12345")
    ch.basic_publish("", "u", b"1")
    method, _, _ = ch.basic_get("u")
    assert method is not None
    body = req(rabbit, "GET", "/api/queues/%2F/u").body
    assert (body["messages"], body["messages_ready"], body["messages_unacknowledged"]) == (2, 1, 1)
    assert (body["message_bytes_ready"], body["message_bytes_unacknowledged"]) == (1, 5)
    chans = req(rabbit, "GET", "/api/channels").body
    assert chans[0]["messages_unacknowledged"] == 1
    conn.close()


# -- robustness: bad requests get 4xx JSON, never a 500 ----------------------------------------------------------------
BAD_REQUESTS = [
    ("PUT", "/api/queues/%2F/q", b"[1,2]"),
    ("PUT", "/api/queues/%2F/q", b'{"durable": "maybe"}'),
    ("PUT", "/api/queues/%2F/q", b'{"arguments": [1]}'),
    ("PUT", "/api/queues/%2F/q", b'{"arguments": {"x-max-priority": 1.5e400}}'),
    ("PUT", "/api/queues/%2F/amq.q", b"{}"),
    ("PUT", "/api/exchanges/%2F/x", b'{"type": 5}'),
    ("PUT", "/api/exchanges/%2F/x", b'{"arguments": {"alternate-exchange": {"a": [1, null]}}, "durable": 1}'),
    (
        "POST",
        "/api/exchanges/%2F/amq.default/publish",
        b'{"properties": [], "routing_key": "k", "payload": "x", "payload_encoding": "string"}',
    ),
    (
        "POST",
        "/api/exchanges/%2F/amq.default/publish",
        b'{"properties": {"headers": 5}, "routing_key": "k", "payload": "x", "payload_encoding": "string"}',
    ),
    (
        "POST",
        "/api/exchanges/%2F/amq.default/publish",
        b'{"properties": {"priority": 999}, "routing_key": "k", "payload": "x", "payload_encoding": "string"}',
    ),
    (
        "POST",
        "/api/exchanges/%2F/amq.default/publish",
        b'{"properties": {}, "routing_key": "k", "payload": 5, "payload_encoding": "string"}',
    ),
    (
        "POST",
        "/api/exchanges/%2F/amq.default/publish",
        b'{"properties": {}, "routing_key": "k", "payload": "!!", "payload_encoding": "base64"}',
    ),
    ("POST", "/api/queues/%2F/q/get", b'{"count": -1, "ackmode": "ack_requeue_true", "encoding": "auto"}'),
    ("POST", "/api/queues/%2F/q/get", b'{"count": 1, "ackmode": "bogus", "encoding": "auto"}'),
    ("POST", "/api/queues/%2F/q/get", b'{"count": 1, "ackmode": "ack_requeue_true", "encoding": "utf-16"}'),
    (
        "POST",
        "/api/queues/%2F/q/get",
        b'{"count": 1, "ackmode": "ack_requeue_true", "encoding": "auto", "truncate": "x"}',
    ),
    ("PUT", "/api/policies/%2F/p", b'{"pattern": "(", "definition": {"message-ttl": 1}}'),
    ("PUT", "/api/policies/%2F/p", b'{"pattern": 5, "definition": {"message-ttl": 1}}'),
    ("PUT", "/api/policies/%2F/p", b'{"pattern": "x", "definition": [1]}'),
    ("POST", "/api/definitions", b'{"queues": 5}'),
    ("POST", "/api/definitions", b'{"queues": [{"vhost": "/"}]}'),
    ("POST", "/api/definitions", b'{"parameters": [{"component": "shovel", "vhost": "/", "name": "s", "value": {}}]}'),
    ("POST", "/api/definitions", b'{"topic_permissions": [{"user": "guest", "vhost": "/", "exchange": "x"}]}'),
    ("POST", "/api/definitions", b'{"users": [{"name": "u"}]}'),
    ("POST", "/api/definitions", b"[]"),
    ("POST", "/api/bindings/%2F/e/amq.direct/x/q", b"{}"),
    ("POST", "/api/bindings/%2F/e/amq.direct/q/q", b'{"arguments": "no"}'),
    ("GET", "/api/queues?page=0", b""),
    ("GET", "/api/queues?page=x", b""),
    ("GET", "/api/queues?name=(&use_regex=true", b""),
    ("PUT", "/api/permissions/%2F/nobody", b'{"configure": ".*", "write": ".*", "read": ".*"}'),
    ("PUT", "/api/users/u", b"{}"),
    ("GET", "/api/fakerabbit/events?limit=x", b""),
]


@pytest.mark.parametrize(("method", "path", "raw"), BAD_REQUESTS)
def test_bad_requests_get_a_4xx_json_error(rabbit: FakeRabbit, method: str, path: str, raw: bytes) -> None:
    req(rabbit, "PUT", "/api/queues/%2F/q", {})
    a = req(rabbit, method, path, raw=raw)
    assert 400 <= a.status < 500, a.text
    assert set(a.body) == {"error", "reason"}


# -- HTTP details ------------------------------------------------------------------------------------------------------
def _raw(rabbit: FakeRabbit, data: bytes, *, read_until_close: bool = True) -> bytes:
    port = int(rabbit.management_url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(data)
        chunks = []
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
            if not read_until_close and b"\r\n\r\n" in b"".join(chunks):
                break
        return b"".join(chunks)


AUTH = b"Authorization: Basic Z3Vlc3Q6Z3Vlc3Q=\r\n"


def test_malformed_request_line_is_400(rabbit: FakeRabbit) -> None:
    answer = _raw(rabbit, b"NONSENSE\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 400 ")
    assert b'"error":"bad_request"' in answer


def test_keep_alive_serves_several_requests_on_one_socket(rabbit: FakeRabbit) -> None:
    one = b"GET /api/whoami HTTP/1.1\r\nHost: x\r\n" + AUTH + b"\r\n"
    last = b"GET /api/vhosts HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" + AUTH + b"\r\n"
    answer = _raw(rabbit, one + one + last)
    assert answer.count(b"HTTP/1.1 200 OK") == 3
    assert answer.endswith(b'"messages_unacknowledged":0}]')


def test_head_chunked_and_expect_continue(rabbit: FakeRabbit) -> None:
    head = _raw(rabbit, b"HEAD /api/overview HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" + AUTH + b"\r\n")
    assert head.startswith(b"HTTP/1.1 200 ") and head.endswith(b"\r\n\r\n")
    body = b'{"durable": true}'
    chunked = (
        b"PUT /api/queues/%2F/chunky HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n"
        + AUTH
        + b"\r\n"
        + f"{len(body):x}\r\n".encode()
        + body
        + b"\r\n0\r\n\r\n"
    )
    assert _raw(rabbit, chunked).startswith(b"HTTP/1.1 201 ")
    assert rabbit.queue("chunky").durable
    expect = (
        b"PUT /api/queues/%2F/expecting HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 2\r\n"
        b"Connection: close\r\n" + AUTH + b"\r\n{}"
    )
    answer = _raw(rabbit, expect)
    assert answer.startswith(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 ")


def test_http_1_0_closes_after_the_answer(rabbit: FakeRabbit) -> None:
    answer = _raw(rabbit, b"GET /api/whoami HTTP/1.0\r\n" + AUTH + b"\r\n")
    assert answer.startswith(b"HTTP/1.1 200 ") and b"connection: close" in answer.lower()
    assert json.loads(answer.split(b"\r\n\r\n", 1)[1]) == {"name": "guest", "tags": ["administrator"]}


# -- users, permissions, definitions -----------------------------------------------------------------------------------
def test_new_user_needs_permissions_to_connect(rabbit: FakeRabbit) -> None:
    assert req(rabbit, "PUT", "/api/users/app", {"password": "s3cret", "tags": ""}).status == 201
    url = f"amqp://app:s3cret@127.0.0.1:{rabbit.port}/%2F"
    with pytest.raises(pika.exceptions.AMQPConnectionError):
        pika.BlockingConnection(pika.URLParameters(url))
    perms = {"configure": ".*", "write": ".*", "read": ".*"}
    assert req(rabbit, "PUT", "/api/permissions/%2F/app", perms).status == 201
    pika.BlockingConnection(pika.URLParameters(url)).close()
    assert req(rabbit, "GET", "/api/users/app").body["tags"] == []


def test_definitions_with_password_hashes_let_those_users_log_in(rabbit: FakeRabbit) -> None:
    defs = {
        "users": [{"name": "svc", "password_hash": password_hash("svc", "pw"), "tags": ["management"]}],
        "vhosts": [{"name": "orders"}],
        "permissions": [{"user": "svc", "vhost": "orders", "configure": ".*", "write": ".*", "read": ".*"}],
    }
    assert req(rabbit, "POST", "/api/definitions", defs).status == 204
    conn = pika.BlockingConnection(pika.URLParameters(f"amqp://svc:pw@127.0.0.1:{rabbit.port}/orders"))
    conn.close()
    with pytest.raises(pika.exceptions.AMQPConnectionError):
        pika.BlockingConnection(pika.URLParameters(f"amqp://svc:wrong@127.0.0.1:{rabbit.port}/orders"))
    exported = req(rabbit, "GET", "/api/definitions").body
    assert {"name": "svc", "password_hash": password_hash("svc", "pw")}.items() <= next(
        u for u in exported["users"] if u["name"] == "svc"
    ).items()


def test_definitions_round_trip_between_two_nodes(rabbit: FakeRabbit) -> None:
    req(rabbit, "PUT", "/api/vhosts/v2", {})
    req(rabbit, "PUT", "/api/exchanges/v2/events", {"type": "topic", "durable": True})
    req(rabbit, "PUT", "/api/queues/v2/audit", {"durable": True, "arguments": {"x-queue-type": "quorum"}})
    req(rabbit, "POST", "/api/bindings/v2/e/events/q/audit", {"routing_key": "#", "arguments": {"k": [1, "a"]}})
    req(rabbit, "PUT", "/api/operator-policies/v2/cap", {"pattern": ".*", "definition": {"max-length": 100}})
    req(rabbit, "PUT", "/api/policies/v2/dlx", {"pattern": "^a", "definition": {"dead-letter-exchange": "dead"}})
    exported = req(rabbit, "GET", "/api/definitions").body
    with FakeRabbit(management=True) as other:
        assert req(other, "POST", "/api/definitions", exported).status == 204
        assert req(other, "GET", "/api/definitions").body == exported
        assert other.queue("audit", vhost="v2").policy == "dlx"


def test_vhost_scoped_import(rabbit: FakeRabbit) -> None:
    defs = {"queues": [{"name": "only-here", "durable": True, "auto_delete": False, "arguments": {}}]}
    req(rabbit, "PUT", "/api/vhosts/scoped", {})
    assert req(rabbit, "POST", "/api/definitions/scoped", defs).status == 204
    assert [x.name for x in rabbit.queues("scoped")] == ["only-here"]
    assert req(rabbit, "POST", "/api/definitions/nosuch", defs).status == 404


def test_deleting_a_vhost_closes_its_connections(rabbit: FakeRabbit) -> None:
    req(rabbit, "PUT", "/api/vhosts/tmp", {})
    conn = pika.BlockingConnection(pika.URLParameters(f"amqp://guest:guest@127.0.0.1:{rabbit.port}/tmp"))
    assert req(rabbit, "DELETE", "/api/vhosts/tmp").status == 204
    with pytest.raises(pika.exceptions.ConnectionClosedByBroker) as info:
        for _ in range(20):
            conn.process_data_events(time_limit=0.05)
    assert info.value.reply_code == 320
    assert "tmp" not in {v["name"] for v in req(rabbit, "GET", "/api/vhosts").body}


def test_management_is_off_by_default() -> None:
    with FakeRabbit() as r, pytest.raises(RuntimeError, match="management=True"):
        _ = r.management_url


def test_management_port_in_use_fails_start_and_frees_the_amqp_port() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        taken = s.getsockname()[1]
        rabbit = FakeRabbit(management=True, management_port=taken)
        with pytest.raises(OSError) as info:
            rabbit.start()
        assert getattr(info.value, "address", None) == f"127.0.0.1:{taken}"


# -- on the caller's event loop (aio-pika) -----------------------------------------------------------------------------
async def test_async_fake_serves_the_api_on_the_running_loop() -> None:
    async with FakeRabbit(management=True) as rabbit:
        conn = await aio_pika.connect(rabbit.url)
        ch = await conn.channel()
        queue = await ch.declare_queue("async-q")
        await ch.default_exchange.publish(aio_pika.Message(b"hi"), routing_key="async-q")
        loop = asyncio.get_running_loop()
        answer = await loop.run_in_executor(None, req, rabbit, "GET", "/api/queues/%2F/async-q")
        assert (answer.status, answer.body["messages"]) == (200, 1)
        moved = await loop.run_in_executor(
            None,
            req,
            rabbit,
            "POST",
            f"/api/queues/%2F/{q(queue.name)}/get",
            {"count": 1, "ackmode": "ack_requeue_false", "encoding": "auto"},
        )
        assert moved.body[0]["payload"] == "hi"
        await conn.close()
