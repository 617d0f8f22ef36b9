"""A record of what happened to messages and topology, so a test can ask "where did my message go?"."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from fakerabbit.broker.message import Message


@dataclass(frozen=True, slots=True)
class Event:
    """One thing that happened. ``message_id`` ties together the events of one published message."""

    kind: str
    time_ms: int
    message_id: int | None
    details: dict[str, Any] = field(default_factory=dict)


class EventKind:
    """A kind of event with a fixed set of detail names, for :meth:`EventLog.record` on the hot path.

    ``EventKind("published", "exchange", "routing_key")`` is made once, at import; each record then stores
    only the values, in a tuple. A tuple value reads back as a list (``queues``).
    """

    __slots__ = ("kind", "names")

    def __init__(self, kind: str, *names: str) -> None:
        self.kind = kind
        self.names = names

    def __repr__(self) -> str:
        return f"EventKind({self.kind!r}, {', '.join(map(repr, self.names))})"


PUBLISHED: Final = EventKind("published", "exchange", "routing_key")
ROUTED: Final = EventKind("routed", "queues")
DELIVERED: Final = EventKind("delivered", "queue", "consumer_tag", "delivery_tag")
DELIVERED_GET: Final = EventKind("delivered", "queue", "delivery_tag")
ACKED: Final = EventKind("acked", "queue")
EXPIRED: Final = EventKind("expired", "queue")
DEAD_LETTERED: Final = EventKind("dead-lettered", "queue", "reason", "exchange", "queues")

# A stored record is a plain tuple: (kind, time_ms, message_id, details dict) from emit(), or (kind, time_ms,
# message_id, values, names) from record(). No Event, and with record() no dict, is built until the log is read.
# A record() tuple holds only strings, ints and tuples of them, which the garbage collector stops tracking: a
# full ring of 100,000 of them costs it nothing.
_Record = tuple[Any, ...]


def _event(r: _Record) -> Event:
    if len(r) == 4:
        return Event(*r)
    kind, time_ms, message_id, values, names = r
    details = {n: list(v) if type(v) is tuple else v for n, v in zip(names, values, strict=True)}
    return Event(kind, time_ms, message_id, details)


class EventLog:
    """A bounded log of :class:`Event` (the newest ``maxlen`` are kept).

    :meth:`emit` takes details as keywords; :meth:`record` is the cheaper form for the per-message events
    (publish, route, deliver, ack), with an :class:`EventKind` and positional values. Both store tuples that
    become :class:`Event` objects only when the log is read (:meth:`snapshot`, iteration). ``enabled = False``
    turns recording off; callers that would compute a detail value only for the log can test it first.
    """

    __slots__ = ("_events", "_last_values", "_now_ms", "enabled")

    def __init__(self, now_ms: Callable[[], int], maxlen: int = 100_000) -> None:
        self._now_ms = now_ms
        # Emitting is on the hot path (expiring 100,000 messages into a dead-letter queue emits 200,000 events).
        self._events: deque[_Record] = deque(maxlen=maxlen)
        self._last_values: tuple[Any, ...] = ()
        self.enabled = True

    def emit(self, kind: str, msg: Message | None, **details: Any) -> None:
        if self.enabled:
            self._events.append((kind, self._now_ms(), msg.id if msg is not None else None, details))

    def record(self, kind: EventKind, message_id: int | None, *values: Any) -> None:
        """Record an event of ``kind`` whose details are ``values``, in the order of ``kind.names``."""
        if self.enabled:
            self._events.append((kind.kind, self._now_ms(), message_id, values, kind.names))

    def record_each(self, kind: EventKind, messages: Iterable[Message], *values: Any) -> None:
        """Record one event of ``kind`` per message, all at the same time and with the same ``values``.

        Expiring 100,000 messages records 100,000 events, at once or (one per timer) in 100,000 calls with the
        same queue name: the records share one ``values`` tuple, that of the previous call when it is equal
        (``==``: fine for the strings and ints that event details are).
        """
        if self.enabled:
            if values == self._last_values:
                values = self._last_values
            else:
                self._last_values = values
            now, name, names, append = self._now_ms(), kind.kind, kind.names, self._events.append
            for m in messages:
                append((name, now, m.id, values, names))

    def clear(self) -> None:
        self._events.clear()

    def snapshot(self) -> list[Event]:
        return [_event(r) for r in self._events]

    def __iter__(self) -> Iterator[Event]:
        return iter(self.snapshot())

    def __len__(self) -> int:
        return len(self._events)
