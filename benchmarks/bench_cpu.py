"""Server CPU per message: fakerabbit (a ``serve`` process and ``FakeRabbit()`` in a thread of this process) next
to the live real brokers, in one run, with the same pika client and 100-byte messages.

    python benchmarks/bench_cpu.py                  # N=20,000, 3 rounds (a few minutes)
    python benchmarks/bench_cpu.py --quick          # N=2,000, 1 round
    python benchmarks/bench_cpu.py --real 3.10=amqp://guest:guest@127.0.0.1:5672/%2F --rounds 5

Server CPU is user + sys time from /proc: of the ``fakerabbit serve`` process; of the thread ``FakeRabbit()``
runs its loop in (``/proc/self/task/<tid>/stat``); of the real broker's ``beam.smp`` process, found as the
process that listens on the URL's port (``ss -ltnp``, else /proc/net/tcp and /proc/*/fd). The real brokers are
shared with other users: their CPU includes whatever else they do during the timed block, so the script also
samples each broker's idle CPU rate right before the block and prints the figures with that rate subtracted
("net"). The ratios are given against both.

Measurements (targets interleaved within each round; medians over the rounds):

- publish: N ``basic_publish`` without confirms to one queue, until a passive ``queue.declare`` counts N;
- consume: those N messages, ``basic_qos(prefetch_count=200)``, one ``basic_ack`` per message;
- confirm: ``confirm_delivery()``, N/4 publishes, each waiting for its ack.

Exits non-zero only on errors, never on a missed goal.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import os
import re
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from urllib.parse import urlparse

import pika
from _common import BODY_100, fake_process, have_uvloop, median, print_table, proc_cpu_s, unique

DEFAULT_REALS = "3.10=amqp://guest:guest@127.0.0.1:5672/%2F,4.3=amqp://guest:guest@127.0.0.1:5674/%2F"
_CLK = os.sysconf("SC_CLK_TCK")


def _stat_cpu(path: str) -> float:
    with open(path) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _CLK


def listener_pid(port: int) -> int | None:
    """The pid of the process listening on 127.0.0.1/0.0.0.0:``port`` (None if it cannot be seen)."""
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        out = subprocess.run(["ss", "-ltnpH", f"sport = :{port}"], capture_output=True, text=True, timeout=10).stdout
        m = re.search(r"pid=(\d+)", out)
        if m:
            return int(m.group(1))
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError), open(table) as f:
            for line in list(f)[1:]:
                cols = line.split()
                if cols[3] == "0A" and int(cols[1].rsplit(":", 1)[1], 16) == port:
                    inodes.add(cols[9])
    for fd in glob.glob("/proc/[0-9]*/fd/*"):
        with contextlib.suppress(OSError):
            link = os.readlink(fd)
            if link.startswith("socket:[") and link[8:-1] in inodes:
                return int(fd.split("/")[2])
    return None


@dataclass
class CpuTarget:
    name: str
    url: str
    cpu: Callable[[], float]
    shared: bool = False  # a broker other people use: subtract its idle rate

    def params(self) -> pika.URLParameters:
        return pika.URLParameters(self.url)


@contextlib.contextmanager
def thread_target() -> Iterator[CpuTarget]:
    from fakerabbit import FakeRabbit

    with FakeRabbit() as r:
        thread = r._thread
        assert thread is not None and thread.native_id is not None
        path = f"/proc/self/task/{thread.native_id}/stat"
        yield CpuTarget("fake-thread", r.url, lambda: _stat_cpu(path))


def _wait_count(ch: pika.adapters.blocking_connection.BlockingChannel, q: str, n: int) -> None:
    deadline = time.perf_counter() + 120
    while ch.queue_declare(q, passive=True).method.message_count < n:
        if time.perf_counter() > deadline:
            raise RuntimeError(f"messages did not all arrive in {q}")
        time.sleep(0.0005)


class Block:
    """Server CPU and wall time over a block; ``idle`` is the target's idle CPU rate (s/s) to subtract."""

    def __init__(self, t: CpuTarget, idle: float) -> None:
        self.t, self.idle = t, idle

    def __enter__(self) -> Block:
        self.c0, self.w0 = self.t.cpu(), time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self.w0
        self.raw = self.t.cpu() - self.c0
        self.net = max(self.raw - self.idle * self.wall, 0.0)


def idle_rate(t: CpuTarget, seconds: float) -> float:
    if not t.shared:
        return 0.0
    c0, w0 = t.cpu(), time.perf_counter()
    time.sleep(seconds)
    return (t.cpu() - c0) / (time.perf_counter() - w0)


def run_round(t: CpuTarget, n: int, idle_s: float) -> dict[str, tuple[float, float, float]]:
    """{measure: (raw µs/msg, net µs/msg, wall µs/msg)}."""
    out: dict[str, tuple[float, float, float]] = {}

    def record(key: str, b: Block, count: int) -> None:
        out[key] = (b.raw / count * 1e6, b.net / count * 1e6, b.wall / count * 1e6)

    conn = pika.BlockingConnection(t.params())
    try:
        ch = conn.channel()
        q = unique("cpu")
        ch.queue_declare(q)
        publish = ch.basic_publish
        idle = idle_rate(t, idle_s)
        with Block(t, idle) as b:
            for _ in range(n):
                publish("", q, BODY_100)
            _wait_count(ch, q, n)
        record("publish", b, n)

        ch.basic_qos(prefetch_count=200)
        got = 0

        def on_message(c: object, method: pika.spec.Basic.Deliver, _p: object, _b: bytes) -> None:
            nonlocal got
            ch.basic_ack(method.delivery_tag)
            got += 1
            if got == n:
                ch.stop_consuming()

        idle = idle_rate(t, idle_s)
        with Block(t, idle) as b:
            ch.basic_consume(q, on_message)
            ch.start_consuming()
        record("consume", b, n)
        ch.queue_delete(q)

        ch2 = conn.channel()
        q2 = unique("cpuc")
        ch2.queue_declare(q2)
        ch2.confirm_delivery()
        m = max(n // 4, 10)
        idle = idle_rate(t, idle_s)
        with Block(t, idle) as b:
            for _ in range(m):
                ch2.basic_publish("", q2, BODY_100)
        record("confirm", b, m)
        ch2.queue_delete(q2)
    finally:
        with contextlib.suppress(Exception):
            conn.close()
    return out


def real_targets(spec: str) -> list[CpuTarget]:
    out = []
    for item in filter(None, spec.split(",")):
        label, _, url = item.partition("=")
        port = urlparse(url).port or 5672
        pid = listener_pid(port)
        if pid is None:
            print(f"note: no process seen listening on port {port}; real-{label} skipped", file=sys.stderr)
            continue
        try:
            c = pika.BlockingConnection(pika.URLParameters(url))
            v = c._impl.server_properties.get("version", b"?")
            c.close()
        except Exception as exc:
            print(f"note: real-{label} at {url} unreachable ({exc!r}); skipped", file=sys.stderr)
            continue
        version = v.decode() if isinstance(v, bytes) else str(v)
        path = f"/proc/{pid}/stat"
        out.append(CpuTarget(f"real-{version}", url, lambda p=path: _stat_cpu(p), shared=True))  # type: ignore[misc]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="N=2,000, 1 round")
    ap.add_argument("-n", type=int, default=None, help="messages per publish/consume block (default 20000)")
    ap.add_argument("--rounds", type=int, default=None, help="rounds, targets interleaved (default 3)")
    ap.add_argument(
        "--real", default=DEFAULT_REALS, help="label=url,... of real brokers (default: 3.10.8 on 5672, 4.3.6 on 5674)"
    )
    ap.add_argument(
        "--targets",
        default="process,thread,real",
        help="comma list of process, thread, real, uvloop (the `serve` process on uvloop's loop, if importable)",
    )
    ap.add_argument("--idle", type=float, default=0.5, help="seconds of idle sampling per block for shared brokers")
    ap.add_argument(
        "--compare-tree",
        action="append",
        default=[],
        metavar="DIR",
        help="also run `serve` from the fakerabbit package in DIR (e.g. a worktree of an older commit)",
    )
    args = ap.parse_args(argv)
    n = args.n or (2000 if args.quick else 20000)
    rounds = args.rounds or (1 if args.quick else 3)
    wanted = set(args.targets.split(","))

    res: dict[str, dict[str, list[tuple[float, float, float]]]] = defaultdict(lambda: defaultdict(list))
    with contextlib.ExitStack() as stack:
        targets: list[CpuTarget] = []
        if "process" in wanted:
            p = stack.enter_context(fake_process())
            assert p.pid is not None
            targets.append(CpuTarget("fake-process", p.url, lambda pid=p.pid: proc_cpu_s(pid)))  # type: ignore[misc]
        if "uvloop" in wanted:
            if have_uvloop():
                p = stack.enter_context(fake_process(uvloop=True))
                assert p.pid is not None
                targets.append(CpuTarget("fake-uvloop", p.url, lambda pid=p.pid: proc_cpu_s(pid)))  # type: ignore[misc]
            else:
                print("note: uvloop is not importable; uvloop target skipped", file=sys.stderr)
        for tree in args.compare_tree:
            p = stack.enter_context(fake_process(tree=tree, name=f"fake@{os.path.basename(os.path.normpath(tree))}"))
            assert p.pid is not None
            targets.append(CpuTarget(p.name, p.url, lambda pid=p.pid: proc_cpu_s(pid)))  # type: ignore[misc]
        if "thread" in wanted:
            targets.append(stack.enter_context(thread_target()))
        reals = real_targets(args.real) if "real" in wanted else []
        targets += reals
        print(
            f"pika {pika.__version__}, python {sys.version.split()[0]}, N={n}, confirm N={max(n // 4, 10)}, "
            f"rounds={rounds}, load {os.getloadavg()[0]:.1f}"
        )
        for r in range(rounds):
            for t in targets:
                out = run_round(t, n, args.idle)
                for k, v in out.items():
                    res[t.name][k].append(v)
                print(
                    f"  round {r + 1} {t.name:14s} "
                    + "  ".join(
                        f"{k} {raw:6.1f}/{net:6.1f} µs cpu {wall:6.1f} µs wall" for k, (raw, net, wall) in out.items()
                    ),
                    flush=True,
                )
    print(f"load {os.getloadavg()[0]:.1f}")
    names = [t.name for t in targets]
    reals_n = [t.name for t in reals]
    fakes = [x for x in names if x not in reals_n]

    def med(name: str, k: str, i: int) -> float:
        return median([v[i] for v in res[name][k]])

    print(
        "\nserver CPU, µs per message (medians; real brokers: raw, then net of their idle rate in brackets; "
        "ratios fake/real against raw, then net)"
    )
    rows = []
    for k in ("publish", "consume", "confirm"):
        row = [k]
        for name in names:
            if name in reals_n:
                row.append(f"{med(name, k, 0):.1f} ({med(name, k, 1):.1f})")
            else:
                row.append(f"{med(name, k, 0):.1f}")
        for f in fakes:
            for rn in reals_n:
                row.append(f"{med(f, k, 0) / med(rn, k, 0):.2f} ({med(f, k, 0) / max(med(rn, k, 1), 1e-9):.2f})")
        rows.append(row)
    ratio_heads = [f"{f}/{rn}" for f in fakes for rn in reals_n]
    print_table(["measure", *names, *ratio_heads], rows)
    if reals_n:
        print("\nwall clock, ratio real/fake (above 1: the fake is faster)")
        rows = []
        for k in ("publish", "consume", "confirm"):
            row = [k]
            for name in names:
                row.append(f"{med(name, k, 2):.1f} µs")
            for f in fakes:
                for rn in reals_n:
                    row.append(f"{med(rn, k, 2) / med(f, k, 2):.2f}")
            rows.append(row)
        print_table(["measure", *names, *ratio_heads], rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
