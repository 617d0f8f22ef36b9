"""Heartbeats (``rabbit_heartbeat``): the server sends one every half interval it has sent nothing else, and
drops a peer that sent nothing for :data:`HEARTBEAT_TIMEOUT_INTERVALS` intervals. Real time, never the virtual
clock.

:class:`HeartbeatMonitor` is the sender and the receive monitor of one connection; the connection tells it when
bytes arrive (:meth:`~HeartbeatMonitor.received`) and when to stop, the throttle pauses its receive side while
the connection is blocked.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol

from fakerabbit.clock import real_monotonic
from fakerabbit.protocol import framing

__all__ = ["HEARTBEAT_TIMEOUT_INTERVALS", "HeartbeatMonitor", "HeartbeatOutput"]

#: A peer that sends nothing for this many heartbeat intervals is dropped (no close frame), as RabbitMQ 3.10.8
#: drops a client that stops talking right after connection.open (rabbit_heartbeat checks once an interval).
HEARTBEAT_TIMEOUT_INTERVALS = 3


class HeartbeatOutput(Protocol):
    """What the sender needs of the connection's writer (:class:`~fakerabbit.protocol.output.Output`)."""

    @property
    def last_send(self) -> float: ...

    def write(self, data: bytes) -> None: ...

    def flush(self) -> None: ...


class HeartbeatMonitor:
    """Sends heartbeats when the connection is otherwise silent and calls ``on_timeout`` when the peer is."""

    __slots__ = ("_handle", "_on_timeout", "_output", "interval", "last_recv", "paused")

    def __init__(self, output: HeartbeatOutput, on_timeout: Callable[[], object]) -> None:
        self._output = output
        self._on_timeout = on_timeout
        #: The negotiated interval in seconds (0: no heartbeats).
        self.interval = 0
        #: ``real_monotonic()`` when the peer last sent something.
        self.last_recv = real_monotonic()
        #: The receive side is paused (a blocked connection is not read, so it cannot miss heartbeats).
        self.paused = False
        self._handle: asyncio.TimerHandle | None = None

    def start(self, interval: int) -> None:
        """Tune-ok asked for heartbeats every ``interval`` seconds."""
        self.interval = interval
        self._schedule()

    def stop(self) -> None:
        """No more heartbeats: the connection stops reading or is gone."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def received(self) -> None:
        self.last_recv = real_monotonic()

    def pause(self) -> None:
        """``rabbit_heartbeat:pause_monitor/1``."""
        self.paused = True

    def resume(self) -> None:
        """``rabbit_heartbeat:resume_monitor/1``: the silence starts counting now."""
        self.paused = False
        self.last_recv = real_monotonic()

    def _schedule(self) -> None:
        self._handle = asyncio.get_event_loop().call_later(self.interval / 2, self._tick)

    def _tick(self) -> None:
        # Timers run on the loop's clock, which freezegun may move; what counts is real elapsed time.
        self._handle = None
        now = real_monotonic()
        interval = self.interval
        output = self._output
        if now - output.last_send >= interval / 2 - 0.01:
            output.write(framing.HEARTBEAT_FRAME)
            output.flush()
        if self.paused:
            self.last_recv = now
        elif now - self.last_recv >= HEARTBEAT_TIMEOUT_INTERVALS * interval - 0.01:
            self._on_timeout()
            return
        self._schedule()
