"""How long the pytest plugin's per-test reset takes (goal: under 1 ms), and what the fixture costs a test.

    python benchmarks/bench_reset.py            # full run (about 15 seconds)
    python benchmarks/bench_reset.py --quick    # a few seconds

Measurements:

- reset: ``fakerabbit_pytest.plugin.reset_for_test`` on a running FakeRabbit (server in its thread, called from
  this thread exactly as the fixture does), after filling the broker with the state a test leaves behind:
  ``empty``; ``typical`` (2 pika connections, each with 5 exchanges, 5 bound queues, 50 messages, a consumer
  with 10 unacked messages; a policy); ``heavy`` (100 more queues holding 10,000 messages, 10 exchanges and
  10 such pika connections). The fill is not timed. Median and 95th percentile in microseconds.
- fixture: a pytest run of N tests that use the ``fakerabbit`` fixture against N tests that do not (each in a
  fresh subprocess, interleaved, best of 5); the difference per test is what the fixture costs (setup, reset, teardown
  and the problem check), in microseconds.

Exits non-zero only on errors, never on a missed goal.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

import pika

from fakerabbit import FakeRabbit
from fakerabbit.broker.fields import table_from_python
from fakerabbit.broker.properties import build_properties
from fakerabbit.broker.session import Session
from fakerabbit_pytest.plugin import reset_for_test


class _Sink:
    def send_deliver(self, *args: Any) -> None: ...
    def send_return(self, *args: Any) -> None: ...
    def send_confirm(self, *args: Any) -> None: ...
    def send_cancel(self, *args: Any) -> None: ...


def fill(rabbit: FakeRabbit, *, queues: int, messages: int) -> None:
    """Queues, bindings, messages and a policy, created on the server's loop without sockets."""

    def do() -> None:
        broker = rabbit._broker
        v = broker.vhost("/")
        conn = broker.open_connection("guest", "/", client_properties={})
        s = Session(conn, 1, v, _Sink())
        for i in range(10):
            v.declare_exchange(
                None, f"x{i}", "topic", passive=False, durable=True, auto_delete=False, internal=False, arguments={}
            )
        args = table_from_python({"x-message-ttl": 60_000, "x-dead-letter-exchange": "x0"})
        for i in range(queues):
            v.declare_queue(
                None, f"q{i}", passive=False, durable=True, exclusive=False, auto_delete=False, arguments=args
            )
            v.bind(None, "queue", f"q{i}", f"x{i % 10}", "#", {})
        props = build_properties(delivery_mode=2, headers=table_from_python({"k": "v"}))
        for i in range(messages):
            s.publish("", f"q{i % queues}", False, False, props, b"x" * 100)
        s.close()
        broker.close_connection(conn)
        broker.set_policy("p", "^q", {"max-length": 1_000_000}, apply_to="queues")

    rabbit._call(do)


def pika_state(rabbit: FakeRabbit, connections: int, queues: int, messages: int) -> list[pika.BlockingConnection]:
    """What a typical test leaves: open pika connections with consumers and unacked messages."""
    conns = []
    for n in range(connections):
        c = pika.BlockingConnection(pika.URLParameters(rabbit.url))
        ch = c.channel()
        ch.basic_qos(prefetch_count=10)
        for i in range(queues):
            ch.exchange_declare(f"px{n}-{i}", "direct")
            ch.queue_declare(f"pq{n}-{i}", arguments={"x-message-ttl": 60_000})
            ch.queue_bind(f"pq{n}-{i}", f"px{n}-{i}", "k")
        for i in range(messages):
            ch.basic_publish(f"px{n}-{i % queues}", "k", b"x" * 100)
        ch.basic_consume(f"pq{n}-0", lambda *a: None)
        c.process_data_events(0)
        conns.append(c)
    rabbit.queues()  # the server has taken in everything the clients sent
    return conns


def time_resets(rabbit: FakeRabbit, scenario: str, reps: int) -> list[float]:
    out = []
    for _ in range(reps):
        conns: list[pika.BlockingConnection] = []
        if scenario == "typical":
            conns = pika_state(rabbit, connections=2, queues=5, messages=50)
            rabbit.set_policy("p", "^pq", {"max-length": 1000})
        elif scenario == "heavy":
            fill(rabbit, queues=100, messages=10_000)
            conns = pika_state(rabbit, connections=10, queues=5, messages=100)
        t = time.perf_counter()
        reset_for_test(rabbit, None)
        out.append((time.perf_counter() - t) * 1e6)
        assert not rabbit._broker.vhost("/").queues, "reset left queues behind"
        for c in conns:
            with contextlib.suppress(Exception):
                c.close()
    return out


def fixture_overhead(n: int) -> tuple[float, float]:
    """Best-of-5 wall time of ``n`` tests with the fixture and without, in seconds."""
    with tempfile.TemporaryDirectory() as d:
        Path(d, "pytest.ini").write_text("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
        Path(d, "test_with.py").write_text(
            textwrap.dedent(
                f"""
                import pytest
                @pytest.mark.parametrize("i", range({n}))
                def test_it(fakerabbit, i):
                    pass
                """
            )
        )
        Path(d, "test_without.py").write_text(
            textwrap.dedent(
                f"""
                import pytest
                @pytest.mark.parametrize("i", range({n}))
                def test_it(i):
                    pass
                """
            )
        )

        def once(name: str) -> float:
            t = time.perf_counter()
            subprocess.run(
                [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", name],
                cwd=d,
                check=True,
                capture_output=True,
            )
            return time.perf_counter() - t

        with_times, without_times = [], []
        for _ in range(5):  # interleaved, best of 5: the least disturbed run of each
            with_times.append(once("test_with.py"))
            without_times.append(once("test_without.py"))
        return min(with_times), min(without_times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    reps = {"empty": 2000, "typical": 200, "heavy": 20}
    n_tests = 2000
    if args.quick:
        reps = {"empty": 300, "typical": 30, "heavy": 3}
        n_tests = 300

    print(f"python {sys.version.split()[0]}")
    print(f"{'scenario':10} {'reps':>6} {'median us':>10} {'p95 us':>10}   goal < 1000 us")
    with FakeRabbit() as rabbit:
        for scenario, n in reps.items():
            ts = sorted(time_resets(rabbit, scenario, n))
            p95 = ts[min(len(ts) - 1, int(len(ts) * 0.95))]
            print(f"{scenario:10} {n:>6} {statistics.median(ts):>10.0f} {p95:>10.0f}")

    with_fixture, without = fixture_overhead(n_tests)
    per_test = (with_fixture - without) / n_tests * 1e6
    print(
        f"fixture: {n_tests} tests {with_fixture:.2f} s with fakerabbit, {without:.2f} s without: "
        f"{per_test:.0f} us per test (includes starting one server per run)"
    )


if __name__ == "__main__":
    main()
