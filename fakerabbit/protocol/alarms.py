"""Resource alarms: RabbitMQ's memory (and disk) alarm and the publisher blocking it causes.

RabbitMQ raises the memory alarm when the node uses more memory than its high watermark and clears it when
usage drops back below. While an alarm is on, every connection that publishes (sends a content header or body
frame) is blocked: the broker stops reading its socket and, if the client announced the ``connection.blocked``
capability, sends ``connection.blocked`` with a reason such as ``"low on memory"``. Connections that only consume
are not blocked. When every alarm has cleared, blocked connections get ``connection.unblocked`` and are read
again (``rabbit_reader``'s ``control_throttle``).

fakerabbit measures "memory" as the bytes of message bodies it holds (ready and unacknowledged), so a test can
set ``FakeRabbit(memory_high_watermark=...)`` to a number of bytes and watch publishers get blocked. A test can
also raise and clear an alarm directly with :meth:`ResourceAlarms.set_alarm`.

``rabbit.block(reason)`` / ``rabbit.unblock()`` (:meth:`ResourceAlarms.block`) is an alarm too, with the test's
reason: every connection that publishes while it is on is blocked, including connections opened after the call.
Unlike a real alarm it also tells the connections open at the call at once, before they publish.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Protocol

from fakerabbit.broker.broker import Broker

__all__ = ["RESOURCES", "AlarmedConnection", "AlarmedListener", "ResourceAlarms"]

RESOURCES = ("memory", "disk")


class _Throttle(Protocol):
    """:class:`~fakerabbit.protocol.throttle.Throttle`."""

    def set_blocked(self, blocked: bool, reason: str) -> None: ...

    def control_throttle(self) -> None: ...


class AlarmedConnection(Protocol):
    """A connection, as the alarms see it: its publisher flow control."""

    @property
    def throttle(self) -> _Throttle: ...


class AlarmedListener(Protocol):
    """What the alarms need of the listener that owns them: the broker (whose memory they watch) and the
    connections (which they throttle)."""

    @property
    def broker(self) -> Broker: ...

    @property
    def connections(self) -> Collection[AlarmedConnection]: ...


class ResourceAlarms:
    """The node's alarms; owned by the server, consulted by every connection."""

    def __init__(self, server: AlarmedListener, memory_high_watermark: int | None = None) -> None:
        self.server = server
        #: Bytes of message bodies (ready + unacknowledged) above which the memory alarm goes off; None: never.
        self.memory_high_watermark = memory_high_watermark
        self.active: set[str] = set()
        self._forced: set[str] = set()
        #: The reason given to ``rabbit.block()`` while it is in effect, else None.
        self.injected: str | None = None

    @property
    def blocking(self) -> bool:
        return bool(self.active) or self.injected is not None

    def reason(self) -> str:
        """``rabbit_reader:blocked_by_message/1`` (or the reason given to ``rabbit.block()``)."""
        if self.injected is not None:
            return self.injected
        return "low on " + " & ".join(r for r in RESOURCES if r in self.active)

    def block(self, reason: str) -> None:
        """``rabbit.block()``: an alarm with ``reason`` until :meth:`unblock`. Running connections that announced
        the ``connection.blocked`` capability are told at once; any connection that publishes while it is on,
        opened before or after, is blocked as under a memory alarm (told, if not told yet, and no longer read)."""
        self.injected = reason
        for conn in list(self.server.connections):
            conn.throttle.set_blocked(True, reason)
            conn.throttle.control_throttle()

    def unblock(self) -> None:
        """``rabbit.unblock()``: lift :meth:`block`; connections go on once no real alarm is left either."""
        if self.injected is None:
            return
        self.injected = None
        self._changed()

    def set_alarm(self, resource: str = "memory", active: bool = True) -> None:
        """Raise or clear an alarm by hand (as ``rabbitmqctl set_vm_memory_high_watermark`` would cause).

        A raised alarm stays on until cleared here, whatever the watermark says."""
        if resource not in RESOURCES:
            raise ValueError(f"resource must be one of {RESOURCES}, not {resource!r}")
        if active:
            self._forced.add(resource)
        else:
            self._forced.discard(resource)
        self._update(resource, active)

    def reset(self) -> None:
        """``rabbit.reset()``: no alarm outlives a test - neither ``rabbit.block()`` nor one raised with
        :meth:`set_alarm` (the watermark stays and is checked again at the next flush)."""
        self.injected = None
        self._forced.clear()
        self.active.clear()
        self._changed()

    def memory_used(self) -> int:
        """Bytes of message bodies held: ready in queues plus delivered and not yet acknowledged."""
        broker = self.server.broker
        total = 0
        for vhost in broker.vhosts.values():
            for q in vhost.queues.values():
                total += q.ready_bytes
        for conn in broker.connections.values():
            for session in conn.sessions.values():
                total += session.unacked_bytes
        return total

    def check(self) -> None:
        """Re-evaluate the memory alarm against the watermark (called whenever the server flushes)."""
        limit = self.memory_high_watermark
        if limit is None or "memory" in self._forced:
            return
        over = self.memory_used() > limit
        if over != ("memory" in self.active):
            self._update("memory", over)

    def _update(self, resource: str, active: bool) -> None:
        before = set(self.active)
        if active:
            self.active.add(resource)
        else:
            self.active.discard(resource)
        if self.active != before:
            self._changed()

    def _changed(self) -> None:
        for conn in list(self.server.connections):
            conn.throttle.control_throttle()
