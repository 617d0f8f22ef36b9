"""Publisher flow control (``rabbit_reader``'s ``#throttle{}``): while a resource alarm is on (see
:mod:`fakerabbit.protocol.alarms`), a connection that publishes is blocked: it is no longer read and, if it
announced the ``connection.blocked`` capability, it is told so once; ``connection.unblocked`` follows when every
alarm has cleared.

These functions are :class:`~fakerabbit.protocol.connection.AMQPConnection`'s methods.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fakerabbit.clock import real_monotonic
from fakerabbit.protocol.codec import commands

if TYPE_CHECKING:
    from fakerabbit.protocol.connection import AMQPConnection


def set_blocked(self: AMQPConnection, blocked: bool, reason: str) -> None:
    """Fault injection (``rabbit.block()``): tell the client at once, whether or not it has published, that it is
    blocked (or, if it was told so and is not held back, unblocked). Publishing is held back by the alarm
    (:func:`publish_received`), not here."""
    if not self.blocked_capable or self.closing or self.state != "running":
        return
    if blocked and not self.blocked_sent:
        self.send(0, commands.Connection.Blocked(reason))
        self.blocked_sent = True
    elif not blocked and self.blocked_sent and not self.blocked:
        self.send(0, commands.Connection.Unblocked())
        self.blocked_sent = False
    else:
        return
    self.server.flush()


def publish_received(self: AMQPConnection) -> None:
    """A content frame arrived: under a resource alarm this connection gets blocked."""
    if self.server.alarms.blocking:
        self.should_block = True
        self._maybe_block()


def control_throttle(self: AMQPConnection) -> None:
    """An alarm changed (rabbit_reader:control_throttle/1)."""
    if self.state != "running" or self.closed:
        return
    if self.blocked and not self.server.alarms.blocking:
        self.blocked = False
        self.should_block = False
        if self.blocked_sent:
            self.send(0, commands.Connection.Unblocked())
            self.blocked_sent = False
        if self.transport is not None and not self.stopped:
            self.transport.resume_reading()
        self._last_recv = real_monotonic()
        self._process()
    elif not self.blocked and self.blocked_sent and not self.server.alarms.blocking:
        self.set_blocked(False, "")  # told by rabbit.block() without ever publishing
    elif not self.blocked:
        self._maybe_block()


def _maybe_block(self: AMQPConnection) -> None:
    if not (self.should_block and self.server.alarms.blocking) or self.blocked:
        return
    self.blocked = True
    if self.transport is not None:
        self.transport.pause_reading()
    if self.blocked_capable and not self.blocked_sent:
        self.send(0, commands.Connection.Blocked(self.server.alarms.reason()))
        self.blocked_sent = True
