"""Debian's amqp-tools (rabbitmq-c's command-line clients), a C client: declare, publish, get, consume, delete.

Skipped when the tools are not installed (``apt-get install amqp-tools``).
"""

from __future__ import annotations

import shutil
import subprocess

import pytest

from tests.conformance.conftest import Target

TOOLS = ("amqp-declare-queue", "amqp-publish", "amqp-get", "amqp-consume", "amqp-delete-queue")
pytestmark = pytest.mark.skipif(
    any(shutil.which(t) is None for t in TOOLS), reason="amqp-tools (rabbitmq-c) is not installed"
)


def run(*args: str, input_: bytes | None = None, timeout: float = 10) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(args, input=input_, capture_output=True, timeout=timeout, check=False)


def test_declare_publish_get_delete(broker: Target) -> None:
    q = broker.name("cli")
    url = broker.url
    declared = run("amqp-declare-queue", "-u", url, "-q", q)
    assert declared.returncode == 0, declared.stderr
    assert declared.stdout.strip() == q.encode()
    for body in (b"first", b"second"):
        published = run("amqp-publish", "-u", url, "-r", q, "-C", "text/plain", "-H", "k: v", "-b", body.decode())
        assert published.returncode == 0, published.stderr
    got = run("amqp-get", "-u", url, "-q", q)
    assert (got.returncode, got.stdout) == (0, b"first")
    got = run("amqp-get", "-u", url, "-q", q)
    assert (got.returncode, got.stdout) == (0, b"second")
    empty = run("amqp-get", "-u", url, "-q", q)
    assert empty.returncode != 0 and empty.stdout == b""
    deleted = run("amqp-delete-queue", "-u", url, "-q", q)
    assert deleted.returncode == 0, deleted.stderr


def test_consume_a_fixed_count_with_acks(broker: Target) -> None:
    q = broker.name("cli")
    url = broker.url
    assert run("amqp-declare-queue", "-u", url, "-q", q).returncode == 0
    lines = b"".join(f"line {i}\n".encode() for i in range(5))
    assert run("amqp-publish", "-u", url, "-r", q, "-l", input_=lines).returncode == 0
    consumed = run("amqp-consume", "-u", url, "-q", q, "-c", "5", "-p", "1", "cat")
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout == lines  # one message per line, each with its newline
    assert run("amqp-get", "-u", url, "-q", q).returncode != 0  # all acked
    run("amqp-delete-queue", "-u", url, "-q", q)


def test_errors_are_reported(broker: Target) -> None:
    missing = broker.name("missing")
    got = run("amqp-get", "-u", broker.url, "-q", missing)
    assert got.returncode != 0
    assert b"NOT_FOUND - no queue" in got.stderr
    bad = run("amqp-get", "-u", broker.url.replace("guest:guest", "guest:wrong"), "-q", missing)
    assert bad.returncode != 0
