"""A connection's output: frames are queued while an event is handled and go to the transport in one write
when the server flushes (coalesced writes), and TCP back-pressure (the transport's ``pause_writing`` /
``resume_writing``) holds deliveries back until the client reads again.

These functions are :class:`~fakerabbit.protocol.connection.AMQPConnection`'s methods.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fakerabbit.clock import real_monotonic
from fakerabbit.protocol import framing
from fakerabbit.protocol.codec import base

if TYPE_CHECKING:
    from fakerabbit.protocol.connection import AMQPConnection

#: Content queued for one connection within one event is handed to the transport once it reaches this many
#: bytes, so that the transport's pause_writing (TCP back-pressure) stops further deliveries before the event ends.
OUT_FLUSH_BYTES = 65536


def write(self: AMQPConnection, data: bytes) -> None:
    if self.closed:
        return
    self._out.append(data)
    self.server.dirty.add(self)


def write_many(self: AMQPConnection, parts: list[bytes]) -> None:
    if self.closed:
        return
    self._out.extend(parts)
    self.server.dirty.add(self)
    # A basic.consume or resume_writing can dispatch a whole backlog in one event: without this, all of it
    # would sit in _out (and then in the transport's buffer) before write_paused could ever be set.
    self._out_bytes += sum(map(len, parts))
    if self._out_bytes >= OUT_FLUSH_BYTES:
        self.flush()


def write_late(self: AMQPConnection, data: bytes) -> None:
    """Queue a frame to go out after the reply to the method being handled (see :meth:`flush`)."""
    if not self.closed:
        self._late.append(data)
        self.server.dirty.add(self)


def send(self: AMQPConnection, channel: int, method: base.Frame) -> None:
    self.write(framing.encode_method(channel, method))


def flush(self: AMQPConnection) -> None:
    if self._confirming:
        self.flush_confirms()
    if self._late:
        self._out.extend(self._late)
        self._late.clear()
    self._out_bytes = 0
    out = self._out
    if out and self.transport is not None and not self.closed:
        data = out[0] if len(out) == 1 else b"".join(out)
        out.clear()
        self._last_send = real_monotonic()
        self.transport.write(data)
    else:
        self._out.clear()


def pause_writing(self: AMQPConnection) -> None:
    self.write_paused = True


def resume_writing(self: AMQPConnection) -> None:
    self.write_paused = False
    try:
        for ch in list(self.channels.values()):
            ch.resume_deliveries()
    except Exception as exc:  # never let a bug escape into the event loop
        self._internal_error(exc)
    self.server.flush()
