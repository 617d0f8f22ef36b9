"""fakerabbit: a fake RabbitMQ for client test suites.

A real AMQP 0-9-1 server that behaves like RabbitMQ, runs on a virtual clock the test controls, and lets the
test look inside. Start one with ``with FakeRabbit() as rabbit:`` and connect any client to ``rabbit.url``;
``FakeRabbit(tls=True)`` serves amqps too (``rabbit.amqps_url``, trusting ``rabbit.ca_file``: see ``docs/tls.md``),
and ``host="::1"`` / ``"::"`` / ``"localhost"`` listen on IPv6.

The public API is what ``__all__`` lists: :class:`FakeRabbit`; the clocks it accepts (:class:`VirtualClock`, the
default under the pytest plugin; :class:`FollowingClock`, which follows freezegun / time-machine;
:class:`SystemClock`, real time) and the :class:`Clock` protocol they share; the errors its API raises
(:mod:`fakerabbit.errors`; :class:`ListenError` when a port cannot be bound). Test helpers (snapshots, events,
x-death views, assertions) are in :mod:`fakerabbit.testing`. Everything else is internal and may change.
"""

from __future__ import annotations

from fakerabbit.clock import Clock, FollowingClock, SystemClock, VirtualClock
from fakerabbit.errors import AMQPError, HardError, ListenError, ManagementListenError, PolicyError, SoftError
from fakerabbit.server import FakeRabbit

__all__ = [
    "AMQPError",
    "Clock",
    "FakeRabbit",
    "FollowingClock",
    "HardError",
    "ListenError",
    "ManagementListenError",
    "PolicyError",
    "SoftError",
    "SystemClock",
    "VirtualClock",
]
