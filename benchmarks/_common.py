"""Shared helpers for the benchmark scripts: targets (fake in a subprocess, fake in a thread, real broker),
timing, medians and memory readings. Run the scripts from the repository root, e.g.
``python benchmarks/bench_throughput.py --quick``."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pika

DEFAULT_REAL_URL = os.environ.get("FAKERABBIT_REAL_URL", "amqp://guest:guest@127.0.0.1:5672/%2F")
_URL_RE = re.compile(r"(amqp://\S+)")

BODY_100 = b"x" * 100


def median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def unique(prefix: str) -> str:
    return f"bench-{prefix}-{uuid.uuid4().hex[:10]}"


def rss_kib(pid: int | None = None) -> int:
    """Resident set size (KiB) of a process (this one by default), from /proc."""
    with open(f"/proc/{pid or os.getpid()}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def proc_cpu_s(pid: int) -> float:
    """User + system CPU seconds used so far by process ``pid`` (from /proc, 10 ms resolution)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class Target:
    name: str
    url: str
    pid: int | None = None  # the broker's process (for RSS), when we own it
    close: Any = None
    info: dict[str, Any] = field(default_factory=dict)

    def params(self) -> pika.URLParameters:
        return pika.URLParameters(self.url)

    def server_cpu(self) -> float | None:
        """CPU seconds used so far by the broker, when it runs in a process of its own that we started."""
        if self.pid is None or self.pid == os.getpid():
            return None
        return proc_cpu_s(self.pid)


_serve_flags: dict[str, list[str]] = {}
# uvloop's transports are not subclasses of asyncio.Transport, and AMQPConnection.connection_made asserts that
# they are (docs/performance.md lists it): for the measurement only, the connection module sees a copy of asyncio
# whose Transport is ``object``.
UVLOOP_MAIN = """
import asyncio, sys, types, uvloop
asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
import fakerabbit.protocol.connection as _conn
_shim = types.ModuleType("asyncio")
_shim.__dict__.update(asyncio.__dict__)
_shim.Transport = object
_conn.asyncio = _shim
from fakerabbit.cli import main
sys.exit(main(sys.argv[1:]))
"""


def have_uvloop() -> bool:
    return subprocess.run([sys.executable, "-c", "import uvloop"], capture_output=True, check=False).returncode == 0


def serve_flags(env: dict[str, str] | None = None) -> list[str]:
    """Extra ``serve`` flags: the management HTTP API is switched off when the CLI has it (it would bind 15672)."""
    key = (env or os.environ).get("PYTHONPATH", "")
    flags = _serve_flags.get(key)
    if flags is None:
        out = subprocess.run(
            [sys.executable, "-m", "fakerabbit", "serve", "--help"],
            capture_output=True,
            text=True,
            check=False,
            env=env,
        ).stdout
        flags = _serve_flags[key] = ["--no-management"] if "--no-management" in out else []
        if "--loop" in out:
            flags.append("--loop")  # completed by fake_process: asyncio or uvloop
    return list(flags)


#: Extra ``serve`` flags for every fake process (``--serve-args`` of the scripts), e.g. ``--no-events``.
EXTRA_SERVE_ARGS: list[str] = []


@contextlib.contextmanager
def fake_process(
    extra_args: tuple[str, ...] = (), *, uvloop: bool = False, tree: str | None = None, name: str | None = None
) -> Iterator[Target]:
    """``python -m fakerabbit serve --port 0`` in a subprocess; the AMQP URL is parsed from the line it prints
    once it accepts connections. ``info["start_s"]`` is the time from spawn to that line.

    ``uvloop=True`` runs it on uvloop's loop, otherwise on asyncio's: with ``serve --loop`` where the CLI has it
    (it picks uvloop by itself when installed), else by installing uvloop's policy first (older trees).

    ``tree`` runs the fakerabbit package found in that directory instead (e.g. a ``git worktree`` of an older
    commit), to compare two versions under the same load."""
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (tree, env.get("PYTHONPATH")) if p)
    flags = serve_flags(env)
    if "--loop" in flags:
        flags = [f for f in flags if f != "--loop"] + ["--loop", "uvloop" if uvloop else "asyncio"]
        prog = [sys.executable, "-m", "fakerabbit"]
    else:
        prog = [sys.executable, "-c", UVLOOP_MAIN] if uvloop else [sys.executable, "-m", "fakerabbit"]
    cmd = [*prog, "serve", "--port", "0", *flags, *EXTRA_SERVE_ARGS, *extra_args]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    url = None
    lines = []
    while url is None:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        if "amqp" in line.lower():
            m = _URL_RE.search(line)
            url = m.group(1) if m else None
    started = time.perf_counter() - t0
    if url is None:
        proc.kill()
        err = proc.stderr.read() if proc.stderr else ""
        raise RuntimeError(f"fakerabbit serve did not print its AMQP URL: {lines!r} {err}")
    try:
        name = name or ("fake-proc-uvloop" if uvloop else "fake-process")
        yield Target(name, url, pid=proc.pid, info={"start_s": started})
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextlib.contextmanager
def fake_thread(**kwargs: Any) -> Iterator[Target]:
    """``FakeRabbit()`` on its private loop in a daemon thread of this process (shares the GIL with pika)."""
    from fakerabbit import FakeRabbit

    with FakeRabbit(**kwargs) as r:
        yield Target("fake-thread", r.url, pid=os.getpid(), info={"rabbit": r})


def real_target(url: str) -> Target | None:
    """The real broker, or None (with a note on stderr) when it cannot be reached."""
    try:
        conn = pika.BlockingConnection(pika.URLParameters(url))
    except Exception as exc:
        print(f"note: real broker at {url} unreachable ({exc!r}); real column skipped", file=sys.stderr)
        return None
    v = conn._impl.server_properties.get("version", b"?")
    conn.close()
    return Target("real", url, info={"version": v.decode() if isinstance(v, bytes) else str(v)})


def fmt_rate(x: float) -> str:
    return "-" if x != x else f"{x:,.0f}"


def fmt_ratio(x: float) -> str:
    return "-" if x != x else f"{x:.2f}"


def print_table(headers: list[str], rows: list[list[str]], left: int = 1) -> None:
    """Plain-text table; the first ``left`` columns and the last one are left-aligned, the rest right-aligned."""
    n = len(headers)
    widths = [max(len(str(r[i])) for r in [headers, *rows]) for i in range(n)]

    def fmt(cells: list[str]) -> str:
        out = []
        for i, (c, w) in enumerate(zip(cells, widths, strict=False)):
            out.append(str(c).ljust(w) if i < left or (left > 1 and i == n - 1) else str(c).rjust(w))
        return "  ".join(out).rstrip()

    line = fmt(headers)
    print(line)
    print("-" * max(len(line), 20))
    for r in rows:
        print(fmt(r))
