"""Connection churn: 5,000 connect / handshake / close cycles against ``fakerabbit serve`` in its own process, with
no growth in its memory or open file descriptors; plus clients that vanish at every stage of the handshake."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from pika import spec

from tests.rawamqp import HEADER, RawAMQP

CYCLES = int(os.environ.get("FAKERABBIT_CHURN_CYCLES", "5000"))
#: The allocator's arenas and the interpreter's caches fill up over the first few thousand connections (RSS
#: climbs about 8 MiB, then stays flat): measure after that.
WARMUP = 4000

pytestmark = pytest.mark.skipif(not Path("/proc/self/fd").exists(), reason="needs /proc to read fds and RSS")


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[str, int]]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "fakerabbit", "serve", "--port", "0", "--no-management", "--no-events"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        m = re.search(r"(amqp://\S+)", line)
        assert m, line
        yield m.group(1), proc.pid
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def cycle(url: str, i: int) -> None:
    c = RawAMQP.connect(url)
    if i % 2:
        c.open_channel(1)
        if i % 4 == 1:
            c.rpc(1, spec.Queue.Declare(queue="", exclusive=True), "Queue.DeclareOk")
    c.rpc(0, spec.Connection.Close(200, "bye", 0, 0), "Connection.CloseOk")
    c.sock.close()


def settle(pid: int, baseline: int, timeout: float = 5.0) -> int:
    deadline = time.monotonic() + timeout
    n = fds(pid)
    while n > baseline and time.monotonic() < deadline:
        time.sleep(0.02)
        n = fds(pid)
    return n


def test_connect_close_cycles_do_not_grow(server: tuple[str, int]) -> None:
    url, pid = server
    for i in range(WARMUP):
        cycle(url, i)
    base_fds = settle(pid, 0, timeout=0.5)
    base_rss = rss_kib(pid)
    t0 = time.monotonic()
    for i in range(CYCLES):
        cycle(url, i)
    elapsed = time.monotonic() - t0
    end_fds = settle(pid, base_fds)
    end_rss = rss_kib(pid)
    print(
        f"\nchurn: {CYCLES} cycles in {elapsed:.1f}s ({CYCLES / elapsed:.0f}/s); fds {base_fds} -> {end_fds}; "
        f"RSS {base_rss} KiB -> {end_rss} KiB"
    )
    assert end_fds <= base_fds
    assert end_rss - base_rss < 3072, (base_rss, end_rss)  # flat, within 3 MiB, over 5,000 more cycles


def test_clients_vanishing_mid_handshake_leave_nothing(server: tuple[str, int]) -> None:
    url, pid = server
    host, port = re.match(r"amqp://[^@]*@([^:/]+):(\d+)", url).groups()  # type: ignore[union-attr]
    base_fds = settle(pid, 0, timeout=0.5)
    for i in range(300):
        s = socket.create_connection((host, int(port)))
        stage = i % 5
        if stage >= 1:
            s.sendall(HEADER[: 4 + (i % 4)] if stage == 1 else HEADER)
        if stage >= 3:
            s.recv(4096)
            s.sendall(b"\x01\x00\x00\x00\x00\x00")  # half a start-ok frame
        if stage == 4:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")  # reset
        s.close()
    assert settle(pid, base_fds) <= base_fds
