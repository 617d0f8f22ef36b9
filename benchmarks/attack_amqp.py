"""A repeatable attack on the AMQP port: what an ill-behaved or hostile client does, and the figures that show
the broker held up (issue 11). Run it from the repository root:

    python benchmarks/attack_amqp.py                      # fakerabbit serve in a subprocess (RSS and fds of it)
    python benchmarks/attack_amqp.py --target thread      # FakeRabbit() in this process (adds the reset attack)
    python benchmarks/attack_amqp.py --url amqp://guest:guest@127.0.0.1:5674/%2F --pid PID   # a running broker
    python benchmarks/attack_amqp.py --quick              # small numbers (a smoke run)

Attacks, each printed with its figures:

* ``connections``: N clients complete the handshake and are held open at once; then all close.
* ``half-open``: N sockets that send the protocol header and nothing else (the handshake timeout drops them).
* ``bodies``: rounds of clients announcing 16 MiB bodies, sending half and vanishing: RSS must not grow per round.
* ``deep-tables``: start-ok client properties nested 550 deep (the most a 4096-octet frame holds), and message
  headers nested 5,000 deep published and read back octet for octet; the log lines they cost.
* ``confirms``: a pipelined burst of publishes with confirms: ack frames (multiple or not), tags confirmed,
  messages a consumer then receives.
* ``pipelined-errors``: a hard error and connection.close in one write: the close the client gets.
* ``reset`` (``--target thread`` only): ``reset()`` under publishing clients: how they were closed.

RSS and open fds of the broker process are printed before and after (``--pid`` for a broker started elsewhere).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import logging
import os
import socket
import struct
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

from pika import spec

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks._common import Target, fake_process, fake_thread, rss_kib
from tests.rawamqp import HEADER, Frame, RawAMQP, body_frame, frame, header_frame, method_frame

# -- frames (the client is the test suite's raw one, tests/rawamqp.py: every byte visible) -----------------------


def shortstr(s: bytes) -> bytes:
    return bytes([len(s)]) + s


def longstr(s: bytes) -> bytes:
    return struct.pack(">I", len(s)) + s


def table(fields: list[tuple[bytes, bytes]]) -> bytes:
    return longstr(b"".join(shortstr(k) + v for k, v in fields))


def nested(depth: int) -> bytes:
    """A table field value nested ``depth`` levels deep."""
    inner = struct.pack(">I", 0)
    for _ in range(depth - 1):
        inner = struct.pack(">I", len(inner) + 3) + b"\x01tF" + inner
    return b"F" + inner


def handshake(url: str, client_properties: bytes | None = None) -> RawAMQP | None:
    """A connection through ``connection.open-ok``, or None (its socket closed) if the broker refused it."""
    try:
        c = RawAMQP.connect(url, client_properties=client_properties)
    except (OSError, AssertionError):
        return None
    if not c.opened:
        c.sock.close()
        return None
    return c


def next_method(c: RawAMQP, timeout: float = 10.0) -> Frame | None:
    """The next method frame (heartbeats and content skipped), or None on timeout or EOF."""
    while True:
        f = c.read_frame(timeout)
        if f is None or f.type == 1:
            return f


def publish(ch: int, queue: str, body: bytes) -> bytes:
    return (
        method_frame(ch, spec.Basic.Publish(exchange="", routing_key=queue))
        + header_frame(ch, len(body), b"\x00\x00")
        + body_frame(ch, body)
    )


CLOSE = method_frame(0, spec.Connection.Close(200, "bye", 0, 0))


# -- measurements ------------------------------------------------------------------------------------------------


def fds(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return -1


def rss_mib(pid: int | None) -> float:
    if pid is None:
        return float("nan")
    try:
        return rss_kib(pid) / 1024
    except (OSError, RuntimeError):
        return float("nan")


class Report:
    def __init__(self, pid: int | None) -> None:
        self.pid = pid

    def state(self) -> str:
        if self.pid is None:
            return "rss ? fds ?"
        gc.collect() if self.pid == os.getpid() else None
        return f"rss {rss_mib(self.pid):7.1f} MiB  fds {fds(self.pid):5d}"

    @contextlib.contextmanager
    def attack(self, name: str) -> Iterator[dict[str, Any]]:
        figures: dict[str, Any] = {}
        before = self.state()
        t0 = time.perf_counter()
        yield figures
        took = time.perf_counter() - t0
        print(f"\n== {name}  ({took:.1f} s)")
        print(f"   before: {before}")
        print(f"   after:  {self.state()}")
        for key, value in figures.items():
            print(f"   {key}: {value}")


# -- attacks -----------------------------------------------------------------------------------------------------


def attack_connections(url: str, rep: Report, n: int) -> None:
    with rep.attack(f"connections: {n} clients held open at once") as fig:
        held: list[RawAMQP] = []
        failed = 0
        for _ in range(n):
            c = handshake(url)
            if c is not None:
                held.append(c)
            else:
                failed += 1
        fig["held"] = len(held)
        fig["refused or failed"] = failed
        fig["while held"] = rep.state()
        for c in held:
            c.close()
        time.sleep(0.3)


def attack_half_open(url: str, rep: Report, n: int, wait: float) -> None:
    with rep.attack(f"half-open: {n} sockets send the header only") as fig:
        socks = []
        for _ in range(n):
            c = RawAMQP.socket_to(url)
            c.send(HEADER)
            socks.append(c)
        time.sleep(0.3)  # let the broker accept them all
        fig["while held"] = rep.state()
        if wait:
            time.sleep(wait)
            dropped = 0
            for c in socks:
                c.read_frame(0.01)
                with contextlib.suppress(OSError):
                    while c.sock.recv(65536):
                        pass
                    dropped += 1
            fig[f"dropped by the broker within {wait:.0f} s"] = dropped
        for c in socks:
            c.sock.close()
        time.sleep(0.3)


def attack_bodies(url: str, rep: Report, rounds: int, clients: int, size: int) -> None:
    with rep.attack(f"bodies: {rounds} rounds of {clients} clients leaving {size >> 20} MiB bodies half sent") as fig:
        chunk = b"z" * 131000
        for r in range(rounds):
            conns = []
            for _ in range(clients):
                c = RawAMQP.with_channel(url)
                c.send(
                    method_frame(1, spec.Basic.Publish(exchange="", routing_key="nowhere"))
                    + header_frame(1, size, b"\x00\x00")
                )
                sent = 0
                while sent < size // 2:
                    c.send(frame(3, 1, chunk))
                    sent += len(chunk)
                conns.append(c)
            time.sleep(0.2)
            mid = rss_mib(rep.pid)
            for c in conns:
                c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                c.sock.close()
            time.sleep(0.5)
            after = rss_mib(rep.pid)
            fig[f"round {r + 1}"] = f"rss with the bodies {mid:.1f} MiB, after the clients vanished {after:.1f} MiB"


def attack_deep_tables(url: str, rep: Report, clients: int, log_lines: list[int] | None) -> None:
    with rep.attack(f"deep-tables: {clients} logins with client properties 550 deep; headers 5,000 deep") as fig:
        start_lines = log_lines[0] if log_lines is not None else 0
        props = table([(b"product", b"S" + longstr(b"deep")), (b"deep", nested(550))])
        ok = 0
        for _ in range(clients):
            login = handshake(url, props)
            if login is not None:
                ok += 1
                login.close()
        fig["logins with deep client properties"] = f"{ok}/{clients}"
        c = RawAMQP.with_channel(url)
        q = f"attack-deep-{os.getpid()}"
        c.rpc(1, spec.Queue.Declare(queue=q), "Queue.DeclareOk")
        headers = table([(b"deep", nested(5000))])
        c.publish(1, "", q, b"x", struct.pack(">H", 0x2000) + headers)
        got = c.rpc(1, spec.Basic.Get(queue=q, no_ack=True), "Basic.GetOk", "Basic.GetEmpty")
        head = c.read_frame()
        same = got.name == "Basic.GetOk" and head is not None and head.payload[14:] == headers
        fig["5,000-deep headers read back unchanged"] = same
        c.rpc(1, spec.Queue.Delete(queue=q), "Queue.DeleteOk")
        c.close()
        if log_lines is not None:
            fig["log lines"] = log_lines[0] - start_lines


def attack_confirms(url: str, rep: Report, n: int) -> None:
    with rep.attack(f"confirms: {n} pipelined publishes with confirms, then a consumer") as fig:
        c = RawAMQP.with_channel(url)
        q = f"attack-confirms-{os.getpid()}"
        c.rpc(1, spec.Queue.Declare(queue=q), "Queue.DeclareOk")
        c.rpc(1, spec.Confirm.Select(), "Confirm.SelectOk")
        c.send(publish(1, q, b"m") * n)
        settled: set[int] = set()
        frames = multiple = nacks = 0
        while len(settled) < n:
            m = next_method(c)
            if m is None:
                break
            if m.name not in ("Basic.Ack", "Basic.Nack"):
                continue
            tag = int(m.method.delivery_tag)
            frames += 1
            nacks += m.name == "Basic.Nack"
            if m.method.multiple:
                multiple += 1
                settled |= set(range(1, tag + 1))
            else:
                settled.add(tag)
        fig["ack frames"] = f"{frames} ({multiple} with multiple=true, {nacks} nacks)"
        fig["tags confirmed"] = f"{len(settled & set(range(1, n + 1)))}/{n}"
        c.send_method(1, spec.Basic.Consume(queue=q, consumer_tag="attack", no_ack=True))
        delivered = 0
        while delivered < n:
            m = next_method(c, 5)
            if m is None:
                break
            if m.name == "Basic.Deliver":
                delivered += 1
        fig["delivered to a consumer"] = f"{delivered}/{n}"
        c.send_method(1, spec.Queue.Delete(queue=q))
        c.close()


def attack_pipelined_errors(url: str, rep: Report) -> None:
    with rep.attack("pipelined-errors: a hard error and connection.close in one write") as fig:
        for name, data in (
            ("declare on an unopened channel", method_frame(5, spec.Queue.Declare(queue="x")) + CLOSE),
            ("second channel.open", method_frame(1, spec.Channel.Open()) + CLOSE),
        ):
            c = RawAMQP.with_channel(url)
            c.send(data)
            m = next_method(c, 3)
            if m is not None and m.name == "Connection.Close":
                fig[name] = f"connection.close {m.method.reply_code} {m.method.reply_text}"
            else:
                fig[name] = f"got {m!r}"
            c.sock.close()


def attack_reset(rabbit: Any, url: str, rep: Report, clients: int) -> None:
    import pika
    import pika.exceptions

    with rep.attack(f"reset: reset() under {clients} publishing clients") as fig:
        outcomes: list[str] = []
        ready = threading.Barrier(clients + 1)

        def client() -> None:
            conn = pika.BlockingConnection(pika.URLParameters(url))
            ch = conn.channel()
            ch.queue_declare("attack-reset")
            ready.wait()
            try:
                while True:
                    ch.basic_publish("", "attack-reset", b"x" * 512)
                    conn.process_data_events(time_limit=0)
            except pika.exceptions.ConnectionClosedByBroker as exc:
                outcomes.append(f"{exc.reply_code}")
            except Exception as exc:
                outcomes.append(type(exc).__name__)

        threads = [threading.Thread(target=client, daemon=True) for _ in range(clients)]
        for t in threads:
            t.start()
        ready.wait()
        time.sleep(0.1)
        rabbit.reset()
        for t in threads:
            t.join(10)
        fig["clients closed with"] = {o: outcomes.count(o) for o in sorted(set(outcomes))}


# -- main --------------------------------------------------------------------------------------------------------


class _Count(logging.Handler):
    def __init__(self, counter: list[int]) -> None:
        super().__init__(logging.DEBUG)
        self.counter = counter

    def emit(self, record: logging.LogRecord) -> None:
        self.counter[0] += 1 + self.format(record).count("\n")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--target", choices=("process", "thread"), default="process")
    p.add_argument("--url", help="attack a running broker at this AMQP URL instead")
    p.add_argument("--pid", type=int, help="that broker's process id (for RSS and fds)")
    p.add_argument("--quick", action="store_true", help="small numbers")
    p.add_argument("--connections", type=int, default=1000)
    p.add_argument("--half-open-wait", type=float, default=0.0, help="wait this long for half-open sockets to go")
    a = p.parse_args(argv)
    n_conn = 50 if a.quick else a.connections
    rounds, bclients, bsize = (1, 2, 4 << 20) if a.quick else (3, 10, 16 << 20)
    deep_clients = 20 if a.quick else 200
    confirms = 200 if a.quick else 2000

    with contextlib.ExitStack() as stack:
        rabbit = None
        log_lines: list[int] | None = None
        if a.url:
            target = Target("external", a.url, pid=a.pid)
        elif a.target == "thread":
            target = stack.enter_context(fake_thread())
            rabbit = target.info["rabbit"]
            log_lines = [0]
            handler = _Count(log_lines)
            logging.getLogger("fakerabbit").addHandler(handler)
            logging.getLogger("fakerabbit").setLevel(logging.INFO)
        else:
            target = stack.enter_context(fake_process())
        print(f"target: {target.name} {target.url} (pid {target.pid})")
        rep = Report(target.pid)
        print(f"start:  {rep.state()}")
        attack_connections(target.url, rep, n_conn)
        attack_half_open(target.url, rep, n_conn // 2, a.half_open_wait)
        attack_bodies(target.url, rep, rounds, bclients, bsize)
        attack_deep_tables(target.url, rep, deep_clients, log_lines)
        attack_confirms(target.url, rep, confirms)
        attack_pipelined_errors(target.url, rep)
        if rabbit is not None:
            attack_reset(rabbit, target.url, rep, 4)
        print(f"\nend:    {rep.state()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
