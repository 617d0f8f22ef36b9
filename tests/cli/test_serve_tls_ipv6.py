"""``fakerabbit serve`` with TLS and IPv6: ``--tls-port`` (amqps), ``--management-tls-port`` (HTTPS), ``--tls-dir``,
``--host ::1`` / ``localhost``, the printed URLs (IPv6 in brackets), ``ctl --cacert`` against an HTTPS API."""

from __future__ import annotations

import re
import socket
import ssl
import subprocess
from pathlib import Path

import pika
import pytest

from tests.cli.conftest import fakerabbit_command
from tests.cli.test_serve import serve
from tests.management.conftest import http
from tests.netsupport import needs_ipv6


def _line(lines: list[str], prefix: str) -> str:
    found = [line for line in lines if line.startswith(prefix)]
    assert len(found) == 1, lines
    return found[0][len(prefix) :]


def _ctl(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*fakerabbit_command(), "ctl", "--management-url", url, *args], capture_output=True, text=True, timeout=60
    )


def test_serve_amqps_and_https_with_the_printed_ca(tmp_path: Path) -> None:
    s = serve("--clock", "virtual", "--tls-port", "0", "--management-tls-port", "0", "--tls-dir", str(tmp_path))
    try:
        ca_file = _line(s.lines, "fakerabbit: TLS certificate authority (trust it in clients): ")
        assert ca_file == str(tmp_path / "ca_certificate.pem")
        client = _line(s.lines, "fakerabbit: client certificate ")
        assert client == f"{tmp_path / 'client_certificate.pem'}, key {tmp_path / 'client_key.pem'}"
        amqps_url = _line(s.lines, "fakerabbit: accepting AMQPS connections on ")
        assert re.fullmatch(r"amqps://guest:guest@127\.0\.0\.1:\d+/%2F", amqps_url)
        https = _line(s.lines, "fakerabbit: management API over HTTPS on ")
        assert re.fullmatch(r"https://127\.0\.0\.1:\d+/api/", https)
        assert s.lines[-1].startswith("fakerabbit: accepting AMQP connections on amqp://guest:guest@127.0.0.1:")

        params = pika.URLParameters(amqps_url)
        params.ssl_options = pika.SSLOptions(ssl.create_default_context(cafile=ca_file), "localhost")
        conn = pika.BlockingConnection(params)
        conn.channel().queue_declare("over-amqps")
        https_base = https.removesuffix("/api/")
        queues = http(https_base, "GET", "/api/queues", context=ssl.create_default_context(cafile=ca_file)).body
        assert [q["name"] for q in queues] == ["over-amqps"]

        listed = _ctl(https_base, "--cacert", ca_file, "list_connections", "ssl", "ssl_protocol", "peer_host")
        assert listed.returncode == 0, listed.stderr
        assert listed.stdout.splitlines()[1:] == ["ssl\tssl_protocol\tpeer_host", "true\ttlsv1.3\t127.0.0.1"]
        untrusted = _ctl(https_base, "list_connections")
        assert untrusted.returncode == 69 and "CERTIFICATE_VERIFY_FAILED" in untrusted.stderr
        missing = _ctl(https_base, "--cacert", str(tmp_path / "none.pem"), "list_connections")
        assert missing.returncode == 64 and "cannot read the CA certificate" in missing.stderr
        conn.close()
    finally:
        s.proc.terminate()
        assert s.proc.wait(timeout=10) == 0
    assert (tmp_path / "ca_certificate.pem").exists()  # --tls-dir: the files stay where they were asked for


def test_a_busy_tls_port_is_a_one_line_error() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        for option in ("--tls-port", "--management-tls-port"):
            r = subprocess.run(
                [*fakerabbit_command(), "serve", "--port", "0", "--management-port", "0", option, str(port)],
                capture_output=True,
                text=True,
                timeout=30,
            )
            assert (r.returncode, r.stderr, r.stdout) == (1, f"fakerabbit: 127.0.0.1:{port} is already in use\n", "")


def test_without_tls_options_nothing_about_tls_is_printed() -> None:
    s = serve()
    try:
        assert not any("TLS" in line or "amqps" in line or "https" in line for line in s.lines)
    finally:
        s.proc.terminate()
        assert s.proc.wait(timeout=10) == 0


@needs_ipv6
def test_serve_on_ipv6_loopback_prints_bracketed_urls() -> None:
    s = serve("--host", "::1", "--tls-port", "0")
    try:
        assert re.fullmatch(r"fakerabbit: management API on http://\[::1\]:\d+/api/", s.lines[0])
        assert re.fullmatch(r"amqp://guest:guest@\[::1\]:\d+/%2F", s.amqp_url)
        amqps_url = _line(s.lines, "fakerabbit: accepting AMQPS connections on ")
        assert re.fullmatch(r"amqps://guest:guest@\[::1\]:\d+/%2F", amqps_url)
        conn = pika.BlockingConnection(pika.URLParameters(s.amqp_url))
        conn.channel().queue_declare("over-ipv6")
        listed = _ctl(s.management_url, "list_connections", "peer_host", "name")
        assert listed.returncode == 0, listed.stderr
        peer_host, name = listed.stdout.splitlines()[2].split("\t")
        assert peer_host == "::1" and re.fullmatch(r"\[::1\]:\d+ -> \[::1\]:\d+", name)
        queues = _ctl(s.management_url, "list_queues", "name")
        assert queues.stdout.splitlines()[-1] == "over-ipv6"
        conn.close()
    finally:
        s.proc.terminate()
        assert s.proc.wait(timeout=10) == 0


@needs_ipv6
def test_serve_on_localhost_answers_both_families() -> None:
    s = serve("--host", "localhost")
    try:
        port = int(s.amqp_url.rsplit(":", 1)[1].split("/")[0])
        assert s.amqp_url == f"amqp://guest:guest@localhost:{port}/%2F"
        for address in ("127.0.0.1", "[::1]"):
            conn = pika.BlockingConnection(pika.URLParameters(f"amqp://guest:guest@{address}:{port}/%2F"))
            conn.close()
    finally:
        s.proc.terminate()
        assert s.proc.wait(timeout=10) == 0


@pytest.mark.parametrize("host", ["192.0.2.1"])
def test_an_address_the_machine_lacks_is_a_one_line_error(host: str) -> None:
    r = subprocess.run(
        [*fakerabbit_command(), "serve", "--host", host, "--port", "5999", "--no-management"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert r.returncode == 1
    assert r.stderr == f"fakerabbit: cannot listen on {host}:5999: Cannot assign requested address\n"
