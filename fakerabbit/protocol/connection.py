"""One client connection, modelled on RabbitMQ's ``rabbit_reader``: the asyncio protocol, its state and its
lifecycle (socket, timers, teardown). The rest of the reader is in modules of its own, whose functions are this
class's methods:

* :mod:`~fakerabbit.protocol.dispatch`: frame dispatch to channel 0 and the channels;
* :mod:`~fakerabbit.protocol.channel0`: the connection class's methods (start/tune/open handshake, close);
* :mod:`~fakerabbit.protocol.error_handling`: how an error ends the connection, depending on its state;
* :mod:`~fakerabbit.protocol.output`: coalesced writes and TCP back-pressure;
* :mod:`~fakerabbit.protocol.throttle`: publisher flow control under resource alarms;
* :mod:`~fakerabbit.protocol.heartbeat`: heartbeats, in real time.

Connection states follow the reader's: ``header`` (waiting for the protocol header), ``starting`` (start sent),
``tuning`` (tune sent), ``opening`` (tune-ok received), ``running``, and ``closed`` (a close was exchanged or
sent: only ``connection.close`` / ``close-ok`` on channel 0 are still read, until the client closes the socket
or a timeout passes).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from fakerabbit.broker import errors
from fakerabbit.broker.broker import ConnectionInfo
from fakerabbit.clock import real_monotonic
from fakerabbit.protocol import channel0, dispatch, error_handling, framing, heartbeat, output, throttle
from fakerabbit.protocol.addresses import host_port, url_host
from fakerabbit.protocol.channel import ChannelHandler
from fakerabbit.protocol.channel0 import CHANNEL_MAX, FRAME_MAX, HEARTBEAT
from fakerabbit.protocol.codec import encode_connection_start
from fakerabbit.protocol.error_handling import CLOSING_TIMEOUT, PROBLEM_CODES
from fakerabbit.protocol.handshake import server_properties
from fakerabbit.protocol.heartbeat import HEARTBEAT_TIMEOUT_INTERVALS
from fakerabbit.protocol.output import OUT_FLUSH_BYTES

if TYPE_CHECKING:
    from fakerabbit.protocol.listener import Listener

__all__ = [
    "CHANNEL_MAX",
    "CLOSING_TIMEOUT",
    "FRAME_MAX",
    "HANDSHAKE_TIMEOUT",
    "HEARTBEAT",
    "HEARTBEAT_TIMEOUT_INTERVALS",
    "OUT_FLUSH_BYTES",
    "PROBLEM_CODES",
    "SILENT_CLOSE_DELAY",
    "AMQPConnection",
]

log = logging.getLogger("fakerabbit")

_monotonic = real_monotonic  # never frozen or shifted by freezegun / time-machine (see fakerabbit.clock)

#: rabbit_reader's ?SILENT_CLOSE_DELAY: after a handshake error or a fatal frame error the socket is closed this
#: many seconds later (read when a close starts, so a test may shorten it on this module).
SILENT_CLOSE_DELAY = 3.0
#: rabbit's handshake_timeout: a client must get to open-ok within this many seconds.
HANDSHAKE_TIMEOUT = 10.0


class AMQPConnection(asyncio.Protocol):
    """asyncio protocol speaking AMQP 0-9-1 to one client."""

    def __init__(self, server: Listener) -> None:
        self.server = server
        self.broker = server.broker
        #: The wire rules of the RabbitMQ version the broker behaves as.
        self.rules = server.broker.profile.amqp
        self.transport: asyncio.Transport | None = None
        self.state = "header"
        self._header = b""
        self.reader = framing.FrameReader(self.rules.frame_min_size)
        self.channels: dict[int, ChannelHandler] = {}
        self.info: ConnectionInfo | None = None
        self.user = ""
        self.vhost = ""
        self.channel_max = CHANNEL_MAX
        self.frame_max = FRAME_MAX
        self.heartbeat = 0
        self.client_properties: dict[str, Any] = {}
        self.capabilities: dict[str, Any] = {}
        self._out: list[bytes] = []
        self._out_bytes = 0  # content bytes in _out (see OUT_FLUSH_BYTES)
        #: No more input is read (a fatal error or the silent-close delay is running).
        self.stopped = False
        #: The socket is gone (or going): nothing more is written.
        self.closed = False
        self._last_recv = _monotonic()
        self._last_send = _monotonic()
        self._hb_handle: asyncio.TimerHandle | None = None
        self._timer: asyncio.TimerHandle | None = None
        self.peer = ""
        #: The client's IP address ("" if the transport has none).
        self.peer_ip = ""
        self.write_paused = False
        # channel methods waiting for the reader to finish the current chunk of input
        self._pending: list[tuple[ChannelHandler, Callable[[], None]]] = []
        self._late: list[bytes] = []
        self._closing_channels: list[ChannelHandler] = []
        self._channel_failure: errors.AMQPError | None = None
        self._dead_channels: set[int] = set()
        # channels holding publisher confirms for the end of the batch (see ChannelHandler.send_confirm)
        self._confirming: dict[ChannelHandler, None] = {}
        self._logged_internal_error = False
        # publisher flow control (rabbit_reader's #throttle{})
        self.should_block = False
        self.blocked = False
        self.blocked_sent = False

    # -- compatibility ----------------------------------------------------------------------------------------
    @property
    def closing(self) -> bool:
        """A close is under way (sent or exchanged)."""
        return self.state == "closed" or self.closed

    @property
    def blocked_capable(self) -> bool:
        return self.capabilities.get("connection.blocked") is True

    # -- asyncio.Protocol -------------------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's transports are not asyncio.Transport
        peer = transport.get_extra_info("peername")
        if isinstance(peer, tuple):
            self.peer_ip, port = host_port(peer)  # IPv4-mapped as IPv4; "[::1]:port" as RabbitMQ names it
            self.peer = f"{url_host(self.peer_ip)}:{port}"
        self.server.connections.add(self)
        self._timer = self._loop().call_later(HANDSHAKE_TIMEOUT, self._handshake_timeout)

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        self._last_recv = _monotonic()
        if self.stopped:
            return
        if self.server.on_inbound is not None:
            self.server.on_inbound()  # the following clock fires timers that fell due before this command
        try:
            if self.state == "header":
                self._header += data
                if len(self._header) < 8:
                    return
                header, data = self._header[:8], self._header[8:]
                self._header = b""
                if not self._protocol_header(header):
                    return
            if data:
                self.reader.feed(data)
            self._process()
        finally:
            self.server.flush()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.server.connections.discard(self)
        self.server.dirty.discard(self)
        for handle in (self._hb_handle, self._timer):
            if handle is not None:
                handle.cancel()
        self._teardown()
        self.reader.clear()  # unread input goes now, not at the next garbage collection
        self._header = b""
        self.server.flush()

    # -- methods that live in modules of their own -------------------------------------------------------------
    # output: coalesced writes, TCP back-pressure
    write = output.write
    write_many = output.write_many
    write_late = output.write_late
    send = output.send
    flush = output.flush
    pause_writing = output.pause_writing
    resume_writing = output.resume_writing
    # dispatch: frames to channel 0 and the channels
    _process = dispatch._process
    _flush_pending = dispatch._flush_pending
    _handle_frame = dispatch._handle_frame
    # channel0: connection.* methods
    _method0 = channel0._method0
    _connection_method = channel0._connection_method
    _start_ok = channel0._start_ok
    _tune_ok = channel0._tune_ok
    _open = channel0._open
    # error_handling: errors end the connection
    handle_exception = error_handling.handle_exception
    close_by_server = error_handling.close_by_server
    _send_close = error_handling._send_close
    _fatal_frame_error = error_handling._fatal_frame_error
    _silent_close = error_handling._silent_close
    _crash = error_handling._crash
    _internal_error = error_handling._internal_error
    log_internal_error = error_handling.log_internal_error
    # throttle: publisher flow control
    set_blocked = throttle.set_blocked
    publish_received = throttle.publish_received
    control_throttle = throttle.control_throttle
    _maybe_block = throttle._maybe_block
    # heartbeat
    _schedule_heartbeat = heartbeat._schedule_heartbeat
    _heartbeat_tick = heartbeat._heartbeat_tick

    # -- socket and timers -----------------------------------------------------------------------------------
    def abort(self, *, graceful: bool = False) -> None:
        """Close the socket now (after flushing what is queued when ``graceful``; otherwise a reset)."""
        if self.transport is None or self.closed:
            return
        if graceful:
            self.flush()
            self.transport.close()
        else:
            self.transport.abort()
        self.closed = True
        self.stopped = True
        self._teardown()

    def force_close(self, text: str) -> None:
        """The broker's state is going away under this connection (a reset): tell an open connection 320
        CONNECTION_FORCED, without the orderly teardown (nothing is requeued or deleted: the caller wipes
        everything). As RabbitMQ does, input is still read (and ignored) until the client's close-ok or the
        closing timeout, so a client still publishing sees the close rather than a reset socket."""
        if self.closed:
            return
        for ch in self.channels.values():
            ch.drop_content()
        self.channels.clear()
        self.info = None
        self._pending.clear()
        self._confirming.clear()
        if self.state in ("running", "opening"):
            self._out.clear()
            self._late.clear()
            self.write(framing.encode_close(0, 320, f"CONNECTION_FORCED - {text}".encode(), 0, 0))
            self.state = "closed"
            timeout = self.heartbeat if 0 < self.heartbeat < CLOSING_TIMEOUT else CLOSING_TIMEOUT
            self._set_timer(timeout, lambda: self.abort(graceful=True))
            return
        self.abort(graceful=True)

    def _close_later(self) -> None:
        """Stop reading and close the socket after :data:`SILENT_CLOSE_DELAY` seconds (flushing first)."""
        self.stopped = True
        if self.transport is not None and not self.closed:
            self.transport.pause_reading()
        self._teardown()
        self._set_timer(SILENT_CLOSE_DELAY, lambda: self.abort(graceful=True))

    def _set_timer(self, delay: float, fn: Any) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self._loop().call_later(delay, fn)

    @staticmethod
    def _loop() -> asyncio.AbstractEventLoop:
        return asyncio.get_event_loop()

    # -- input ------------------------------------------------------------------------------------------------
    def _protocol_header(self, header: bytes) -> bool:
        if header not in framing.ACCEPTED_HEADERS:
            self.broker.report_problem(f"connection {self.peer or '?'} sent protocol header {header!r}, not AMQP 0-9-1")
            self.write(framing.refusal_header(header, sasl=self.rules.sasl_refusal_header))
            self.abort(graceful=True)
            return False
        props = server_properties(self.broker.profile.server_version)
        self.write(encode_connection_start(props, b"PLAIN AMQPLAIN", b"en_US"))
        self.state = "starting"
        return True

    def _handshake_timeout(self) -> None:
        self._timer = None
        if self.state in ("header", "starting", "tuning", "opening") and not self.closed:
            log.info("handshake timeout from %s", self.peer)
            self.abort(graceful=True)

    # -- lifecycle -------------------------------------------------------------------------------------------
    def _teardown(self) -> None:
        """Release the broker side: channels closed (unacked requeued), exclusive queues dropped."""
        channels, info = list(self.channels.values()), self.info
        self.channels.clear()
        self.info = None
        try:
            for ch in channels:
                ch.drop_content()
                ch.release()
            if info is not None:
                self.broker.close_connection(info)
        except Exception as exc:  # never let a bug escape into the event loop
            self.log_internal_error("releasing a connection", exc)

    def confirms_waiting(self, ch: ChannelHandler) -> None:
        """``ch`` holds confirms: they go out when the current batch of input is handled (or at the next flush)."""
        self._confirming[ch] = None
        self.server.dirty.add(self)

    def flush_confirms(self) -> None:
        """Send every channel's coalesced confirms."""
        while self._confirming:
            ch = next(iter(self._confirming))
            del self._confirming[ch]
            ch.flush_confirms()

    def channel_closing(self, ch: ChannelHandler) -> None:
        """A client's channel.close was handled: close-ok goes out when the reader is done (see _process)."""
        self._closing_channels.append(ch)

    def channel_gone(self, number: int) -> None:
        self.channels.pop(number, None)
        if self.info is not None:
            self.info.sessions.pop(number, None)
