"""Listening addresses: which sockets a host means (IPv4, IPv6, both), one port for all of them, and addresses
written as RabbitMQ writes them (``rabbit_misc:ntoa/1`` for ``peer_host``, ``ntoab/1`` with brackets in names)."""

from __future__ import annotations

import errno
import socket

import pytest

from fakerabbit.protocol.addresses import bind, host_port, ip_text, url_host
from tests.netsupport import needs_dualstack, needs_ipv6


@pytest.mark.parametrize(
    ("address", "text"),
    [
        ("127.0.0.1", "127.0.0.1"),
        ("::1", "::1"),
        ("::ffff:127.0.0.1", "127.0.0.1"),  # an IPv4 client of a dual-stack socket: ntoa writes it as IPv4
        ("::ffff:10.1.2.3", "10.1.2.3"),
        ("fe80::1%eth0", "fe80::1"),
        ("0:0:0:0:0:0:0:1", "::1"),
        ("not-an-address", "not-an-address"),
    ],
)
def test_ip_text_is_rabbit_misc_ntoa(address: str, text: str) -> None:
    assert ip_text(address) == text


@pytest.mark.parametrize(
    ("host", "written"),
    [("::1", "[::1]"), ("::", "[::]"), ("[::1]", "[::1]"), ("127.0.0.1", "127.0.0.1"), ("localhost", "localhost")],
)
def test_url_host_brackets_ipv6(host: str, written: str) -> None:
    assert url_host(host) == written


def test_host_port_of_socket_addresses() -> None:
    assert host_port(("::ffff:127.0.0.1", 5672, 0, 0)) == ("127.0.0.1", 5672)
    assert host_port(("::1", 5671, 0, 0)) == ("::1", 5671)
    assert host_port(("127.0.0.1", 5672)) == ("127.0.0.1", 5672)
    assert host_port("/tmp/socket") == ("", 0)
    assert host_port(None) == ("", 0)


def _accepts(sock: socket.socket, address: str) -> bool:
    port = sock.getsockname()[1]
    sock.setblocking(True)
    sock.settimeout(5)
    try:
        with socket.create_connection((address, port), timeout=5):
            conn, _ = sock.accept()
            conn.close()
    except OSError:
        return False
    return True


def test_an_ipv4_address_is_one_ipv4_socket() -> None:
    socks = bind("127.0.0.1", 0)
    try:
        assert [s.family for s in socks] == [socket.AF_INET]
        assert _accepts(socks[0], "127.0.0.1")
    finally:
        for s in socks:
            s.close()


@needs_ipv6
def test_localhost_listens_on_both_loopbacks_on_one_port() -> None:
    socks = bind("localhost", 0)
    try:
        assert [s.family for s in socks] == [socket.AF_INET, socket.AF_INET6]
        assert [s.getsockname()[0] for s in socks] == ["127.0.0.1", "::1"]
        assert socks[0].getsockname()[1] == socks[1].getsockname()[1] != 0
        assert _accepts(socks[0], "127.0.0.1")
        assert _accepts(socks[1], "::1")
    finally:
        for s in socks:
            s.close()


@needs_ipv6
def test_ipv6_loopback_only() -> None:
    socks = bind("::1", 0)
    try:
        assert [s.family for s in socks] == [socket.AF_INET6]
        assert _accepts(socks[0], "::1")
        assert not _accepts(socks[0], "127.0.0.1")
    finally:
        for s in socks:
            s.close()


@needs_dualstack
def test_the_ipv6_wildcard_accepts_ipv4_too() -> None:
    socks = bind("::", 0)
    try:
        assert len(socks) == 1
        assert _accepts(socks[0], "::1")
        assert _accepts(socks[0], "127.0.0.1")
    finally:
        for s in socks:
            s.close()


@needs_ipv6
def test_a_taken_port_in_one_family_is_an_error_when_the_port_was_asked_for() -> None:
    with socket.socket(socket.AF_INET6) as taken:
        taken.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        taken.bind(("::1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(OSError) as info:
            bind("localhost", port)
        assert info.value.errno == errno.EADDRINUSE


def test_an_address_the_machine_does_not_have_is_an_error() -> None:
    with pytest.raises(OSError) as info:
        bind("192.0.2.1", 0)  # TEST-NET-1: never a local address
    assert info.value.errno == errno.EADDRNOTAVAIL


def test_accepted_connections_have_nagle_off() -> None:
    """asyncio turns Nagle off only for sockets whose proto says TCP; a listening socket made with proto 0 gave
    accepted sockets proto 0, and a delivery written right after a confirm waited ~40 ms for the client's ACK."""
    from fakerabbit import FakeRabbit

    with FakeRabbit() as rabbit:
        client = socket.create_connection(("127.0.0.1", rabbit.port))
        try:
            client.sendall(b"AMQP\x00\x00\x09\x01")
            client.recv(1)  # connection.start has been written: the server side is accepted
            conns = list(rabbit._listener.connections)
            assert len(conns) == 1
            sock = conns[0].transport.get_extra_info("socket")
            assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
        finally:
            client.close()
