"""Helpers for tests that use fakerabbit: snapshots, events, x-death views and assertions.

``rabbit.queue(...)``, ``rabbit.queues()``, ``rabbit.exchanges()``, ``rabbit.bindings()`` and
``rabbit.connections()`` return the snapshot classes below; ``rabbit.events`` returns :class:`Events`.
"""

from __future__ import annotations

from fakerabbit.testing.assertions import (
    assert_bodies,
    assert_empty,
    assert_event_kinds,
    assert_headers,
    assert_message_count,
    assert_x_death,
    diff,
)
from fakerabbit.testing.events import Event, Events
from fakerabbit.testing.snapshots import (
    BindingSnapshot,
    ConnectionSnapshot,
    ConsumerSnapshot,
    DelayedMessageSnapshot,
    ExchangeSnapshot,
    MessageSnapshot,
    QueueSnapshot,
)
from fakerabbit.testing.xdeath import RoutingKeys, XDeath, XDeathEntry, message_headers, x_death

__all__ = [
    "BindingSnapshot",
    "ConnectionSnapshot",
    "ConsumerSnapshot",
    "DelayedMessageSnapshot",
    "Event",
    "Events",
    "ExchangeSnapshot",
    "MessageSnapshot",
    "QueueSnapshot",
    "RoutingKeys",
    "XDeath",
    "XDeathEntry",
    "assert_bodies",
    "assert_empty",
    "assert_event_kinds",
    "assert_headers",
    "assert_message_count",
    "assert_x_death",
    "diff",
    "message_headers",
    "x_death",
]
