"""Helpers shared by the dead-lettering, policy and CC/BCC conformance tests.

They follow the vocabulary of RabbitMQ's ``dead_lettering_SUITE`` (deps/rabbit/test): ``setup(Q, DLQ, extra)``,
``pub``, ``get``, ``empty`` and ``ready``. Dead-lettering is asynchronous on a real broker (the source queue
publishes to the DLX after the nack), so checks of a *target* queue go through :func:`eventually`, which retries
briefly on the real broker and checks exactly once on the fake (where the effect is synchronous).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

import pika
from pika.adapters.blocking_connection import BlockingChannel

from fakerabbit.broker.fields import Field, Table
from tests.conformance.conftest import Target
from tests.rawamqp import RawAMQP, RawMessage, array_of_tables

T = TypeVar("T")

QUEUE_TYPES = ["classic", "quorum"]


def declare(ch: BlockingChannel, name: str, qtype: str = "classic", **arguments: Any) -> None:
    """Declare a durable queue of type ``qtype`` with ``arguments`` (``None`` values are left out)."""
    args = {k.replace("_", "-"): v for k, v in arguments.items() if v is not None}
    if qtype != "classic":
        args["x-queue-type"] = qtype
    ch.queue_declare(name, durable=True, arguments=args)


def qargs(**arguments: Any) -> dict[str, Any]:
    """``x_message_ttl=1`` -> ``{"x-message-ttl": 1}``."""
    return {k.replace("_", "-"): v for k, v in arguments.items() if v is not None}


def setup(
    broker: Target, ch: BlockingChannel, qtype: str = "classic", extra: dict[str, Any] | None = None
) -> tuple[str, str, str]:
    """The suite's ``setup``: exchange "dlx", Q with DLX "dlx" and DLRK DLQ (+ ``extra``), DLQ bound to "dlx".

    Returns ``(Q, DLQ, dlx)``.
    """
    dlx = broker.exchange("dlx")
    q, dlq = broker.name("q"), broker.name("dlq")
    ch.exchange_declare(dlx, "direct")
    args = {"x-dead-letter-exchange": dlx, "x-dead-letter-routing-key": dlq, **(extra or {})}
    if qtype != "classic":
        args["x-queue-type"] = qtype
    ch.queue_declare(q, durable=True, arguments=args)
    ch.queue_declare(dlq, durable=True)
    ch.queue_bind(dlq, dlx, routing_key=dlq)
    return q, dlq, dlx


def pub(ch: BlockingChannel, q: str, body: bytes | str, exchange: str = "", **props: Any) -> None:
    """Publish ``body`` to ``q`` (through the default exchange unless ``exchange`` is given)."""
    data = body.encode() if isinstance(body, str) else body
    ch.basic_publish(exchange, q, data, pika.BasicProperties(**props) if props else None)


def get(ch: BlockingChannel, q: str) -> tuple[Any, Any, bytes]:
    """``basic.get`` without auto-ack; asserts a message came.

    A real broker enqueues asynchronously (quorum queues, dead letters), so an empty answer is retried for a
    moment before failing; on the fake an empty answer is already a failure, the retry only delays it.
    """
    deadline = time.monotonic() + 3.0
    while True:
        method, props, body = ch.basic_get(q, auto_ack=False)
        if method is not None:
            return method, props, body
        assert time.monotonic() < deadline, f"expected a message in {q}"
        time.sleep(0.02)


def empty(ch: BlockingChannel, q: str) -> bool:
    """True if ``basic.get`` finds nothing (a message found is acked away, so call it last)."""
    method, _, _ = ch.basic_get(q, auto_ack=True)
    return method is None


def ready(ch: BlockingChannel, q: str) -> int:
    """Ready messages in ``q`` (passive declare)."""
    return int(ch.queue_declare(q, passive=True).method.message_count)


def drain(ch: BlockingChannel, q: str) -> list[bytes]:
    """Every ready body of ``q`` in order (auto-acked)."""
    out: list[bytes] = []
    while True:
        method, _, body = ch.basic_get(q, auto_ack=True)
        if method is None:
            return out
        out.append(body)


def eventually(broker: Target, check: Callable[[], T], timeout: float = 3.0) -> T:
    """Run ``check`` (which asserts); on a real broker retry it until it passes or ``timeout`` runs out."""
    if broker.is_fake:
        return check()
    deadline = time.monotonic() + timeout
    while True:
        try:
            return check()
        except AssertionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def wait_ready(broker: Target, ch: BlockingChannel, q: str, n: int) -> None:
    """Wait (real broker) until ``q`` has exactly ``n`` ready messages; assert it."""

    def check() -> None:
        assert ready(ch, q) == n

    eventually(broker, check)


def quiet(broker: Target) -> None:
    """Give a real broker a moment to finish asynchronous work (nothing to do on the fake)."""
    if not broker.is_fake:
        time.sleep(0.15)


def anchored(name: str) -> str:
    """A policy pattern that matches exactly ``name``."""
    return "^" + re.escape(name) + "$"


def now_s(broker: Target) -> int:
    """The broker's current time in whole seconds (the virtual clock on the fake, wall time on the real one)."""
    if broker.fake is not None:
        return int(broker.fake.clock.now_ms() // 1000)
    return int(time.time())


def as_utc(value: datetime) -> datetime:
    """pika decodes ``T`` timestamps naive (1.3) or aware (1.4): normalise to aware UTC."""
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def raw_get(broker: Target, q: str) -> RawMessage:
    """``basic.get`` (auto-ack) over a raw connection, keeping the raw property bytes; waits on a real broker."""
    deadline = time.monotonic() + 3.0
    with RawAMQP.with_channel(broker.url) as raw:
        while True:
            msg = raw.basic_get(q)
            if msg is not None:
                return msg
            assert time.monotonic() < deadline, f"expected a message in {q}"
            time.sleep(0.02)


def x_death_tables(msg: RawMessage) -> list[Table]:
    """The typed tables of the message's ``x-death`` header (asserting it is an array of tables)."""
    return array_of_tables(msg.headers["x-death"])


def untimed(table: Table) -> list[tuple[str, Field]]:
    """A typed x-death table as ``[(key, (tag, value)), ...]`` in wire order, with the ``time`` value blanked."""
    return [(k, (tag, None) if k == "time" else (tag, v)) for k, (tag, v) in table.items()]


# -- at-least-once quorum queues -------------------------------------------------------------------------------
ALO = {"x-dead-letter-strategy": "at-least-once", "x-overflow": "reject-publish", "x-queue-type": "quorum"}


def held(broker: Target, q: str) -> int | None:
    """How many dead letters ``q`` holds (the fake only; None on the real broker, where only stats tell)."""
    if broker.fake is None:
        return None
    return broker.fake.queue(q).dead_letters_held


def still_empty(broker: Target, ch: BlockingChannel, q: str) -> None:
    """``q`` gets nothing: checked at once on the fake, after a moment on the real broker."""
    quiet(broker)
    if not broker.is_fake:
        time.sleep(0.4)
    assert ready(ch, q) == 0
