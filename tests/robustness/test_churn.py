"""Churn: 5,000 connect/close cycles against one FakeRabbit must not leak file descriptors, memory or state; nor
must clients that vanish at any stage of the handshake.

A cycle is a raw-socket session whose frames are sent in one go (the broker handles them one by one, exactly as if
they came in separate packets), so the 5,000 cycles take seconds, not minutes. Four kinds, interleaved:

* clean (7 in 10): handshake, connection.close, wait for close-ok, close the socket;
* closed with state (1 in 10): handshake with heartbeats on (so the broker runs a heartbeat timer), a channel, an
  exclusive queue and a consumer, then connection.close and its close-ok: the orderly teardown of all of them;
* killed with state (1 in 10): handshake, a channel, an exclusive queue, a consumer, a publish; once the
  delivery arrives (so the broker holds an unacked message, a consumer and an exclusive queue for this
  connection) the socket is reset (SO_LINGER 0);
* killed during the handshake (1 in 10): protocol header and start-ok only, then a reset.

After a warm-up, the process's open descriptors (``/proc/self/fd``: the test's and the broker's sockets) and the
memory allocated since the warm-up and still alive (tracemalloc, all threads: every Python object the broker keeps,
C extension types included) must not grow beyond a small bound. The broker's event log is switched off: it is a
bounded ring buffer (100,000 events) that would otherwise fill with two events per connection and be measured as
growth.

(This replaces a second churn test that ran the same sessions, one round trip at a time, against ``fakerabbit
serve`` in a subprocess and bounded its RSS: the memory bound here is on what is allocated, not on what the
allocator keeps, and the CLI serves connections with the same listener.)
"""

from __future__ import annotations

import gc
import os
import socket
import struct
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

import pytest
from pika import spec

from fakerabbit import FakeRabbit
from tests.rawamqp import HEADER, RawAMQP, body_frame, header_frame, method_frame

CYCLES = 5000
WARMUP = 500
IN_FLIGHT = 20
#: Allowed growth after the warm-up. A leak of one socket per 1,000 cycles, or of 200 bytes per connection,
#: would exceed these.
FD_SLACK = 4
MEMORY_SLACK = 600_000

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(not Path("/proc/self/fd").exists(), reason="needs /proc to count open descriptors"),
]

START_OK = method_frame(
    0,
    spec.Connection.StartOk(
        client_properties={"product": "churn"}, mechanism="PLAIN", response=b"\x00guest\x00guest", locale="en_US"
    ),
)
TUNE_OK = method_frame(0, spec.Connection.TuneOk(channel_max=2047, frame_max=131072, heartbeat=0))
TUNE_OK_HEARTBEAT = method_frame(0, spec.Connection.TuneOk(channel_max=2047, frame_max=131072, heartbeat=60))
OPEN = method_frame(0, spec.Connection.Open(virtual_host="/"))
CLOSE = method_frame(0, spec.Connection.Close(200, "bye", 0, 0))
HANDSHAKE = HEADER + START_OK + TUNE_OK + OPEN


def state(i: int) -> bytes:
    """A channel, an exclusive queue and a consumer on it."""
    q = f"churn.{i}"
    return (
        method_frame(1, spec.Channel.Open())
        + method_frame(1, spec.Queue.Declare(queue=q, exclusive=True))
        + method_frame(1, spec.Basic.Consume(queue=q, consumer_tag="c"))
    )


def with_delivery(i: int) -> bytes:
    return (
        HANDSHAKE
        + state(i)
        + method_frame(1, spec.Basic.Publish(exchange="", routing_key=f"churn.{i}"))
        + header_frame(1, 5)
        + body_frame(1, b"hello")
    )


def reset(sock: socket.socket) -> None:
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


KINDS = {3: "closed with state", 5: "handshake", 9: "killed with state"}


class Cycle:
    """One connection in flight: what was sent and what it waits for."""

    def __init__(self, url: str, i: int) -> None:
        self.c = RawAMQP.socket_to(url)
        self.kind = KINDS.get(i % 10, "clean")
        if self.kind == "clean":
            self.c.send(HANDSHAKE + CLOSE)
        elif self.kind == "closed with state":
            self.c.send(HEADER + START_OK + TUNE_OK_HEARTBEAT + OPEN + state(i) + CLOSE)
        elif self.kind == "killed with state":
            self.c.send(with_delivery(i))
        else:
            self.c.send(HEADER + START_OK)

    def finish(self) -> None:
        c = self.c
        if self.kind in ("clean", "closed with state"):
            c.wait("Connection.CloseOk")
            assert c.seen[-1].name == "Connection.CloseOk", c.seen[-1:]
            if self.kind == "closed with state":
                names = [f.name for f in c.seen]
                assert names[-4:-1] == ["Channel.OpenOk", "Queue.DeclareOk", "Basic.ConsumeOk"], names
            c.sock.close()
        elif self.kind == "killed with state":
            c.wait("Basic.Deliver")
            assert c.seen[-1].name == "Basic.Deliver", c.seen[-1:]
            reset(c.sock)
        else:
            c.wait("Connection.Tune")
            reset(c.sock)


def run_cycles(url: str, first: int, count: int) -> None:
    pending: list[Cycle] = []
    for i in range(first, first + count):
        pending.append(Cycle(url, i))
        if len(pending) == IN_FLIGHT:
            for cycle in pending:
                cycle.finish()
            pending.clear()
    for cycle in pending:
        cycle.finish()


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def rss_kib() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def settled(rabbit: FakeRabbit, timeout: float = 5.0) -> tuple[int, int, int]:
    """Wait until the broker has let go of every connection; (server connections, broker connections, queues)."""
    deadline = time.monotonic() + timeout

    def counts() -> tuple[int, int, int]:
        return (
            len(rabbit._listener.connections),
            len(rabbit._broker.connections),
            len(rabbit._broker.vhosts["/"].queues),
        )

    while True:
        got = rabbit._call(counts)
        if got == (0, 0, 0) or time.monotonic() > deadline:
            return got
        time.sleep(0.02)


@pytest.fixture
def tracing() -> Iterator[None]:
    yield
    if tracemalloc.is_tracing():
        tracemalloc.stop()


def test_5000_connect_close_cycles_leak_nothing(rabbit: FakeRabbit, tracing: None) -> None:
    rabbit._broker.events.enabled = False
    t0 = time.monotonic()
    run_cycles(rabbit.url, 0, WARMUP)
    assert settled(rabbit) == (0, 0, 0)
    gc.collect()
    fds_before, rss_before = open_fds(), rss_kib()
    tracemalloc.start()
    base, _ = tracemalloc.get_traced_memory()

    run_cycles(rabbit.url, WARMUP, CYCLES - WARMUP)

    assert settled(rabbit) == (0, 0, 0)
    gc.collect()
    grown = tracemalloc.get_traced_memory()[0] - base
    top = tracemalloc.take_snapshot().statistics("lineno")[:5]
    tracemalloc.stop()
    fds_after, rss_after = open_fds(), rss_kib()
    print(
        f"\nchurn: {CYCLES} cycles in {time.monotonic() - t0:.1f} s; fds {fds_before} -> {fds_after}; "
        f"traced memory +{grown} B; RSS {rss_before} -> {rss_after} KiB"
    )
    assert fds_after - fds_before <= FD_SLACK
    assert grown <= MEMORY_SLACK, [str(s) for s in top]
    assert rabbit.problems == []
    assert rabbit.connections() == []


def test_clients_vanishing_mid_handshake_leave_nothing(rabbit: FakeRabbit) -> None:
    """300 sockets that go at every stage of the handshake: right after the TCP connect, after part of the
    protocol header, after all of it, half-way through a start-ok frame (closed, or reset)."""
    u = urlparse(rabbit.url)
    address = (u.hostname or "127.0.0.1", u.port or 5672)
    base_fds = open_fds()
    for i in range(300):
        s = socket.create_connection(address)
        stage = i % 5
        if stage >= 1:
            s.sendall(HEADER[: 4 + (i % 4)] if stage == 1 else HEADER)
        if stage >= 3:
            s.recv(4096)
            s.sendall(b"\x01\x00\x00\x00\x00\x00")  # half a start-ok frame
        if stage == 4:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # reset
        s.close()
    assert settled(rabbit) == (0, 0, 0)
    deadline = time.monotonic() + 5
    while open_fds() > base_fds and time.monotonic() < deadline:
        time.sleep(0.02)
    assert open_fds() <= base_fds
    assert rabbit.problems == []
