"""One client connection, modelled on RabbitMQ's ``rabbit_reader``: handshake, channel 0, frame dispatch,
errors, heartbeats, flow control (resource alarms, TCP back-pressure) and coalesced writes.

Connection states follow the reader's: ``header`` (waiting for the protocol header), ``starting`` (start sent),
``tuning`` (tune sent), ``opening`` (tune-ok received), ``running``, and ``closed`` (a close was exchanged or
sent: only ``connection.close`` / ``close-ok`` on channel 0 are still read, until the client closes the socket
or a timeout passes). How an error ends the connection depends on the state, exactly as in RabbitMQ 3.10:

* running or opening: ``connection.close`` with the code, text and offending method ids, then wait for
  ``close-ok`` (at most the heartbeat interval, capped at 30 s);
* during the handshake: no frame at all, the socket is closed after RabbitMQ's 3 s "silent close" delay —
  except a refused login by a client with the ``authentication_failure_close`` capability, which is told 403;
* a frame that is too large or has a bad frame-end octet: the close frame (if running), then the socket is
  closed after 3 s whatever the client does;
* a method id the framing does not know, or a malformed field table in method arguments: RabbitMQ's reader
  crashes, so the socket closes at once without a close frame.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pamqp import base, commands

from fakerabbit.broker import errors
from fakerabbit.broker.broker import ConnectionInfo
from fakerabbit.clock import real_monotonic
from fakerabbit.protocol import erlfmt, framing
from fakerabbit.protocol.channel import ChannelHandler
from fakerabbit.protocol.codec import (
    MethodDecodeError,
    decode_args,
    encode_connection_start,
)
from fakerabbit.protocol.erlfmt import Atom
from fakerabbit.protocol.handshake import check_tune_ok, parse_amqplain, parse_plain, server_properties

if TYPE_CHECKING:
    from fakerabbit.server import Server

log = logging.getLogger("fakerabbit")

_monotonic = real_monotonic  # never frozen or shifted by freezegun / time-machine (see fakerabbit.clock)

CHANNEL_MAX = 2047
FRAME_MAX = 131072
HEARTBEAT = 60
#: rabbit_reader's ?SILENT_CLOSE_DELAY: after a handshake error or a fatal frame error the socket is closed this
#: many seconds later.
SILENT_CLOSE_DELAY = 3.0
#: rabbit_reader's ?CLOSING_TIMEOUT: the longest the broker waits for the client to close after a close.
CLOSING_TIMEOUT = 30.0
#: rabbit's handshake_timeout: a client must get to open-ok within this many seconds.
HANDSHAKE_TIMEOUT = 10.0
#: A peer that sends nothing for this many heartbeat intervals is dropped (no close frame), as RabbitMQ 3.10.8
#: drops a client that stops talking right after connection.open (rabbit_heartbeat checks once an interval).
HEARTBEAT_TIMEOUT_INTERVALS = 3
#: Content queued for one connection within one event is handed to the transport once it reaches this many
#: bytes, so that the transport's pause_writing (TCP back-pressure) stops further deliveries before the event ends.
OUT_FLUSH_BYTES = 65536

#: Reply codes recorded as problems: the client broke the protocol (501-505) or asked for something the fake
#: does not do (540 NOT_IMPLEMENTED, 541 INTERNAL_ERROR).
PROBLEM_CODES = frozenset({501, 502, 503, 504, 505, 540, 541})

_HANDSHAKE_STATES = ("starting", "tuning")
_CONNECTION_CLASS = 10


class AMQPConnection(asyncio.Protocol):
    """asyncio protocol speaking AMQP 0-9-1 to one client."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.broker = server.broker
        self.transport: asyncio.Transport | None = None
        self.state = "header"
        self._header = b""
        self.reader = framing.FrameReader(framing.FRAME_MIN_SIZE)
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
        self.write_paused = False
        # channel methods waiting for the reader to finish the current chunk of input
        self._pending: list[tuple[ChannelHandler, Callable[[], None]]] = []
        self._late: list[bytes] = []
        self._closing_channels: list[ChannelHandler] = []
        self._channel_failure: errors.AMQPError | None = None
        self._dead_channels: set[int] = set()
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
            self.peer = f"{peer[0]}:{peer[1]}"
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
        self.server.flush()

    def pause_writing(self) -> None:
        self.write_paused = True

    def resume_writing(self) -> None:
        self.write_paused = False
        try:
            for ch in list(self.channels.values()):
                ch.resume_deliveries()
        except Exception as exc:  # never let a bug escape into the event loop
            self._internal_error(exc)
        self.server.flush()

    def _internal_error(self, exc: Exception) -> None:
        log.exception("internal error in a connection")
        self.broker.report_problem(f"fakerabbit internal error: {exc!r}")
        self.handle_exception(errors.InternalError(""))

    # -- output -----------------------------------------------------------------------------------------------
    def write(self, data: bytes) -> None:
        if self.closed:
            return
        self._out.append(data)
        self.server.dirty.add(self)

    def write_many(self, parts: list[bytes]) -> None:
        if self.closed:
            return
        self._out.extend(parts)
        self.server.dirty.add(self)
        # A basic.consume or resume_writing can dispatch a whole backlog in one event: without this, all of it
        # would sit in _out (and then in the transport's buffer) before write_paused could ever be set.
        self._out_bytes += sum(map(len, parts))
        if self._out_bytes >= OUT_FLUSH_BYTES:
            self.flush()

    def write_late(self, data: bytes) -> None:
        """Queue a frame to go out after the reply to the method being handled (see :meth:`flush`)."""
        if not self.closed:
            self._late.append(data)
            self.server.dirty.add(self)

    def send(self, channel: int, method: base.Frame) -> None:
        self.write(framing.encode_method(channel, method))

    def flush(self) -> None:
        if self._late:
            self._out.extend(self._late)
            self._late.clear()
        self._out_bytes = 0
        if self._out and self.transport is not None and not self.closed:
            data = b"".join(self._out)
            self._out.clear()
            self._last_send = _monotonic()
            self.transport.write(data)
        else:
            self._out.clear()

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

    def _close_later(self, delay: float) -> None:
        """Stop reading and close the socket after ``delay`` seconds (flushing first)."""
        self.stopped = True
        if self.transport is not None and not self.closed:
            self.transport.pause_reading()
        self._teardown()
        self._set_timer(delay, lambda: self.abort(graceful=True))

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
            self.write(framing.PROTOCOL_HEADER)
            self.abort(graceful=True)
            return False
        props = server_properties(self.broker.profile.server_version)
        self.write(encode_connection_start(props, b"PLAIN AMQPLAIN", b"en_US"))
        self.state = "starting"
        return True

    def _process(self) -> None:
        """Handle every complete frame in the buffer, as RabbitMQ's reader handles one chunk of input.

        The reader parses and assembles frames itself (framing errors, channel 0, content assembly, channel
        counting) while channel methods run in the channel processes: they are collected here and run after the
        reader's work on the chunk (or before a channel-0 method). So an error the reader finds wins over a hard
        error a channel raises for an earlier frame of the same chunk; the channel's replies and soft errors
        still go out first, as RabbitMQ's channels finish their mailboxes before the connection closes.
        """
        failure: errors.AMQPError | None = None
        fatal: str | None = None
        while not self.stopped and not self.closed and not self.blocked:
            try:
                frame = self.reader.next_frame()
            except framing.FrameTooLarge as exc:
                too_large: erlfmt.Term = (Atom("frame_too_large"), exc.size, exc.limit)
                fatal = erlfmt.frame_error_text(exc.type, b"", too_large)
                break
            except framing.BadFrameEnd as exc:
                bad_end: erlfmt.Term = (Atom("invalid_frame_end_marker"), exc.end)
                fatal = erlfmt.frame_error_text(exc.type, exc.payload, bad_end)
                break
            if frame is None:
                break
            try:
                self._handle_frame(frame)
            except framing.UnknownMethod as exc:
                self._pending.clear()
                self._crash(str(exc))
                return
            except errors.AMQPError as exc:
                failure = exc
                break
            except Exception as exc:  # never let a bug take the broker down
                log.exception("internal error handling a frame")
                self.broker.report_problem(f"fakerabbit internal error: {exc!r}")
                failure = errors.InternalError("")
                break
        self._flush_pending()
        channel_failure, self._channel_failure = self._channel_failure, None
        self._dead_channels.clear()
        closing, self._closing_channels = self._closing_channels, []
        if fatal is None and failure is None and channel_failure is None:
            # rabbit_reader answers channel_closing (then the channel sends close-ok) once it is done with the
            # chunk; an error in the chunk closes the connection first, and no close-ok goes out
            for ch in closing:
                ch.send(commands.Channel.CloseOk())
                self.channel_gone(ch.number)
        if fatal is not None:
            self._fatal_frame_error(fatal)
        elif failure is not None:
            self.handle_exception(failure)
        elif channel_failure is not None:
            self.handle_exception(channel_failure)

    def _flush_pending(self) -> None:
        """Run the channel methods the reader handed on (see :meth:`_process`)."""
        while self._pending and not self.closed:
            ch, fn = self._pending.pop(0)
            if ch.number in self._dead_channels or self.state == "closed":
                continue
            try:
                fn()
                if self._late:
                    self._out.extend(self._late)
                    self._late.clear()
            except errors.AMQPError as exc:  # a hard error: this channel is dead, the connection will close
                self._dead_channels.add(ch.number)
                if self._channel_failure is None:
                    self._channel_failure = exc
            except Exception as exc:  # never let a bug take the broker down
                log.exception("internal error handling a channel method")
                self.broker.report_problem(f"fakerabbit internal error: {exc!r}")
                self._dead_channels.add(ch.number)
                if self._channel_failure is None:
                    self._channel_failure = errors.InternalError("")

    def _handshake_timeout(self) -> None:
        self._timer = None
        if self.state in ("header", "starting", "tuning", "opening") and not self.closed:
            log.info("handshake timeout from %s", self.peer)
            self.abort(graceful=True)

    # -- errors -----------------------------------------------------------------------------------------------
    def handle_exception(self, exc: errors.AMQPError) -> None:
        """``rabbit_reader:handle_exception/3``: what an error does depends on the connection state."""
        if self.state == "closed" or self.closed:
            return
        if self.state in _HANDSHAKE_STATES:
            if self.state == "starting" and isinstance(exc, errors.AccessRefusedHard):
                if self.capabilities.get("authentication_failure_close") is True:
                    self._send_close(exc)
                self._silent_close(exc.reply_text, report=False)
            else:
                self._silent_close(exc.reply_text)
            return
        self._send_close(exc)
        self.state = "closed"
        self._teardown()
        timeout = self.heartbeat if 0 < self.heartbeat < CLOSING_TIMEOUT else CLOSING_TIMEOUT
        self._set_timer(timeout, lambda: self.abort(graceful=True))

    def _send_close(self, exc: errors.AMQPError) -> None:
        class_id, method_id = exc.method_ids
        if exc.code in PROBLEM_CODES:
            method = commands.INDEX_MAPPING.get((class_id << 16) | method_id) if class_id else None
            where = f" (in reply to {getattr(method, 'name', method)})" if method is not None else ""
            self.broker.report_problem(f"connection {self.peer or '?'} closed with {exc.reply_text}{where}")
        self.write(
            framing.encode_close(0, exc.code, exc.reply_text.encode("utf-8", "surrogateescape"), class_id, method_id)
        )

    def _fatal_frame_error(self, text: str) -> None:
        """rabbit_reader:fatal_frame_error/5: report (if opening or running), then close after the silent-close
        delay whatever the client does."""
        if self.state in ("opening", "running"):
            self._send_close(errors.FrameError(text))
            self.state = "closed"
        else:
            self.broker.report_problem(f"connection {self.peer or '?'}: FRAME_ERROR - {text}")
        self._close_later(SILENT_CLOSE_DELAY)

    def _silent_close(self, why: str, *, report: bool = True) -> None:
        """A handshake error: no close frame; the socket goes after the silent-close delay."""
        if report:
            self.broker.report_problem(f"connection {self.peer or '?'} refused during the handshake: {why}")
        self._close_later(SILENT_CLOSE_DELAY)

    def _crash(self, why: str) -> None:
        """What RabbitMQ's reader does when it crashes: the socket closes at once, without a close frame."""
        self.broker.report_problem(f"connection {self.peer or '?'} dropped (RabbitMQ's reader would crash): {why}")
        self.abort(graceful=True)

    def close_by_server(self, code: int, text: str) -> None:
        """Fault injection / management API: close this connection with connection.close."""
        exc = errors.ConnectionForced(text)
        exc.code = code
        if self.state in ("running", "opening"):
            self.handle_exception(exc)
        else:
            self.abort(graceful=True)
        self.server.flush()

    def _teardown(self) -> None:
        """Release the broker side: channels closed (unacked requeued), exclusive queues dropped."""
        channels, info = list(self.channels.values()), self.info
        self.channels.clear()
        self.info = None
        try:
            for ch in channels:
                ch.release()
            if info is not None:
                self.broker.close_connection(info)
        except Exception as exc:  # never let a bug escape into the event loop
            log.exception("internal error releasing a connection")
            self.broker.report_problem(f"fakerabbit internal error: {exc!r}")

    # -- frames -----------------------------------------------------------------------------------------------
    def _handle_frame(self, frame: framing.RawFrame) -> None:
        """``rabbit_reader:handle_frame/4``."""
        ftype, channel, payload = frame.type, frame.channel, frame.payload
        if self.state == "closed":
            if channel == 0 and ftype == framing.FRAME_METHOD and len(payload) >= 4:
                cls = framing.method_class(payload)
                try:
                    method = decode_args(cls, payload[4:])
                except MethodDecodeError:
                    return
                if isinstance(method, commands.Connection.Close):
                    self.send(0, commands.Connection.CloseOk())
                elif isinstance(method, commands.Connection.CloseOk):
                    self.abort(graceful=True)
            return
        if channel == 0:
            if ftype == framing.FRAME_METHOD and len(payload) >= 4:
                self._method0(payload)
            elif ftype == framing.FRAME_HEARTBEAT and not payload:
                return
            elif ftype == framing.FRAME_BODY or (ftype == framing.FRAME_HEADER and len(payload) >= 12):
                raise errors.UnexpectedFrame(erlfmt.unexpected_frame_text(ftype, payload))
            else:
                raise errors.FrameError(erlfmt.frame_error_text(ftype, payload, Atom("unknown_frame")))
            return
        if self.state != "running":
            raise errors.UnexpectedFrame(erlfmt.unexpected_frame_text(ftype, payload))
        if ftype == framing.FRAME_METHOD and len(payload) >= 4:
            framing.method_class(payload)  # unknown ids: the reader crashes before the channel sees it
        elif ftype == framing.FRAME_HEARTBEAT and not payload:
            raise errors.UnexpectedFrame(erlfmt.unexpected_frame_text(ftype, payload))
        elif not (ftype == framing.FRAME_BODY or (ftype == framing.FRAME_HEADER and len(payload) >= 12)):
            raise errors.FrameError(erlfmt.frame_error_text(ftype, payload, Atom("unknown_frame")))
        ch = self.channels.get(channel)
        if ch is None:
            if len(self.channels) >= self.channel_max:
                raise errors.NotAllowed(
                    f"number of channels opened ({len(self.channels)}) has reached the negotiated "
                    f"channel_max ({self.channel_max})"
                )
            ch = self.channels[channel] = ChannelHandler(self, channel)
        deferred = ch.handle_frame(ftype, payload)
        if deferred is not None:
            self._pending.append((ch, deferred))
        if ftype != framing.FRAME_METHOD and not self.closed:
            self.publish_received()

    def _method0(self, payload: bytes) -> None:
        """``rabbit_reader:handle_method0/3``: decode failures are internal errors here (541, ids 0 0)."""
        cls = framing.method_class(payload)
        index = framing.method_index(payload)
        ids = (index >> 16, index & 0xFFFF)
        try:
            method = decode_args(cls, payload[4:])
        except MethodDecodeError as exc:
            # handle_method0 catches what decoding throws: a field table that does not parse is a crash inside
            # its try (541 below), unlike on other channels where it kills the reader
            if exc.kind == "utf8":
                raise errors.FrameError("Malformed UTF-8 in shortstr").at(ids) from None
            raise errors.InternalError("") from None
        self._flush_pending()  # the channels get through what they were sent before this
        try:
            self._connection_method(method)
        except errors.AMQPError as exc:
            if exc.method_ids == (0, 0) and not isinstance(exc, errors.AccessRefusedHard):
                exc.at(ids)
            raise

    def _connection_method(self, method: base.Frame) -> None:
        state = self.state
        if isinstance(method, commands.Connection.StartOk) and state == "starting":
            self._start_ok(method)
        elif isinstance(method, commands.Connection.TuneOk) and state == "tuning":
            self._tune_ok(method)
        elif isinstance(method, commands.Connection.Open) and state == "opening":
            self._open(method)
        elif isinstance(method, commands.Connection.Close) and state == "running":
            self._teardown()
            self.send(0, commands.Connection.CloseOk())
            self.state = "closed"
            self._set_timer(CLOSING_TIMEOUT, lambda: self.abort(graceful=True))
        elif isinstance(method, commands.Connection.UpdateSecret) and state == "running":
            self.send(0, commands.Connection.UpdateSecretOk())
        else:
            raise errors.ChannelError(f"unexpected method in connection state {state}")

    def _start_ok(self, m: commands.Connection.StartOk) -> None:
        props = m.client_properties if isinstance(m.client_properties, dict) else {}
        self.client_properties = dict(props)
        caps = self.client_properties.get("capabilities")
        self.capabilities = dict(caps) if isinstance(caps, dict) else {}
        mechanism = m.mechanism or ""
        response = m.response if isinstance(m.response, bytes) else str(m.response or "").encode()
        if mechanism == "PLAIN":
            creds = parse_plain(response)
        elif mechanism == "AMQPLAIN":
            creds = parse_amqplain(response)
        else:
            raise errors.CommandInvalid(f"unknown authentication mechanism '{mechanism}'")
        if creds is None:
            raise errors.SyntaxError_(f"{mechanism} response invalid")
        user, password = creds
        if not self.broker.auth.authenticate(user, password):
            raise errors.AccessRefusedHard(
                f"Login was refused using authentication mechanism {mechanism}. For details see the broker logfile."
            )
        self.user = user
        self.send(0, commands.Connection.Tune(channel_max=CHANNEL_MAX, frame_max=FRAME_MAX, heartbeat=HEARTBEAT))
        self.state = "tuning"

    def _tune_ok(self, m: commands.Connection.TuneOk) -> None:
        frame_max, channel_max, heartbeat = m.frame_max or 0, m.channel_max or 0, m.heartbeat or 0
        check_tune_ok(frame_max, channel_max, CHANNEL_MAX, FRAME_MAX)
        self.frame_max, self.channel_max, self.heartbeat = frame_max, channel_max, heartbeat
        self.reader.frame_max = frame_max
        self.state = "opening"
        if heartbeat:
            self._schedule_heartbeat()

    def _open(self, m: commands.Connection.Open) -> None:
        vhost = m.virtual_host or ""
        self.info = self.broker.open_connection(
            self.user, vhost, peer=self.peer, client_properties=self.client_properties
        )
        self.vhost = vhost
        self.info.close = self.close_by_server
        self.info.drop = self.abort
        self.info.blocked = self.set_blocked
        self.send(0, commands.Connection.OpenOk())
        self.state = "running"
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def channel_closing(self, ch: ChannelHandler) -> None:
        """A client's channel.close was handled: close-ok goes out when the reader is done (see _process)."""
        self._closing_channels.append(ch)

    def channel_gone(self, number: int) -> None:
        self.channels.pop(number, None)
        if self.info is not None:
            self.info.sessions.pop(number, None)

    # -- flow control -------------------------------------------------------------------------------------------
    def set_blocked(self, blocked: bool, reason: str) -> None:
        """Fault injection: tell the client it is blocked / unblocked (nothing is held back)."""
        if self.blocked_capable and not self.closing and self.state == "running":
            self.send(0, commands.Connection.Blocked(reason) if blocked else commands.Connection.Unblocked())
            self.server.flush()

    def publish_received(self) -> None:
        """A content frame arrived: under a resource alarm this connection gets blocked."""
        if self.server.alarms.blocking:
            self.should_block = True
            self._maybe_block()

    def control_throttle(self) -> None:
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
            self._last_recv = _monotonic()
            self._process()
        elif not self.blocked:
            self._maybe_block()

    def _maybe_block(self) -> None:
        if not (self.should_block and self.server.alarms.blocking) or self.blocked:
            return
        self.blocked = True
        if self.transport is not None:
            self.transport.pause_reading()
        if self.blocked_capable and not self.blocked_sent:
            self.send(0, commands.Connection.Blocked(self.server.alarms.reason()))
            self.blocked_sent = True

    # -- heartbeats (real time, never the virtual clock) ----------------------------------------------------------
    def _schedule_heartbeat(self) -> None:
        self._hb_handle = self._loop().call_later(self.heartbeat / 2, self._heartbeat_tick)

    def _heartbeat_tick(self) -> None:
        # Timers run on the loop's clock, which freezegun may move; what counts is real elapsed time.
        if self.closed or self.stopped:
            return
        now = _monotonic()
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
