"""What the management API shows of TLS and IPv6: a connection's ``ssl*`` and ``peer_cert_*`` items, the
listeners in ``/api/overview``, the protocol-listener health check, and IPv6 addresses (``peer_host`` ``::1``,
connection names ``[::1]:port -> [::1]:port``).

The plain-connection items, the listeners and the health check are compared with every live broker (they have no
TLS listener and listen on 127.0.0.1 only: see ``ss -ltnp``). What a TLS or IPv6 connection shows comes from
RabbitMQ's source: ``rabbit_ssl:info/2`` (``ssl_protocol`` ``tlsv1.3``, Erlang's names of the cipher suite:
``any``/``aes_256_gcm``/``aead``), ``rabbit_cert_info`` (RFC 4514 subject and issuer, ``"<from> - <until>"``,
upper-case hex serial), ``rabbit_misc:ntoa/1`` (``peer_host``: IPv6 without brackets, IPv4-mapped as IPv4) and
``rabbit_net:connection_string/2`` (``ntoab``: IPv6 in brackets in the name).
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pika
import pytest

from fakerabbit import FakeRabbit
from tests.management.conftest import Api, http
from tests.netsupport import needs_dualstack, needs_ipv6

FAKE_PROFILES = ("3.10", "4.0")
TLS_ITEMS = {
    "ssl",
    "ssl_protocol",
    "ssl_key_exchange",
    "ssl_cipher",
    "ssl_hash",
    "peer_cert_subject",
    "peer_cert_issuer",
    "peer_cert_validity",
}


def _connection(api: Api, conn_name: str) -> dict[str, Any]:
    def ours(a: object) -> bool:
        return any(c.get("user_provided_name") == conn_name for c in getattr(a, "body", None) or [])

    listed = api.poll(lambda: api.request("GET", "/api/connections"), ours).body
    row: dict[str, Any] = next(c for c in listed if c.get("user_provided_name") == conn_name)
    return row


# -- compared with the live brokers --------------------------------------------------------------------------------
def test_a_plain_connection_shows_the_tls_items_empty(api: Api) -> None:
    conn_name = api.prefix + "plain"
    params = pika.URLParameters(api.amqp_url)
    params.client_properties = {"connection_name": conn_name}
    conn = pika.BlockingConnection(params)
    try:
        c = _connection(api, conn_name)
        assert set(c) >= TLS_ITEMS
        assert c["ssl"] is False
        assert {k: c[k] for k in TLS_ITEMS - {"ssl"}} == dict.fromkeys(TLS_ITEMS - {"ssl"})
        # 4.3.6 adds the peer certificate's serial number; 3.10.8 and 4.0.5 do not have the item
        assert ("peer_cert_serial_number" in c) is api.at_least("4.1")
        if api.at_least("4.1"):
            assert c["peer_cert_serial_number"] is None
        assert (c["protocol"], c["auth_mechanism"]) == ("AMQP 0-9-1", "PLAIN")
        # GET /api/connections/{name} writes RabbitMQ's '' (none) as "", the list as null (3.10.8, 4.0.5, 4.3.6)
        single = api.request("GET", f"/api/connections/{quote(c['name'], safe='')}").body
        assert single["ssl"] is False
        assert {k: single[k] for k in TLS_ITEMS - {"ssl"}} == dict.fromkeys(TLS_ITEMS - {"ssl"}, "")
        assert single.get("peer_cert_serial_number", "absent") == ("" if api.at_least("4.1") else "absent")
    finally:
        conn.close()


def test_the_overview_lists_the_amqp_listener(api: Api) -> None:
    listeners = api.request("GET", "/api/overview").body["listeners"]
    amqp = [entry for entry in listeners if entry["protocol"] == "amqp"]
    assert amqp and all(isinstance(entry["port"], int) for entry in amqp)
    # 4.3.6 says whether each listener uses TLS ("tls": false); 3.10.8 and 4.0.5 have no such item
    assert all(("tls" in entry) is api.at_least("4.1") for entry in listeners)
    if api.at_least("4.1"):
        assert {entry["tls"] for entry in amqp} == {False}
    assert not any(entry["protocol"] in ("amqp/ssl", "https") for entry in listeners)


@pytest.mark.parametrize(("asked", "normalised"), [("amqps", "amqp/ssl"), ("https", "https"), ("nonesuch", "nonesuch")])
def test_protocol_listener_check_without_tls_listeners(api: Api, asked: str, normalised: str) -> None:
    answer = api.request("GET", f"/api/health/checks/protocol-listener/{asked}")
    assert answer.status == 503
    assert (answer.body["status"], answer.body["reason"]) == ("failed", "No active listener")
    assert answer.body["missing"] == ([normalised] if api.at_least("4.1") else normalised)
    assert "amqp" in answer.body["protocols"]


# -- TLS connections (from RabbitMQ's source) ------------------------------------------------------------------------
@pytest.fixture(scope="module", params=["4.3", "4.0"])
def tls_rabbit(request: pytest.FixtureRequest) -> Iterator[FakeRabbit]:
    with FakeRabbit(tls=True, management_tls=True, rabbitmq_version=request.param) as rabbit:
        yield rabbit


def _tls_connection(rabbit: FakeRabbit, ctx: ssl.SSLContext) -> pika.BlockingConnection:
    params = pika.URLParameters(rabbit.amqps_url)
    params.ssl_options = pika.SSLOptions(ctx, "localhost")
    return pika.BlockingConnection(params)


def _only_connection(rabbit: FakeRabbit) -> dict[str, Any]:
    rows = http(rabbit.management_url, "GET", "/api/connections").body
    assert len(rows) == 1
    row: dict[str, Any] = rows[0]
    return row


def test_a_tls_1_3_connection(tls_rabbit: FakeRabbit) -> None:
    tls_rabbit.reset()
    conn = _tls_connection(tls_rabbit, ssl.create_default_context(cafile=tls_rabbit.ca_file))
    try:
        c = _only_connection(tls_rabbit)
        assert c["ssl"] is True
        assert (c["ssl_protocol"], c["ssl_key_exchange"], c["ssl_hash"]) == ("tlsv1.3", "any", "aead")
        assert c["ssl_cipher"] in ("aes_256_gcm", "aes_128_gcm", "chacha20_poly1305")
        assert (c["peer_cert_subject"], c["peer_cert_issuer"], c["peer_cert_validity"]) == (None, None, None)
        assert c["port"] == tls_rabbit.tls_port and c["protocol"] == "AMQP 0-9-1"
        assert c["name"] == f"127.0.0.1:{c['peer_port']} -> 127.0.0.1:{tls_rabbit.tls_port}"
    finally:
        conn.close()


def test_a_tls_1_2_connection_with_a_client_certificate(tls_rabbit: FakeRabbit) -> None:
    tls_rabbit.reset()
    ctx = ssl.create_default_context(cafile=tls_rabbit.ca_file)
    ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(tls_rabbit.client_cert, tls_rabbit.client_key)
    conn = _tls_connection(tls_rabbit, ctx)
    try:
        c = _only_connection(tls_rabbit)
        assert (c["ssl_protocol"], c["ssl_key_exchange"]) == ("tlsv1.2", "ecdhe_ecdsa")  # an ECDSA server key
        assert c["ssl_cipher"] in ("aes_256_gcm", "aes_128_gcm", "chacha20_poly1305")
        assert c["ssl_hash"] == "aead"
        assert c["peer_cert_subject"] == "CN=guest,OU=fakerabbit client,O=fakerabbit"
        assert c["peer_cert_issuer"] == "OU=fakerabbit CA,O=fakerabbit"
        assert c["peer_cert_validity"] == "2000-01-01T00:00:00Z - 3000-01-01T00:00:00Z"  # trustme's default span
        if tls_rabbit._broker.profile.name == "4.3":
            serial = c["peer_cert_serial_number"]
            assert serial == serial.upper() and int(serial, 16) > 0 and not serial.startswith("0")
        else:
            assert "peer_cert_serial_number" not in c
    finally:
        conn.close()


def test_listeners_and_health_checks_with_tls(tls_rabbit: FakeRabbit) -> None:
    overview = http(tls_rabbit.management_https_url, "GET", "/api/overview", context=_ctx(tls_rabbit)).body
    got = [(entry["protocol"], entry["ip_address"], entry["port"], entry.get("tls")) for entry in overview["listeners"]]
    four_three = tls_rabbit._broker.profile.name == "4.3"
    mgmt = tls_rabbit.management
    assert mgmt is not None
    assert got == [
        ("amqp", "127.0.0.1", tls_rabbit.port, False if four_three else None),
        ("amqp/ssl", "127.0.0.1", tls_rabbit.tls_port, True if four_three else None),
        ("http", "127.0.0.1", mgmt.port, False if four_three else None),
        ("https", "127.0.0.1", mgmt.tls_port, True if four_three else None),
    ]
    for asked in ("amqps", "https", "amqp/ssl"):
        answer = http(tls_rabbit.management_url, "GET", f"/api/health/checks/protocol-listener/{asked}")
        assert (answer.status, answer.body["status"]) == (200, "ok")
    answer = http(tls_rabbit.management_url, "GET", f"/api/health/checks/port-listener/{tls_rabbit.tls_port}")
    assert (answer.status, answer.body) == (200, {"status": "ok", "port": tls_rabbit.tls_port})


def _ctx(rabbit: FakeRabbit) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=rabbit.ca_file)


def test_the_management_api_over_https_needs_the_ca(tls_rabbit: FakeRabbit) -> None:
    assert tls_rabbit.management_https_url.startswith("https://127.0.0.1:")
    ok = http(tls_rabbit.management_https_url, "GET", "/api/whoami", context=_ctx(tls_rabbit))
    assert (ok.status, ok.body["name"]) == (200, "guest")
    with pytest.raises(OSError, match="CERTIFICATE_VERIFY_FAILED"):
        http(tls_rabbit.management_https_url, "GET", "/api/whoami", context=ssl.create_default_context())
    # plain HTTP on the HTTPS port gets no HTTP answer
    mgmt = tls_rabbit.management
    assert mgmt is not None
    with socket.create_connection(("127.0.0.1", mgmt.tls_port), timeout=5) as s:
        s.sendall(b"GET /api/overview HTTP/1.1\r\nHost: x\r\n\r\n")
        assert not s.recv(64).startswith(b"HTTP/")


# -- IPv6 (from RabbitMQ's source: the live brokers listen on 127.0.0.1 only) ----------------------------------------
@needs_ipv6
def test_an_ipv6_connection_is_named_with_brackets_and_peer_host_without() -> None:
    with FakeRabbit(host="::1", management=True) as rabbit:
        assert rabbit.url == f"amqp://guest:guest@[::1]:{rabbit.port}/%2F"
        assert rabbit.management_url == f"http://[::1]:{rabbit.management.port}"  # type: ignore[union-attr]
        conn = pika.BlockingConnection(pika.URLParameters(rabbit.url))
        try:
            c = _only_connection(rabbit)
            assert (c["peer_host"], c["host"], c["port"]) == ("::1", "::1", rabbit.port)
            assert c["name"] == f"[::1]:{c['peer_port']} -> [::1]:{rabbit.port}"
            single = http(rabbit.management_url, "GET", f"/api/connections/{quote(c['name'], safe='')}")
            assert single.status == 200 and single.body["name"] == c["name"]
            ch = conn.channel()
            ch.queue_declare("v6")
            ch.basic_consume("v6", lambda *a: None)
            conn.process_data_events(time_limit=0)
            consumer = http(rabbit.management_url, "GET", "/api/consumers").body[0]
            assert consumer["channel_details"]["peer_host"] == "::1"
            assert consumer["channel_details"]["name"] == f"{c['name']} (1)"
            assert [s.peer for s in rabbit.connections()] == [f"[::1]:{c['peer_port']}"]
            listeners = http(rabbit.management_url, "GET", "/api/overview").body["listeners"]
            assert [(entry["protocol"], entry["ip_address"]) for entry in listeners] == [
                ("amqp", "::1"),
                ("http", "::1"),
            ]
        finally:
            conn.close()


@needs_dualstack
def test_an_ipv4_client_of_the_dual_stack_wildcard_shows_as_ipv4() -> None:
    with FakeRabbit(host="::", management=True, loopback_users=()) as rabbit:
        assert rabbit.url == f"amqp://guest:guest@[::]:{rabbit.port}/%2F"
        conn = pika.BlockingConnection(pika.URLParameters(f"amqp://guest:guest@127.0.0.1:{rabbit.port}/%2F"))
        try:
            c = _only_connection(rabbit)
            # the socket says ::ffff:127.0.0.1; rabbit_misc:ntoa/1 writes an IPv4-mapped address as IPv4
            assert (c["peer_host"], c["host"]) == ("127.0.0.1", "127.0.0.1")
            assert c["name"] == f"127.0.0.1:{c['peer_port']} -> 127.0.0.1:{rabbit.port}"
        finally:
            conn.close()


@needs_ipv6
def test_guest_may_log_in_over_ipv6_loopback_and_localhost_serves_both_families() -> None:
    with FakeRabbit(host="localhost", management=True) as rabbit:
        assert rabbit.url == f"amqp://guest:guest@localhost:{rabbit.port}/%2F"
        for address in ("127.0.0.1", "[::1]"):
            conn = pika.BlockingConnection(pika.URLParameters(f"amqp://guest:guest@{address}:{rabbit.port}/%2F"))
            assert conn.is_open  # guest is a loopback user: ::1 counts as loopback (rabbit_net:is_loopback/1)
            conn.close()
        listeners = http(rabbit.management_url, "GET", "/api/overview").body["listeners"]
        assert [(entry["protocol"], entry["ip_address"]) for entry in listeners] == [
            ("amqp", "127.0.0.1"),
            ("amqp", "::1"),
            ("http", "127.0.0.1"),
            ("http", "::1"),
        ]
        answer = http(rabbit.management_url, "GET", "/api/health/checks/protocol-listener/amqp")
        assert answer.body == {"status": "ok", "protocols": ["amqp", "http"]}
