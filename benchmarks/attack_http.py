"""Repeatable HTTP attacks on a management API: prints what each malformed request got, how many incomplete
requests the server holds, and the server's RSS and open file descriptors before and after.

Run by hand against ``fakerabbit serve`` (started here unless ``--url`` is given) and, for comparison, a live
RabbitMQ::

    python benchmarks/attack_http.py                     # starts `fakerabbit serve` on free ports
    python benchmarks/attack_http.py --url http://127.0.0.1:15672 --pid 1234
    python benchmarks/attack_http.py --url http://127.0.0.1:15674 --real   # a live RabbitMQ (no RSS/fds)

``--held N`` (default 1000) incomplete requests are opened and held for ``--hold SECONDS`` (default 6: past
RabbitMQ's 5 s request timeout); the script then counts how many the server has closed (with a 408 or not).
"""

from __future__ import annotations

import argparse
import base64
import os
import re
import resource
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

AUTH = "Authorization: Basic " + base64.b64encode(b"guest:guest").decode() + "\r\n"
JSON = "Content-Type: application/json\r\n"

CASES: dict[str, str] = {
    "smuggling (Content-Length + Transfer-Encoding)": (
        f"POST /api/definitions HTTP/1.1\r\nHost: x\r\n{AUTH}{JSON}Content-Length: 5\r\nTransfer-Encoding: chunked"
        f"\r\n\r\n0\r\n\r\nGET /api/whoami HTTP/1.1\r\nHost: x\r\n{AUTH}\r\n"
    ),
    "Content-Length: 1_0": f"POST /api/definitions HTTP/1.1\r\nHost: x\r\n{AUTH}{JSON}Content-Length: 1_0\r\n\r\n{{}}",
    "Content-Length: -1": f"POST /api/definitions HTTP/1.1\r\nHost: x\r\n{AUTH}{JSON}Content-Length: -1\r\n\r\n",
    "two Content-Lengths": (
        f"POST /api/definitions HTTP/1.1\r\nHost: x\r\n{AUTH}{JSON}Content-Length: 2\r\nContent-Length: 3\r\n\r\n{{}}"
    ),
    "chunk size 0x2": (
        f"POST /api/definitions HTTP/1.1\r\nHost: x\r\n{AUTH}{JSON}Transfer-Encoding: chunked\r\n\r\n"
        "0x2\r\n{}\r\n0\r\n\r\n"
    ),
    "NUL in a header": f"GET /api/whoami HTTP/1.1\r\nHost: x\r\nX-A: a\x00b\r\n{AUTH}\r\n",
    "space before the colon": f"GET /api/whoami HTTP/1.1\r\nHost : x\r\n{AUTH}\r\n",
    "bare LF": f"GET /api/whoami HTTP/1.1\nHost: x\n{AUTH.strip()}\n\n",
    "HTTP/2.0": f"GET /api/whoami HTTP/2.0\r\nHost: x\r\n{AUTH}\r\n",
    "no Host": f"GET /api/whoami HTTP/1.1\r\n{AUTH}\r\n",
    "64 KiB header": f"GET /api/whoami HTTP/1.1\r\nHost: x\r\nX-Big: {'a' * 70000}\r\n{AUTH}\r\n",
    "JSON nested 10,000 deep": (
        f"POST /api/definitions HTTP/1.1\r\nHost: x\r\n{AUTH}{JSON}Content-Length: 20000\r\nConnection: close\r\n\r\n"
        + "[" * 10000
        + "]" * 10000
    ),
    "no credentials": "GET /api/users HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
}


def exchange(host: str, port: int, data: bytes, timeout: float) -> tuple[list[int], str]:
    """Send ``data``; read until the server closes or ``timeout``; the statuses seen and a body excerpt."""
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(data)
        chunks: list[bytes] = []
        try:
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                chunks.append(chunk)
        except TimeoutError:
            chunks.append(b" <no close>")
    answer = b"".join(chunks)
    statuses = [int(x) for x in re.findall(rb"HTTP/1\.1 (\d{3}) ", answer)]
    body = answer.split(b"\r\n\r\n", 1)[1][:80] if b"\r\n\r\n" in answer else answer[:80]
    return statuses, body.decode("latin-1", "replace")


def rss_kib(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def fds(pid: int) -> int | None:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None


def held_connections(host: str, port: int, n: int, hold: float) -> tuple[int, int, int]:
    """Open ``n`` connections that each send half a request head; after ``hold`` s count (open, 408, closed)."""
    socks: list[socket.socket] = []
    for _ in range(n):
        try:
            s = socket.create_connection((host, port), timeout=5)
            s.sendall(b"GET /api/whoami HTTP/1.1\r\nHost: x\r\n")
            socks.append(s)
        except OSError:
            break
    time.sleep(hold)
    still_open = answered_408 = closed = 0
    for s in socks:
        s.setblocking(False)
        try:
            data = s.recv(4096)
            if data.startswith(b"HTTP/1.1 408"):
                answered_408 += 1
            elif not data:
                closed += 1
            else:
                closed += 1
        except BlockingIOError:
            still_open += 1
        except OSError:
            closed += 1
        s.close()
    return still_open, answered_408, closed


def start_serve() -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "fakerabbit", "serve", "--port", "0", "--management-port", "0"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    url = ""
    while True:
        line = proc.stdout.readline()
        if not line:
            raise SystemExit("fakerabbit serve exited early")
        m = re.search(r"(http://\S+)/api/", line)
        if m:
            url = m.group(1)
        if "accepting AMQP connections" in line:
            return proc, url


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", help="management API base URL (default: start fakerabbit serve)")
    parser.add_argument("--pid", type=int, help="the server's process id (for RSS and fds)")
    parser.add_argument("--real", action="store_true", help="the target is a live RabbitMQ")
    parser.add_argument("--held", type=int, default=1000, help="incomplete requests to hold open")
    parser.add_argument("--hold", type=float, default=6.0, help="seconds to hold them")
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, args.held + 256)), hard))

    proc = None
    url, pid = args.url, args.pid
    if url is None:
        proc, url = start_serve()
        pid = proc.pid
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 15672
    target = "live RabbitMQ" if args.real else "fakerabbit"
    print(f"target: {target} at {url}")
    before = (rss_kib(pid), fds(pid)) if pid else (None, None)
    try:
        print(f"\n{'malformed request':48} statuses   body")
        for name, request in CASES.items():
            statuses, body = exchange(host, port, request.encode("latin-1"), timeout=2.0)
            print(f"{name:48} {statuses!s:10} {body!r}")
        print(f"\nholding {args.held} incomplete request heads for {args.hold:g} s ...")
        still_open, answered_408, closed = held_connections(host, port, args.held, args.hold)
        print(f"  still open: {still_open}   answered 408: {answered_408}   closed without answer: {closed}")
        after = (rss_kib(pid), fds(pid)) if pid else (None, None)
        if pid:
            print(f"\nserver RSS: {before[0]} KiB -> {after[0]} KiB   open fds: {before[1]} -> {after[1]}")
        else:
            print("\n(no --pid: RSS and fds not measured)")
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=10)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
