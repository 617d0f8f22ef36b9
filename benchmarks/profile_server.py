"""Profile the fake's hot paths with py-spy (sampling, no code changes): the fake runs as
``python -m fakerabbit serve`` in its own process, py-spy attaches to it while pika drives one workload, and
the samples are folded into self and inclusive time per function.

    pip install py-spy
    python benchmarks/profile_server.py                      # all workloads, reports in $TMPDIR/fakerabbit-profiles/
    python benchmarks/profile_server.py --workloads publish,topic --out /tmp/prof --top 15

Workloads: publish (no confirms), consume (ack, prefetch 200; queue filled before sampling), confirm (a confirm
per message), cycle (connect + declare + publish + get + close), declare (queue.declare), topic (publish to a
topic exchange with --bindings bindings). For each, ``OUT/<workload>.txt`` holds py-spy's raw folded stacks
(feed it to flamegraph.pl or speedscope) and ``OUT/<workload>.summary.txt`` the summary printed here.
Percentages are of the samples in which the server was busy (py-spy leaves out idle samples: the loop waiting
in epoll). Native frames are on by default so that time in the cyclic garbage collector shows up
(``gc_collect_main``, charged to the Python function that happened to allocate).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import Any

import pika
from _common import BODY_100, Target, fake_process, unique


@contextlib.contextmanager
def spy(pid: int, path: str, rate: int, native: bool) -> Iterator[None]:
    exe = shutil.which("py-spy") or os.path.join(os.path.dirname(sys.executable), "py-spy")
    cmd = [exe, "record", "--pid", str(pid), "--format", "raw", "-F", "-r", str(rate), "-o", path]
    cmd.append("--native" if native else "--nonblocking")
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    time.sleep(0.7)  # let py-spy attach
    try:
        yield
    finally:
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=60)
        if proc.returncode not in (0, -2, 130) and not os.path.exists(path):
            raise RuntimeError(f"py-spy failed: {err}")


def fold(path: str) -> tuple[int, collections.Counter[str], collections.Counter[str]]:
    """(busy samples, self samples per function, inclusive samples per function)."""
    selfc: collections.Counter[str] = collections.Counter()
    incl: collections.Counter[str] = collections.Counter()
    total = 0
    with open(path) as f:
        for line in f:
            stack, _, count = line.rstrip("\n").rpartition(" ")
            if not stack:
                continue
            n = int(count)
            frames = [fr for fr in stack.split(";") if not fr.startswith("process ") and not fr.startswith("thread ")]
            if not frames:
                continue
            total += n
            selfc[frames[-1]] += n
            for fr in set(frames):
                incl[fr] += n
    return total, selfc, incl


def short(frame: str) -> str:
    # "func (fakerabbit/protocol/channel.py:40)" -> "fakerabbit/protocol/channel.py:40 func"
    name, _, where = frame.partition(" (")
    where = where.rstrip(")")
    for marker in ("site-packages/", "lib/python3.11/"):
        if marker in where:
            where = where.split(marker, 1)[1]
    return f"{where} {name}"


# -- workloads: (setup, run) ---------------------------------------------------------------------------------
def wl_publish(ch: Any, n: int, _b: int) -> Callable[[], None]:
    q = unique("p")
    ch.queue_declare(q)

    def run() -> None:
        for _ in range(n):
            ch.basic_publish("", q, BODY_100)
        ch.queue_declare(q, passive=True)

    return run


def wl_consume(ch: Any, n: int, _b: int) -> Callable[[], None]:
    q = unique("c")
    ch.queue_declare(q)
    for _ in range(n):
        ch.basic_publish("", q, BODY_100)
    ch.queue_declare(q, passive=True)
    ch.basic_qos(prefetch_count=200)

    def run() -> None:
        got = 0

        def on_message(c: Any, method: Any, _p: Any, _b: bytes) -> None:
            nonlocal got
            ch.basic_ack(method.delivery_tag)
            got += 1
            if got == n:
                ch.stop_consuming()

        ch.basic_consume(q, on_message)
        ch.start_consuming()

    return run


def wl_confirm(ch: Any, n: int, _b: int) -> Callable[[], None]:
    q = unique("f")
    ch.queue_declare(q)
    ch.confirm_delivery()

    def run() -> None:
        for _ in range(n // 4):
            ch.basic_publish("", q, BODY_100)

    return run


def wl_declare(ch: Any, n: int, _b: int) -> Callable[[], None]:
    def run() -> None:
        for i in range(n // 4):
            ch.queue_declare(f"decl-{i}")

    return run


def wl_topic(ch: Any, n: int, bindings: int) -> Callable[[], None]:
    x = unique("t")
    ch.exchange_declare(x, "topic")
    for i in range(bindings):
        ch.queue_declare(f"{x}-{i}")
        ch.queue_bind(f"{x}-{i}", x, f"svc{i}.*.event")

    def run() -> None:
        for i in range(max(n // 40, 100)):
            ch.basic_publish(x, f"svc{(i * 7919) % bindings}.k.event", BODY_100)
        ch.queue_declare(f"{x}-0", passive=True)

    return run


def run_cycle(t: Target, n: int) -> None:
    for _ in range(max(n // 40, 50)):
        q = unique("cy")
        conn = pika.BlockingConnection(t.params())
        ch = conn.channel()
        ch.queue_declare(q, exclusive=True)
        ch.basic_publish("", q, BODY_100)
        ch.basic_get(q, auto_ack=True)
        conn.close()


WORKLOADS = {
    "publish": wl_publish,
    "consume": wl_consume,
    "confirm": wl_confirm,
    "declare": wl_declare,
    "topic": wl_topic,
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workloads", default="publish,consume,confirm,cycle,declare,topic")
    ap.add_argument("--out", default=os.path.join(tempfile.gettempdir(), "fakerabbit-profiles"))
    ap.add_argument("-n", type=int, default=40000, help="messages for publish/consume (others scale from it)")
    ap.add_argument("--bindings", type=int, default=10000)
    ap.add_argument("--rate", type=int, default=250, help="py-spy samples per second")
    ap.add_argument(
        "--no-native",
        action="store_true",
        help="python frames only, sampled without pausing the server (default: --native, which shows the cyclic "
        "garbage collector as gc_collect_main but pauses the server at each sample)",
    )
    ap.add_argument("--top", type=int, default=20)
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    for name in args.workloads.split(","):
        path = os.path.join(args.out, f"{name}.txt")
        with fake_process() as t:
            assert t.pid is not None
            if name == "cycle":
                with spy(t.pid, path, args.rate, not args.no_native):
                    t0 = time.perf_counter()
                    run_cycle(t, args.n)
                    wall = time.perf_counter() - t0
            else:
                conn = pika.BlockingConnection(t.params())
                ch = conn.channel()
                run = WORKLOADS[name](ch, args.n, args.bindings)
                with spy(t.pid, path, args.rate, not args.no_native):
                    t0 = time.perf_counter()
                    run()
                    wall = time.perf_counter() - t0
                conn.close()
        total, selfc, incl = fold(path)
        lines = [
            f"== {name}: {wall:.2f} s wall, {total} busy samples at {args.rate}/s "
            f"(~{total / args.rate:.2f} s server CPU)"
        ]
        lines.append("  self %   function")
        for fr, c in selfc.most_common(args.top):
            lines.append(f"  {100 * c / total:5.1f}   {short(fr)}")
        lines.append("  incl %   function (fakerabbit and pamqp frames)")
        shown = 0
        for fr, c in incl.most_common():
            if "fakerabbit/" in fr or "pamqp/" in fr or "gc_collect" in fr:
                lines.append(f"  {100 * c / total:5.1f}   {short(fr)}")
                shown += 1
                if shown >= args.top + 10:
                    break
        text = "\n".join(lines)
        print(text, flush=True)
        with open(os.path.join(args.out, f"{name}.summary.txt"), "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
