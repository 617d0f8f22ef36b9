"""Publisher flow control (``rabbit_reader``'s ``#throttle{}``): while a resource alarm is on (see
:mod:`fakerabbit.protocol.alarms`), a connection that publishes is blocked: it is no longer read and, if it
announced the ``connection.blocked`` capability, it is told so once; ``connection.unblocked`` follows when every
alarm has cleared.

:class:`Throttle` owns that state for one connection. What it needs of the connection is
:class:`ThrottledConnection`; of the node's alarms, :class:`Alarms`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from fakerabbit.protocol.codec import base, commands

__all__ = ["Alarms", "Throttle", "ThrottledConnection"]


class Alarms(Protocol):
    """The node's resource alarms (:class:`~fakerabbit.protocol.alarms.ResourceAlarms`)."""

    @property
    def blocking(self) -> bool: ...

    def reason(self) -> str: ...


class ThrottledConnection(Protocol):
    """What the throttle needs of its connection."""

    @property
    def running(self) -> bool:
        """Open (``connection.open-ok`` sent) and not closing."""
        ...

    @property
    def blocked_capable(self) -> bool:
        """The client announced the ``connection.blocked`` capability."""
        ...

    def hold_input(self) -> None:
        """Stop reading the socket."""
        ...

    def release_input(self) -> None:
        """Read the socket again, and handle what is buffered already."""
        ...


class _Sender(Protocol):
    def send(self, channel: int, method: base.Frame) -> None: ...


class _Monitor(Protocol):
    def pause(self) -> None: ...

    def resume(self) -> None: ...


class Throttle:
    """One connection's publisher flow control."""

    __slots__ = ("_alarms", "_conn", "_flush", "_monitor", "_send", "blocked", "blocked_sent", "should_block")

    def __init__(
        self,
        conn: ThrottledConnection,
        alarms: Alarms,
        output: _Sender,
        heartbeat: _Monitor,
        flush: Callable[[], object],
    ) -> None:
        """``flush`` writes what every connection has queued (the listener's flush)."""
        self._conn = conn
        self._send = output.send
        self._alarms = alarms
        self._monitor = heartbeat
        self._flush = flush
        #: The connection published under an alarm.
        self.should_block = False
        #: The connection is not read (and its heartbeat receive monitor is paused).
        self.blocked = False
        #: ``connection.blocked`` was sent and not yet followed by ``connection.unblocked``.
        self.blocked_sent = False

    def set_blocked(self, blocked: bool, reason: str) -> None:
        """Fault injection (``rabbit.block()``): tell the client at once, whether or not it has published, that it
        is blocked (or, if it was told so and is not held back, unblocked). Publishing is held back by the alarm
        (:meth:`publish_received`), not here."""
        conn = self._conn
        if not conn.blocked_capable or not conn.running:
            return
        if blocked and not self.blocked_sent:
            self._send(0, commands.Connection.Blocked(reason))
            self.blocked_sent = True
        elif not blocked and self.blocked_sent and not self.blocked:
            self._send(0, commands.Connection.Unblocked())
            self.blocked_sent = False
        else:
            return
        self._flush()

    def publish_received(self) -> None:
        """A content frame arrived: under a resource alarm this connection gets blocked."""
        if self._alarms.blocking:
            self.should_block = True
            self._maybe_block()

    def control_throttle(self) -> None:
        """An alarm changed (``rabbit_reader:control_throttle/1``)."""
        conn = self._conn
        if not conn.running:
            return
        blocking = self._alarms.blocking
        if self.blocked and not blocking:
            self.blocked = False
            self.should_block = False
            if self.blocked_sent:
                self._send(0, commands.Connection.Unblocked())
                self.blocked_sent = False
            self._monitor.resume()
            conn.release_input()
        elif not self.blocked and self.blocked_sent and not blocking:
            self.set_blocked(False, "")  # told by rabbit.block() without ever publishing
        elif not self.blocked:
            self._maybe_block()

    def _maybe_block(self) -> None:
        alarms = self._alarms
        if not (self.should_block and alarms.blocking) or self.blocked:
            return
        self.blocked = True
        conn = self._conn
        conn.hold_input()
        self._monitor.pause()
        if conn.blocked_capable and not self.blocked_sent:
            self._send(0, commands.Connection.Blocked(alarms.reason()))
            self.blocked_sent = True
