"""Read-only snapshots of broker state, as ``rabbit.queue(...)``, ``rabbit.exchanges()`` and friends return them.

A snapshot is taken on the server's loop and never changes afterwards; looking at it never consumes a message
or touches the broker. Message details are decoded only when first read.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cached_property
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from fakerabbit.broker.fields import table_to_python
from fakerabbit.broker.session import ConnectionInfo, Session
from fakerabbit.testing.xdeath import RoutingKeys, XDeath

if TYPE_CHECKING:
    from fakerabbit.broker.delayed import Pending
    from fakerabbit.broker.exchange import Binding, Exchange
    from fakerabbit.broker.message import Message
    from fakerabbit.broker.queue import Consumer, Queue

__all__ = [
    "BindingSnapshot",
    "ConnectionSnapshot",
    "ConsumerSnapshot",
    "DelayedMessageSnapshot",
    "ExchangeSnapshot",
    "MessageSnapshot",
    "QueueSnapshot",
]

_EMPTY: Mapping[str, Any] = MappingProxyType({})


def _ms_to_dt(ms: int | None) -> datetime | None:
    return None if ms is None else datetime.fromtimestamp(ms / 1000, tz=UTC)


def _frozen(d: dict[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(d)


@dataclass(frozen=True, eq=False)
class MessageSnapshot:
    """A message as it sits in a queue (ready, not yet delivered).

    Attributes:
        id: the broker's id for the message; ``rabbit.events.for_message(m.id)`` tells its story.
            A dead-lettered copy keeps the id of the message it was copied from.
        body: the body bytes, exactly as published.
        exchange: the exchange it was published (or dead-lettered) to.
        routing_key: its routing key (CC/BCC keys are in :attr:`routing_keys`).
        routing_keys: the routing key followed by CC and BCC keys.
        redelivered: whether a consumer will see ``redelivered=True``.
        expires_at: when its TTL (message or queue TTL, whichever is smaller) runs out, or ``None``.
        priority: the priority the queue files it under.
        persistent: ``delivery_mode == 2``.
        delivery_count: quorum queues: how often it was returned (the ``x-delivery-count`` header it will get).
        raw_properties: the content-header property bytes that will be delivered.
    """

    id: int
    body: bytes
    exchange: str
    routing_key: str
    routing_keys: RoutingKeys
    redelivered: bool
    expires_at: datetime | None
    priority: int
    persistent: bool
    delivery_count: int
    raw_properties: bytes
    _message: Message = field(repr=False, compare=False)

    @classmethod
    def build(
        cls, msg: Message, redelivered: bool, expires_at_ms: int | None, priority: int, delivery_count: int
    ) -> MessageSnapshot:
        """A snapshot of ``msg`` with its queue-specific state (captured on the server's loop)."""
        return cls(
            id=msg.id,
            body=msg.body,
            exchange=msg.exchange,
            routing_key=msg.routing_key,
            routing_keys=RoutingKeys(msg.routing_keys),
            redelivered=redelivered,
            expires_at=_ms_to_dt(expires_at_ms),
            priority=priority,
            persistent=msg.persistent,
            delivery_count=delivery_count,
            raw_properties=msg.props.raw,
            _message=msg,
        )

    @cached_property
    def properties(self) -> Mapping[str, Any]:
        """The basic properties that are set (``content_type``, ``headers``, ``delivery_mode``, ...) as plain
        values; ``timestamp`` is raw seconds. Read-only."""
        return _frozen(self._message.props.to_dict())

    @cached_property
    def headers(self) -> Mapping[str, Any]:
        """The headers table as plain values (``x-death`` ``time`` as an aware datetime); empty if none."""
        table = self._message.props.headers
        return _frozen(table_to_python(table)) if table else _EMPTY

    @cached_property
    def x_death(self) -> XDeath:
        """The parsed ``x-death`` history (see :class:`~fakerabbit.testing.xdeath.XDeath`)."""
        return XDeath.from_headers(self.headers)

    @property
    def text(self) -> str:
        """The body decoded as UTF-8."""
        return self.body.decode("utf-8")

    def json(self) -> Any:
        """The body parsed as JSON."""
        return json.loads(self.body)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MessageSnapshot):
            return NotImplemented
        return (self.id, self.body, self.raw_properties, self.redelivered) == (
            other.id,
            other.body,
            other.raw_properties,
            other.redelivered,
        )

    def __hash__(self) -> int:
        return hash((self.id, self.body, self.raw_properties))


@dataclass(frozen=True, slots=True)
class ConsumerSnapshot:
    """A consumer on a queue."""

    tag: str
    queue: str
    connection_id: int
    channel: int
    ack_required: bool
    exclusive: bool
    prefetch_count: int
    priority: int
    unacked_count: int
    arguments: Mapping[str, Any]

    @classmethod
    def of(cls, c: Consumer) -> ConsumerSnapshot:
        return cls(
            tag=c.tag,
            queue=c.queue.name,
            connection_id=_session(c).conn.id,
            channel=_session(c).number,
            ack_required=not c.no_ack,
            exclusive=c.exclusive,
            prefetch_count=c.prefetch,
            priority=c.priority,
            unacked_count=c.unacked,
            arguments=_frozen(table_to_python(c.arguments)),
        )


@dataclass(frozen=True, eq=False)
class QueueSnapshot:
    """A queue at one moment.

    ``messages`` are the ready messages in the order consumers will get them (unacknowledged deliveries are
    counted in ``unacked_count``, not listed). ``arguments`` are the declare arguments as plain values;
    ``effective_policy`` is the merged user/operator policy definition that applies (``{}`` if none).
    ``dead_letters_held`` counts what a quorum queue with at-least-once dead-lettering holds because it could not
    deliver it yet (``held_dead_letters`` lists them); RabbitMQ counts them in ``messages`` but not as ready.
    """

    name: str
    vhost: str
    type: str
    durable: bool
    exclusive: bool
    auto_delete: bool
    arguments: Mapping[str, Any]
    message_count: int
    message_bytes: int
    unacked_count: int
    consumers: tuple[ConsumerSnapshot, ...]
    policy: str | None
    operator_policy: str | None
    effective_policy: Mapping[str, Any]
    _entries: tuple[tuple[Message, bool, int | None, int, int], ...] = field(repr=False)
    dead_letters_held: int = 0
    _held: tuple[Message, ...] = field(default=(), repr=False)

    @classmethod
    def of(cls, q: Queue) -> QueueSnapshot:
        """Capture ``q``. Call on the server's loop: this copies what changes, cheaply."""
        entries = tuple((e.msg, e.redelivered, e.expires_at, e.priority, e.delivery_count) for e in q.ready_entries())
        return cls(
            name=q.name,
            vhost=q.vhost.name,
            type=q.queue_type,
            durable=q.durable,
            exclusive=q.exclusive_owner is not None,
            auto_delete=q.auto_delete,
            arguments=_frozen(table_to_python(q.arguments)),
            message_count=q.ready_count,
            message_bytes=q.ready_bytes,
            unacked_count=q.unacked,
            consumers=tuple(ConsumerSnapshot.of(c) for c in q.consumers),
            policy=q.policy_name,
            operator_policy=q.operator_policy_name,
            effective_policy=_frozen(dict(q.settings.policy_definition)),
            _entries=entries,
            dead_letters_held=q.held_dead_letters()[0],
            _held=tuple(m for _, m in q.dlx_worker.messages()) if q.dlx_worker is not None else (),
        )

    @property
    def consumer_count(self) -> int:
        """How many consumers the queue has."""
        return len(self.consumers)

    @cached_property
    def messages(self) -> tuple[MessageSnapshot, ...]:
        """The ready messages, head first."""
        return tuple(MessageSnapshot.build(*captured) for captured in self._entries)

    @property
    def bodies(self) -> list[bytes]:
        """The ready messages' bodies, head first."""
        return [m.body for m in self.messages]

    @cached_property
    def held_dead_letters(self) -> tuple[MessageSnapshot, ...]:
        """At-least-once quorum queues: the dead letters held, oldest first (those the worker already tried to
        deliver carry their ``x-death``; the others are as they died)."""
        return tuple(MessageSnapshot.build(m, False, None, 0, 0) for m in self._held)

    def __repr__(self) -> str:
        return (
            f"<QueueSnapshot {self.name!r} vhost={self.vhost!r} type={self.type} messages={self.message_count} "
            f"unacked={self.unacked_count} consumers={self.consumer_count}>"
        )


@dataclass(frozen=True, slots=True)
class ExchangeSnapshot:
    """An exchange. ``name == ""`` is the default exchange.

    ``messages_delayed``: for an ``x-delayed-message`` exchange, how many messages it holds until they are due
    (counted by exchange name, as the plugin counts them); 0 for other types.
    """

    name: str
    vhost: str
    type: str
    durable: bool
    auto_delete: bool
    internal: bool
    arguments: Mapping[str, Any]
    messages_delayed: int = 0

    @property
    def alternate_exchange(self) -> str | None:
        """The ``alternate-exchange`` argument, if set."""
        ae = self.arguments.get("alternate-exchange")
        return ae if isinstance(ae, str) else None

    @classmethod
    def of(cls, x: Exchange, vhost: str, messages_delayed: int = 0) -> ExchangeSnapshot:
        return cls(
            name=x.name,
            vhost=vhost,
            type=str(x.type),
            durable=x.durable,
            auto_delete=x.auto_delete,
            internal=x.internal,
            arguments=_frozen(table_to_python(x.arguments)),
            messages_delayed=messages_delayed,
        )


@dataclass(frozen=True, slots=True)
class DelayedMessageSnapshot:
    """A message an ``x-delayed-message`` exchange holds (``rabbit.delayed_messages()``).

    Attributes:
        exchange: the delayed exchange that holds it.
        vhost: its vhost.
        delay_ms: the delay read from its ``x-delay`` header.
        due_at: when it is released (routed by the exchange's ``x-delayed-type``).
        message: the message as published (its ``x-delay`` header is rewritten on release).
    """

    exchange: str
    vhost: str
    delay_ms: int
    due_at: datetime
    message: MessageSnapshot

    @classmethod
    def of(cls, p: Pending, vhost: str) -> DelayedMessageSnapshot:
        due = _ms_to_dt(p.due_ms)
        assert due is not None
        return cls(p.exchange.name, vhost, p.delay_ms, due, MessageSnapshot.build(p.msg, False, None, 0, 0))


@dataclass(frozen=True, slots=True)
class BindingSnapshot:
    """A binding from exchange ``source`` to a queue or exchange ``destination``."""

    vhost: str
    source: str
    destination: str
    destination_type: str  # "queue" | "exchange"
    routing_key: str
    arguments: Mapping[str, Any]

    @classmethod
    def of(cls, b: Binding, vhost: str) -> BindingSnapshot:
        return cls(
            vhost=vhost,
            source=b.source,
            destination=b.destination,
            destination_type=b.destination_kind,
            routing_key=b.routing_key,
            arguments=_frozen(table_to_python(b.arguments)),
        )


@dataclass(frozen=True, slots=True)
class ConnectionSnapshot:
    """A client connection that has completed ``connection.open``."""

    id: int
    name: str
    user: str
    vhost: str
    peer: str
    client_properties: Mapping[str, Any]
    channels: int

    @property
    def client_product(self) -> str | None:
        """``client_properties["product"]`` as a string (``"Pika Python Client Library"``, ...)."""
        p = self.client_properties.get("product")
        if isinstance(p, bytes):
            return p.decode("utf-8", "replace")
        return None if p is None else str(p)

    @property
    def connection_name(self) -> str | None:
        """The name the client gave (``client_properties["connection_name"]``), if any."""
        n = self.client_properties.get("connection_name")
        if isinstance(n, bytes):
            return n.decode("utf-8", "replace")
        return None if n is None else str(n)

    @classmethod
    def of(cls, c: ConnectionInfo) -> ConnectionSnapshot:
        return cls(
            id=c.id,
            name=c.name,
            user=c.user,
            vhost=c.vhost,
            peer=c.peer,
            client_properties=_frozen(dict(c.client_properties)),
            channels=len(c.sessions),
        )


def _session(c: Consumer) -> Session:
    """The broker session (channel) of consumer ``c`` (queues see it through a narrow Protocol)."""
    assert isinstance(c.session, Session)
    return c.session
