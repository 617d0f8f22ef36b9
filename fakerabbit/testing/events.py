"""``rabbit.events``: what happened to each message, so a test can answer "where did my message go?".

Kinds of event (``event.kind``) and their ``details``:

==========================  ==================================================================================
kind                        details
==========================  ==================================================================================
``published``               ``exchange``, ``routing_key``
``routed``                  ``queues``: the queues it was routed to (empty if none)
``returned``                (mandatory and unroutable: basic.return sent)
``unroutable``              (not mandatory and unroutable: dropped)
``rejected-publish``        ``queue``: the queue refused it (overflow ``reject-publish``)
``delivered``               ``queue``, ``delivery_tag`` and, for basic.consume, ``consumer_tag``
``acked``                   ``queue``
``rejected``                ``queue``, ``requeue`` (basic.reject / basic.nack)
``expired``                 ``queue``: its TTL ran out
``dropped-maxlen``          ``queue``: dropped from the head by ``x-max-length`` / ``x-max-length-bytes``
``delivery-limit``          ``queue``: a quorum queue's delivery limit was exceeded
``consumer-timeout``        ``queue``, ``delivery_tag``, ``timeout_ms``, ``consumer_tag`` (not for basic.get): it
                            was not acknowledged in time (``docs/consumer-timeout.md``)
``dead-lettered``           ``queue`` (from), ``reason``, ``exchange`` (the DLX), ``queues`` (to)
``dropped``                 ``queue``, ``reason``, ``why``: dead-lettering dropped it (no DLX, DLX missing,
                            dead-letter cycle; at-least-once: strategy changed, queue deleted)
``dead-letter-buffered``    ``queue``, ``reason``: a quorum queue with at-least-once dead-lettering took it into
                            its discards buffer
``dead-letter-held``        ``queue``, ``reason``, ``why``: the at-least-once worker could not deliver it (DLX
                            missing, no queue to route to, dead-letter cycle, refused by a target); it is retried
``delayed``                 ``exchange``, ``delay_ms``, ``due_ms``: an ``x-delayed-message`` exchange holds it
``delay-released``          ``exchange``, ``queues``: it fell due and was routed (docs/delayed.md)
==========================  ==================================================================================

plus topology and connection events without a message (``queue-declared``, ``queue-deleted``,
``queue-expired``, ``exchange-declared``, ``exchange-deleted``, ``consumer-added``, ``consumer-cancelled``,
``connection-opened``, ``connection-closed``, ``restarted``).

``event.message_id`` ties together the events of one published message, including its dead-lettered copies.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any, overload

from fakerabbit.broker.events import Event

__all__ = ["Event", "Events", "format_event"]

MESSAGE_KINDS = (
    "published",
    "routed",
    "returned",
    "unroutable",
    "rejected-publish",
    "delivered",
    "acked",
    "rejected",
    "expired",
    "dropped-maxlen",
    "delivery-limit",
    "consumer-timeout",
    "dead-lettered",
    "dead-letter-buffered",
    "dead-letter-held",
    "dropped",
    "delayed",
    "delay-released",
)


def format_event(e: Event) -> str:
    """One line: ``12:00:30.000 #3 dead-lettered queue='work' reason='expired' ...``."""
    t = datetime.fromtimestamp(e.time_ms / 1000, tz=UTC).strftime("%H:%M:%S.%f")[:-3]
    who = f"#{e.message_id} " if e.message_id is not None else ""
    details = " ".join(f"{k}={v!r}" for k, v in e.details.items())
    return f"{t} {who}{e.kind}{' ' + details if details else ''}"


class Events(Sequence[Event]):
    """An immutable list of :class:`~fakerabbit.broker.events.Event`, oldest first, with filters.

    ``rabbit.events`` takes a new snapshot each time it is read; filters return new :class:`Events`.
    """

    __slots__ = ("_events",)

    def __init__(self, events: Iterable[Event] = ()) -> None:
        self._events: tuple[Event, ...] = tuple(events)

    # -- sequence -------------------------------------------------------------------------------------------
    @overload
    def __getitem__(self, index: int) -> Event: ...

    @overload
    def __getitem__(self, index: slice) -> Events: ...

    def __getitem__(self, index: int | slice) -> Event | Events:
        if isinstance(index, slice):
            return Events(self._events[index])
        return self._events[index]

    def __len__(self) -> int:
        return len(self._events)

    def __iter__(self) -> Iterator[Event]:
        return iter(self._events)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Events):
            return self._events == other._events
        if isinstance(other, list | tuple):
            return list(self._events) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Events({len(self._events)} events)"

    def __str__(self) -> str:
        return self.format()

    # -- queries --------------------------------------------------------------------------------------------
    def all(self) -> list[Event]:
        """Every event, oldest first."""
        return list(self._events)

    def of_kind(self, *kinds: str) -> Events:
        """Events of any of ``kinds`` (``"dead-lettered"``, ``"expired"``, ...)."""
        wanted = set(kinds)
        return Events(e for e in self._events if e.kind in wanted)

    def for_message(self, message_id: int) -> Events:
        """Events of one message (and its dead-lettered copies); see :attr:`MessageSnapshot.id`."""
        return Events(e for e in self._events if e.message_id == message_id)

    def for_queue(self, queue: str) -> Events:
        """Events that involve ``queue``: happened in it, or routed / dead-lettered to it."""

        def involves(e: Event) -> bool:
            d = e.details
            return d.get("queue") == queue or queue in (d.get("queues") or ())

        return Events(e for e in self._events if involves(e))

    def where(self, **details: Any) -> Events:
        """Events whose details have all the given values, e.g. ``where(routing_key="orders")``."""
        return Events(e for e in self._events if all(k in e.details and e.details[k] == v for k, v in details.items()))

    def kinds(self) -> list[str]:
        """The kinds, in order (handy in assertions: ``assert events.kinds() == ["published", ...]``)."""
        return [e.kind for e in self._events]

    def message_ids(self) -> list[int]:
        """The distinct message ids, in order of first appearance."""
        seen: dict[int, None] = {}
        for e in self._events:
            if e.message_id is not None:
                seen.setdefault(e.message_id)
        return list(seen)

    def published(self, *, exchange: str | None = None, routing_key: str | None = None) -> list[int]:
        """Ids of the messages published (optionally to ``exchange`` / with ``routing_key``), in order."""
        wanted: dict[str, Any] = {}
        if exchange is not None:
            wanted["exchange"] = exchange
        if routing_key is not None:
            wanted["routing_key"] = routing_key
        return [e.message_id for e in self.of_kind("published").where(**wanted) if e.message_id is not None]

    def first(self) -> Event | None:
        """The oldest event, or ``None``."""
        return self._events[0] if self._events else None

    def last(self) -> Event | None:
        """The newest event, or ``None``."""
        return self._events[-1] if self._events else None

    def format(self) -> str:
        """A readable multi-line log (see :func:`format_event`)."""
        return "\n".join(format_event(e) for e in self._events) if self._events else "(no events)"

    def story(self, message_id: int) -> str:
        """ "Where did my message go?": the message's events, one per line."""
        return self.for_message(message_id).format()
