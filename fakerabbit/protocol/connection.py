"""One client connection: handshake, channel 0, heartbeats, errors, and coalesced writes."""

from __future__ import annotations

import asyncio
import logging
import struct
from typing import TYPE_CHECKING, Any

from pamqp import base, commands

from fakerabbit.broker import errors
from fakerabbit.broker.broker import ConnectionInfo
from fakerabbit.broker.fields import FieldError, decode_table, table_to_python
from fakerabbit.clock import real_monotonic
from fakerabbit.protocol import framing
from fakerabbit.protocol.channel import ChannelHandler
from fakerabbit.protocol.codec import reply_text

if TYPE_CHECKING:
    from fakerabbit.server import Server

log = logging.getLogger("fakerabbit")

_monotonic = real_monotonic  # never frozen or shifted by freezegun / time-machine (see fakerabbit.clock)

CHANNEL_MAX = 2047
FRAME_MAX = 131072
HEARTBEAT = 60

#: Reply codes recorded as problems: the client broke the protocol (501-505) or asked for something the fake
#: does not do (540 NOT_IMPLEMENTED, 541 INTERNAL_ERROR).
PROBLEM_CODES = frozenset({501, 502, 503, 504, 505, 540, 541})


def server_properties(version: str) -> dict[str, Any]:
    return {
        "capabilities": {
            "publisher_confirms": True,
            "exchange_exchange_bindings": True,
            "basic.nack": True,
            "consumer_cancel_notify": True,
            "connection.blocked": True,
            "consumer_priorities": True,
            "authentication_failure_close": True,
            "per_consumer_qos": True,
            "direct_reply_to": True,
        },
        "cluster_name": "rabbit@fakerabbit",
        "copyright": "Copyright (c) 2007-2024 Broadcom Inc and/or its subsidiaries",
        "information": "Licensed under the MPL 2.0. Website: https://rabbitmq.com",
        "platform": "Erlang/OTP 26.2.5",
        "product": "RabbitMQ",
        "version": version,
    }


class AMQPConnection(asyncio.Protocol):
    """asyncio protocol speaking AMQP 0-9-1 to one client."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.broker = server.broker
        self.transport: asyncio.Transport | None = None
        self.state = "header"
        self._header = b""
        self.reader = framing.FrameReader(FRAME_MAX)
        self.channels: dict[int, ChannelHandler] = {}
        self.info: ConnectionInfo | None = None
        self.user = ""
        self.channel_max = CHANNEL_MAX
        self.frame_max = FRAME_MAX
        self.heartbeat = 0
        self.client_properties: dict[str, Any] = {}
        self._out: list[bytes] = []
        self.closing = False
        self.closed = False
        self._last_recv = _monotonic()
        self._last_send = _monotonic()
        self._hb_handle: asyncio.TimerHandle | None = None
        self._close_timer: asyncio.TimerHandle | None = None
        self.peer = ""
        self.blocked_capable = False
        self.write_paused = False

    # -- asyncio.Protocol -------------------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        peer = transport.get_extra_info("peername")
        if isinstance(peer, tuple):
            self.peer = f"{peer[0]}:{peer[1]}"
        self.server.connections.add(self)

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        self._last_recv = _monotonic()
        if self.server.on_inbound is not None:
            self.server.on_inbound()
        try:
            if self.state == "header":
                self._header += data
                if len(self._header) < 8:
                    return
                header, data = self._header[:8], self._header[8:]
                self._header = b""
                if header != framing.PROTOCOL_HEADER:
                    self.broker.report_problem(
                        f"connection {self.peer or '?'} sent protocol header {header!r}, not AMQP 0-9-1"
                    )
                    self.write(framing.PROTOCOL_HEADER)
                    self.flush()
                    self.abort(graceful=True)
                    return
                self.send(
                    0,
                    commands.Connection.Start(
                        version_major=0,
                        version_minor=9,
                        server_properties=server_properties(self.broker.profile.server_version),
                        mechanisms="AMQPLAIN PLAIN",
                        locales="en_US",
                    ),
                )
                self.state = "start"
            if data:
                self.reader.feed(data)
                self._process()
        finally:
            self.server.flush()

    def _process(self) -> None:
        while not self.closed:
            try:
                frame = self.reader.next_frame()
            except errors.AMQPError as exc:
                self.fail(exc, 0, 0, fatal=True)
                return
            if frame is None:
                return
            try:
                self._handle_frame(frame)
            except errors.AMQPError as exc:
                self.fail(exc, *exc.method_ids, fatal=isinstance(exc, errors.FrameError))
            except Exception as exc:  # never let a bug take the broker down
                log.exception("internal error handling a frame")
                self.fail(errors.InternalError(f"fakerabbit internal error: {exc!r}"), 0, 0)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.server.connections.discard(self)
        self.server.dirty.discard(self)
        for handle in (self._hb_handle, self._close_timer):
            if handle is not None:
                handle.cancel()
        self._teardown()
        self.server.flush()

    def pause_writing(self) -> None:
        self.write_paused = True

    def resume_writing(self) -> None:
        self.write_paused = False

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

    def send(self, channel: int, method: base.Frame) -> None:
        self.write(framing.encode_method(channel, method))

    def flush(self) -> None:
        if self._out and self.transport is not None and not self.closed:
            data = b"".join(self._out)
            self._out.clear()
            self._last_send = _monotonic()
            self.transport.write(data)
        else:
            self._out.clear()

    def abort(self, *, graceful: bool = False) -> None:
        """Close the socket (after flushing when ``graceful``)."""
        if self.transport is None:
            return
        if graceful:
            self.flush()
            self.transport.close()
        else:
            self.transport.abort()
        self.closed = True
        self._teardown()

    # -- errors -----------------------------------------------------------------------------------------------
    def fail(self, exc: errors.AMQPError, class_id: int, method_id: int, *, fatal: bool = False) -> None:
        """A connection error: send connection.close with RabbitMQ's code and text, then close."""
        if self.closing or self.closed:
            return
        if exc.code in PROBLEM_CODES:
            method = commands.INDEX_MAPPING.get((class_id << 16) | method_id) if class_id else None
            where = f" (in reply to {getattr(method, 'name', method)})" if method is not None else ""
            self.broker.report_problem(f"connection {self.peer or '?'} closed with {exc.reply_text}{where}")
        self.send(
            0,
            commands.Connection.Close(
                reply_code=exc.code, reply_text=reply_text(exc.reply_text), class_id=class_id, method_id=method_id
            ),
        )
        self.closing = True
        self._teardown()
        if fatal or self.state in ("start", "tune"):
            self.flush()
            self.abort(graceful=True)
            return
        loop = asyncio.get_event_loop()
        self._close_timer = loop.call_later(1.0, self.abort)

    def close_by_server(self, code: int, text: str) -> None:
        """Fault injection / management API: close this connection with connection.close."""
        exc = errors.ConnectionForced(text)
        exc.code = code
        self.fail(exc, 0, 0)
        self.server.flush()

    def _teardown(self) -> None:
        """Release the broker side: channels closed (unacked requeued), exclusive queues dropped."""
        for ch in list(self.channels.values()):
            if not ch.session.closed:
                ch.session.close()
        self.channels.clear()
        if self.info is not None:
            self.broker.close_connection(self.info)
            self.info = None

    # -- frames -----------------------------------------------------------------------------------------------
    def _handle_frame(self, frame: framing.RawFrame) -> None:
        if frame.type == framing.FRAME_HEARTBEAT:
            if frame.channel != 0:
                raise errors.FrameError("heartbeat frame on non-zero channel")
            return
        if self.closing:
            if frame.channel == 0 and frame.type == framing.FRAME_METHOD:
                method = framing.decode_method(frame.payload)
                if isinstance(method, commands.Connection.CloseOk | commands.Connection.Close):
                    if isinstance(method, commands.Connection.Close):
                        self.send(0, commands.Connection.CloseOk())
                    self.abort(graceful=True)
            return
        if frame.channel == 0:
            if frame.type != framing.FRAME_METHOD:
                raise errors.UnexpectedFrame("expected method frame, got non method frame instead")
            method = framing.decode_method(frame.payload)
            self._connection_method(method)
            return
        if self.state != "opened":
            raise errors.CommandInvalid("channel frames before connection.open-ok")
        ch = self.channels.get(frame.channel)
        if frame.type == framing.FRAME_METHOD:
            method = framing.decode_method(frame.payload)
            if isinstance(method, commands.Channel.Open):
                self._open_channel(frame.channel, method)
                return
            if ch is None:
                raise errors.ChannelError(f"expected 'channel.open' on channel {frame.channel}").at(
                    (method.index >> 16, method.index & 0xFFFF)
                )
            ch.handle_method(method, frame.payload)
        else:
            if ch is None:
                raise errors.ChannelError(f"expected 'channel.open' on channel {frame.channel}")
            ch.handle_content(frame)

    def _open_channel(self, number: int, method: commands.Channel.Open) -> None:
        if number in self.channels:
            raise errors.ChannelError("second 'channel.open' seen").at((20, 10))
        if number > self.channel_max:
            raise errors.NotAllowed(f"channel number {number} exceeds negotiated channel_max {self.channel_max}").at(
                (20, 10)
            )
        assert self.info is not None
        ch = ChannelHandler(self, number)
        self.channels[number] = ch
        self.info.sessions[number] = ch.session
        self.send(number, commands.Channel.OpenOk())

    def channel_gone(self, number: int) -> None:
        self.channels.pop(number, None)
        if self.info is not None:
            self.info.sessions.pop(number, None)

    def _connection_method(self, method: base.Frame) -> None:
        ids = (method.index >> 16, method.index & 0xFFFF)
        try:
            self._connection_method_inner(method)
        except errors.AMQPError as exc:
            raise exc.at(ids) from None

    def _connection_method_inner(self, method: base.Frame) -> None:
        state = self.state
        if isinstance(method, commands.Connection.StartOk) and state == "start":
            self._start_ok(method)
        elif isinstance(method, commands.Connection.TuneOk) and state == "tune":
            self._tune_ok(method)
        elif isinstance(method, commands.Connection.Open) and state == "open":
            self._open(method)
        elif isinstance(method, commands.Connection.Close):
            self.send(0, commands.Connection.CloseOk())
            self.flush()
            self._teardown()
            self.abort(graceful=True)
        elif isinstance(method, commands.Connection.CloseOk):
            self.abort(graceful=True)
        elif isinstance(method, commands.Connection.UpdateSecret) and state == "opened":
            self.send(0, commands.Connection.UpdateSecretOk())
        elif state in ("start", "tune", "open"):
            raise errors.CommandInvalid(f"expected a different method in state '{state}', got {method.name}")
        else:
            raise errors.CommandInvalid(f"unexpected method on channel 0: {method.name}")

    def _start_ok(self, m: commands.Connection.StartOk) -> None:
        self.client_properties = dict(m.client_properties or {})
        caps = self.client_properties.get("capabilities") or {}
        self.blocked_capable = bool(isinstance(caps, dict) and caps.get("connection.blocked"))
        mechanism = m.mechanism or ""
        response = m.response or ""
        raw = response.encode("utf-8", "surrogateescape") if isinstance(response, str) else bytes(response)
        user = password = None
        if mechanism == "PLAIN":
            parts = raw.split(b"\x00")
            if len(parts) == 3:
                user, password = parts[1].decode("utf-8", "replace"), parts[2].decode("utf-8", "replace")
        elif mechanism == "AMQPLAIN":
            try:
                table, _ = decode_table(struct.pack(">I", len(raw)) + raw)
                plain = table_to_python(table)
                user, password = str(plain.get("LOGIN", "")), str(plain.get("PASSWORD", ""))
            except FieldError:
                user = None
        else:
            raise errors.CommandInvalid(f"unknown authentication mechanism '{mechanism}'")
        if user is None or password is None or not self.broker.auth.authenticate(user, password):
            raise errors.AccessRefusedHard(
                f"Login was refused using authentication mechanism {mechanism}. For details see the broker logfile."
            )
        self.user = user
        self.send(0, commands.Connection.Tune(channel_max=CHANNEL_MAX, frame_max=FRAME_MAX, heartbeat=HEARTBEAT))
        self.state = "tune"

    def _tune_ok(self, m: commands.Connection.TuneOk) -> None:
        self.channel_max = m.channel_max or CHANNEL_MAX
        self.frame_max = m.frame_max or FRAME_MAX
        if self.frame_max < framing.FRAME_MIN_SIZE:
            raise errors.NotAllowed(f"frame_max={self.frame_max} < {framing.FRAME_MIN_SIZE} min size")
        self.reader.frame_max = self.frame_max
        self.heartbeat = m.heartbeat or 0
        self.state = "open"
        if self.heartbeat:
            self._schedule_heartbeat()

    def _open(self, m: commands.Connection.Open) -> None:
        vhost = m.virtual_host or "/"
        self.info = self.broker.open_connection(
            self.user, vhost, peer=self.peer, client_properties=self.client_properties
        )
        self.info.close = self.close_by_server
        self.info.drop = self.abort
        self.info.blocked = self.set_blocked
        self.send(0, commands.Connection.OpenOk())
        self.state = "opened"

    def set_blocked(self, blocked: bool, reason: str) -> None:
        if self.blocked_capable and not self.closed:
            self.send(0, commands.Connection.Blocked(reason) if blocked else commands.Connection.Unblocked())
            self.server.flush()

    # -- heartbeats (real time, never the virtual clock) -----------------------------------------------------------
    def _schedule_heartbeat(self) -> None:
        loop = asyncio.get_event_loop()
        interval = max(self.heartbeat / 2, 0.05)
        self._hb_handle = loop.call_later(interval, self._heartbeat_tick)

    def _heartbeat_tick(self) -> None:
        if self.closed:
            return
        now = _monotonic()
        if now - self._last_recv > 2 * self.heartbeat:
            log.info("missed heartbeats from %s, closing", self.peer)
            self.abort()
            return
        if now - self._last_send >= self.heartbeat / 2:
            self.write(framing.HEARTBEAT_FRAME)
            self.flush()
        self._schedule_heartbeat()
