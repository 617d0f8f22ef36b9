"""Slow consumers: the broker must honour TCP back-pressure instead of buffering deliveries without limit.

A consumer on a raw socket with a 4 KiB receive buffer stops reading while 50 MB are published to its queue. The
fake's output for that connection (what asyncio's transport buffers plus what the connection has queued but not yet
handed to the transport) must stay bounded: once the transport calls ``pause_writing`` the queue must keep the
messages instead of delivering them. The publisher, on another connection, must keep getting its confirms. When the
consumer reads again, every message arrives exactly once and in order.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlparse

import pika
import pytest
from pika import spec

from fakerabbit import FakeRabbit
from tests.rawamqp import RawAMQP
from tests.robustness.conftest import fake_connection

MESSAGE_SIZE = 65536
MESSAGES = 800  # 50 MiB
#: asyncio's default high-water mark is 64 KiB; the fake hands queued content to the transport every 64 KiB; one
#: more delivery (64 KiB + frames) may be on its way when the transport pauses. 512 KiB leaves ample room and is
#: still a hundred times less than what was published.
BUFFER_BOUND = 512 * 1024
QUEUE = "slow"

pytestmark = pytest.mark.timeout(120)


class SmallWindow(RawAMQP):
    """A raw client whose socket has a small receive buffer (set before connect, so the TCP window is small)."""

    @classmethod
    def socket_to(cls, url: str) -> RawAMQP:
        u = urlparse(url)
        host, port = u.hostname or "127.0.0.1", u.port or 5672
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.settimeout(5)
        sock.connect((host, port))
        return cls(host, port, sock)


def body(i: int) -> bytes:
    return struct.pack(">I", i) + bytes([i % 251]) * (MESSAGE_SIZE - 4)


class BufferWatch:
    """Samples, from a thread, how many bytes the fake holds for one connection; keeps the maximum."""

    def __init__(self, rabbit: FakeRabbit, conn: Any) -> None:
        self.rabbit, self.conn = rabbit, conn
        self.max = 0
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def held(self) -> int:
        def size() -> int:
            transport = self.conn.transport
            queued = self.conn.output.queued()
            return queued + (transport.get_write_buffer_size() if transport is not None else 0)

        return self.rabbit._call(size)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.max = max(self.max, self.held())
            self.samples += 1
            time.sleep(0.002)

    def __enter__(self) -> BufferWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)
        self.max = max(self.max, self.held())


@pytest.fixture
def publisher(rabbit: FakeRabbit) -> Iterator[Any]:
    conn = pika.BlockingConnection(pika.URLParameters(rabbit.url))
    ch = conn.channel()
    ch.queue_declare(QUEUE)
    ch.confirm_delivery()
    yield ch
    conn.close()


def publish_all(ch: Any, count: int = MESSAGES, start: int = 0) -> None:
    """Publish with confirms: each basic_publish returns once the broker acked it (pika raises on a nack)."""
    for i in range(start, start + count):
        ch.basic_publish("", QUEUE, body(i))


def slow_consumer(rabbit: FakeRabbit, *, subscribe: bool = True) -> tuple[SmallWindow, Any]:
    c = SmallWindow.connect(rabbit.url)
    c.open_channel(1)
    if subscribe:
        c.rpc(1, spec.Basic.Consume(queue=QUEUE, consumer_tag="slow", no_ack=True), "Basic.ConsumeOk")
    return c, fake_connection(rabbit, c.sock.getsockname()[1])


def drain(c: RawAMQP, count: int, timeout: float = 30.0) -> list[int]:
    """Read ``count`` deliveries; return their sequence numbers (checking every body)."""
    got: list[int] = []
    deadline = time.monotonic() + timeout
    while len(got) < count:
        f = c.read_frame(max(deadline - time.monotonic(), 0.01))
        assert f is not None, f"only {len(got)} of {count} deliveries arrived (eof={c.eof})"
        if f.name == "Basic.Deliver":
            message = c.get_message(1)
            i = struct.unpack_from(">I", message.body)[0]
            assert message.body == body(i)
            got.append(i)
    return got


def backlog(rabbit: FakeRabbit) -> int:
    return rabbit.queue(QUEUE).message_count


def test_a_stalled_consumer_does_not_make_the_broker_buffer_what_is_published(
    rabbit: FakeRabbit, publisher: Any
) -> None:
    consumer, conn = slow_consumer(rabbit)
    with BufferWatch(rabbit, conn) as watch:
        t0 = time.monotonic()
        publish_all(publisher)  # 800 confirms: the publisher is served while the consumer is stuck
        publish_s = time.monotonic() - t0
        paused = rabbit._call(lambda: conn.write_paused)
        waiting = backlog(rabbit)
        held_while_stalled = watch.max
        got = drain(consumer, MESSAGES)
    print(
        f"\nslow consumer: published 50 MiB in {publish_s:.1f} s; max held for the consumer {held_while_stalled} B "
        f"(whole run {watch.max} B, {watch.samples} samples); {waiting} messages waited in the queue"
    )
    assert paused  # the transport did push back...
    assert waiting > MESSAGES // 2  # ...and the queue, not a buffer, kept the messages
    assert watch.max < BUFFER_BOUND
    assert got == list(range(MESSAGES))
    assert backlog(rabbit) == 0
    consumer.close()


def test_a_backlog_is_not_dumped_into_the_buffer_of_a_slow_consumer(rabbit: FakeRabbit, publisher: Any) -> None:
    """A basic.consume on a queue holding 50 MiB dispatches in one event: the deliveries must still stop once
    the transport pauses (before the fix, all 50 MiB went into the transport's buffer at once)."""
    publish_all(publisher)
    assert backlog(rabbit) == MESSAGES
    consumer, conn = slow_consumer(rabbit, subscribe=False)
    with BufferWatch(rabbit, conn) as watch:
        consumer.rpc(1, spec.Basic.Consume(queue=QUEUE, consumer_tag="slow", no_ack=True), "Basic.ConsumeOk")
        time.sleep(0.3)
        paused = rabbit._call(lambda: conn.write_paused)
        waiting = backlog(rabbit)
        publish_all(publisher, 10, start=MESSAGES)  # the publisher is still served
        got = drain(consumer, MESSAGES + 10)
    assert paused
    assert waiting > MESSAGES // 2
    assert watch.max < BUFFER_BOUND
    assert got == list(range(MESSAGES + 10))
    consumer.close()


def test_a_stalled_consumer_does_not_hold_back_the_other_consumers(rabbit: FakeRabbit, publisher: Any) -> None:
    """Round-robin skips the paused consumer: a reading consumer of the same queue gets the rest at once."""
    consumer, conn = slow_consumer(rabbit)
    reader = RawAMQP.connect(rabbit.url)
    reader.open_channel(1)
    reader.rpc(1, spec.Basic.Consume(queue=QUEUE, consumer_tag="fast", no_ack=True), "Basic.ConsumeOk")
    count = 320  # 20 MiB
    with BufferWatch(rabbit, conn) as watch:
        done = threading.Event()
        fast: list[int] = []

        def read_fast() -> None:
            deadline = time.monotonic() + 60
            while not done.is_set() and time.monotonic() < deadline:
                f = reader.read_frame(0.1)
                if f is not None and f.name == "Basic.Deliver":
                    fast.append(struct.unpack_from(">I", reader.get_message(1).body)[0])

        t = threading.Thread(target=read_fast, daemon=True)
        t.start()
        publish_all(publisher, count)
        deadline = time.monotonic() + 20
        while backlog(rabbit) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert backlog(rabbit) == 0  # nothing waits for the stalled consumer while another one reads
        time.sleep(0.2)
        done.set()
        t.join(5)
        # What the stalled consumer got is in socket buffers (the kernel's and the transport's), all bounded.
        stalled = drain(consumer, count - len(fast))
    assert sorted(fast + stalled) == list(range(count))
    assert len(stalled) < count // 2
    assert watch.max < BUFFER_BOUND
    consumer.close()
    reader.close()
