"""The test-facing part of :class:`fakerabbit.FakeRabbit`: inspection, events and fault injection.

A mixin so that it lives apart from the server's lifecycle code; every method marshals onto the server's loop
through ``self.call`` and returns immutable snapshots.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from fakerabbit.broker.broker import Broker
    from fakerabbit.server import Server

T = TypeVar("T")


class TestingAPI:
    """Inspection and fault injection (mixed into FakeRabbit)."""

    __test__ = False  # not a pytest test class

    broker: Broker
    server: Server

    def call(self, fn: Callable[[], T]) -> T:  # implemented by FakeRabbit
        raise NotImplementedError
