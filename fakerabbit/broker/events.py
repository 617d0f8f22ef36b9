"""A record of what happened to messages and topology, so a test can ask "where did my message go?"."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fakerabbit.broker.message import Message


@dataclass(frozen=True, slots=True)
class Event:
    """One thing that happened. ``message_id`` ties together the events of one published message."""

    kind: str
    time_ms: int
    message_id: int | None
    details: dict[str, Any] = field(default_factory=dict)


class EventLog:
    """A bounded log of :class:`Event` (the newest ``maxlen`` are kept)."""

    def __init__(self, now_ms: Any, maxlen: int = 100_000) -> None:
        self._now_ms = now_ms
        # Plain tuples, turned into Event objects only when read: emitting is on the hot path (expiring
        # 100,000 messages into a dead-letter queue emits 200,000 events).
        self._events: deque[tuple[str, int, int | None, dict[str, Any]]] = deque(maxlen=maxlen)
        self.enabled = True

    def emit(self, kind: str, msg: Message | None, **details: Any) -> None:
        if self.enabled:
            self._events.append((kind, self._now_ms(), msg.id if msg is not None else None, details))

    def clear(self) -> None:
        self._events.clear()

    def snapshot(self) -> list[Event]:
        return [Event(*e) for e in self._events]

    def __iter__(self) -> Iterator[Event]:
        return iter(self.snapshot())

    def __len__(self) -> int:
        return len(self._events)
