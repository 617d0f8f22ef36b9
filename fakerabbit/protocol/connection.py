"""One client connection, modelled on RabbitMQ's ``rabbit_reader``: the asyncio protocol, its state and its
lifecycle (socket, timers, teardown), composed of collaborators that own the rest of the reader's state:

* :class:`~fakerabbit.protocol.output.Output`: coalesced writes, TCP back-pressure, batched confirms;
* :class:`~fakerabbit.protocol.dispatch.Dispatcher`: the frame reader, frame dispatch to channel 0 and the
  channels, what one chunk of input leaves behind;
* :class:`~fakerabbit.protocol.channel0.Channel0`: the connection class's methods (start/tune/open, close) and
  what the client said in the handshake;
* :class:`~fakerabbit.protocol.error_handling.ErrorHandler`: how an error ends the connection;
* :class:`~fakerabbit.protocol.throttle.Throttle`: publisher flow control under resource alarms;
* :class:`~fakerabbit.protocol.heartbeat.HeartbeatMonitor`: heartbeats, in real time.

None of them imports this module: each declares, as a ``Protocol``, the little it needs of the connection, and
:class:`AMQPConnection` implements those. What the connection needs of its listener is
:class:`ConnectionListener`.

Connection states follow the reader's: ``header`` (waiting for the protocol header), ``starting`` (start sent),
``tuning`` (tune sent), ``opening`` (tune-ok received), ``running``, and ``closed`` (a close was exchanged or
sent: only ``connection.close`` / ``close-ok`` on channel 0 are still read, until the client closes the socket
or a timeout passes).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
from collections.abc import Callable, Set
from typing import Any, Protocol

from fakerabbit.broker import errors
from fakerabbit.broker.broker import Broker, ConnectionInfo
from fakerabbit.broker.profile import Profile
from fakerabbit.broker.session import Session, SessionSink
from fakerabbit.protocol import framing
from fakerabbit.protocol.addresses import host_port, url_host
from fakerabbit.protocol.channel import ChannelHandler
from fakerabbit.protocol.channel0 import CHANNEL_MAX, FRAME_MAX, HEARTBEAT, Channel0
from fakerabbit.protocol.codec import encode_connection_start
from fakerabbit.protocol.dispatch import Dispatcher
from fakerabbit.protocol.error_handling import CLOSING_TIMEOUT, PROBLEM_CODES, ErrorHandler
from fakerabbit.protocol.handshake import server_properties
from fakerabbit.protocol.heartbeat import HEARTBEAT_TIMEOUT_INTERVALS, HeartbeatMonitor
from fakerabbit.protocol.output import OUT_FLUSH_BYTES, Output
from fakerabbit.protocol.throttle import Alarms, Throttle

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
    "ConnectionListener",
]

log = logging.getLogger("fakerabbit")

#: rabbit_reader's ?SILENT_CLOSE_DELAY: after a handshake error or a fatal frame error the socket is closed this
#: many seconds later (read when a close starts, so a test may shorten it on this module).
SILENT_CLOSE_DELAY = 3.0
#: rabbit's handshake_timeout: a client must get to open-ok within this many seconds.
HANDSHAKE_TIMEOUT = 10.0


class ConnectionListener(Protocol):
    """What a connection needs of the listener that accepted it
    (:class:`~fakerabbit.protocol.listener.Listener`)."""

    @property
    def broker(self) -> Broker: ...

    @property
    def connections(self) -> set[AMQPConnection]:
        """The open connections (a connection adds and removes itself)."""
        ...

    @property
    def dirty(self) -> set[AMQPConnection]:
        """The connections with frames to write at the end of the event (see :meth:`flush`)."""
        ...

    @property
    def alarms(self) -> Alarms: ...

    @property
    def loopback_users(self) -> Set[str]: ...

    @property
    def on_inbound(self) -> Callable[[], object] | None:
        """Called before each batch of client bytes is handled."""
        ...

    def flush(self) -> None:
        """Write what every dirty connection has queued."""
        ...


#: what one read takes at most (asyncio's own ``max_size`` for a socket read)
READ_BUFFER = 262144
_read_buffers = threading.local()


def _read_buffer() -> memoryview:
    """This thread's read buffer. The loop reads into it and the connection copies the bytes out at once, so the
    connections of one loop (one thread) share it; asyncio's plain ``recv`` would allocate a fresh 256 KiB object
    per read (an mmap, a page fault, an mremap and a munmap: a few µs for every small read)."""
    view: memoryview | None = getattr(_read_buffers, "view", None)
    if view is None:
        view = _read_buffers.view = memoryview(bytearray(READ_BUFFER))
    return view


_start_frames: dict[int, tuple[Profile, bytes]] = {}


def _connection_start(profile: Profile) -> bytes:
    """The ``connection.start`` frame of ``profile``'s broker (the same for every connection: encoded once)."""
    cached = _start_frames.get(id(profile))
    if cached is None or cached[0] is not profile:
        if len(_start_frames) >= 64:  # profiles made on the fly (dataclasses.replace in tests): keep it bounded
            _start_frames.clear()
        frame = encode_connection_start(server_properties(profile), b"PLAIN AMQPLAIN", b"en_US")
        cached = _start_frames[id(profile)] = (profile, frame)
    return cached[1]


class AMQPConnection(asyncio.BufferedProtocol):
    """asyncio protocol speaking AMQP 0-9-1 to one client."""

    def __init__(self, server: ConnectionListener) -> None:
        self.server = server
        self._inbuf = _read_buffer()
        broker = self.broker = server.broker
        #: The wire rules of the RabbitMQ version the broker behaves as.
        rules = self.rules = broker.profile.amqp
        self.transport: asyncio.Transport | None = None
        self.state = "header"
        self._header = b""
        self.channels: dict[int, ChannelHandler] = {}
        self.info: ConnectionInfo | None = None
        self.vhost = ""
        self.channel_max = CHANNEL_MAX
        self.frame_max = FRAME_MAX
        #: The negotiated heartbeat interval in seconds (0: none).
        self.heartbeat = 0
        #: No more input is read (a fatal error or the silent-close delay is running).
        self.stopped = False
        #: The socket is gone (or going): nothing more is written.
        self.closed = False
        self._timer: asyncio.TimerHandle | None = None
        self.peer = ""
        #: The client's IP address ("" if the transport has none).
        self.peer_ip = ""
        # the collaborators
        self.output = Output(functools.partial(server.dirty.add, self))
        self.heartbeats = HeartbeatMonitor(self.output, self._missed_heartbeats)
        self.error_handler = ErrorHandler(self, self.output, broker.report_problem, unicode=rules.unicode_texts)
        self.throttle = Throttle(self, server.alarms, self.output, self.heartbeats, server.flush)
        self.channel0 = Channel0(self, self.output, broker, server.loopback_users)
        self.dispatcher = Dispatcher(
            self,
            self.channels,
            self.channel0,
            self.error_handler,
            self.output,
            self.throttle,
            server.alarms,
            frame_min_size=rules.frame_min_size,
            unicode=rules.unicode_texts,
        )
        #: The listener calls it at the end of each event (the writer's flush, bound once).
        self.flush: Callable[[], None] = self.output.flush
        self._feed = self.dispatcher.reader.feed
        self._process = self.dispatcher.process

    # -- what others read -------------------------------------------------------------------------------------
    @property
    def reader(self) -> framing.FrameReader:
        """The bytes read and not yet handled."""
        return self.dispatcher.reader

    @property
    def user(self) -> str:
        return self.channel0.user

    @property
    def client_properties(self) -> dict[str, Any]:
        return self.channel0.client_properties

    @property
    def capabilities(self) -> dict[str, Any]:
        return self.channel0.capabilities

    @property
    def blocked_capable(self) -> bool:
        return self.channel0.capabilities.get("connection.blocked") is True

    @property
    def running(self) -> bool:
        """Open (open-ok sent) and not closing."""
        return self.state == "running" and not self.closed

    @property
    def write_paused(self) -> bool:
        """TCP back-pressure: the client does not read what it is sent."""
        return self.output.paused

    # -- asyncio.Protocol -------------------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's transports are not asyncio.Transport
        self.output.transport = self.transport
        peer = transport.get_extra_info("peername")
        if isinstance(peer, tuple):
            self.peer_ip, port = host_port(peer)  # IPv4-mapped as IPv4; "[::1]:port" as RabbitMQ names it
            self.peer = f"{url_host(self.peer_ip)}:{port}"
        self.server.connections.add(self)
        self._timer = asyncio.get_event_loop().call_later(HANDSHAKE_TIMEOUT, self._handshake_timeout)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._inbuf

    def buffer_updated(self, nbytes: int) -> None:
        self.data_received(self._inbuf[:nbytes].tobytes())

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        self.heartbeats.received()
        if self.stopped:
            return
        server = self.server
        if server.on_inbound is not None:
            server.on_inbound()  # the following clock fires timers that fell due before this command
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
                self._feed(data)
            self._process()
        finally:
            server.flush()

    def connection_lost(self, exc: Exception | None) -> None:
        self._socket_gone()
        self.server.connections.discard(self)
        self.server.dirty.discard(self)
        if self._timer is not None:
            self._timer.cancel()
        self.teardown()
        self.dispatcher.reader.clear()  # unread input goes now, not at the next garbage collection
        self._header = b""
        self.server.flush()

    def pause_writing(self) -> None:
        self.output.paused = True

    def resume_writing(self) -> None:
        self.output.paused = False
        try:
            for ch in list(self.channels.values()):
                ch.resume_deliveries()
        except Exception as exc:  # never let a bug escape into the event loop
            self.error_handler.internal_error(exc)
        self.server.flush()

    # -- the public surface (listener, management, fault injection) -------------------------------------------
    def abort(self, *, graceful: bool = False) -> None:
        """Close the socket now (after flushing what is queued when ``graceful``; otherwise a reset)."""
        if self.transport is None or self.closed:
            return
        if graceful:
            self.output.flush()
            self.transport.close()
        else:
            self.transport.abort()
        self._socket_gone()
        self.stopped = True
        self.teardown()

    def close_by_server(self, code: int, text: str) -> None:
        """Fault injection / management API: close this connection with connection.close."""
        exc = errors.ConnectionForced(text)
        exc.code = code
        if self.state in ("running", "opening"):
            self.error_handler.handle_exception(exc)
        else:
            self.abort(graceful=True)
        self.server.flush()

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
        self.dispatcher.forget()
        self.output.forget_confirms()
        if self.state in ("running", "opening"):
            self.output.discard()
            self.output.write(framing.encode_close(0, 320, f"CONNECTION_FORCED - {text}".encode(), 0, 0))
            self.state = "closed"
            self._set_timer(self._closing_timeout(), self._abort_gracefully)
            return
        self.abort(graceful=True)

    # -- for the collaborators ---------------------------------------------------------------------------------
    def teardown(self) -> None:
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
            self.error_handler.log_internal_error("releasing a connection", exc)

    def tuned(self, channel_max: int, frame_max: int, heartbeat: int) -> None:
        self.frame_max, self.channel_max, self.heartbeat = frame_max, channel_max, heartbeat
        self.dispatcher.reader.frame_max = frame_max
        if heartbeat:
            self.heartbeats.start(heartbeat)

    def opened(self, info: ConnectionInfo, vhost: str) -> None:
        self.info = info
        self.vhost = vhost
        info.close = self.close_by_server
        info.drop = self.abort
        if self._timer is not None:  # the handshake timeout
            self._timer.cancel()
            self._timer = None

    def await_socket_close(self) -> None:
        self._set_timer(CLOSING_TIMEOUT, self._abort_gracefully)

    def await_close_ok(self) -> None:
        self.state = "closed"
        self.teardown()
        self._set_timer(self._closing_timeout(), self._abort_gracefully)

    def close_later(self, *, close_sent: bool = False) -> None:
        """Stop reading and close the socket after :data:`SILENT_CLOSE_DELAY` seconds (flushing first)."""
        if close_sent:
            self.state = "closed"
        self.stopped = True
        self.heartbeats.stop()
        if self.transport is not None and not self.closed:
            self.transport.pause_reading()
        self.teardown()
        self._set_timer(SILENT_CLOSE_DELAY, self._abort_gracefully)

    def hold_input(self) -> None:
        if self.transport is not None:
            self.transport.pause_reading()

    def release_input(self) -> None:
        if self.transport is not None and not self.stopped:
            self.transport.resume_reading()
        self._process()

    def new_channel(self, number: int) -> ChannelHandler:
        return ChannelHandler(self, self.output, self.rules, number)

    def open_session(self, number: int, sink: SessionSink) -> Session:
        info = self.info
        assert info is not None
        session = info.sessions[number] = Session(info, number, self.broker.vhost(info.vhost), sink)
        return session

    def channel_closing(self, ch: ChannelHandler) -> None:
        self.dispatcher.channel_closing(ch)

    def channel_gone(self, number: int) -> None:
        self.channels.pop(number, None)
        if self.info is not None:
            self.info.sessions.pop(number, None)

    # -- internals ---------------------------------------------------------------------------------------------
    def _socket_gone(self) -> None:
        self.closed = True
        self.output.close()
        self.heartbeats.stop()

    def _abort_gracefully(self) -> None:
        self.abort(graceful=True)

    def _closing_timeout(self) -> float:
        """How long to wait for close-ok: the heartbeat interval, at most :data:`CLOSING_TIMEOUT`."""
        return self.heartbeat if 0 < self.heartbeat < CLOSING_TIMEOUT else CLOSING_TIMEOUT

    def _set_timer(self, delay: float, fn: Callable[[], object]) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = asyncio.get_event_loop().call_later(delay, fn)

    def _protocol_header(self, header: bytes) -> bool:
        if header not in framing.ACCEPTED_HEADERS:
            self.broker.report_problem(f"connection {self.peer or '?'} sent protocol header {header!r}, not AMQP 0-9-1")
            self.output.write(framing.refusal_header(header, sasl=self.rules.sasl_refusal_header))
            self.abort(graceful=True)
            return False
        self.output.write(_connection_start(self.broker.profile))
        self.state = "starting"
        return True

    def _handshake_timeout(self) -> None:
        self._timer = None
        if self.state in ("header", "starting", "tuning", "opening") and not self.closed:
            log.info("handshake timeout from %s", self.peer)
            self.abort(graceful=True)

    def _missed_heartbeats(self) -> None:
        log.info("missed heartbeats from %s, closing", self.peer)
        self.broker.report_problem(
            f"connection {self.peer or '?'} missed heartbeats (heartbeat {self.heartbeat} s): closed"
        )
        self.abort(graceful=True)
