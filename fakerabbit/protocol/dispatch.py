"""Frame dispatch (``rabbit_reader:handle_frame/4``): every complete frame of a chunk of input goes to channel
0 (:class:`~fakerabbit.protocol.channel0.Channel0`) or to its channel's
:class:`~fakerabbit.protocol.channel.ChannelHandler`, and the errors found on the way end the connection
(:class:`~fakerabbit.protocol.error_handling.ErrorHandler`).

:class:`Dispatcher` owns the frame reader and what one chunk of input leaves behind: the channel methods
waiting for the reader to finish the chunk, the channels closing, the first hard error a channel raised.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from functools import partial
from typing import Protocol

from fakerabbit.broker import errors, texts
from fakerabbit.broker.erlterm import Atom, Term
from fakerabbit.protocol import framing
from fakerabbit.protocol.channel import MAX_MSG_SIZE, ChannelHandler
from fakerabbit.protocol.codec import MethodDecodeError, base, commands, decode_args, publish_fields
from fakerabbit.protocol.framing import frame_error_text, unexpected_frame_text

__all__ = ["DispatchedConnection", "Dispatcher"]


class DispatchedConnection(Protocol):
    """What the dispatcher needs of its connection."""

    @property
    def state(self) -> str: ...

    @property
    def stopped(self) -> bool:
        """No more input is read."""
        ...

    @property
    def closed(self) -> bool:
        """The socket is gone (or going)."""
        ...

    @property
    def channel_max(self) -> int: ...

    def new_channel(self, number: int) -> ChannelHandler:
        """The handler for a channel number seen for the first time (already counted against channel_max)."""
        ...

    def channel_gone(self, number: int) -> None: ...

    def abort(self, *, graceful: bool = False) -> None: ...


class _Errors(Protocol):
    """:class:`~fakerabbit.protocol.error_handling.ErrorHandler`."""

    def handle_exception(self, exc: errors.AMQPError) -> None: ...

    def fatal_frame_error(self, text: str) -> None: ...

    def crash(self, why: str) -> None: ...

    def log_internal_error(self, what: str, exc: BaseException) -> None: ...


class _Output(Protocol):
    """:class:`~fakerabbit.protocol.output.Output`."""

    @property
    def late(self) -> list[bytes]: ...

    def release_late(self) -> None: ...

    def flush_confirms(self) -> None: ...

    def send(self, channel: int, method: base.Frame) -> None: ...


class _Throttle(Protocol):
    """:class:`~fakerabbit.protocol.throttle.Throttle`."""

    @property
    def blocked(self) -> bool: ...

    def publish_received(self) -> None: ...


class _Alarms(Protocol):
    @property
    def blocking(self) -> bool: ...


class _Channel0(Protocol):
    def handle(self, method: base.Frame, ids: tuple[int, int]) -> None: ...


_METHOD, _HEADER, _BODY, _HEARTBEAT = framing.FRAME_METHOD, framing.FRAME_HEADER, framing.FRAME_BODY, 8
_method_class = framing.method_class
_method_head = struct.Struct(">BHII")  # frame type, channel, size; class and method ids
_content_head = struct.Struct(">BHIHHQ")  # frame type, channel, size; class id, weight, body size
_frame_head = struct.Struct(">BHI")
_ack_args = struct.Struct(">QB")
_PUBLISH_ID = commands.Basic.Publish.index
_ACK_ID = commands.Basic.Ack.index
_publish = ChannelHandler.publish
_ack = ChannelHandler.ack


class Dispatcher:
    """One connection's input: frames out of the reader, to channel 0 or to the channels."""

    def __init__(
        self,
        conn: DispatchedConnection,
        channels: dict[int, ChannelHandler],
        channel0: _Channel0,
        error_handler: _Errors,
        output: _Output,
        throttle: _Throttle,
        alarms: _Alarms,
        *,
        frame_min_size: int,
        unicode: bool,
    ) -> None:
        """``channels`` is the connection's channel table (the dispatcher adds channels to it);
        ``frame_min_size`` is the frame_max until tune-ok; ``unicode``: texts are printed as 3.12+ prints them."""
        self._conn = conn
        self._channels = channels
        self._channel0 = channel0
        self._errors = error_handler
        self._output = output
        self._throttle = throttle
        self._alarms = alarms
        self._unicode = unicode
        #: The bytes read and not yet handled, split into frames.
        self.reader = framing.FrameReader(frame_min_size)
        # channel methods waiting for the reader to finish the current chunk of input
        self._pending: list[tuple[ChannelHandler, Callable[[], None]]] = []
        self._closing_channels: list[ChannelHandler] = []
        self._channel_failure: errors.AMQPError | None = None
        self._dead_channels: set[int] = set()

    def process(self) -> None:
        """Handle every complete frame in the buffer, as RabbitMQ's reader handles one chunk of input.

        The reader parses and assembles frames itself (framing errors, channel 0, content assembly, channel
        counting) while channel methods run in the channel processes: they are collected here and run after the
        reader's work on the chunk (or before a channel-0 method). So an error the reader finds wins over a hard
        error a channel raises for an earlier frame of the same chunk; the channel's replies and soft errors
        still go out first, as RabbitMQ's channels finish their mailboxes before the connection closes.
        """
        failure: errors.AMQPError | None = None
        fatal: str | None = None
        next_frame = self.reader.next_frame
        handle = self._handle_frame
        conn = self._conn
        throttle = self._throttle
        alarms = self._alarms
        while not conn.stopped and not conn.closed and not throttle.blocked:
            if conn.state == "running" and not alarms.blocking:
                self._take_hot()
            try:
                frame = next_frame()
            except framing.FrameTooLarge as exc:
                too_large: Term = (Atom("frame_too_large"), exc.size, exc.limit)
                fatal = frame_error_text(exc.type, b"", too_large, unicode=self._unicode)
                break
            except framing.BadFrameEnd as exc:
                bad_end: Term = (Atom("invalid_frame_end_marker"), exc.end)
                fatal = frame_error_text(exc.type, exc.payload, bad_end, unicode=self._unicode)
                break
            if frame is None:
                break
            try:
                handle(*frame)
            except framing.UnknownMethod as exc:
                self._pending.clear()
                self._errors.crash(str(exc))
                return
            except errors.AMQPError as exc:
                failure = exc
                break
            except Exception as exc:  # never let a bug take the broker down
                self._errors.log_internal_error("handling a frame", exc)
                failure = errors.InternalError("")
                break
        if self._pending:
            self.flush_pending()
        self._output.flush_confirms()  # the batch's publisher confirms, coalesced
        channel_failure = self._channel_failure
        if self._dead_channels:
            self._dead_channels.clear()
        closing = self._closing_channels
        if closing:
            self._closing_channels = []
        if channel_failure is None and fatal is None and failure is None:
            if not closing:
                return  # the common case: nothing failed, no channel closing
            # rabbit_reader answers channel_closing (then the channel sends close-ok) once it is done with the
            # chunk; an error in the chunk closes the connection first, and no close-ok goes out
            for ch in closing:
                ch.send(commands.Channel.CloseOk())
                conn.channel_gone(ch.number)
            return
        self._channel_failure = None
        if fatal is not None:
            self._errors.fatal_frame_error(fatal)
            return
        if failure is None and channel_failure is None:
            return
        self._errors.handle_exception(failure if failure is not None else channel_failure)  # type: ignore[arg-type]
        if conn.state == "closed" and not conn.stopped and not conn.closed and self.reader.pending():
            # the rest of the chunk is read in the closing state (a client's close-ok in the same write counts)
            self.process()

    def _take_hot(self) -> None:
        """The hot path of the reader: complete ``basic.publish`` messages (method, content header and at most one
        body frame, all in the buffer) and ``basic.ack`` methods at the head of the buffer, for channels that are
        waiting for a method, are taken in one go and handed on as :meth:`_handle_frame` would hand them on
        (without building pamqp objects). Anything else, or anything about them that is not the plain case
        (a frame too large, a bad frame end, other arguments, a body in several frames, another channel's frame
        in between, an incomplete message), stops it: :meth:`_handle_frame` then takes the frames one by one, as
        if this had not run. Only called on a running connection while no alarm is on (``publish_received``)."""
        reader = self.reader
        buf = reader._buf
        pos = reader._pos
        end = len(buf)
        fmax = min(reader.frame_max or MAX_MSG_SIZE, MAX_MSG_SIZE)
        channels = self._channels
        pending = self._pending
        while end - pos >= 11:
            ftype, number, size, index = _method_head.unpack_from(buf, pos)
            if ftype != _METHOD or size > fmax:
                break
            stop = pos + 7 + size
            if stop >= end or buf[stop] != framing.FRAME_END:
                break
            ch = channels.get(number)
            if ch is None or ch._asm != "method":
                break
            if index == _ACK_ID and size == 13:
                tag, bits = _ack_args.unpack_from(buf, pos + 11)
                pending.append((ch, partial(_ack, ch, tag, bool(bits & 1))))
                pos = stop + 1
                continue
            if index != _PUBLISH_ID:
                break
            fields = publish_fields(buf, pos + 11, stop)
            head = stop + 1
            if fields is None or end - head < 19:
                break
            htype, hnumber, hsize, class_id, weight, body_size = _content_head.unpack_from(buf, head)
            if htype != _HEADER or hnumber != number or not 12 <= hsize <= fmax or class_id != 60 or weight:
                break
            hstop = head + 7 + hsize
            if hstop >= end or buf[hstop] != framing.FRAME_END:
                break
            if body_size:
                at = hstop + 1
                if end - at < 7:
                    break
                btype, bnumber, bsize = _frame_head.unpack_from(buf, at)
                if btype != _BODY or bnumber != number or bsize != body_size or bsize > fmax:
                    break
                bstop = at + 7 + bsize
                if bstop >= end or buf[bstop] != framing.FRAME_END:
                    break
                body = bytes(buf[at + 7 : bstop])
                pos = bstop + 1
            else:
                body = b""
                pos = hstop + 1
            exchange, routing_key, bits = fields
            props = bytes(buf[head + 19 : hstop])
            pending.append((ch, partial(_publish, ch, exchange, routing_key, bits, props, body, body_size)))
        reader._pos = pos

    def flush_pending(self) -> None:
        """Run the channel methods the reader handed on (see :meth:`process`), in order.

        The list is taken whole (no ``pop(0)`` per method); methods handed on while it runs go to a fresh list, run
        after it, and whatever is left when the connection closes goes back in front, as before."""
        dead = self._dead_channels
        conn = self._conn
        output = self._output
        late = output.late
        while self._pending and not conn.closed:
            batch, self._pending = self._pending, []
            for i, (ch, fn) in enumerate(batch):
                if conn.closed:
                    self._pending[:0] = batch[i:]
                    return
                if ch.number in dead or conn.state == "closed":
                    continue
                try:
                    fn()
                    if late:
                        output.release_late()
                except errors.AMQPError as exc:  # a hard error: this channel is dead, the connection will close
                    dead.add(ch.number)
                    if self._channel_failure is None:
                        self._channel_failure = exc
                except Exception as exc:  # never let a bug take the broker down
                    self._errors.log_internal_error("handling a channel method", exc)
                    dead.add(ch.number)
                    if self._channel_failure is None:
                        self._channel_failure = errors.InternalError("")

    def channel_closing(self, ch: ChannelHandler) -> None:
        """A client's channel.close was handled: close-ok goes out when the reader is done (see :meth:`process`)."""
        self._closing_channels.append(ch)

    def forget(self) -> None:
        """Drop the channel methods still waiting (the connection is forced closed)."""
        self._pending.clear()

    def _method0(self, payload: bytes) -> None:
        """``rabbit_reader:handle_method0/3``: decode failures are internal errors here (541, ids 0 0)."""
        cls = _method_class(payload)
        index = framing.method_index(payload)
        ids = (index >> 16, index & 0xFFFF)
        try:
            method = decode_args(cls, payload[4:])
        except MethodDecodeError as exc:
            # handle_method0 catches what decoding throws: a field table that does not parse is a crash inside
            # its try (541 below), unlike on other channels where it kills the reader
            if exc.kind == "utf8":
                raise errors.FrameError(texts.MALFORMED_SHORTSTR).at(ids) from None
            raise errors.InternalError("") from None
        self.flush_pending()  # the channels get through what they were sent before this
        if self._channel_failure is not None and isinstance(method, commands.Connection.Close):
            # the reader shuts the channels down and waits for them: a channel's hard error is what the client
            # gets, not close-ok (any other channel-0 method is handled first: its own error wins)
            failure, self._channel_failure = self._channel_failure, None
            raise failure
        self._channel0.handle(method, ids)

    def _new_channel(self, number: int) -> ChannelHandler:
        channels = self._channels
        channel_max = self._conn.channel_max
        if len(channels) >= channel_max:
            raise errors.NotAllowed(texts.channel_max_reached(len(channels), channel_max))
        ch = channels[number] = self._conn.new_channel(number)
        return ch

    def _unexpected(self, ftype: int, payload: bytes) -> errors.AMQPError:
        return errors.UnexpectedFrame(unexpected_frame_text(ftype, payload, unicode=self._unicode))

    def _unknown(self, ftype: int, payload: bytes) -> errors.AMQPError:
        return errors.FrameError(frame_error_text(ftype, payload, Atom("unknown_frame"), unicode=self._unicode))

    def _handle_frame(self, ftype: int, channel: int, payload: bytes) -> None:
        """``rabbit_reader:handle_frame/4``."""
        conn = self._conn
        state = conn.state
        if channel and state == "running":
            # the hot path: a frame for a channel of a running connection, each frame classified once
            if ftype == _METHOD and len(payload) >= 4:
                cls = _method_class(payload)  # unknown ids: the reader crashes before the channel sees it
            elif ftype == _BODY or (ftype == _HEADER and len(payload) >= 12):
                cls = None
            elif ftype == _HEARTBEAT and not payload:
                raise self._unexpected(ftype, payload)
            else:
                raise self._unknown(ftype, payload)
            ch = self._channels.get(channel)
            if ch is None:
                ch = self._new_channel(channel)
            if cls is not None:
                deferred = ch.method_frame(payload, cls)
                if deferred is not None:
                    self._pending.append((ch, deferred))
                return
            deferred = ch.handle_frame(ftype, payload)
            if deferred is not None:
                self._pending.append((ch, deferred))
            if self._alarms.blocking and not conn.closed:
                self._throttle.publish_received()
            return
        if state == "closed":
            if channel == 0 and ftype == _METHOD and len(payload) >= 4:
                cls = _method_class(payload)
                try:
                    method = decode_args(cls, payload[4:])
                except MethodDecodeError:
                    return
                if isinstance(method, commands.Connection.Close):
                    self._output.send(0, commands.Connection.CloseOk())
                elif isinstance(method, commands.Connection.CloseOk):
                    conn.abort(graceful=True)
            return
        if channel == 0:
            if ftype == _METHOD and len(payload) >= 4:
                self._method0(payload)
            elif ftype == _HEARTBEAT and not payload:
                return
            elif ftype == _BODY or (ftype == _HEADER and len(payload) >= 12):
                raise self._unexpected(ftype, payload)
            else:
                raise self._unknown(ftype, payload)
            return
        # a channel frame before the connection is open
        raise self._unexpected(ftype, payload)
