"""fakerabbit: a fake RabbitMQ for client test suites.

A real AMQP 0-9-1 server that behaves like RabbitMQ, runs on a virtual clock the test controls, and lets the
test look inside. Start one with ``with FakeRabbit() as rabbit:`` and connect any client to ``rabbit.url``.
"""

from __future__ import annotations

from fakerabbit.clock import SystemClock, VirtualClock
from fakerabbit.server import FakeRabbit

__all__ = ["FakeRabbit", "SystemClock", "VirtualClock"]
