"""Expiry on the virtual clock: how long ``clock.advance()`` takes to expire 100,000 messages of one queue and
dead-letter them into another (goal: under 1 s), and how much memory a queued 100-byte message costs.

    python benchmarks/bench_expiry.py            # 100,000 messages, best of 3
    python benchmarks/bench_expiry.py --quick    # 20,000 messages, one round
    python benchmarks/bench_expiry.py --amqp     # also publish over AMQP with pika and advance from the test thread

Measurements (the broker model on its own unless ``--amqp``; publishing is not timed):

- ``advance``: ``clock.advance()`` over N messages published to ``source`` (``x-message-ttl`` 300 s,
  ``x-dead-letter-exchange`` "" and ``x-dead-letter-routing-key`` ``dlq``), in two shapes: ``one instant`` (all
  published at the same virtual instant: one timer expires them all) and ``spread`` (one virtual millisecond
  between publishes: N timers, each expiring one message). Each message is dead-lettered (x-death added,
  routed, enqueued in ``dlq``). Seconds (wall clock) and messages per second; then, for the same round, the
  process's CPU seconds (less sensitive to other load on the machine) and the part of the wall-clock seconds spent
  in the young-generation collection that follows the firing (the garbage collector is paused while timers fire,
  so every object the expiry left behind is examined then).
- ``memory``: tracemalloc's growth while N 100-byte messages (with a few properties: content type, delivery mode,
  a header) are queued, divided by N, in bytes per message; also once they are dead-lettered copies in ``dlq``
  (the source queue then empty). With the broker's event log on (the default: it keeps the last 100,000 events)
  and off (``broker.events.enabled = False``), which isolates what the queue itself holds per message.

Exits non-zero only on errors, never on a missed goal.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fakerabbit.broker.broker import Broker
from fakerabbit.broker.fields import table_from_python
from fakerabbit.broker.properties import build_properties
from fakerabbit.broker.session import Session
from fakerabbit.clock import VirtualClock

BODY = b"x" * 100
TTL_MS = 300_000  # longer than the spread publishing takes (one virtual millisecond per message)
GOAL_S = 1.0


class _Sink:
    def send_deliver(self, *args: Any) -> None: ...
    def send_return(self, *args: Any) -> None: ...
    def send_confirm(self, *args: Any) -> None: ...
    def send_cancel(self, *args: Any) -> None: ...


def _setup() -> tuple[Broker, VirtualClock, Session]:
    clock = VirtualClock()
    broker = Broker(clock)
    v = broker.vhost("/")
    v.declare_queue(None, "dlq", passive=False, durable=True, exclusive=False, auto_delete=False, arguments={})
    args = table_from_python(
        {"x-message-ttl": TTL_MS, "x-dead-letter-exchange": "", "x-dead-letter-routing-key": "dlq"}
    )
    v.declare_queue(None, "source", passive=False, durable=True, exclusive=False, auto_delete=False, arguments=args)
    conn = broker.open_connection("guest", "/", client_properties={})
    return broker, clock, Session(conn, 1, v, _Sink())


_PROPS = build_properties(
    content_type="application/json", delivery_mode=2, headers=table_from_python({"tenant": "acme"})
)


def _publish(session: Session, clock: VirtualClock, n: int, spread: bool) -> None:
    for _ in range(n):
        session.publish("", "source", False, False, _PROPS, BODY)
        if spread:
            clock.advance(0.001)


class Round(NamedTuple):
    seconds: float  # wall clock, advance() and the collection after it
    cpu: float  # process CPU time of the same
    gc: float  # wall clock of the young-generation collection alone


def bench_advance(n: int, spread: bool) -> Round:
    broker, clock, session = _setup()
    _publish(session, clock, n, spread)
    v = broker.vhost("/")
    assert v.queues["source"].ready_count == n
    gc.collect()
    c0, t0 = time.process_time(), time.perf_counter()
    clock.advance(TTL_MS / 1000 + (n / 1000 if spread else 0))
    t1 = time.perf_counter()
    gc.collect(0)  # the young-generation collection that the next allocation would trigger: counted too
    t2, c2 = time.perf_counter(), time.process_time()
    assert v.queues["source"].ready_count == 0, "not everything expired"
    assert v.queues["dlq"].ready_count == n, "not everything was dead-lettered"
    return Round(t2 - t0, c2 - c0, t2 - t1)


def bench_memory(n: int, events: bool = True) -> tuple[float, float]:
    broker, clock, session = _setup()
    broker.events.enabled = events
    v = broker.vhost("/")
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    _publish(session, clock, n, spread=False)
    gc.collect()
    queued = tracemalloc.get_traced_memory()[0]
    clock.advance(TTL_MS / 1000)
    gc.collect()
    dead = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    assert v.queues["dlq"].ready_count == n
    return (queued - before) / n, (dead - before) / n


def bench_amqp(n: int) -> float:
    """The same through the server: pika publishes (not timed), then ``rabbit.clock.advance`` from this thread."""
    import pika

    from fakerabbit import FakeRabbit

    with FakeRabbit() as rabbit:
        conn = pika.BlockingConnection(pika.URLParameters(rabbit.url))
        ch = conn.channel()
        ch.queue_declare("dlq")
        ch.queue_declare(
            "source",
            arguments={"x-message-ttl": TTL_MS, "x-dead-letter-exchange": "", "x-dead-letter-routing-key": "dlq"},
        )
        props = pika.BasicProperties(content_type="application/json", delivery_mode=2, headers={"tenant": "acme"})
        for _ in range(n):
            ch.basic_publish("", "source", BODY, props)
        assert ch.queue_declare("source", passive=True).method.message_count == n
        t0 = time.perf_counter()
        rabbit.clock.advance(TTL_MS / 1000)
        elapsed = time.perf_counter() - t0
        assert ch.queue_declare("dlq", passive=True).method.message_count == n
        conn.close()
    return elapsed


def best(rounds: int, fn: Callable[[], Round]) -> Round:
    """The fastest round (by wall clock)."""
    return min(fn() for _ in range(rounds))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="20,000 messages, one round")
    parser.add_argument("--amqp", action="store_true", help="also measure through the server with pika")
    parser.add_argument("-n", type=int, default=None, help="messages (default 100,000; 20,000 with --quick)")
    opts = parser.parse_args()
    n = opts.n or (20_000 if opts.quick else 100_000)
    rounds = 1 if opts.quick else 3
    print(
        f"fakerabbit expiry benchmark: {n:,} messages of {len(BODY)} bytes, TTL {TTL_MS // 1000} s, "
        f"dead-lettered into another queue; best of {rounds}; Python {sys.version.split()[0]}"
    )
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"load average when starting: {load:.2f} on {os.cpu_count()} CPUs (timings assume an otherwise idle machine)")
    print()
    print(f"{'case':<40} {'seconds':>9} {'msg/s':>12}  goal < {GOAL_S:.0f} s  {'cpu s':>7} {'of which gc':>12}")
    print("-" * 100)
    for label, spread in (("advance, one instant (1 timer)", False), (f"advance, spread ({n:,} timers)", True)):
        r = best(rounds, lambda spread=spread: bench_advance(n, spread))
        s = r.seconds
        verdict = "ok" if s < GOAL_S else "MISSED"
        print(f"{label:<40} {s:>9.3f} {n / s:>12,.0f}  {verdict:<10}  {r.cpu:>7.3f} {r.gc:>12.3f}")
    if opts.amqp:
        s = bench_amqp(n)
        print(
            f"{'advance through the server (pika)':<40} {s:>9.3f} {n / s:>12,.0f}  {'ok' if s < GOAL_S else 'MISSED'}"
        )
    print()
    for events in (True, False):
        queued, dead = bench_memory(n, events)
        note = "event log on (default)" if events else "event log off: the queue's own cost"
        print(f"memory per queued 100-byte message:    {queued:>7,.0f} bytes   ({note}, tracemalloc)")
        print(f"  ... and per dead-lettered copy:      {dead:>7,.0f} bytes   (x-death kept as records until read)")


if __name__ == "__main__":
    main()
