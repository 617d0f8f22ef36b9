"""Start-up, stop and per-test reset of the fake.

    python benchmarks/bench_startup.py            # full run (a few seconds)
    python benchmarks/bench_startup.py --quick

- in-process ``FakeRabbit()`` construct + ``start()`` + ``stop()`` (thread mode), median over N runs, and the
  same on the caller's loop (``async with FakeRabbit()``);
- ``rabbit.reset()`` from the test thread, on an idle broker and after a typical test (one pika connection,
  3 queues, 1 exchange, 2 bindings, 10 messages, 1 consumer), median over N runs;
- ``python -m fakerabbit serve --port 0``: process spawn until it prints its URL (accepting connections), and
  ``import fakerabbit`` in a fresh interpreter.

The real RabbitMQ's start is not measured here (the local broker is shared); the issue measured ~4.5 s.
Goals: start + stop median < 20 ms; reset median < 1 ms. Exits non-zero only on errors.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import subprocess
import sys
import time

import pika
from _common import BODY_100, fake_process, median, print_table, unique

from fakerabbit import FakeRabbit


def pct(xs: list[float], p: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(p * len(s)))]


def bench_start_stop(n: int) -> tuple[list[float], list[float], list[float]]:
    starts, stops, totals = [], [], []
    for _ in range(n):
        t0 = time.perf_counter()
        r = FakeRabbit()
        r.start()
        t1 = time.perf_counter()
        r.stop()
        t2 = time.perf_counter()
        starts.append(t1 - t0)
        stops.append(t2 - t1)
        totals.append(t2 - t0)
    return starts, stops, totals


def bench_start_stop_async(n: int) -> list[float]:
    async def run() -> list[float]:
        out = []
        for _ in range(n):
            t0 = time.perf_counter()
            async with FakeRabbit():
                pass
            out.append(time.perf_counter() - t0)
        return out

    return asyncio.run(run())


def typical_test(url: str) -> pika.BlockingConnection:
    conn = pika.BlockingConnection(pika.URLParameters(url))
    ch = conn.channel()
    x = unique("x")
    ch.exchange_declare(x, "topic")
    qs = [unique("q") for _ in range(3)]
    for q in qs:
        ch.queue_declare(q)
    ch.queue_bind(qs[0], x, "a.*")
    ch.queue_bind(qs[1], x, "#")
    for i in range(10):
        ch.basic_publish(x, f"a.{i}", BODY_100)
    ch.basic_consume(qs[2], lambda *a: None)
    ch.queue_declare(qs[0], passive=True)  # round trip: everything above is applied
    return conn


def bench_reset(n: int, with_state: bool) -> list[float]:
    out = []
    with FakeRabbit() as r:
        for _ in range(n):
            conn = typical_test(r.url) if with_state else None
            t0 = time.perf_counter()
            r.reset()
            out.append(time.perf_counter() - t0)
            if conn is not None:
                with contextlib.suppress(Exception):
                    conn.close()
    return out


def bench_process_start(n: int) -> list[float]:
    out = []
    for _ in range(n):
        with fake_process() as t:
            out.append(t.info["start_s"])
    return out


def bench_import(n: int) -> list[float]:
    code = "import time; t = time.perf_counter(); import fakerabbit.server; print(time.perf_counter() - t)"
    return [float(subprocess.check_output([sys.executable, "-c", code], text=True)) for _ in range(n)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("-n", type=int, default=None, help="runs for start/stop and reset (default 100)")
    args = ap.parse_args(argv)
    n = args.n or (5 if args.quick else 100)
    np_ = 2 if args.quick else 7

    bench_start_stop(2)  # warm up imports and the first loop
    starts, stops, totals = bench_start_stop(n)
    async_totals = bench_start_stop_async(n)
    reset_idle = bench_reset(n, with_state=False)
    reset_state = bench_reset(n, with_state=True)
    proc = bench_process_start(np_)
    imp = bench_import(np_)

    ms = 1000.0
    rows = [
        ["FakeRabbit() + start() (thread)", median(starts) * ms, pct(starts, 0.9) * ms, min(starts) * ms, n, ""],
        ["stop() (thread)", median(stops) * ms, pct(stops, 0.9) * ms, min(stops) * ms, n, ""],
        ["start + stop (thread)", median(totals) * ms, pct(totals, 0.9) * ms, min(totals) * ms, n, "< 20 ms"],
        [
            "start + stop (async, caller's loop)",
            median(async_totals) * ms,
            pct(async_totals, 0.9) * ms,
            min(async_totals) * ms,
            n,
            "< 20 ms",
        ],
        ["reset() idle", median(reset_idle) * ms, pct(reset_idle, 0.9) * ms, min(reset_idle) * ms, n, "< 1 ms"],
        [
            "reset() after a typical test",
            median(reset_state) * ms,
            pct(reset_state, 0.9) * ms,
            min(reset_state) * ms,
            n,
            "< 1 ms",
        ],
        [
            "serve process: spawn to accepting",
            median(proc) * ms,
            pct(proc, 0.9) * ms,
            min(proc) * ms,
            np_,
            "(RabbitMQ ~4500)",
        ],
        ["import fakerabbit.server (fresh interpreter)", median(imp) * ms, pct(imp, 0.9) * ms, min(imp) * ms, np_, ""],
    ]
    goals = {2: 20.0, 3: 20.0, 4: 1.0, 5: 1.0}
    table = []
    for i, (name, med, p90, mn, count, goal) in enumerate(rows):
        status = ""
        if i in goals:
            status = "ok" if med < goals[i] else "MISSED"
        table.append([name, f"{med:.3f}", f"{p90:.3f}", f"{mn:.3f}", str(count), f"{goal} {status}".strip()])
    print(f"python {sys.version.split()[0]}")
    print_table(["measure (ms)", "median", "p90", "min", "runs", "goal"], table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
