"""Heartbeats (``rabbit_heartbeat``): the server sends one every half interval it has sent nothing else, and
drops a peer that sent nothing for :data:`HEARTBEAT_TIMEOUT_INTERVALS` intervals. Real time, never the virtual
clock.

These functions are :class:`~fakerabbit.protocol.connection.AMQPConnection`'s methods.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from fakerabbit.clock import real_monotonic
from fakerabbit.protocol import framing

if TYPE_CHECKING:
    from fakerabbit.protocol.connection import AMQPConnection

log = logging.getLogger("fakerabbit")

#: A peer that sends nothing for this many heartbeat intervals is dropped (no close frame), as RabbitMQ 3.10.8
#: drops a client that stops talking right after connection.open (rabbit_heartbeat checks once an interval).
HEARTBEAT_TIMEOUT_INTERVALS = 3


def _schedule_heartbeat(self: AMQPConnection) -> None:
    self._hb_handle = self._loop().call_later(self.heartbeat / 2, self._heartbeat_tick)


def _heartbeat_tick(self: AMQPConnection) -> None:
    # Timers run on the loop's clock, which freezegun may move; what counts is real elapsed time.
    if self.closed or self.stopped:
        return
    now = real_monotonic()
    if now - self._last_send >= self.heartbeat / 2 - 0.01:
        self.write(framing.HEARTBEAT_FRAME)
        self.flush()
    if self.blocked:  # RabbitMQ pauses the receive monitor of a blocked connection
        self._last_recv = now
    elif now - self._last_recv >= HEARTBEAT_TIMEOUT_INTERVALS * self.heartbeat - 0.01:
        log.info("missed heartbeats from %s, closing", self.peer)
        self.broker.report_problem(
            f"connection {self.peer or '?'} missed heartbeats (heartbeat {self.heartbeat} s): closed"
        )
        self.abort(graceful=True)
        return
    self._schedule_heartbeat()
