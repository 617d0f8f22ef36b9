"""Hot paths of the broker model, in CPU time (no sockets, no pamqp): the figures behind docs/performance.md's
hot-path list, before and after each fix.

    python benchmarks/bench_hotpath.py            # about 30 s
    python benchmarks/bench_hotpath.py --quick    # a few seconds
    python benchmarks/bench_hotpath.py --only topic,gc

Every figure is ``time.process_time()`` of this process around direct calls into the model, the median of
``--reps`` repetitions, so other load on the machine inflates it little. Rows:

- publish: ``Session.publish`` of a 100-byte message with no properties (and with five common properties)
  into one queue through the default exchange, the GC on, messages accumulating;
- consume: ``Session.get`` + ``Session.ack`` of those messages; a basic.consume consumer with ack per message;
- gc: GC-tracked objects and tracemalloc bytes per queued message;
- gcmode: publish with the GC as CPython sets it, as ``fakerabbit serve`` tunes it, and disabled;
- topic: publish through a topic exchange with N bindings (one binding matches each key);
- auth, props, events: the single calls (permission check, property read, event emit);
- close: open a connection, declare an exclusive queue, close it, with N other queues present; delete a
  queue bound to a topic exchange with N bindings.

Exits non-zero only on errors, never on a slow figure.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

from fakerabbit.broker.broker import Broker
from fakerabbit.broker.properties import RawProperties, build_properties
from fakerabbit.broker.session import Session
from fakerabbit.clock import SystemClock, VirtualClock

BODY_100 = b"x" * 100
EMPTY = b"\x00\x00"
PROPS5 = build_properties(
    content_type="application/json",
    delivery_mode=2,
    correlation_id="c-1234",
    message_id="m-5678",
    timestamp=1_700_000_000,
)


class NullSink:
    def send_deliver(self, *a: Any) -> None:
        pass

    def send_return(self, *a: Any) -> None:
        pass

    def send_confirm(self, *a: Any) -> None:
        pass

    def send_cancel(self, *a: Any) -> None:
        pass

    def writable(self) -> bool:
        return True


def model(clock: Any = None) -> tuple[Broker, Any, Session]:
    broker = Broker(clock if clock is not None else VirtualClock())
    conn = broker.open_connection("guest", "/", client_properties={})
    vhost = broker.vhost("/")
    return broker, conn, Session(conn, 1, vhost, NullSink())


def declare(v: Any, conn: Any, name: str, *, exclusive: bool = False) -> Any:
    return v.declare_queue(
        conn, name, passive=False, durable=False, exclusive=exclusive, auto_delete=False, arguments={}
    )


def exchange(v: Any, conn: Any, name: str, type_: str) -> Any:
    return v.declare_exchange(
        conn, name, type_, passive=False, durable=False, auto_delete=False, internal=False, arguments={}
    )


ROWS: list[tuple[str, str, float, str]] = []


def row(section: str, measure: str, value: float, unit: str) -> None:
    ROWS.append((section, measure, value, unit))
    print(f"  {section:8s} {measure:62s} {value:12.2f} {unit}", flush=True)


def cpu_per_op(fn: Callable[[], int], reps: int) -> float:
    """Median over ``reps`` runs of CPU microseconds per operation; ``fn`` returns how many operations it did."""
    out = []
    for _ in range(reps):
        gc.collect()
        t0 = time.process_time()
        n = fn()
        out.append((time.process_time() - t0) / n * 1e6)
    return statistics.median(out)


# -- sections -------------------------------------------------------------------------------------------------
def section_publish(n: int, reps: int) -> None:
    for label, props in (("no properties", EMPTY), ("5 properties", PROPS5)):
        for clock_name in ("virtual", "system"):

            def run(props: bytes = props, clock_name: str = clock_name) -> int:
                _b, conn, s = model(SystemClock() if clock_name == "system" else None)
                declare(s.vhost, conn, "q")
                for _ in range(n):
                    s.publish("", "q", False, False, props, BODY_100)
                return n

            row("publish", f"Session.publish, {label}, {clock_name} clock (us)", cpu_per_op(run, reps), "us")

    def run_quiet() -> int:
        _b, conn, s = model()
        s.broker.events.enabled = False
        declare(s.vhost, conn, "q")
        for _ in range(n):
            s.publish("", "q", False, False, EMPTY, BODY_100)
        return n

    row(
        "publish",
        "Session.publish, no properties, virtual clock, event log off (us)",
        cpu_per_op(run_quiet, reps),
        "us",
    )


def section_consume(n: int, reps: int) -> None:
    def timed_get_ack() -> float:
        _b, conn, s = model()
        declare(s.vhost, conn, "q")
        for _ in range(n):
            s.publish("", "q", False, False, EMPTY, BODY_100)
        gc.collect()
        t0 = time.process_time()
        for _ in range(n):
            r = s.get("q", False)
            assert r is not None
            s.ack(r.delivery_tag, False)
        return (time.process_time() - t0) / n * 1e6

    row("consume", "Session.get + ack (us)", statistics.median(timed_get_ack() for _ in range(reps)), "us")

    def timed_consume() -> float:
        _b, conn, s = model()
        declare(s.vhost, conn, "q")
        s.qos(0, 200, False)
        c = s.consume("q", "ctag", False, False, {})
        s.start(c)
        gc.collect()
        t0 = time.process_time()
        for _ in range(n):
            s.publish("", "q", False, False, EMPTY, BODY_100)  # delivered at once (prefetch 200)
            s.ack(s.next_tag - 1, False)
        return (time.process_time() - t0) / n * 1e6

    row(
        "consume",
        "publish + deliver to a consumer + ack (us)",
        statistics.median(timed_consume() for _ in range(reps)),
        "us",
    )


def section_gc(n: int) -> None:
    for label, props in (("no properties", EMPTY), ("5 properties", PROPS5)):
        _b, conn, s = model()
        declare(s.vhost, conn, "q")
        for _ in range(100):
            s.publish("", "q", False, False, props, BODY_100)
        s.broker.events.clear()
        gc.collect()
        before = len(gc.get_objects())
        for _ in range(n):
            s.publish("", "q", False, False, props, BODY_100)
        gc.collect()
        after = len(gc.get_objects())
        row("gc", f"GC-tracked objects per queued message, {label}", (after - before) / n, "objects")
    # the event log's share, measured with it off and on
    for enabled in (False, True):
        _b, conn, s = model()
        s.broker.events.enabled = enabled
        declare(s.vhost, conn, "q")
        gc.collect()
        tracemalloc.start()
        snap0 = tracemalloc.take_snapshot()
        for _ in range(n):
            s.publish("", "q", False, False, EMPTY, BODY_100)
        snap1 = tracemalloc.take_snapshot()
        tracemalloc.stop()
        total = sum(st.size_diff for st in snap1.compare_to(snap0, "filename"))
        row(
            "gc",
            f"tracemalloc bytes per queued message, event log {'on' if enabled else 'off'}",
            total / n,
            "B",
        )


def section_gc_settings(n: int, reps: int) -> None:
    """What ``fakerabbit serve``'s GC tuning buys while messages accumulate (``n`` queued per run)."""
    try:
        from fakerabbit.cli import GC_GEN0_THRESHOLD
    except ImportError:
        GC_GEN0_THRESHOLD = 50_000
    default = gc.get_threshold()
    modes = (
        ("CPython default thresholds", default, False),
        (f"gc.freeze() + gen0 threshold {GC_GEN0_THRESHOLD:,} (fakerabbit serve)", None, True),
        ("GC disabled (for reference)", None, False),
    )
    for label, threshold, freeze in modes:
        times = []
        for _ in range(reps):
            _b, conn, s = model()
            declare(s.vhost, conn, "q")
            gc.collect()
            if freeze:
                gc.freeze()
                gc.set_threshold(GC_GEN0_THRESHOLD, default[1], default[2])
            elif threshold is None:
                gc.disable()
            t0 = time.process_time()
            for _ in range(n):
                s.publish("", "q", False, False, EMPTY, BODY_100)
            times.append((time.process_time() - t0) / n * 1e6)
            gc.enable()
            gc.unfreeze()
            gc.set_threshold(*default)
            del _b, conn, s
        row("gcmode", f"publish, {n:,} queued, {label} (us)", statistics.median(times), "us")


def section_topic(sizes: list[int], n_pub: int, reps: int) -> None:
    for n in sizes:
        _b, conn, s = model()
        v = s.vhost
        exchange(v, conn, "x", "topic")
        for i in range(n):
            declare(v, conn, f"q{i}")
            v.bind(conn, "queue", f"q{i}", "x", f"svc{i}.*.event", {})
        # a few wildcard-heavy bindings that every key also matches
        declare(v, conn, "all")
        v.bind(conn, "queue", "all", "x", "#.event", {})
        m = max(200, min(n_pub, 2_000_000 // n))
        keys = [f"svc{(i * 7919) % n}.k.event" for i in range(m)]

        def run(keys: list[str] = keys, s: Session = s) -> int:
            for k in keys:
                s.publish("x", k, False, False, EMPTY, BODY_100)
            return len(keys)

        row("topic", f"topic publish, {n:,} bindings (us)", cpu_per_op(run, reps), "us")
        x = v.exchanges["x"]
        k1 = ["svc1.k.event"]

        def match(x: Any = x, k1: list[str] = k1) -> int:
            for _ in range(10000):
                x.match(k1, None)
            return 10000

        row("topic", f"Exchange.match alone, {n:,} bindings (us)", cpu_per_op(match, reps), "us")
        fresh = [[f"svc{(i * 7919) % n}.k{i}.event"] for i in range(2000)]  # never routed before: no cached result

        def match_new(x: Any = x, fresh: list[list[str]] = fresh) -> int:
            trie = getattr(x.kind, "trie", None)
            if trie is not None:
                trie._cache.clear()  # as a bind or unbind does: every key below is routed afresh
            for k in fresh:
                x.match(k, None)
            return len(fresh)

        row(
            "topic",
            f"Exchange.match alone, {n:,} bindings, a new key each time (us)",
            cpu_per_op(match_new, reps),
            "us",
        )


def section_calls(reps: int) -> None:
    broker, _conn, _s = model()
    auth = broker.auth
    auth.set_permissions("limited", "/", configure="^cfg-.*", write="^(pub|amq\\.default)$", read=".*")

    def check_full() -> int:
        for _ in range(100000):
            auth.check("guest", "/", "write", "exchange", "")
        return 100000

    def check_limited() -> int:
        for _ in range(100000):
            auth.check("limited", "/", "write", "exchange", "pub")
        return 100000

    row("auth", "Auth.check, full permissions '.*' (us)", cpu_per_op(check_full, reps), "us")
    row("auth", "Auth.check, a regex permission (us)", cpu_per_op(check_limited, reps), "us")

    def read_empty() -> int:
        for _ in range(100000):
            p = RawProperties(EMPTY)
            _ = p.expiration, p.user_id, p.reply_to
        return 100000

    def read_props5() -> int:
        for _ in range(100000):
            p = RawProperties(PROPS5)
            _ = p.expiration, p.user_id, p.reply_to
        return 100000

    row("props", "RawProperties(b'\\0\\0') + expiration, user_id, reply_to (us)", cpu_per_op(read_empty, reps), "us")
    row("props", "RawProperties(5 properties) + the same three reads (us)", cpu_per_op(read_props5, reps), "us")

    for clock_name, clock in (("virtual", VirtualClock()), ("system", SystemClock())):
        b = Broker(clock)
        emit = b.events.emit

        def emits(emit: Any = emit, b: Broker = b) -> int:
            b.events.clear()
            for _ in range(100000):
                emit("acked", None, queue="q")
            return 100000

        row("events", f"EventLog.emit, {clock_name} clock (us)", cpu_per_op(emits, reps), "us")
        record = getattr(b.events, "record", None)
        if record is not None:
            from fakerabbit.broker.events import ACKED

            def records(record: Any = record, b: Broker = b) -> int:
                b.events.clear()
                for _ in range(100000):
                    record(ACKED, None, "q")
                return 100000

            row("events", f"EventLog.record, {clock_name} clock (us)", cpu_per_op(records, reps), "us")


def section_close(sizes: list[int], reps: int) -> None:
    for n in sizes:
        broker, conn, s = model()
        v = s.vhost
        for i in range(n):
            declare(v, conn, f"q{i}")
        counter = iter(range(10**9))

        def cycle(broker: Broker = broker, v: Any = v, counter: Any = counter) -> int:
            for _ in range(200):
                c = broker.open_connection("guest", "/", client_properties={})
                declare(v, c, f"ex{next(counter)}", exclusive=True)
                broker.close_connection(c)
            return 200

        row("close", f"open + exclusive queue + close, {n:,} queues present (us)", cpu_per_op(cycle, reps), "us")
    for n in sizes:
        times: list[float] = []

        def delete(n: int = n, times: list[float] = times) -> None:
            _b, conn, s = model()
            v = s.vhost
            exchange(v, conn, "tx", "topic")
            qs = [declare(v, conn, f"q{i}") for i in range(n)]
            for i in range(n):
                v.bind(conn, "queue", f"q{i}", "tx", f"k{i}.*", {})
            sample = qs[: min(n, 500)]
            gc.collect()
            t0 = time.process_time()
            for q in sample:
                v.delete_queue(q)
            spent = time.process_time() - t0
            times.append(spent / len(sample) * 1e6)  # only the deletes are timed, not the set-up

        for _ in range(reps):
            delete()
        row("close", f"delete a queue bound to a topic exchange, {n:,} bindings (us)", statistics.median(times), "us")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small N, 3 repetitions")
    ap.add_argument("--only", default="publish,consume,gc,gcmode,topic,calls,close", help="comma list of sections")
    ap.add_argument("--reps", type=int, default=None, help="repetitions per figure (default 5; 3 with --quick)")
    ap.add_argument("-n", type=int, default=None, help="messages per publish run (default 50000; 5000 with --quick)")
    ap.add_argument("--bindings", type=int, default=None, help="largest topic binding / queue count (default 10000)")
    args = ap.parse_args(argv)
    only = set(args.only.split(","))
    reps = args.reps or (3 if args.quick else 5)
    n = args.n or (5000 if args.quick else 50000)
    big = args.bindings or (1000 if args.quick else 10000)
    sizes = sorted({max(big // 100, 1), max(big // 10, 1), big}) if not args.quick else sorted({max(big // 10, 1), big})
    print(f"python {sys.version.split()[0]}; CPU time per operation, median of {reps}")
    if "publish" in only:
        section_publish(n, reps)
    if "consume" in only:
        section_consume(n, reps)
    if "gc" in only:
        section_gc(n)
    if "gcmode" in only:
        section_gc_settings(n * 4, reps)
    if "topic" in only:
        section_topic(sizes, 2000 if args.quick else 5000, reps)
    if "calls" in only:
        section_calls(reps)
    if "close" in only:
        section_close(sizes[-2:], reps)
    return 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
