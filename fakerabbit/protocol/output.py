"""A connection's output (``rabbit_writer``): frames are queued while an event is handled and go to the
transport in one write when the listener flushes (coalesced writes); TCP back-pressure (the transport's
``pause_writing`` / ``resume_writing``) holds deliveries back until the client reads again; publisher confirms
that channels hold for the end of a batch go out before the write.

:class:`Output` knows nothing of the connection that owns it: it is given a transport (anything with
``write(bytes)``) and a function that tells the listener it has something to flush.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from fakerabbit.clock import real_monotonic
from fakerabbit.protocol import framing
from fakerabbit.protocol.codec import base

__all__ = ["OUT_FLUSH_BYTES", "ConfirmHolder", "Output", "Transport"]

#: Content queued for one connection within one event is handed to the transport once it reaches this many
#: bytes, so that the transport's pause_writing (TCP back-pressure) stops further deliveries before the event ends.
OUT_FLUSH_BYTES = 65536


class Transport(Protocol):
    """Where the bytes go (an asyncio transport, or a list in a test)."""

    def write(self, data: bytes) -> None: ...


class ConfirmHolder(Protocol):
    """A channel holding publisher confirms until the end of the batch (see :meth:`Output.confirms_waiting`)."""

    def flush_confirms(self) -> None: ...


class Output:
    """One connection's writer; it owns the queued frames, the back-pressure flag and the time of the last write.

    ``mark_dirty`` is called whenever something is queued: the listener then calls :meth:`flush` at the end of
    the event (see ``Listener.flush``)."""

    __slots__ = (
        "_confirming",
        "_mark_dirty",
        "_out",
        "_out_bytes",
        "closed",
        "last_send",
        "late",
        "paused",
        "transport",
    )

    def __init__(self, mark_dirty: Callable[[], object]) -> None:
        self._mark_dirty = mark_dirty
        #: Set once the connection is made.
        self.transport: Transport | None = None
        #: The socket is gone (or going): nothing more is queued or written.
        self.closed = False
        #: The transport's buffer is above its high-water mark (TCP back-pressure): no deliveries meanwhile.
        self.paused = False
        #: ``real_monotonic()`` of the last write (the heartbeat sender reads it).
        self.last_send = real_monotonic()
        self._out: list[bytes] = []
        self._out_bytes = 0  # content bytes in _out (see OUT_FLUSH_BYTES)
        #: Frames queued with :meth:`write_late`, waiting for the reply to the method being handled (the same list
        #: for the writer's life: a reader may keep it to test it for emptiness).
        self.late: list[bytes] = []
        # channels holding publisher confirms for the end of the batch (see ChannelHandler.send_confirm)
        self._confirming: dict[ConfirmHolder, None] = {}

    # -- queueing ---------------------------------------------------------------------------------------------
    def write(self, data: bytes) -> None:
        if self.closed:
            return
        self._out.append(data)
        self._mark_dirty()

    def write_many(self, parts: list[bytes]) -> None:
        if self.closed:
            return
        self._out.extend(parts)
        self._mark_dirty()
        # A basic.consume or resume_writing can dispatch a whole backlog in one event: without this, all of it
        # would sit in _out (and then in the transport's buffer) before paused could ever be set.
        self._out_bytes += sum(map(len, parts))
        if self._out_bytes >= OUT_FLUSH_BYTES:
            self.flush()

    def write_late(self, data: bytes) -> None:
        """Queue a frame to go out after the reply to the method being handled (see :meth:`release_late`)."""
        if not self.closed:
            self.late.append(data)
            self._mark_dirty()

    def send(self, channel: int, method: base.Frame) -> None:
        self.write(framing.encode_method(channel, method))

    def release_late(self) -> None:
        """The method being handled is done: the frames it queued with :meth:`write_late` follow its reply."""
        if self.late:
            self._out.extend(self.late)
            self.late.clear()

    def discard(self) -> None:
        """Forget what is queued and not written yet (the connection is being forced closed)."""
        self._out.clear()
        self.late.clear()

    def queued(self) -> int:
        """Bytes queued and not yet handed to the transport."""
        return sum(map(len, self._out)) + sum(map(len, self.late))

    # -- publisher confirms -----------------------------------------------------------------------------------
    def confirms_waiting(self, holder: ConfirmHolder) -> None:
        """``holder`` holds confirms: they go out when the current batch of input is handled (or at the next
        flush)."""
        self._confirming[holder] = None
        self._mark_dirty()

    def forget_confirms(self) -> None:
        """The channels holding confirms are gone: none of them is sent."""
        self._confirming.clear()

    def flush_confirms(self) -> None:
        """Send every channel's coalesced confirms."""
        confirming = self._confirming
        while confirming:
            holder = next(iter(confirming))
            del confirming[holder]
            holder.flush_confirms()

    # -- writing ----------------------------------------------------------------------------------------------
    def flush(self) -> None:
        """Hand everything queued to the transport in one write."""
        if self._confirming:
            self.flush_confirms()
        if self.late:
            self._out.extend(self.late)
            self.late.clear()
        self._out_bytes = 0
        out = self._out
        transport = self.transport
        if out and transport is not None and not self.closed:
            data = out[0] if len(out) == 1 else b"".join(out)
            out.clear()
            self.last_send = real_monotonic()
            transport.write(data)
        else:
            out.clear()

    def close(self) -> None:
        """The socket is gone: nothing more is written; what is queued goes."""
        self.closed = True
        self._out.clear()
        self.late.clear()
        self._confirming.clear()
