"""The same five small pika tests on fakerabbit's pytest plugin and on pytest-rabbitmq (run by hand).

pytest-rabbitmq (https://pypi.org/project/pytest-rabbitmq/) starts the system's ``rabbitmq-server`` for the
session and, after each test, clears queues and exchanges through ``rabbitmqctl``. Both runs use each plugin
as its documentation shows; every test opens its own pika connection, so the test bodies are identical.

    pip install pytest-rabbitmq            # into the same environment as fakerabbit (needs rabbitmq-server)
    python benchmarks/bench_vs_pytest_rabbitmq.py --runs 3

The RabbitMQ node gets ports of its own (``--port``, default 5801, distribution port + 20000), a node name and
a config file of its own (``RABBITMQ_CONFIG_FILE``: a system ``/etc/rabbitmq/rabbitmq.conf`` that pins a listener
to 5672 would otherwise make the node crash with ``eaddrinuse`` while a broker runs there), so it never meets a
broker already running on 5672 and friends; pytest-rabbitmq stops it at the end of its session, and the script
checks that nothing is left listening on the port.
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

TESTS = """
import pika


def channel(params):
    conn = pika.BlockingConnection(params)
    ch = conn.channel()
    ch.confirm_delivery()
    return conn, ch


def test_publish_and_get(params):
    conn, ch = channel(params)
    ch.queue_declare("orders")
    ch.basic_publish("", "orders", b"order-1")
    method, _props, body = ch.basic_get("orders", auto_ack=True)
    assert body == b"order-1" and method.message_count == 0
    conn.close()


def test_fanout_to_two_queues(params):
    conn, ch = channel(params)
    ch.exchange_declare("events", "fanout")
    for q in ("audit", "mail"):
        ch.queue_declare(q)
        ch.queue_bind(q, "events")
    ch.basic_publish("events", "", b"signed-up")
    assert [ch.basic_get(q, auto_ack=True)[2] for q in ("audit", "mail")] == [b"signed-up", b"signed-up"]
    conn.close()


def test_topic_routing(params):
    conn, ch = channel(params)
    ch.exchange_declare("logs", "topic")
    ch.queue_declare("errors")
    ch.queue_bind("errors", "logs", "*.error")
    ch.basic_publish("logs", "billing.error", b"e")
    ch.basic_publish("logs", "billing.info", b"i")
    assert ch.queue_declare("errors", passive=True).method.message_count == 1
    conn.close()


def test_reject_dead_letters(params):
    conn, ch = channel(params)
    ch.queue_declare("work.dlq")
    ch.queue_declare("work", arguments={"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "work.dlq"})
    ch.basic_publish("", "work", b"poison")
    method, _props, _body = ch.basic_get("work")
    ch.basic_reject(method.delivery_tag, requeue=False)
    for _ in range(100):
        method, props, body = ch.basic_get("work.dlq", auto_ack=True)
        if body is not None:
            break
    assert props.headers["x-death"][0]["reason"] == "rejected"
    conn.close()


def test_consume_and_ack(params):
    conn, ch = channel(params)
    ch.queue_declare("jobs")
    for i in range(10):
        ch.basic_publish("", "jobs", str(i).encode())
    seen = []
    def on_message(c, method, _props, body):
        seen.append(body)
        c.basic_ack(method.delivery_tag)
    ch.basic_consume("jobs", on_message)
    while len(seen) < 10:
        conn.process_data_events(0.1)
    assert seen == [str(i).encode() for i in range(10)]
    conn.close()
"""

FAKE_CONFTEST = """
import pika, pytest

@pytest.fixture
def params(fakerabbit_url):
    return pika.URLParameters(fakerabbit_url)
"""

REAL_CONFTEST = """
import pika, pytest
from pytest_rabbitmq import factories

rabbitmq_proc = factories.rabbitmq_proc(port={port}, distribution_port={dist}, node="fakerabbit-bench-{port}")
rabbitmq = factories.rabbitmq("rabbitmq_proc")

@pytest.fixture
def params(rabbitmq_proc, rabbitmq):  # the client fixture clears queues and exchanges after each test
    return pika.ConnectionParameters(rabbitmq_proc.host, rabbitmq_proc.port,
                                     credentials=pika.PlainCredentials("guest", "guest"))
"""

_DURATION = re.compile(r"^([\d.]+)s (setup|call|teardown)\s+\S+", re.M)


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def run_once(project: Path, disable: str, env: dict[str, str]) -> tuple[float, dict[str, float], str]:
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", f"no:{disable}", "--durations=0"],
        cwd=project,
        capture_output=True,
        text=True,
        check=False,
        env=env,
    )
    wall = time.perf_counter() - t0
    phases = {"setup": 0.0, "call": 0.0, "teardown": 0.0}
    for seconds, phase in _DURATION.findall(proc.stdout):
        phases[phase] += float(seconds)
    if proc.returncode != 0:
        return float("nan"), phases, proc.stdout[-3000:] + proc.stderr[-2000:]
    return wall, phases, ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="runs of each suite (default 3)")
    parser.add_argument("--port", type=int, default=5801, help="AMQP port of pytest-rabbitmq's node (default 5801)")
    args = parser.parse_args()
    if _listening(args.port) or _listening(args.port + 20000):
        sys.exit(f"port {args.port} or {args.port + 20000} is taken: pick another --port")

    with tempfile.TemporaryDirectory(prefix="bench-vs-pytest-rabbitmq-") as tmp:
        conf = Path(tmp) / "rabbitmq.conf"
        conf.write_text(f"listeners.tcp.local = 127.0.0.1:{args.port}\n")
        env = {**os.environ, "RABBITMQ_CONFIG_FILE": str(conf)}
        suites = {}
        for name, conftest, disable in (
            ("fakerabbit", FAKE_CONFTEST, "pytest_rabbitmq"),
            ("pytest-rabbitmq", REAL_CONFTEST.format(port=args.port, dist=args.port + 20000), "fakerabbit"),
        ):
            project = Path(tmp) / name.replace("-", "_")
            project.mkdir()
            (project / "conftest.py").write_text(textwrap.dedent(conftest))
            (project / "test_five.py").write_text(TESTS)
            suites[name] = (project, disable)

        print(f"five small pika tests, {args.runs} run(s) each; wall = the whole `python -m pytest` process")
        results: dict[str, list[float]] = {}
        for name, (project, disable) in suites.items():
            results[name] = []
            for i in range(args.runs):
                wall, phases, error = run_once(project, disable, env)
                if error:
                    print(f"  {name} run {i + 1}: FAILED\n{textwrap.indent(error, '    ')}")
                    continue
                results[name].append(wall)
                print(
                    f"  {name:16} run {i + 1}: {wall:6.2f} s wall   setup {phases['setup']:5.2f} s   "
                    f"call {phases['call']:5.2f} s   teardown {phases['teardown']:5.2f} s"
                )
            if _listening(args.port):
                print(f"  warning: something still listens on {args.port} after the {name} runs")
        fake, real = (statistics.median(results[n]) if results[n] else float("nan") for n in suites)
        print(f"median wall: fakerabbit {fake:.2f} s, pytest-rabbitmq {real:.2f} s, ratio {real / fake:.1f}x")


if __name__ == "__main__":
    main()
