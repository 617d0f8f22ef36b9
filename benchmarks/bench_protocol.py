"""The fake's CPU per message on the wire path, without sockets or an event loop's I/O: one ``AMQPConnection``
is fed pika-shaped frames in 64 KiB chunks and writes into a list. Measures the protocol layer plus the broker
in ``time.process_time()``, which other load on the machine hardly inflates; ``--profile`` prints cProfile's
top entries instead.

    python benchmarks/bench_protocol.py                 # µs per message (per cycle), medians of 5
    python benchmarks/bench_protocol.py --quick
    python benchmarks/bench_protocol.py --profile publish
    python benchmarks/bench_protocol.py --instructions  # instructions per message under callgrind (deterministic)

Workloads: ``publish`` (basic.publish, 100-byte body, no properties, to a queue), ``consume`` (the queued
messages go to a consumer with prefetch 200 and each is acked by a basic.ack fed back in), ``confirm``
(publish on a channel in confirm mode, one publish per chunk: the confirm path per message), ``cycle`` (a
per-test cycle on a new connection, as pika writes it: handshake, channel, exclusive queue.declare, publish,
basic.get, channel.close, connection.close).

``--instructions`` runs each workload under valgrind's callgrind, collecting only inside the timed part
(``functools.reduce`` wraps it), after a warm-up: the count does not move with the machine's load, so two
versions can be compared on a busy machine (``PYTHONPATH=/tmp/old python benchmarks/bench_protocol.py
--instructions``).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import functools
import pstats
import re
import statistics
import struct
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from pamqp import commands
from pamqp import frame as pamqp_frame

from fakerabbit.broker.broker import Broker
from fakerabbit.clock import SystemClock
from fakerabbit.protocol.connection import AMQPConnection
from fakerabbit.protocol.listener import Listener

BODY = b"x" * 100
CHUNK = 65536


class Sink:
    """A transport that keeps what is written (and forgets it on demand)."""

    def __init__(self) -> None:
        self.out: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.out.append(data)

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 40000) if name == "peername" else default

    def pause_reading(self) -> None: ...
    def resume_reading(self) -> None: ...
    def close(self) -> None: ...
    def abort(self) -> None: ...
    def is_closing(self) -> bool:
        return False

    def get_write_buffer_size(self) -> int:
        return 0


def m(ch: int, method: Any) -> bytes:
    return pamqp_frame.marshal(method, ch)


def publish_frames(ch: int, queue: str) -> bytes:
    head = struct.pack(">HHQ", 60, 0, len(BODY)) + b"\x00\x00"
    return (
        m(ch, commands.Basic.Publish(exchange="", routing_key=queue))
        + struct.pack(">BHI", 2, ch, len(head))
        + head
        + b"\xce"
        + struct.pack(">BHI", 3, ch, len(BODY))
        + BODY
        + b"\xce"
    )


def chunks(frames: list[bytes]) -> list[bytes]:
    out, cur, size = [], [], 0
    for f in frames:
        cur.append(f)
        size += len(f)
        if size >= CHUNK:
            out.append(b"".join(cur))
            cur, size = [], 0
    if cur:
        out.append(b"".join(cur))
    return out


class Rig:
    def __init__(self) -> None:
        self.broker = Broker(SystemClock())
        self.server = Listener(self.broker)
        self.conn = AMQPConnection(self.server)
        self.sink = Sink()
        self.conn.connection_made(self.sink)  # type: ignore[arg-type]
        self.feed(b"AMQP\x00\x00\x09\x01")
        self.feed(
            m(
                0,
                commands.Connection.StartOk(
                    client_properties={"capabilities": {"publisher_confirms": True}},
                    mechanism="PLAIN",
                    response="\x00guest\x00guest",
                ),
            )
        )
        self.feed(m(0, commands.Connection.TuneOk(channel_max=2047, frame_max=131072, heartbeat=0)))
        self.feed(m(0, commands.Connection.Open(virtual_host="/")))
        self.feed(m(1, commands.Channel.Open()))
        self.feed(m(1, commands.Queue.Declare(queue="q")))
        self.sink.out.clear()

    def feed(self, data: bytes) -> None:
        self.conn.data_received(data)


def prepare_publish(rig: Rig, n: int) -> Callable[[], None]:
    """``n`` publishes to queue ``q`` in 64 KiB chunks; returns the timed part."""
    data = chunks([publish_frames(1, "q")] * n)
    feed = rig.feed

    def go() -> None:
        for c in data:
            feed(c)

    return go


def prepare_publish1(rig: Rig, n: int) -> Callable[[], None]:
    """``n`` publishes to queue ``q``, one per chunk: what a server that keeps up with pika reads (each publish
    is a read of its own), so the per-read cost counts in full."""
    one = publish_frames(1, "q")
    feed = rig.feed

    def go() -> None:
        for _ in range(n):
            feed(one)

    return go


def prepare_consume(rig: Rig, n: int) -> Callable[[], None]:
    """Consume the ``n`` queued messages: each delivery is acked (multiple=false) in chunks of up to 200 acks."""
    rig.feed(m(1, commands.Basic.Qos(prefetch_count=200)))
    rig.sink.out.clear()
    first = rig.conn.channels[1].session.next_tag  # the delivery tag the first delivery will carry
    acks = [
        b"".join(m(1, commands.Basic.Ack(delivery_tag=first + i)) for i in range(j, min(j + 200, n)))
        for j in range(0, n, 200)
    ]
    consume = m(1, commands.Basic.Consume(queue="q", consumer_tag="c"))
    feed, out = rig.feed, rig.sink.out

    def go() -> None:
        feed(consume)
        for chunk in acks:
            out.clear()
            feed(chunk)

    return go


def finish_consume(rig: Rig) -> None:
    rig.feed(m(1, commands.Basic.Cancel(consumer_tag="c")))
    rig.sink.out.clear()


def prepare_confirm(rig: Rig, n: int, ch: int = 2) -> Callable[[], None]:
    """``n`` publishes on a new channel ``ch`` in confirm mode, one publish per chunk."""
    rig.feed(m(ch, commands.Channel.Open()))
    rig.feed(m(ch, commands.Confirm.Select()))
    rig.sink.out.clear()
    one = publish_frames(ch, "q")
    feed, out = rig.feed, rig.sink.out

    def go() -> None:
        for _ in range(n):
            feed(one)
            out.clear()

    return go


#: the client properties pika 1.4 sends
PIKA_CLIENT_PROPERTIES = {
    "product": "Pika Python Client Library",
    "platform": "Python 3.11.7",
    "capabilities": {
        "authentication_failure_close": True,
        "basic.nack": True,
        "connection.blocked": True,
        "consumer_cancel_notify": True,
        "publisher_confirms": True,
    },
    "information": "See http://pika.rtfd.org",
    "version": "1.4.4",
}


def prepare_cycle(rig: Rig, n: int) -> Callable[[], None]:
    """``n`` per-test cycles, each on a new connection, in pika's writes: handshake, channel.open, an exclusive
    queue.declare, a publish to it, basic.get, channel.close, connection.close, the socket closed."""
    cycles = []
    for i in range(n):
        q = f"cycle-{i}"
        cycles.append(
            [
                b"AMQP\x00\x00\x09\x01",
                m(
                    0,
                    commands.Connection.StartOk(
                        client_properties=PIKA_CLIENT_PROPERTIES, mechanism="PLAIN", response="\x00guest\x00guest"
                    ),
                ),
                m(0, commands.Connection.TuneOk(channel_max=2047, frame_max=131072, heartbeat=60))
                + m(0, commands.Connection.Open(virtual_host="/")),
                m(1, commands.Channel.Open()),
                m(1, commands.Queue.Declare(queue=q, exclusive=True)),
                publish_frames(1, q),
                m(1, commands.Basic.Get(queue=q, no_ack=True)),
                m(1, commands.Channel.Close(reply_code=200, reply_text="Normal shutdown", class_id=0, method_id=0)),
                m(0, commands.Connection.Close(reply_code=200, reply_text="Normal shutdown", class_id=0, method_id=0)),
            ]
        )
    server = rig.server

    def go() -> None:
        for writes in cycles:
            conn = AMQPConnection(server)
            sink = Sink()
            conn.connection_made(sink)  # type: ignore[arg-type]
            for data in writes:
                conn.data_received(data)
            conn.connection_lost(None)

    return go


def timed(fn: Callable[[], None]) -> float:
    t0 = time.process_time()
    fn()
    return time.process_time() - t0


def run_publish(rig: Rig, n: int) -> float:
    t = timed(prepare_publish(rig, n))
    rig.sink.out.clear()
    return t


def run_publish1(rig: Rig, n: int) -> float:
    t = timed(prepare_publish1(rig, n))
    rig.sink.out.clear()
    return t


def run_consume(rig: Rig, n: int) -> float:
    t = timed(prepare_consume(rig, n))
    finish_consume(rig)
    return t


def run_confirm(rig: Rig, n: int) -> float:
    return timed(prepare_confirm(rig, n))


def run_cycle(rig: Rig, n: int) -> float:
    return timed(prepare_cycle(rig, n))


WORKLOADS = ("publish", "publish1", "consume", "confirm", "cycle")


def count_one(workload: str, n: int) -> None:
    """The body of ``--instructions``: runs one workload inside ``functools.reduce`` (the C function callgrind
    collects in), after a warm-up of the same workload."""
    rig = Rig()
    for size in (min(n, 200), n):  # a warm-up (caches, first-time paths), then the counted run
        if workload == "consume":
            prepare_publish(rig, size)()
            rig.sink.out.clear()
            go = prepare_consume(rig, size)
        elif workload == "publish":
            go = prepare_publish(rig, size)
        elif workload == "publish1":
            go = prepare_publish1(rig, size)
        elif workload == "confirm":
            go = prepare_confirm(rig, size, 2 + (size == n))
        else:
            go = prepare_cycle(rig, size)
        if size == n:
            functools.reduce(lambda _a, _b: go(), [None], None)
        else:
            go()
        rig.sink.out.clear()
        if workload == "consume":
            finish_consume(rig)
        rig.feed(m(1, commands.Queue.Purge(queue="q")))
        if rig.sink.out[-1][7:11] != b"\x00\x32\x00\x1f":  # queue.purge-ok: nothing failed
            raise RuntimeError(f"the {workload} workload failed: {rig.sink.out[-3:]!r}")
        rig.sink.out.clear()


def instructions(workloads: list[str], n: int, python: str) -> dict[str, float]:
    """Instructions per message (valgrind's callgrind, collecting inside the timed part only): deterministic,
    whatever else runs on the machine."""
    out: dict[str, float] = {}
    for w in workloads:
        cmd = [
            "valgrind",
            "--tool=callgrind",
            "--callgrind-out-file=/dev/null",
            "--collect-atstart=no",
            "--toggle-collect=functools_reduce",
            python,
            __file__,
            "--count-one",
            w,
            "-n",
            str(n),
        ]
        res = subprocess.run(cmd, capture_output=True, text=True, check=True)
        found = re.search(r"Collected : (\d+)", res.stderr)
        if found is None:
            raise RuntimeError(f"no instruction count from callgrind:\n{res.stderr[-2000:]}")
        out[w] = int(found.group(1)) / n
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("-n", type=int, default=None, help="messages per run (default 20000)")
    ap.add_argument("--reps", type=int, default=None, help="default 5")
    ap.add_argument("--profile", choices=WORKLOADS, default=None)
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument(
        "--instructions",
        action="store_true",
        help="instructions per message under valgrind's callgrind (deterministic; default -n 2000)",
    )
    ap.add_argument("--only", default=",".join(WORKLOADS), help="comma list of workloads (default all)")
    ap.add_argument("--count-one", choices=WORKLOADS, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.count_one:
        asyncio.run(_async(count_one, args.count_one, args.n or 2000))
        return 0
    if args.instructions:
        n = args.n or 2000
        counts = instructions(args.only.split(","), n, sys.executable)
        print(f"python {sys.version.split()[0]}, N={n}: instructions per message (callgrind)")
        for k, v in counts.items():
            print(f"  {k:8s} {v:10,.0f}")
        return 0
    n = args.n or (2000 if args.quick else 20000)
    reps = args.reps or (1 if args.quick else 5)

    async def go() -> int:
        if args.profile:
            rig = Rig()
            if args.profile == "consume":
                run_publish(rig, n)
            prepare = {
                "publish": prepare_publish,
                "publish1": prepare_publish1,
                "consume": prepare_consume,
                "confirm": prepare_confirm,
                "cycle": prepare_cycle,
            }[args.profile]
            go = prepare(rig, n)
            prof = cProfile.Profile()
            prof.enable()
            go()  # the timed part only
            prof.disable()
            pstats.Stats(prof).sort_stats("tottime").print_stats(args.top)
            return 0
        res: dict[str, list[float]] = {"publish": [], "publish1": [], "consume": [], "confirm": [], "cycle": []}
        for _ in range(reps):
            rig = Rig()
            res["publish"].append(run_publish(rig, n) / n * 1e6)
            res["consume"].append(run_consume(rig, n) / n * 1e6)
            res["publish1"].append(run_publish1(rig, n) / n * 1e6)
            rig.feed(m(1, commands.Queue.Purge(queue="q")))
            res["confirm"].append(run_confirm(rig, max(n // 4, 10)) / max(n // 4, 10) * 1e6)
            cycles = max(n // 20, 10)
            res["cycle"].append(run_cycle(rig, cycles) / cycles * 1e6)
            rig.conn.connection_lost(None)
        print(f"python {sys.version.split()[0]}, N={n}, reps={reps}: CPU µs per message (median, min-max)")
        for k, v in res.items():
            print(f"  {k:8s} {statistics.median(v):6.2f}   ({min(v):.2f} - {max(v):.2f})")
        return 0

    return asyncio.run(go())


async def _async(fn: Callable[..., None], *args: Any) -> None:
    fn(*args)


if __name__ == "__main__":
    sys.exit(main())
