"""The fake's CPU per message on the wire path, without sockets or an event loop's I/O: one ``AMQPConnection``
is fed pika-shaped frames in 64 KiB chunks and writes into a list. Measures the protocol layer plus the broker
in ``time.process_time()``, which other load on the machine hardly inflates; ``--profile`` prints cProfile's
top entries instead.

    python benchmarks/bench_protocol.py                 # publish, consume+ack: µs per message, medians of 5
    python benchmarks/bench_protocol.py --quick
    python benchmarks/bench_protocol.py --profile publish

Workloads: ``publish`` (basic.publish, 100-byte body, no properties, to a queue), ``consume`` (the queued
messages go to a consumer with prefetch 200 and each is acked by a basic.ack fed back in), ``confirm``
(publish on a channel in confirm mode, one publish per chunk: the confirm path per message).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import statistics
import struct
import sys
import time
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


def run_publish(rig: Rig, n: int) -> float:
    data = chunks([publish_frames(1, "q")] * n)
    t0 = time.process_time()
    for c in data:
        rig.feed(c)
    t = time.process_time() - t0
    rig.sink.out.clear()
    return t


def run_consume(rig: Rig, n: int) -> float:
    """Consume the ``n`` queued messages: each delivery is acked (multiple=false) in chunks of up to 200 acks."""
    rig.feed(m(1, commands.Basic.Qos(prefetch_count=200)))
    rig.sink.out.clear()
    acks = [m(1, commands.Basic.Ack(delivery_tag=i + 1)) for i in range(n)]
    t0 = time.process_time()
    rig.feed(m(1, commands.Basic.Consume(queue="q", consumer_tag="c")))
    for i in range(0, n, 200):
        rig.sink.out.clear()
        rig.feed(b"".join(acks[i : i + 200]))
    t = time.process_time() - t0
    rig.feed(m(1, commands.Basic.Cancel(consumer_tag="c")))
    rig.sink.out.clear()
    return t


def run_confirm(rig: Rig, n: int) -> float:
    rig.feed(m(2, commands.Channel.Open()))
    rig.feed(m(2, commands.Confirm.Select()))
    one = publish_frames(2, "q")
    t0 = time.process_time()
    for _ in range(n):
        rig.feed(one)
        rig.sink.out.clear()
    return time.process_time() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("-n", type=int, default=None, help="messages per run (default 20000)")
    ap.add_argument("--reps", type=int, default=None, help="default 5")
    ap.add_argument("--profile", choices=["publish", "consume", "confirm"], default=None)
    ap.add_argument("--top", type=int, default=30)
    args = ap.parse_args(argv)
    n = args.n or (2000 if args.quick else 20000)
    reps = args.reps or (1 if args.quick else 5)

    async def go() -> int:
        if args.profile:
            rig = Rig()
            if args.profile == "consume":
                run_publish(rig, n)
            prof = cProfile.Profile()
            fn = {"publish": run_publish, "consume": run_consume, "confirm": run_confirm}[args.profile]
            prof.enable()
            fn(rig, n)
            prof.disable()
            pstats.Stats(prof).sort_stats("tottime").print_stats(args.top)
            return 0
        res: dict[str, list[float]] = {"publish": [], "consume": [], "confirm": []}
        for _ in range(reps):
            rig = Rig()
            res["publish"].append(run_publish(rig, n) / n * 1e6)
            res["consume"].append(run_consume(rig, n) / n * 1e6)
            res["confirm"].append(run_confirm(rig, max(n // 4, 10)) / max(n // 4, 10) * 1e6)
            rig.conn.connection_lost(None)
        print(f"python {sys.version.split()[0]}, N={n}, reps={reps}: CPU µs per message (median, min-max)")
        for k, v in res.items():
            print(f"  {k:8s} {statistics.median(v):6.2f}   ({min(v):.2f} - {max(v):.2f})")
        return 0

    return asyncio.run(go())


if __name__ == "__main__":
    sys.exit(main())
