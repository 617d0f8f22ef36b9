"""Scale: 10,000 queues, 1,000,000 queued 100-byte messages, topic routing over 10,000 bindings.

    python benchmarks/bench_scale.py              # full run (about 1.5 minutes)
    python benchmarks/bench_scale.py --quick      # seconds
    python benchmarks/bench_scale.py --only topic,messages

Two levels, both reported:

- wire: pika against ``python -m fakerabbit serve`` in its own process; memory is that process's RSS;
- broker: the broker model called directly (no sockets, no pamqp): what the model itself costs, and where its
  memory goes (tracemalloc). Broker-level times are CPU time of this process (``time.process_time``), so other
  load on the machine does not inflate them; wire-level times are wall-clock.

"Growth" is the cost at the large size divided by the cost at the small one, per operation: 1.0 means constant
cost per operation (the whole run grows linearly); 10.0 for a 10x size means each operation is O(size).
Exits non-zero only on errors, never on a missed goal.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import sys
import time
import tracemalloc
from typing import Any

import pika
from _common import BODY_100, Target, fake_process, median, print_table, rss_kib, unique

from fakerabbit.broker.broker import Broker
from fakerabbit.broker.session import Session
from fakerabbit.clock import VirtualClock

EMPTY_PROPS = b"\x00\x00"


def ratio(a: float, b: float, fmt: str = ".2f") -> str:
    """a / b, or "-" when b is too small to divide by (timer resolution on tiny runs)."""
    return format(a / b, fmt) if b > 0 else "-"


ROWS: list[list[str]] = []


def row(section: str, measure: str, small: str, large: str, growth: str = "", note: str = "") -> None:
    ROWS.append([section, measure, small, large, growth, note])
    print(f"  {section:9s} {measure:52s} {small:>14s} {large:>14s} {growth:>8s}  {note}", flush=True)


# -- broker-level harness ---------------------------------------------------------------------------------------
class NullSink:
    def send_deliver(self, *a: Any) -> None:
        pass

    def send_return(self, *a: Any) -> None:
        pass

    def send_confirm(self, *a: Any) -> None:
        pass

    def send_cancel(self, *a: Any) -> None:
        pass


def model() -> tuple[Broker, Any, Session]:
    broker = Broker(VirtualClock())
    conn = broker.open_connection("guest", "/", client_properties={})
    vhost = broker.vhost("/")
    return broker, conn, Session(conn, 1, vhost, NullSink())


def declare_queue(vhost: Any, conn: Any, name: str) -> Any:
    return vhost.declare_queue(
        conn, name, passive=False, durable=False, exclusive=False, auto_delete=False, arguments={}
    )


def declare_exchange(vhost: Any, conn: Any, name: str, type_: str) -> Any:
    return vhost.declare_exchange(
        conn, name, type_, passive=False, durable=False, auto_delete=False, internal=False, arguments={}
    )


# -- wire helpers -----------------------------------------------------------------------------------------------
def barrier(ch: Any, q: str) -> int:
    """A round trip on the channel: the fake handles frames in order, so everything sent before is applied."""
    return int(ch.queue_declare(q, passive=True).method.message_count)


def cycle_ms(t: Target, m: int) -> float:
    params = t.params()
    times = []
    for _ in range(m):
        q = unique("cy")
        t0 = time.perf_counter()
        conn = pika.BlockingConnection(params)
        ch = conn.channel()
        ch.queue_declare(q, exclusive=True)
        ch.basic_publish("", q, BODY_100)
        ch.basic_get(q, auto_ack=True)
        conn.close()
        times.append(time.perf_counter() - t0)
    return median(times) * 1000


# -- sections ---------------------------------------------------------------------------------------------------
def section_queues(nq: int, small: int) -> None:
    print(f"queues: {nq:,} queues (growth: last {small:,} vs first {small:,})")
    with fake_process() as t:
        base_cycle = cycle_ms(t, 30)
        rss0 = rss_kib(t.pid)
        conn = pika.BlockingConnection(t.params())
        ch = conn.channel()
        names = [f"scale-q-{i}" for i in range(nq)]
        stamps = [time.perf_counter()]
        for name in names:
            ch.queue_declare(name)
            stamps.append(time.perf_counter())
        first = (stamps[small] - stamps[0]) / small * 1e6
        last = (stamps[-1] - stamps[-1 - small]) / small * 1e6
        row(
            "queues",
            f"queue.declare over the wire (us each), first / last {small:,}",
            f"{first:.0f}",
            f"{last:.0f}",
            ratio(last, first),
        )
        t0 = time.perf_counter()
        for name in names:
            ch.basic_publish("", name, BODY_100)
        barrier(ch, names[0])
        pub = (time.perf_counter() - t0) / nq * 1e6
        row("queues", f"publish 1 msg to each of {nq:,} queues (us each)", "", f"{pub:.1f}")
        rss1 = rss_kib(t.pid)
        row("queues", "RSS per queue holding 1 message (bytes)", "", f"{(rss1 - rss0) * 1024 / nq:,.0f}")
        big_cycle = cycle_ms(t, 30)
        row(
            "queues",
            f"per-test cycle ms, 0 vs {nq:,} queues present",
            f"{base_cycle:.2f}",
            f"{big_cycle:.2f}",
            ratio(big_cycle, base_cycle),
            "wall clock; see the broker-level row below",
        )
        t0 = time.perf_counter()
        for name in names:
            ch.queue_delete(name)
        row("queues", "queue.delete over the wire (us each)", "", f"{(time.perf_counter() - t0) / nq * 1e6:.0f}")
        conn.close()

    # broker level (CPU time): declare cost as queues accumulate; a test's connection (open, exclusive queue,
    # close) with many queues present; reset(); deleting queues bound to a topic exchange
    tmp: dict[str, float] = {}
    for n in (nq // 10, nq):
        broker, conn, s = model()
        v = broker.vhost("/")
        gc.collect()
        stamps = [time.process_time()]
        for i in range(n):
            declare_queue(v, conn, f"q{i}")
            if (i + 1) % small == 0:
                stamps.append(time.process_time())
        tmp[f"decl-first{n}"] = (stamps[1] - stamps[0]) / small * 1e6
        tmp[f"decl-last{n}"] = (stamps[-1] - stamps[-2]) / small * 1e6
        reps = 200
        gc.collect()
        t0 = time.process_time()
        for j in range(reps):
            c = broker.open_connection("guest", "/", client_properties={})
            v.declare_queue(c, f"ex{j}", passive=False, durable=False, exclusive=True, auto_delete=False, arguments={})
            broker.close_connection(c)
        tmp[f"conn{n}"] = (time.process_time() - t0) / reps * 1e6
        gc.collect()
        t0 = time.process_time()
        broker.reset()
        tmp[f"reset{n}"] = (time.process_time() - t0) * 1000
        broker, conn, s = model()
        v = broker.vhost("/")
        declare_exchange(v, conn, "tx", "topic")
        qs = [declare_queue(v, conn, f"q{i}") for i in range(n)]
        for i in range(n):
            v.bind(conn, "queue", f"q{i}", "tx", f"k{i}.*", {})
        sample = qs[: min(n, 1000)]
        gc.collect()
        t0 = time.process_time()
        for q in sample:
            v.delete_queue(q)
        tmp[f"del{n}"] = (time.process_time() - t0) / len(sample) * 1e6
        del broker, conn, s, v, qs, sample
    a, b = nq // 10, nq

    def grow(key: str, what: str, unit: str, fmt: str = ".1f", note: str = "10x") -> None:
        lo, hi = tmp[f"{key}{a}"], tmp[f"{key}{b}"]
        row("queues", f"{what}, {a:,} / {b:,} ({unit})", format(lo, fmt), format(hi, fmt), ratio(hi, lo, ".1f"), note)

    grow("decl-first", "broker-level queue.declare, first queues", "us")
    grow("decl-last", "broker-level queue.declare, last queues", "us", note="vs first: growth per declare")
    grow(
        "conn",
        "broker-level open conn + excl. queue + close, queues present",
        "us",
        note="O(queues) before the exclusive-queue index",
    )
    grow("reset", "broker reset() with N queues", "ms", ".2f")
    grow("del", "delete a queue bound to a topic exchange, N bindings", "us")


ROWS_TMP: dict[str, float] = {}


def section_messages(nm: int, chunk: int) -> None:
    print(f"messages: {nm:,} queued 100-byte messages in one queue (growth: last chunk vs first, chunk {chunk:,})")
    # wire level
    with fake_process() as t:
        conn = pika.BlockingConnection(t.params())
        ch = conn.channel()
        q = unique("deep")
        ch.queue_declare(q)
        # warm-up run so that RSS growth is the messages, not first-use allocations
        for _ in range(1000):
            ch.basic_publish("", q, BODY_100)
        barrier(ch, q)
        ch.queue_purge(q)
        gc_rss0 = rss_kib(t.pid)
        rates = []
        cpus = []
        publish = ch.basic_publish
        for done in range(0, nm, chunk):
            c0 = t.server_cpu() or 0.0
            t0 = time.perf_counter()
            for _ in range(chunk):
                publish("", q, BODY_100)
            count = barrier(ch, q)
            rates.append(chunk / (time.perf_counter() - t0))
            cpus.append(((t.server_cpu() or 0.0) - c0) / chunk * 1e6)
            if count != done + chunk:
                raise RuntimeError(f"expected {done + chunk} messages, queue has {count}")
        rss1 = rss_kib(t.pid)
        row(
            "messages",
            "wire publish msg/s (first chunk / last chunk)",
            f"{rates[0]:,.0f}",
            f"{rates[-1]:,.0f}",
            ratio(rates[0], rates[-1]),
            "wall clock; growth = time per msg",
        )
        row(
            "messages",
            "fake process CPU us/msg publishing (first / last chunk)",
            f"{cpus[0]:.1f}",
            f"{cpus[-1]:.1f}",
            ratio(cpus[-1], cpus[0]),
            "user+sys from /proc",
        )
        row(
            "messages",
            f"fake process RSS per queued message (bytes), {nm:,} msgs",
            "",
            f"{(rss1 - gc_rss0) * 1024 / nm:,.0f}",
            "",
            f"RSS {gc_rss0 / 1024:.0f} -> {rss1 / 1024:.0f} MiB",
        )
        # consume a slice from the deep queue: dispatch must not depend on the depth
        n_c = min(20000, nm)
        ch.basic_qos(prefetch_count=200)
        got = 0

        def on_message(c: Any, method: Any, _p: Any, _b: bytes) -> None:
            nonlocal got
            ch.basic_ack(method.delivery_tag)
            got += 1
            if got == n_c:
                ch.stop_consuming()

        c0 = t.server_cpu() or 0.0
        t0 = time.perf_counter()
        tag = ch.basic_consume(q, on_message)
        ch.start_consuming()
        rate = n_c / (time.perf_counter() - t0)
        ccpu = ((t.server_cpu() or 0.0) - c0) / n_c * 1e6
        ch.basic_cancel(tag)
        row(
            "messages",
            f"consume+ack from the {nm:,}-deep queue (prefetch 200): msg/s, CPU us/msg",
            "",
            f"{rate:,.0f}",
            f"{ccpu:.1f}",
            "growth column: fake CPU us/msg",
        )
        t0 = time.perf_counter()
        ch.queue_purge(q)
        row("messages", f"queue.purge of {nm - n_c:,} messages (ms)", "", f"{(time.perf_counter() - t0) * 1000:.0f}")
        conn.close()

    # broker level
    broker, conn, s = model()
    v = broker.vhost("/")
    declare_queue(v, conn, "deep")
    gc.collect()
    rss0 = rss_kib()
    per = []
    for _ in range(0, nm, chunk):
        t0 = time.process_time()
        for _ in range(chunk):
            s.publish("", "deep", False, False, EMPTY_PROPS, BODY_100)
        per.append((time.process_time() - t0) / chunk * 1e6)
    rss1 = rss_kib()
    row(
        "messages",
        "broker-level publish (us/msg, first / last chunk)",
        f"{per[0]:.2f}",
        f"{per[-1]:.2f}",
        ratio(per[-1], per[0]),
    )
    row(
        "messages",
        "broker-level RSS per queued message (bytes)",
        "",
        f"{(rss1 - rss0) * 1024 / nm:,.0f}",
        "",
        f"event log holds {len(broker.events):,} events",
    )
    t0 = time.process_time()
    v.purge_queue(conn, "deep")
    del broker, conn, s, v
    gc.collect()

    # where the bytes go: tracemalloc over a sample, grouped by allocation line
    sample = min(100_000, nm)
    broker, conn, s = model()
    v = broker.vhost("/")
    declare_queue(v, conn, "deep")
    broker.events.enabled = False  # the event log is a bounded ring (reported above); count the message alone
    tracemalloc.start()
    snap0 = tracemalloc.take_snapshot()
    for _ in range(sample):
        s.publish("", "deep", False, False, EMPTY_PROPS, BODY_100)
    snap1 = tracemalloc.take_snapshot()
    tracemalloc.stop()
    stats = snap1.compare_to(snap0, "lineno")
    total = sum(st.size_diff for st in stats)
    row(
        "messages",
        f"tracemalloc bytes per message, event log off ({sample:,} sample)",
        "",
        f"{total / sample:,.0f}",
        "",
        "top allocation sites follow",
    )
    for st in stats[:8]:
        if st.size_diff / sample < 4:
            continue
        fr = st.traceback[0]
        fname = fr.filename.split("/fakerabbit/")[-1] if "/fakerabbit/" in fr.filename else fr.filename
        row("messages", f"  {fname}:{fr.lineno}", "", f"{st.size_diff / sample:,.1f}", "", "bytes/msg")


def section_topic(sizes: list[int], n_pub: int) -> None:
    print(f"topic: routing over {', '.join(f'{s:,}' for s in sizes)} bindings (each publish matches one binding)")
    per: dict[tuple[str, int], float] = {}
    for kind in ("topic", "direct"):
        for n in sizes:
            broker, conn, s = model()
            v = broker.vhost("/")
            declare_exchange(v, conn, "x", kind)
            for i in range(n):
                declare_queue(v, conn, f"q{i}")
                v.bind(conn, "queue", f"q{i}", "x", f"svc{i}.*.event" if kind == "topic" else f"svc{i}.k.event", {})
            m = max(200, min(n_pub, 2_000_000 // n))  # keep the slow cases short
            keys = [f"svc{(i * 7919) % n}.k.event" for i in range(m)]
            gc.collect()
            t0 = time.process_time()
            for k in keys:
                s.publish("x", k, False, False, EMPTY_PROPS, BODY_100)
            per[(kind, n)] = (time.process_time() - t0) / m * 1e6
            got = sum(q.ready_count for q in v.queues.values())
            if got != m:
                raise RuntimeError(f"{kind}: {got} routed of {m}")
            del broker, conn, s, v
    lo, hi = sizes[0], sizes[-1]
    for kind in ("topic", "direct"):
        row(
            "topic",
            f"broker-level {kind} publish (us), {lo:,} / {hi:,} bindings",
            f"{per[(kind, lo)]:.1f}",
            f"{per[(kind, hi)]:.1f}",
            ratio(per[(kind, hi)], per[(kind, lo)], ".1f"),
            f"{hi // lo}x bindings",
        )
    for n in sizes[1:-1]:
        row("topic", f"broker-level topic publish (us), {n:,} bindings", "", f"{per[('topic', n)]:.1f}")

    # wire level
    wire: dict[int, float] = {}
    with fake_process() as t:
        conn = pika.BlockingConnection(t.params())
        ch = conn.channel()
        for n in (lo, hi):
            x = unique("tx")
            ch.exchange_declare(x, "topic")
            names = []
            for i in range(n):
                qn = f"{x}-q{i}"
                names.append(qn)
                ch.queue_declare(qn)
                ch.queue_bind(qn, x, f"svc{i}.*.event")
            m = max(200, min(n_pub, 2_000_000 // n))
            keys = [f"svc{(i * 7919) % n}.k.event" for i in range(m)]
            t0 = time.perf_counter()
            for k in keys:
                ch.basic_publish(x, k, BODY_100)
            barrier(ch, names[0])
            wire[n] = m / (time.perf_counter() - t0)
            for qn in names:
                ch.queue_delete(qn)
            ch.exchange_delete(x)
        conn.close()
    row(
        "topic",
        f"wire topic publish msg/s, {lo:,} / {hi:,} bindings",
        f"{wire[lo]:,.0f}",
        f"{wire[hi]:,.0f}",
        ratio(wire[lo], wire[hi], ".1f"),
        "growth = time per msg",
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", default="queues,messages,topic", help="comma list of queues, messages, topic")
    ap.add_argument("--queues", type=int, default=None, help="number of queues (default 10000)")
    ap.add_argument("--messages", type=int, default=None, help="queued messages (default 1000000)")
    ap.add_argument("--bindings", type=int, default=None, help="largest number of topic bindings (default 10000)")
    args = ap.parse_args(argv)
    only = set(args.only.split(","))
    nq = args.queues or (1000 if args.quick else 10000)
    nm = args.messages or (20000 if args.quick else 1_000_000)
    nb = args.bindings or (1000 if args.quick else 10000)
    print(f"python {sys.version.split()[0]}, pika {pika.__version__}")
    print(f"  {'section':9s} {'measure':52s} {'small':>14s} {'large':>14s} {'growth':>8s}  note")
    if "queues" in only:
        section_queues(nq, max(nq // 10, 1))
    if "messages" in only:
        section_messages(nm, max(nm // 10, 1))
    if "topic" in only:
        section_topic([max(nb // 100, 1), nb // 10, nb], 2000 if args.quick else 5000)
    print()
    print_table(["section", "measure", "small", "large", "growth", "note"], ROWS, left=2)
    return 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
