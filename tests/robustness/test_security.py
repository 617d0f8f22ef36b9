"""Security defaults: loopback only unless a host is given explicitly; credentials and permissions always checked."""

from __future__ import annotations

import socket

import pika
import pika.exceptions
import pytest

from fakerabbit import FakeRabbit
from fakerabbit.cli import build_parser


def bound_address(rabbit: FakeRabbit) -> str:
    server = rabbit.server._server
    assert server is not None
    return str(server.sockets[0].getsockname()[0])


def non_loopback_address() -> str | None:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.connect(("10.255.255.255", 1))  # no packet is sent: this only picks the outgoing interface
        addr = str(s.getsockname()[0])
    except OSError:
        return None
    finally:
        s.close()
    return None if addr.startswith("127.") else addr


def test_binds_to_loopback_by_default() -> None:
    with FakeRabbit() as rabbit:
        assert bound_address(rabbit) == "127.0.0.1"
        assert rabbit.url.startswith("amqp://guest:guest@127.0.0.1:")
        other = non_loopback_address()
        if other is not None:
            with pytest.raises(OSError):
                socket.create_connection((other, rabbit.port), timeout=2).close()


def test_cli_default_host_is_loopback() -> None:
    args = build_parser().parse_args(["serve"])
    assert args.host == "127.0.0.1"
    assert build_parser().parse_args(["serve", "--host", "0.0.0.0"]).host == "0.0.0.0"


def test_other_interfaces_only_when_asked() -> None:
    with FakeRabbit(host="0.0.0.0") as rabbit:
        assert bound_address(rabbit) == "0.0.0.0"
        other = non_loopback_address()
        if other is not None:
            socket.create_connection((other, rabbit.port), timeout=2).close()


def test_credentials_are_always_checked() -> None:
    with FakeRabbit(users={"app": "s3cret"}) as rabbit:
        url = rabbit.url
        assert url.startswith("amqp://app:s3cret@")
        pika.BlockingConnection(pika.URLParameters(url)).close()
        for bad in (url.replace("app:s3cret", "app:wrong"), url.replace("app:s3cret", "guest:guest")):
            with pytest.raises(pika.exceptions.ProbableAuthenticationError):
                pika.BlockingConnection(pika.URLParameters(bad))


def test_a_user_without_permissions_cannot_open_the_vhost() -> None:
    with FakeRabbit(users={"app": "pw", "nobody": "pw"}) as rabbit:
        rabbit.call(lambda: rabbit.broker.auth.permissions.pop(("nobody", "/")))
        with pytest.raises(pika.exceptions.ProbableAccessDeniedError) as exc:
            pika.BlockingConnection(pika.URLParameters(rabbit.url.replace("app:pw", "nobody:pw")))
        assert "NOT_ALLOWED - access to vhost '/' refused for user 'nobody'" in str(exc.value)
