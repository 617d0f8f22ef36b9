"""Security defaults: loopback only unless a host is given explicitly; credentials and permissions always checked."""

from __future__ import annotations

import socket

import pika
import pika.exceptions
import pytest

from fakerabbit import FakeRabbit
from fakerabbit.cli import build_parser


def bound_address(rabbit: FakeRabbit) -> str:
    """The one address the AMQP listener's socket is bound to."""
    (bound,) = rabbit._listener.bound
    return bound.ip_address


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
        rabbit._call(lambda: rabbit._broker.auth.permissions.pop(("nobody", "/")))
        with pytest.raises(pika.exceptions.ProbableAccessDeniedError) as exc:
            pika.BlockingConnection(pika.URLParameters(rabbit.url.replace("app:pw", "nobody:pw")))
        assert "NOT_ALLOWED - access to vhost '/' refused for user 'nobody'" in str(exc.value)


def _login_from(source: str | None, url_host: str, port: int, user: str = "guest") -> object:
    """Log in with ``user`` from ``source`` (bound locally): the tune, the 403 close, or None (silent)."""
    from pika import spec

    from tests.rawamqp import HEADER, RawAMQP

    c = RawAMQP.socket_to(f"amqp://{url_host}:{port}/")
    if source is not None:  # reconnect from the given local address
        c.sock.close()
        c.sock = socket.create_connection((url_host, port), timeout=5, source_address=(source, 0))
    c.send(HEADER)
    c.read_frame()
    props = {"capabilities": {"authentication_failure_close": True}}
    response = f"\x00{user}\x00{user}".encode()
    c.send_method(0, spec.Connection.StartOk(props, "PLAIN", response, "en_US"))
    f = c.read_frame(timeout=5)
    c.sock.close()
    return None if f is None else (f.name, getattr(f.method, "reply_code", None), getattr(f.method, "reply_text", None))


def test_guest_only_from_loopback_when_listening_beyond_it(caplog: pytest.LogCaptureFixture) -> None:
    """RabbitMQ's default ``loopback_users = [guest]`` (rabbit_access_control:check_user_loopback): guest from
    another address is refused like a bad password; 127.x.x.x is loopback (rabbit_net:is_loopback)."""
    other = non_loopback_address()
    if other is None:
        pytest.skip("no non-loopback address on this machine")
    with FakeRabbit("0.0.0.0", users={"guest": "guest", "app": "app"}) as rabbit:
        refused = (
            "Connection.Close",
            403,
            "ACCESS_REFUSED - Login was refused using authentication mechanism PLAIN. "
            "For details see the broker logfile.",
        )
        assert _login_from(other, other, rabbit.port) == refused
        assert _login_from(other, other, rabbit.port, user="app") == ("Connection.Tune", None, None)
        assert _login_from("127.0.0.2", "127.0.0.1", rabbit.port) == ("Connection.Tune", None, None)
        assert _login_from(None, "127.0.0.1", rabbit.port) == ("Connection.Tune", None, None)
        assert "user 'guest' can only connect via localhost" in caplog.text
        assert rabbit.problems == []  # a refused login is no protocol violation
    with FakeRabbit("0.0.0.0", loopback_users=()) as rabbit:
        assert _login_from(other, other, rabbit.port) == ("Connection.Tune", None, None)


def test_is_loopback() -> None:
    from fakerabbit.protocol.handshake import is_loopback

    for address in ("127.0.0.1", "127.1.2.3", "::1", "::ffff:127.0.0.5", ""):
        assert is_loopback(address), address
    for address in ("192.0.2.2", "10.0.0.1", "::ffff:10.0.0.1", "fe80::1", "0.0.0.0", "not-an-ip"):
        assert not is_loopback(address), address


@pytest.mark.parametrize(("flag", "guest_ok"), [([], False), (["--loopback-users", "none"], True)])
def test_serve_loopback_users(flag: list[str], guest_ok: bool) -> None:
    import re
    import subprocess
    import sys

    other = non_loopback_address()
    if other is None:
        pytest.skip("no non-loopback address on this machine")
    cmd = [sys.executable, "-m", "fakerabbit", "serve", "--host", "0.0.0.0", "--port", "0", "--no-management", *flag]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        port = int(re.search(r":(\d+)/", line).group(1))  # type: ignore[union-attr]
        got = _login_from(other, other, port)
        assert (got == ("Connection.Tune", None, None)) == guest_ok, got
    finally:
        proc.terminate()
        proc.wait(10)
