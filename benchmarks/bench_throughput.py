"""Throughput and per-test cycle, with pika and 100-byte messages, against the fake in its own process, the fake
in a thread of this process (sharing the GIL with pika) and a real RabbitMQ, side by side in one run.

    python benchmarks/bench_throughput.py            # full run (about a minute)
    python benchmarks/bench_throughput.py --quick    # a few seconds
    python benchmarks/bench_throughput.py --real-url amqp://guest:guest@host:5672/%2F --reps 5

Measurements (each repeated ``--reps`` times, targets interleaved; medians reported):

- publish: ``basic_publish`` without confirms, N messages to one queue; the clock stops when a passive
  ``queue.declare`` reports all N messages in the queue.
- consume: the N messages just published, ``basic.qos(prefetch_count=200)``, one ``basic.ack`` per message.
- confirm: ``confirm_delivery()`` then N/4 publishes, each waiting for its ack (pika's blocking publish).
- cycle: connect + channel + ``queue.declare`` (exclusive) + publish + ``basic.get`` + close, in ms per cycle.

Ratios are fake/real for rates and real/fake for the cycle time: above 1 means the fake is faster.
Exits non-zero only on errors, never on a missed goal.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from collections import defaultdict

import pika
from _common import (
    BODY_100,
    DEFAULT_REAL_URL,
    EXTRA_SERVE_ARGS,
    Target,
    fake_process,
    fake_thread,
    fmt_ratio,
    have_uvloop,
    median,
    print_table,
    real_target,
    unique,
)

GOALS = {"publish": 1.0, "consume": 1.0, "confirm": 1.0, "cycle": 2.0}


def _wait_count(ch: pika.adapters.blocking_connection.BlockingChannel, q: str, n: int, timeout: float = 60) -> None:
    deadline = time.perf_counter() + timeout
    while True:
        count = ch.queue_declare(q, passive=True).method.message_count
        if count >= n:
            return
        if time.perf_counter() > deadline:
            raise RuntimeError(f"only {count}/{n} messages arrived in {q}")
        time.sleep(0.0005)


class ServerCPU:
    """Broker CPU (us) per operation over a block, for a fake we run as a process; NaN otherwise."""

    def __init__(self, t: Target, out: dict[str, float], key: str, ops: int) -> None:
        self.t, self.out, self.key, self.ops = t, out, key, ops

    def __enter__(self) -> None:
        self.c0 = self.t.server_cpu()

    def __exit__(self, *exc: object) -> None:
        c1 = self.t.server_cpu()
        if self.c0 is not None and c1 is not None:
            self.out[self.key] = (c1 - self.c0) / self.ops * 1e6


def bench_publish_consume(t: Target, n: int, cpu: dict[str, float]) -> tuple[float, float]:
    """(publish msgs/s, consume msgs/s)."""
    conn = pika.BlockingConnection(t.params())
    try:
        ch = conn.channel()
        q = unique("tp")
        ch.queue_declare(q, auto_delete=False)
        publish = ch.basic_publish
        with ServerCPU(t, cpu, "publish", n):
            t0 = time.perf_counter()
            for _ in range(n):
                publish("", q, BODY_100)
            _wait_count(ch, q, n)
            pub = n / (time.perf_counter() - t0)

        ch.basic_qos(prefetch_count=200)
        got = 0

        def on_message(c: object, method: pika.spec.Basic.Deliver, _p: object, _b: bytes) -> None:
            nonlocal got
            ch.basic_ack(method.delivery_tag)
            got += 1
            if got == n:
                ch.stop_consuming()

        with ServerCPU(t, cpu, "consume", n):
            t0 = time.perf_counter()
            ch.basic_consume(q, on_message)
            ch.start_consuming()
            con = n / (time.perf_counter() - t0)
        ch.queue_delete(q)
        return pub, con
    finally:
        with contextlib.suppress(Exception):
            conn.close()


def bench_confirm(t: Target, n: int, cpu: dict[str, float]) -> float:
    conn = pika.BlockingConnection(t.params())
    try:
        ch = conn.channel()
        q = unique("tc")
        ch.queue_declare(q)
        ch.confirm_delivery()
        with ServerCPU(t, cpu, "confirm", n):
            t0 = time.perf_counter()
            for _ in range(n):
                ch.basic_publish("", q, BODY_100)
            rate = n / (time.perf_counter() - t0)
        ch.queue_delete(q)
        return rate
    finally:
        with contextlib.suppress(Exception):
            conn.close()


def bench_cycle(t: Target, m: int, cpu: dict[str, float]) -> float:
    """Median ms of connect + declare + publish + get + close."""
    params = t.params()
    times = []
    c0 = t.server_cpu()
    for _ in range(m):
        q = unique("cy")
        t0 = time.perf_counter()
        conn = pika.BlockingConnection(params)
        ch = conn.channel()
        ch.queue_declare(q, exclusive=True)
        ch.basic_publish("", q, BODY_100)
        _m, _p, body = ch.basic_get(q, auto_ack=True)
        conn.close()
        times.append(time.perf_counter() - t0)
        if body != BODY_100:
            raise RuntimeError(f"{t.name}: basic.get returned {body!r}")
    c1 = t.server_cpu()
    if c0 is not None and c1 is not None:
        cpu["cycle"] = (c1 - c0) / m * 1e6
    return median(times) * 1000


def run_target(t: Target, n: int, cycles: int) -> tuple[dict[str, float], dict[str, float]]:
    """Rates (and cycle ms), and the broker's CPU in us per message / per cycle when it is our process."""
    cpu: dict[str, float] = {}
    pub, con = bench_publish_consume(t, n, cpu)
    res = {
        "publish": pub,
        "consume": con,
        "confirm": bench_confirm(t, max(n // 4, 10), cpu),
        "cycle": bench_cycle(t, cycles, cpu),
    }
    return res, cpu


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small N, one repetition")
    ap.add_argument("-n", type=int, default=None, help="messages per publish/consume run (default 20000)")
    ap.add_argument("--cycles", type=int, default=None, help="per-test cycles per run (default 200)")
    ap.add_argument("--reps", type=int, default=None, help="repetitions per target (default 5)")
    ap.add_argument("--real-url", default=DEFAULT_REAL_URL)
    ap.add_argument("--no-real", action="store_true", help="skip the real broker")
    ap.add_argument(
        "--targets",
        default="process,thread,real",
        help="comma list of process, thread, real, uvloop (the fake process on uvloop's loop, if importable); "
        "default process,thread,real",
    )
    ap.add_argument(
        "--compare-tree",
        action="append",
        default=[],
        metavar="DIR",
        help="also run the fake process from the fakerabbit package in DIR (target fake@DIR's name), e.g. a git "
        "worktree of an older commit: before/after under the same load (repeatable)",
    )
    ap.add_argument("--serve-args", default="", help="extra flags for every `fakerabbit serve`, e.g. --no-events")
    args = ap.parse_args(argv)
    EXTRA_SERVE_ARGS.extend(args.serve_args.split())
    n = args.n or (500 if args.quick else 20000)
    cycles = args.cycles or (10 if args.quick else 200)
    reps = args.reps or (1 if args.quick else 5)
    wanted = set(args.targets.split(","))

    results: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    cpus: dict[str, list[float]] = defaultdict(list)
    real = None if (args.no_real or "real" not in wanted) else real_target(args.real_url)
    with contextlib.ExitStack() as stack:
        targets: list[Target] = []
        for tree in args.compare_tree:
            name = f"fake@{os.path.basename(os.path.normpath(tree))}"
            targets.append(stack.enter_context(fake_process(tree=tree, name=name)))
        if "process" in wanted:
            targets.append(stack.enter_context(fake_process()))
        if "uvloop" in wanted:
            if have_uvloop():
                targets.append(stack.enter_context(fake_process(uvloop=True)))
            else:
                print("note: uvloop is not importable; uvloop target skipped", file=sys.stderr)
        if "thread" in wanted:
            targets.append(stack.enter_context(fake_thread()))
        if real is not None:
            targets.append(real)
        print(
            f"pika {pika.__version__}, python {sys.version.split()[0]}, N={n}, confirm N={max(n // 4, 10)}, "
            f"cycles={cycles}, reps={reps}" + (f", real RabbitMQ {real.info['version']}" if real else "")
        )
        for rep in range(reps):
            for t in targets:
                r, cpu = run_target(t, n, cycles)
                for k, v in r.items():
                    results[t.name][k].append(v)
                for k, v in cpu.items():
                    cpus[f"{t.name}:{k}"].append(v)
                print(
                    f"  rep {rep + 1} {t.name:13s} publish {r['publish']:9,.0f}/s  consume {r['consume']:9,.0f}/s  "
                    f"confirm {r['confirm']:8,.0f}/s  cycle {r['cycle']:6.2f} ms",
                    flush=True,
                )

    med = {name: {k: median(v) for k, v in d.items()} for name, d in results.items()}
    names = [t.name for t in targets if t.name in med]
    headers = ["measure", *names]
    if "real" in med:
        headers += [f"{x} / real" for x in names if x != "real"]
    rows = []
    for k, unit in (("publish", "msg/s"), ("consume", "msg/s"), ("confirm", "msg/s"), ("cycle", "ms")):
        row = [f"{k} ({unit})"]
        for name in names:
            v = med[name][k]
            row.append(f"{v:.2f}" if k == "cycle" else f"{v:,.0f}")
        if "real" in med:
            for name in names:
                if name == "real":
                    continue
                ratio = med["real"][k] / med[name][k] if k == "cycle" else med[name][k] / med["real"][k]
                mark = "ok" if ratio >= GOALS[k] else "MISSED"
                row.append(f"{fmt_ratio(ratio)} (goal {GOALS[k]:.1f}: {mark})")
        rows.append(row)
    print()
    print("medians (ratio > 1 means the fake is faster)")
    print_table(headers, rows)
    if reps > 1:
        print()
        print("spread over the repetitions (min - max)")
        spread = []
        for k in ("publish", "consume", "confirm", "cycle"):
            cells = [k]
            for name in names:
                lo, hi = min(results[name][k]), max(results[name][k])
                cells.append(f"{lo:.2f} - {hi:.2f}" if k == "cycle" else f"{lo:,.0f} - {hi:,.0f}")
            spread.append(cells)
        print_table(["measure", *names], spread)
    if cpus:
        print()
        print("broker CPU of the fake's own process (user+sys from /proc, medians; not inflated by other load):")
        for name in [n for n in names if n.startswith("fake") and n != "fake-thread"]:
            for k in ("publish", "consume", "confirm", "cycle"):
                vals = cpus.get(f"{name}:{k}")
                if vals:
                    unit = "us per cycle" if k == "cycle" else "us per message"
                    print(f"  {name:16s} {k:8s} {median(vals):8.1f} {unit}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
