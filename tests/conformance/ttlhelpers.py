"""Helpers for the TTL, queue-expiry, length-limit, quorum and declare-argument conformance tests.

* Time: ``broker.advance(s)`` moves the virtual clock on the fake and sleeps on the real broker, so TTLs in
  these tests are tens or hundreds of milliseconds and every wait keeps a margin of at least 50 ms.
* Determinism on the real broker: a passive declare can overtake a publish still on its way to the queue
  process, so channels that count messages use publisher confirms (``confirmed(ch)``): a confirmed publish
  has been enqueued. Effects that happen inside the broker after a confirm (dead-lettering into another
  queue) are read through :func:`eventually`, which retries briefly on the real broker and checks exactly
  once on the fake, where they are synchronous.
* :class:`Typed` sends a table value with an explicit AMQP type (pika itself only sends ``signedint`` /
  ``long`` for integers and cannot send floats); enable it with the ``typed_tables`` fixture.
"""

from __future__ import annotations

import re
import struct
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pika
import pika.data
import pika.exceptions
import pytest
from pika.adapters.blocking_connection import BlockingChannel

from tests.conformance.conftest import Target

T = TypeVar("T")


def anchored(name: str) -> str:
    """A policy pattern matching exactly ``name`` (policies on the shared real broker must be anchored)."""
    return "^" + re.escape(name) + "$"


def confirmed(ch: BlockingChannel) -> BlockingChannel:
    ch.confirm_delivery()
    return ch


def ready(ch: BlockingChannel, q: str) -> int:
    """Ready messages in ``q`` (passive declare: the ``message_count`` of declare-ok)."""
    return int(ch.queue_declare(q, passive=True).method.message_count)


def bodies(ch: BlockingChannel, q: str, n: int = 10) -> list[bytes]:
    """Drain ``q`` with ``basic.get`` (auto-ack), up to ``n`` messages."""
    out: list[bytes] = []
    for _ in range(n):
        method, _, body = ch.basic_get(q, auto_ack=True)
        if method is None:
            break
        out.append(body)
    return out


def eventually(broker: Target, fn: Callable[[], T], pred: Callable[[T], bool], timeout: float = 1.5) -> T:
    """``fn()`` once on the fake; on the real broker retried until ``pred`` holds (or ``timeout``)."""
    value = fn()
    if broker.is_fake:
        return value
    deadline = time.monotonic() + timeout
    while not pred(value) and time.monotonic() < deadline:
        time.sleep(0.02)
        value = fn()
    return value


def channel_error(fn: Callable[[], object]) -> tuple[int, str]:
    """Run ``fn`` expecting the broker to close the channel; return (reply_code, reply_text)."""
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as exc:
        fn()
    return exc.value.reply_code, exc.value.reply_text


def publish_error(ch: BlockingChannel, exchange: str, rk: str, body: bytes, props: Any) -> tuple[int, str]:
    """Publish (asynchronous in AMQP) and then make a synchronous call to see the channel error."""

    def go() -> None:
        ch.basic_publish(exchange, rk, body, props)
        ch.queue_declare("", exclusive=True)

    return channel_error(go)


def with_dlq(
    broker: Target, ch: BlockingChannel, args: dict[str, Any] | None = None, *, qtype: str = "classic"
) -> tuple[str, str]:
    """Queue Q dead-lettering through the default exchange into DLQ (``x-dead-letter-routing-key`` = DLQ)."""
    q, dlq = broker.name("q"), broker.name("dlq")
    ch.queue_declare(dlq, durable=True)
    full = {"x-dead-letter-exchange": "", "x-dead-letter-routing-key": dlq, **(args or {})}
    if qtype != "classic":
        full["x-queue-type"] = qtype
    ch.queue_declare(q, durable=True, arguments=full)
    return q, dlq


def death_reasons(ch: BlockingChannel, dlq: str, n: int = 10) -> list[tuple[bytes, str, str]]:
    """Drain ``dlq``: (body, x-death[0].reason, x-death[0].queue) per message."""
    out = []
    for _ in range(n):
        method, props, body = ch.basic_get(dlq, auto_ack=True)
        if method is None:
            break
        death = props.headers["x-death"][0]
        out.append((body, death["reason"], death["queue"]))
    return out


# -- typed table values -------------------------------------------------------------------------------------

_PACK = {
    "b": ">b",
    "B": ">B",
    "s": ">h",
    "u": ">H",
    "I": ">i",
    "i": ">I",
    "l": ">q",
    "f": ">f",
    "d": ">d",
}


class Typed:
    """A table value sent with AMQP type ``tag`` (``"b"`` byte, ``"s"`` short, ``"l"`` long, ``"d"`` double…)."""

    def __init__(self, tag: str, value: Any) -> None:
        self.tag = tag
        self.value = value

    def encode(self) -> bytes:
        return self.tag.encode() + struct.pack(_PACK[self.tag], self.value)


@pytest.fixture
def typed_tables(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Let pika encode :class:`Typed` values in argument tables."""
    original = pika.data.encode_value

    def encode_value(pieces: list[bytes], value: Any) -> int:
        if isinstance(value, Typed):
            data = value.encode()
            pieces.append(data)
            return len(data)
        return int(original(pieces, value))

    monkeypatch.setattr(pika.data, "encode_value", encode_value)
    yield
