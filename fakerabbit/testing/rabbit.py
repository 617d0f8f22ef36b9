"""What a test can use of the broker it is given, fake or real: the shape :class:`~fakerabbit.FakeRabbit` and the
pytest plugin's dual-mode ``RealRabbit`` share (``fakerabbit_pytest.real``).

Both conform to :class:`Rabbit` structurally, and mypy checks that they do (``server.py`` and
``conftest_plugin/real.py`` each assign their class to a ``type[Rabbit]``): a signature changed on one side and
not on the other fails the type check instead of a dual-mode run. A test written against :class:`Rabbit` runs
against both; on a real broker the calls that only the fake can answer skip the test with a reason (see
``docs/pytest.md``, "Dual mode").
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, Protocol

from fakerabbit.testing.api import ConnectionFilter
from fakerabbit.testing.events import Events
from fakerabbit.testing.snapshots import (
    BindingSnapshot,
    ConnectionSnapshot,
    DelayedMessageSnapshot,
    ExchangeSnapshot,
    MessageSnapshot,
    QueueSnapshot,
)

__all__ = ["Rabbit", "RabbitClock", "RabbitQueue"]


class RabbitClock(Protocol):
    """The broker's clock as a test moves it: the fake's virtual (or following) clock, or a real broker's, where
    ``advance`` waits in real time (with ``--fakerabbit-real-wait``) or skips the test."""

    def now(self) -> datetime:
        """The broker's current time."""
        ...

    def advance(self, seconds: float | timedelta) -> int:
        """Move the time on by ``seconds``; returns how many timers fired (0 on a real broker)."""
        ...

    async def advance_async(self, seconds: float | timedelta) -> int:
        """:meth:`advance` for async tests: the clients on the test's loop keep running."""
        ...

    def advance_to(self, when: datetime) -> int:
        """Move the time on to ``when``."""
        ...


class RabbitQueue(Protocol):
    """A queue's counts (:class:`~fakerabbit.testing.QueueSnapshot` on the fake); ``messages`` skips the test on
    a real broker."""

    @property
    def name(self) -> str: ...
    @property
    def vhost(self) -> str: ...
    @property
    def message_count(self) -> int: ...
    @property
    def consumer_count(self) -> int: ...
    @property
    def unacked_count(self) -> int: ...
    @property
    def messages(self) -> Sequence[MessageSnapshot]: ...


class Rabbit(Protocol):
    """The broker a test is given: :class:`~fakerabbit.FakeRabbit`, or ``RealRabbit`` in dual mode.

    ``vhost`` defaults differ: ``"/"`` on the fake; on a real broker the URL's vhost, or the xdist worker's own.
    The methods below the inspection of one queue (the listings, ``events``, ``restart``) skip the test on a
    real broker; ``problems`` is always empty there.
    """

    @property
    def url(self) -> str:
        """The AMQP URL to connect to."""
        ...

    @property
    def management_url(self) -> str:
        """``http://HOST:PORT`` of the management HTTP API."""
        ...

    @property
    def clock(self) -> RabbitClock:
        """The clock the broker's time comes from."""
        ...

    # -- inspection -----------------------------------------------------------------------------------------
    def queue(self, name: str, vhost: str = ...) -> RabbitQueue:
        """The counts of one queue (``LookupError`` if it does not exist)."""
        ...

    def connections(self) -> list[ConnectionSnapshot]:
        """The client connections that are open."""
        ...

    @property
    def problems(self) -> list[str]:
        """What the broker met that it does not support, or a client's protocol violations."""
        ...

    def clear_problems(self) -> list[str]:
        """Return :attr:`problems` and forget them."""
        ...

    def queues(self, vhost: str | None = ...) -> list[QueueSnapshot]:
        """Snapshots of every queue of ``vhost``."""
        ...

    def exchanges(self, vhost: str | None = ..., *, predeclared: bool = True) -> list[ExchangeSnapshot]:
        """Snapshots of the exchanges of ``vhost``."""
        ...

    def bindings(
        self,
        vhost: str | None = ...,
        *,
        source: str | None = None,
        destination: str | None = None,
        include_default: bool = False,
    ) -> list[BindingSnapshot]:
        """Snapshots of the bindings of ``vhost``."""
        ...

    def delayed_messages(self, exchange: str | None = None, vhost: str | None = ...) -> list[DelayedMessageSnapshot]:
        """The messages the delayed-message exchanges hold."""
        ...

    @property
    def events(self) -> Events:
        """What happened to each message."""
        ...

    # -- policies -------------------------------------------------------------------------------------------
    def set_policy(
        self,
        name: str,
        pattern: str,
        definition: dict[str, Any],
        *,
        priority: int = 0,
        apply_to: str = "queues",
        vhost: str = ...,
    ) -> None:
        """Set a user policy (``rabbitmqctl set_policy``)."""
        ...

    def clear_policy(self, name: str, vhost: str = ...) -> None:
        """Remove a user policy."""
        ...

    def set_operator_policy(
        self,
        name: str,
        pattern: str,
        definition: dict[str, Any],
        *,
        priority: int = 0,
        apply_to: str = "queues",
        vhost: str = ...,
    ) -> None:
        """Set an operator policy."""
        ...

    def clear_operator_policy(self, name: str, vhost: str = ...) -> None:
        """Remove an operator policy."""
        ...

    # -- fault injection ------------------------------------------------------------------------------------
    def close_connections(
        self, reply_code: int = 320, reply_text: str = ..., *, where: ConnectionFilter | None = None
    ) -> int:
        """Close client connections with ``connection.close``; returns how many."""
        ...

    def drop_connections(self, *, where: ConnectionFilter | None = None) -> int:
        """Reset client connections' sockets; returns how many."""
        ...

    def block(self, reason: str = "low on memory") -> None:
        """Send ``connection.blocked`` to the clients."""
        ...

    def unblock(self) -> None:
        """Send ``connection.unblocked``."""
        ...

    def restart(self, *, graceful: bool = True) -> None:
        """Restart the node: what is durable survives."""
        ...

    def reset(self) -> None:
        """Back to the initial state (the plugin does this between tests)."""
        ...
