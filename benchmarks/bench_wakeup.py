"""What a server pays per wake-up: the ``fakerabbit serve`` process's user and system CPU and its voluntary context
switches per pika publish, next to the floor of any asyncio server, one that reads and discards what it is sent,
woken at the same pace.

    python benchmarks/bench_wakeup.py              # N=20,000 (about 10 s)
    python benchmarks/bench_wakeup.py --quick      # N=2,000
    python benchmarks/bench_wakeup.py -n 5000 --gaps 0,40,60

Why: pika writes each publish on its own, and a server that keeps up is woken for a few of them at a time. Then a
faster broker does not spend less CPU per message, it sleeps and wakes more often (each wake-up costs the system
calls, the scheduler and caches gone cold while the client ran), so ``bench_cpu.py``'s CPU per message hardly moves
when the code gets faster. The null server shows what the wake-ups alone cost at that pace.

- ``fake``: N ``basic_publish`` (100-byte body, no confirms) from pika to ``fakerabbit serve`` (asyncio loop), then a
  passive ``queue.declare`` that counts them; the server's /proc figures over that block.
- ``null``: an asyncio ``BufferedProtocol`` server in its own process that discards its input; a client writes N
  150-octet chunks (a publish's three frames), each after a busy wait of GAP µs (``--gaps``; pika's own pace is
  about 60 µs per publish here); the server's /proc figures over that block.

Exits non-zero only on errors.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time

import pika
from _common import BODY_100, fake_process

_TCK = os.sysconf("SC_CLK_TCK")

NULL_SERVER = """
import asyncio, sys
class Discard(asyncio.BufferedProtocol):
    buf = memoryview(bytearray(262144))
    def get_buffer(self, sizehint): return self.buf
    def buffer_updated(self, nbytes): pass
async def main():
    server = await asyncio.get_running_loop().create_server(Discard, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    await asyncio.sleep(3600)
asyncio.run(main())
"""


def proc_figures(pid: int) -> tuple[float, float, int]:
    """(user s, system s, voluntary context switches) of process ``pid`` so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    with open(f"/proc/{pid}/status") as f:
        switches = next(int(line.split()[1]) for line in f if line.startswith("voluntary_ctxt_switches"))
    return int(fields[11]) / _TCK, int(fields[12]) / _TCK, switches


def report(name: str, n: int, before: tuple[float, float, int], after: tuple[float, float, int], wall: float) -> None:
    user, system = (after[0] - before[0]) / n * 1e6, (after[1] - before[1]) / n * 1e6
    print(
        f"{name:16s} user {user:5.1f} µs  sys {system:5.1f} µs  total {user + system:5.1f} µs per message;"
        f"  {(after[2] - before[2]) / n:.2f} wake-ups per message;  wall {wall / n * 1e6:5.1f} µs per message"
    )


def run_fake(n: int) -> None:
    with fake_process() as target:
        assert target.pid is not None
        conn = pika.BlockingConnection(target.params())
        ch = conn.channel()
        q = "bench-wakeup"
        ch.queue_declare(q)
        for _ in range(1000):  # warm-up
            ch.basic_publish("", q, BODY_100)
        ch.queue_purge(q)
        before, t0 = proc_figures(target.pid), time.perf_counter()
        for _ in range(n):
            ch.basic_publish("", q, BODY_100)
        while ch.queue_declare(q, passive=True).method.message_count < n:
            pass
        wall = time.perf_counter() - t0
        report("fake (pika)", n, before, proc_figures(target.pid), wall)
        conn.close()


def run_null(n: int, gap_us: float) -> None:
    proc = subprocess.Popen([sys.executable, "-c", NULL_SERVER], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline())
        sock = socket.create_connection(("127.0.0.1", port))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        chunk, gap = b"x" * 150, gap_us * 1e-6
        before, t0 = proc_figures(proc.pid), time.perf_counter()
        for _ in range(n):
            sock.sendall(chunk)
            until = time.perf_counter() + gap
            while time.perf_counter() < until:
                pass
        wall = time.perf_counter() - t0
        time.sleep(0.2)  # the server reads the rest
        report(f"null, gap {gap_us:g} µs", n, before, proc_figures(proc.pid), wall)
        sock.close()
    finally:
        proc.terminate()
        proc.wait()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="N=2,000")
    ap.add_argument("-n", type=int, default=None, help="messages (default 20000)")
    ap.add_argument("--gaps", default="0,40,60", help="the null client's pauses in µs (default 0,40,60)")
    args = ap.parse_args(argv)
    n = args.n or (2000 if args.quick else 20000)
    print(f"python {sys.version.split()[0]}, N={n}, load {os.getloadavg()[0]:.1f}")
    run_fake(n)
    for gap in args.gaps.split(","):
        run_null(n, float(gap))
    return 0


if __name__ == "__main__":
    sys.exit(main())
