"""fakerabbit on uvloop's event loop (the optional extra ``pytest-fakerabbit[uvloop]``): pika over TCP, the
virtual clock's read-ahead of client bytes (``Server.drain_inbound`` reads the socket's fd), and
``fakerabbit serve`` picking uvloop when it is installed."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from typing import Any

import pika
import pytest

from fakerabbit import FakeRabbit
from fakerabbit.cli import run_loop

uvloop = pytest.importorskip("uvloop")


def _on_uvloop() -> bool:
    return type(asyncio.get_running_loop()).__module__.startswith("uvloop")


def test_pika_publish_and_get_on_uvloop() -> None:
    async def main() -> None:
        assert _on_uvloop()
        async with FakeRabbit() as rabbit:
            loop = asyncio.get_running_loop()

            def client() -> Any:
                conn = pika.BlockingConnection(pika.URLParameters(rabbit.url))
                ch = conn.channel()
                ch.queue_declare("q")
                ch.basic_publish("", "q", b"hello", pika.BasicProperties(content_type="text/plain"))
                got = ch.basic_get("q", auto_ack=True)
                conn.close()
                return got

            method, props, body = await loop.run_in_executor(None, client)
            assert body == b"hello" and props.content_type == "text/plain"
            assert method.routing_key == "q"

    uvloop.run(main())


def test_virtual_clock_reads_ahead_on_uvloop() -> None:
    """A message published just before ``advance()`` is enqueued at the old time, so its TTL runs out: the
    server reads the bytes straight from the socket (``get_extra_info("socket")`` is uvloop's pseudo-socket)."""

    async def main() -> None:
        async with FakeRabbit() as rabbit:
            loop = asyncio.get_running_loop()
            conn: Any = await loop.run_in_executor(None, pika.BlockingConnection, pika.URLParameters(rabbit.url))
            ch = await loop.run_in_executor(None, conn.channel)

            def setup() -> None:
                ch.queue_declare("dlq")
                ch.queue_declare(
                    "ttl",
                    arguments={"x-message-ttl": 1000, "x-dead-letter-exchange": "", "x-dead-letter-routing-key": "dlq"},
                )

            await loop.run_in_executor(None, setup)
            # Published from this coroutine, which keeps the loop busy until advance(): the loop has not read
            # the bytes when the clock moves, so only drain_inbound can enqueue the message at the old time.
            ch.basic_publish("", "ttl", b"m")
            rabbit.clock.advance(2)
            depth = {q.name: len(q.messages) for q in rabbit.queues()}
            assert depth == {"dlq": 1, "ttl": 0}
            await loop.run_in_executor(None, conn.close)

    uvloop.run(main())


def test_run_loop_picks_uvloop_when_installed() -> None:
    async def which() -> int:
        return 1 if _on_uvloop() else 0

    assert run_loop(which()) == 1
    assert run_loop(which(), "uvloop") == 1
    assert run_loop(which(), "asyncio") == 0


def test_serve_on_uvloop_accepts_pika() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "fakerabbit", "serve", "--port", "0", "--no-management", "--loop", "uvloop"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        url = line.rsplit(" ", 1)[-1].strip()
        assert url.startswith("amqp://"), line + (proc.stderr.read() if proc.stderr else "")
        conn = pika.BlockingConnection(pika.URLParameters(url))
        ch = conn.channel()
        ch.queue_declare("q")
        ch.basic_publish("", "q", b"over uvloop")
        _m, _p, body = ch.basic_get("q", auto_ack=True)
        assert body == b"over uvloop"
        conn.close()
    finally:
        proc.terminate()
        proc.wait(timeout=10)
