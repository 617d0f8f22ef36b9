"""``fakerabbit serve`` as a process: the ready lines, the management API, --definitions, SIGTERM, busy ports."""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pika
import pytest

from tests.cli.conftest import fakerabbit_command
from tests.management.conftest import http


class Served:
    def __init__(self, proc: subprocess.Popen[str], lines: list[str]) -> None:
        self.proc = proc
        self.lines = lines
        self.management_url = re.search(r"(http://\S+)/api/", lines[0]).group(1) if "management" in lines[0] else ""
        self.amqp_url = re.search(r"(amqp://\S+)", lines[-1]).group(1)  # type: ignore[union-attr]


def serve(*args: str) -> Served:
    proc = subprocess.Popen(
        [*fakerabbit_command(), "serve", "--port", "0", "--management-port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: list[str] = []
    assert proc.stdout is not None
    while True:
        line = proc.stdout.readline()
        if not line:
            raise AssertionError(f"serve exited early: {proc.wait()} {proc.stderr.read() if proc.stderr else ''}")
        lines.append(line.rstrip("\n"))
        if "accepting AMQP connections" in line:
            return Served(proc, lines)


@pytest.fixture
def served() -> Iterator[Served]:
    s = serve("--clock", "virtual")
    yield s
    if s.proc.poll() is None:
        s.proc.kill()
        s.proc.wait()


def test_serve_prints_ready_lines_serves_both_and_exits_0_on_sigterm(served: Served) -> None:
    assert served.lines[0].startswith("fakerabbit: management API on http://127.0.0.1:")
    assert served.lines[1].startswith("fakerabbit: accepting AMQP connections on amqp://guest:guest@127.0.0.1:")
    overview = http(served.management_url, "GET", "/api/overview")
    assert overview.status == 200 and overview.body["product_name"] == "RabbitMQ"
    conn = pika.BlockingConnection(pika.URLParameters(served.amqp_url))
    conn.channel().queue_declare("from-pika")
    assert [q["name"] for q in http(served.management_url, "GET", "/api/queues").body] == ["from-pika"]
    advanced = http(served.management_url, "POST", "/api/fakerabbit/clock/advance", {"seconds": 60})
    assert advanced.status == 200
    served.proc.send_signal(signal.SIGTERM)
    assert served.proc.wait(timeout=10) == 0


def _busy_port() -> tuple[socket.socket, int]:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    return s, int(s.getsockname()[1])


@pytest.mark.parametrize("option", ["--management-port", "--port"])
def test_busy_port_is_a_one_line_error_and_exit_1(option: str) -> None:
    sock, port = _busy_port()
    with sock:
        other = "--port" if option == "--management-port" else "--management-port"
        r = subprocess.run(
            [*fakerabbit_command(), "serve", other, "0", option, str(port)], capture_output=True, text=True, timeout=30
        )
    assert r.returncode == 1
    assert r.stderr == f"fakerabbit: 127.0.0.1:{port} is already in use\n"
    assert r.stdout == ""


def test_definitions_are_loaded_at_start(tmp_path: Path) -> None:
    defs = {
        "exchanges": [{"name": "orders", "vhost": "/", "type": "topic", "durable": True}],
        "queues": [{"name": "billing", "vhost": "/", "durable": True, "arguments": {"x-max-length": 5}}],
        "bindings": [
            {
                "source": "orders",
                "vhost": "/",
                "destination": "billing",
                "destination_type": "queue",
                "routing_key": "order.#",
                "arguments": {},
            }
        ],
    }
    path = tmp_path / "definitions.json"
    path.write_text(json.dumps(defs))
    s = serve("--definitions", str(path))
    try:
        queue = http(s.management_url, "GET", "/api/queues/%2F/billing").body
        assert (queue["durable"], queue["arguments"]["x-max-length"]) == (True, 5)
        bindings = http(s.management_url, "GET", "/api/bindings/%2F/e/orders/q/billing").body
        assert [b["routing_key"] for b in bindings] == ["order.#"]
    finally:
        s.proc.terminate()
        assert s.proc.wait(timeout=10) == 0


def test_bad_definitions_exit_1(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text('{"queues": [{"name": "q", "vhost": "/", "arguments": {"x-max-length": "many"}}]}')
    r = subprocess.run(
        [*fakerabbit_command(), "serve", "--port", "0", "--management-port", "0", "--definitions", str(path)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert r.returncode == 1
    assert r.stderr.startswith(f"fakerabbit: cannot load definitions from {path}: PRECONDITION_FAILED - invalid arg")
    missing = subprocess.run(
        [*fakerabbit_command(), "serve", "--definitions", str(tmp_path / "none.json")],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert missing.returncode == 1 and "cannot read definitions" in missing.stderr


def test_no_management() -> None:
    s = serve("--no-management")
    try:
        assert len(s.lines) == 1 and s.management_url == ""
    finally:
        s.proc.terminate()
        assert s.proc.wait(timeout=10) == 0


def test_dead_letter_retry_interval() -> None:
    """At-least-once quorum dead letters held for a missing DLX are retried every --dead-letter-retry-interval
    seconds (virtual here), not RabbitMQ's default 180."""
    s = serve("--clock", "virtual", "--dead-letter-retry-interval", "5")
    try:
        conn = pika.BlockingConnection(pika.URLParameters(s.amqp_url))
        ch = conn.channel()
        ch.queue_declare(
            "src",
            durable=True,
            arguments={
                "x-queue-type": "quorum",
                "x-dead-letter-strategy": "at-least-once",
                "x-overflow": "reject-publish",
                "x-dead-letter-exchange": "dlx",
            },
        )
        ch.queue_declare("dlq", durable=True)
        ch.basic_publish("", "src", b"m", pika.BasicProperties(expiration="0"))
        ch.exchange_declare("dlx", "fanout")
        ch.queue_bind("dlq", "dlx")
        assert ch.queue_declare("dlq", passive=True).method.message_count == 0
        advanced = http(s.management_url, "POST", "/api/fakerabbit/clock/advance", {"seconds": 5})
        assert advanced.status == 200
        assert ch.queue_declare("dlq", passive=True).method.message_count == 1
        conn.close()
    finally:
        s.proc.terminate()
        assert s.proc.wait(timeout=10) == 0


@pytest.mark.parametrize("plugins", [None, ""])
def test_plugins_option_switches_the_delayed_exchange(plugins: str | None) -> None:
    """The delayed-message exchange is on by default; ``--plugins ''`` turns it off (the unknown-type 406)."""
    s = serve("--clock", "virtual", *(["--plugins", plugins] if plugins is not None else []))
    try:
        conn = pika.BlockingConnection(pika.URLParameters(s.amqp_url))
        ch = conn.channel()
        declare = lambda: ch.exchange_declare("dx", "x-delayed-message", arguments={"x-delayed-type": "fanout"})  # noqa: E731
        if plugins is None:
            declare()
            overview = http(s.management_url, "GET", "/api/overview").body
            assert "x-delayed-message" in [t["name"] for t in overview["exchange_types"]]
            conn.close()
        else:
            with pytest.raises(pika.exceptions.ChannelClosedByBroker) as exc:
                declare()
            assert (exc.value.reply_code, exc.value.reply_text) == (
                406,
                "PRECONDITION_FAILED - unknown exchange type 'x-delayed-message'",
            )
            conn.close()
    finally:
        s.proc.terminate()
        assert s.proc.wait(timeout=10) == 0


def test_unknown_plugin_is_refused() -> None:
    proc = subprocess.run(
        [*fakerabbit_command(), "serve", "--plugins", "rabbitmq_shovel"], capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert "unknown plugin(s) rabbitmq_shovel" in proc.stderr
