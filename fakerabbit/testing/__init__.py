"""Helpers for tests that use fakerabbit: snapshots, events, x-death views and assertions.

``rabbit.queue(...)``, ``rabbit.queues()``, ``rabbit.exchanges()``, ``rabbit.bindings()`` and
``rabbit.connections()`` return the snapshot classes below; ``rabbit.events`` returns :class:`Events`.
:class:`Rabbit` is the shape :class:`~fakerabbit.FakeRabbit` shares with the pytest plugin's dual-mode
``RealRabbit``: annotate a test's ``fakerabbit`` argument with it to use only what works on both.
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
from fakerabbit.testing.rabbit import Rabbit, RabbitClock, RabbitQueue
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
    "Rabbit",
    "RabbitClock",
    "RabbitQueue",
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
