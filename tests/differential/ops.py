"""The operations of a differential scenario.

Each operation is a small frozen dataclass whose ``repr`` is valid Python: a scenario printed as a list of them can
be pasted back (``python -m tests.differential --replay FILE``). Names are drawn from a small fixed vocabulary
(queues ``q0``..``q2``, exchanges ``x0``..``x2``); the harness prefixes them with a per-scenario unique prefix on
both brokers, so close texts that name a queue read the same on both.

Channels 1..3 are always open and in confirm mode (a channel the broker closed is reopened after the operation);
``Ack``/``Nack``/``Reject`` name an unacknowledged delivery by its position among the channel's unacknowledged
delivery tags (sorted), so a replay addresses the same message on both brokers.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field, fields
from typing import Any

QUEUES = ("q0", "q1", "q2")
EXCHANGES = ("x0", "x1", "x2")
VOCABULARY = frozenset(QUEUES + EXCHANGES)
CHANNELS = (1, 2, 3)


@dataclass(frozen=True)
class DeclareQueue:
    queue: str
    kind: str = "classic"  # "classic" | "quorum" | "stream" (sets x-queue-type)
    durable: bool = False
    args: dict[str, Any] = field(default_factory=dict)
    passive: bool = False
    ch: int = 1


@dataclass(frozen=True)
class DeleteQueue:
    queue: str
    if_unused: bool = False
    if_empty: bool = False
    ch: int = 1


@dataclass(frozen=True)
class PurgeQueue:
    queue: str
    ch: int = 1


@dataclass(frozen=True)
class DeclareExchange:
    exchange: str
    type: str = "direct"
    alternate: str | None = None
    passive: bool = False
    ch: int = 1


@dataclass(frozen=True)
class DeleteExchange:
    exchange: str
    if_unused: bool = False
    ch: int = 1


@dataclass(frozen=True)
class Bind:
    queue: str
    exchange: str
    key: str = ""
    args: dict[str, Any] = field(default_factory=dict)
    unbind: bool = False
    ch: int = 1


@dataclass(frozen=True)
class BindExchange:
    destination: str
    source: str
    key: str = ""
    unbind: bool = False
    ch: int = 1


@dataclass(frozen=True)
class Publish:
    exchange: str
    key: str
    mandatory: bool = False
    priority: int | None = None
    expiration: str | None = None
    persistent: bool = False
    headers: dict[str, Any] | None = None
    ch: int = 1
    immediate: bool = False


@dataclass(frozen=True)
class Get:
    queue: str
    no_ack: bool = False
    ch: int = 1


@dataclass(frozen=True)
class Consume:
    """``basic.consume`` with the consumer tag ``c<ch>`` (so at most one consumer per channel)."""

    queue: str
    no_ack: bool = False
    exclusive: bool = False
    ch: int = 1
    offset: Any = None  # x-stream-offset ("first", "last", "next", an offset), or none


@dataclass(frozen=True)
class Cancel:
    ch: int = 1


@dataclass(frozen=True)
class Qos:
    prefetch: int
    ch: int = 1


@dataclass(frozen=True)
class Ack:
    index: int = 0
    multiple: bool = False
    ch: int = 1


@dataclass(frozen=True)
class Nack:
    index: int = 0
    multiple: bool = False
    requeue: bool = True
    ch: int = 1


@dataclass(frozen=True)
class Reject:
    index: int = 0
    requeue: bool = True
    ch: int = 1


@dataclass(frozen=True)
class AckUnknown:
    """``basic.ack`` of a delivery tag the channel never used (a channel error)."""

    ch: int = 1


@dataclass(frozen=True)
class Recover:
    ch: int = 1
    requeue: bool = True


@dataclass(frozen=True)
class SettleAll:
    """``basic.ack`` / ``basic.nack`` with delivery tag 0 and multiple: every unacknowledged delivery."""

    nack: bool = False
    requeue: bool = True
    ch: int = 1


@dataclass(frozen=True)
class CloseChannel:
    ch: int = 1


@dataclass(frozen=True)
class CloseConnection:
    """Close the whole connection politely (its unacknowledged messages go back); the next step reconnects."""


Op = (
    DeclareQueue
    | DeleteQueue
    | PurgeQueue
    | DeclareExchange
    | DeleteExchange
    | Bind
    | BindExchange
    | Publish
    | Get
    | Consume
    | Cancel
    | Qos
    | Ack
    | Nack
    | Reject
    | AckUnknown
    | Recover
    | SettleAll
    | CloseChannel
    | CloseConnection
)

OP_TYPES = {
    cls.__name__: cls
    for cls in (
        DeclareQueue,
        DeleteQueue,
        PurgeQueue,
        DeclareExchange,
        DeleteExchange,
        Bind,
        BindExchange,
        Publish,
        Get,
        Consume,
        Cancel,
        Qos,
        Ack,
        Nack,
        Reject,
        AckUnknown,
        Recover,
        SettleAll,
        CloseChannel,
        CloseConnection,
    )
}


def _short_repr(self: Any) -> str:
    """``Publish(exchange='x0', key='k1', mandatory=True)``: the fields that differ from their defaults."""
    parts = []
    for f in fields(self):
        value = getattr(self, f.name)
        if f.default is not MISSING and value == f.default:
            continue
        if f.default_factory is not MISSING and value == f.default_factory():
            continue
        parts.append(repr(value) if f.default is MISSING and f.default_factory is MISSING else f"{f.name}={value!r}")
    return f"{type(self).__name__}({', '.join(parts)})"


for _cls in OP_TYPES.values():
    _cls.__repr__ = _short_repr  # type: ignore[method-assign]


def parse_scenario(text: str) -> list[Op]:
    """A scenario printed by the fuzzer (a Python list of operations) back as operations."""
    value = eval(text, {"__builtins__": {}}, dict(OP_TYPES))
    return list(value)


def format_scenario(ops: list[Op]) -> str:
    return "[\n" + "".join(f"    {op!r},\n" for op in ops) + "]"
