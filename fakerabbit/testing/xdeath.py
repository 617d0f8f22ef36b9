"""A typed view of a message's ``x-death`` header (and the ``x-first-death-*`` / ``x-last-death-*`` headers).

:func:`x_death` reads the header from whatever the test holds: a :class:`~fakerabbit.testing.snapshots.
MessageSnapshot` from ``rabbit.queue(...).messages``, a pika ``BasicProperties``, an aio-pika / aiormq message,
a kombu message, or a plain ``headers`` dict. Clients decode the header differently (bytes or str, datetime or
int for ``time``); the view is the same for all of them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

__all__ = ["RoutingKeys", "XDeath", "XDeathEntry", "message_headers", "x_death"]


class RoutingKeys(tuple[str, ...]):
    """Routing keys: an immutable tuple of ``str`` that also equals a list of the same keys.

    ``entry.routing_keys == ["orders"]`` holds, as it does for the list a client decodes from the header;
    comparisons with tuples and hashing are a tuple's.
    """

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, list):
            return list(self) == other
        return tuple.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = tuple.__hash__

    def __repr__(self) -> str:
        return repr(list(self))


def _text(value: Any) -> str:
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", "surrogateescape")
    return str(value)


def _time(value: Any) -> datetime:
    if isinstance(value, datetime):
        return value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    if isinstance(value, int | float):
        return datetime.fromtimestamp(value, UTC)
    raise TypeError(f"x-death 'time' is neither a datetime nor a number: {value!r}")


@dataclass(frozen=True, slots=True)
class XDeathEntry:
    """One entry of ``x-death``: how often the message died in ``queue`` for ``reason``."""

    queue: str
    reason: str
    count: int
    time: datetime
    exchange: str
    routing_keys: RoutingKeys
    original_expiration: str | None = None

    @classmethod
    def from_header(cls, entry: Mapping[str, Any]) -> XDeathEntry:
        """Build from one decoded x-death table (keys as on the wire: ``routing-keys``, ...)."""
        oe = entry.get("original-expiration")
        return cls(
            queue=_text(entry["queue"]),
            reason=_text(entry["reason"]),
            count=int(entry["count"]),
            time=_time(entry["time"]),
            exchange=_text(entry["exchange"]),
            routing_keys=RoutingKeys(_text(k) for k in entry.get("routing-keys", ())),
            original_expiration=None if oe is None else _text(oe),
        )


@dataclass(frozen=True, slots=True)
class XDeath:
    """The parsed death history of a message, most recent death first (as RabbitMQ orders ``x-death``).

    Iterable and indexable like a list of :class:`XDeathEntry`; empty (and falsy) when the message never died.
    """

    entries: tuple[XDeathEntry, ...] = ()
    first_death_reason: str | None = None
    first_death_queue: str | None = None
    first_death_exchange: str | None = None
    last_death_reason: str | None = None
    last_death_queue: str | None = None
    last_death_exchange: str | None = None

    def __iter__(self) -> Iterator[XDeathEntry]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def __getitem__(self, index: int) -> XDeathEntry:
        return self.entries[index]

    def __bool__(self) -> bool:
        return bool(self.entries)

    def find(self, queue: str, reason: str | None = None) -> XDeathEntry | None:
        """The entry for ``queue`` (and ``reason``, if given), or ``None``."""
        for e in self.entries:
            if e.queue == queue and (reason is None or e.reason == reason):
                return e
        return None

    def count_for(self, queue: str | None = None, reason: str | None = None) -> int:
        """How many times the message died, in ``queue`` and/or for ``reason`` (all entries if both None)."""
        return sum(
            e.count
            for e in self.entries
            if (queue is None or e.queue == queue) and (reason is None or e.reason == reason)
        )

    @property
    def total(self) -> int:
        """Deaths in every queue for every reason."""
        return self.count_for()

    @property
    def latest(self) -> XDeathEntry | None:
        """The entry updated by the most recent death (the first one), or ``None``."""
        return self.entries[0] if self.entries else None

    def as_dicts(self) -> list[dict[str, Any]]:
        """The entries as plain dicts with the wire's key names (for readable assertion messages)."""
        out = []
        for e in self.entries:
            d: dict[str, Any] = {
                "queue": e.queue,
                "reason": e.reason,
                "count": e.count,
                "exchange": e.exchange,
                "routing-keys": list(e.routing_keys),
                "time": e.time,
            }
            if e.original_expiration is not None:
                d["original-expiration"] = e.original_expiration
            out.append(d)
        return out

    @classmethod
    def from_headers(cls, headers: Mapping[str, Any] | None) -> XDeath:
        """Parse decoded message headers (as any client or :attr:`MessageSnapshot.headers` gives them)."""
        if not headers:
            return cls()
        raw = headers.get("x-death") or ()
        entries = tuple(XDeathEntry.from_header(e) for e in raw if isinstance(e, Mapping))

        def opt(key: str) -> str | None:
            v = headers.get(key)
            return None if v is None else _text(v)

        return cls(
            entries,
            opt("x-first-death-reason"),
            opt("x-first-death-queue"),
            opt("x-first-death-exchange"),
            opt("x-last-death-reason"),
            opt("x-last-death-queue"),
            opt("x-last-death-exchange"),
        )


def message_headers(message: Any) -> Mapping[str, Any] | None:
    """The headers of a snapshot, a client's message or properties object, or a headers dict."""
    if message is None or isinstance(message, Mapping):
        return message
    headers = getattr(message, "headers", None)
    if isinstance(headers, Mapping):
        return headers
    props = getattr(message, "properties", None)  # kombu / py-amqp messages, pika (method, props, body) users
    if isinstance(props, Mapping):
        inner = props.get("application_headers", props.get("headers"))
        return inner if isinstance(inner, Mapping) else None
    if props is not None:
        inner = getattr(props, "headers", None)
        return inner if isinstance(inner, Mapping) else None
    if headers is None and hasattr(message, "headers"):
        return None
    raise TypeError(f"cannot find message headers on {type(message).__name__!r}")


def x_death(message: Any) -> XDeath:
    """The typed ``x-death`` view of ``message``.

    ``message`` may be a :class:`~fakerabbit.testing.snapshots.MessageSnapshot`, a pika ``BasicProperties``,
    an aio-pika ``IncomingMessage``, an aiormq ``DeliveredMessage``, a kombu ``Message``, or a headers dict.
    """
    deaths = getattr(message, "x_death", None)
    if isinstance(deaths, XDeath):
        return deaths
    return XDeath.from_headers(message_headers(message))
