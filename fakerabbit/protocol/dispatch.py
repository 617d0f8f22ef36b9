"""Frame dispatch (``rabbit_reader:handle_frame/4``): every complete frame of a chunk of input goes to channel
0 (:mod:`fakerabbit.protocol.channel0`) or to its channel's :class:`~fakerabbit.protocol.channel.ChannelHandler`,
and the errors found on the way end the connection (:mod:`fakerabbit.protocol.error_handling`).

These functions are :class:`~fakerabbit.protocol.connection.AMQPConnection`'s methods.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fakerabbit.broker import errors, texts
from fakerabbit.protocol import erlfmt, framing
from fakerabbit.protocol.channel import ChannelHandler
from fakerabbit.protocol.codec import MethodDecodeError, commands, decode_args
from fakerabbit.protocol.erlfmt import Atom

if TYPE_CHECKING:
    from fakerabbit.protocol.connection import AMQPConnection


def _process(self: AMQPConnection) -> None:
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
    while not self.stopped and not self.closed and not self.blocked:
        try:
            frame = next_frame()
        except framing.FrameTooLarge as exc:
            too_large: erlfmt.Term = (Atom("frame_too_large"), exc.size, exc.limit)
            fatal = erlfmt.frame_error_text(exc.type, b"", too_large, unicode=self.rules.unicode_texts)
            break
        except framing.BadFrameEnd as exc:
            bad_end: erlfmt.Term = (Atom("invalid_frame_end_marker"), exc.end)
            fatal = erlfmt.frame_error_text(exc.type, exc.payload, bad_end, unicode=self.rules.unicode_texts)
            break
        if frame is None:
            break
        try:
            handle(*frame)
        except framing.UnknownMethod as exc:
            self._pending.clear()
            self._crash(str(exc))
            return
        except errors.AMQPError as exc:
            failure = exc
            break
        except Exception as exc:  # never let a bug take the broker down
            self.log_internal_error("handling a frame", exc)
            failure = errors.InternalError("")
            break
    if self._pending:
        self._flush_pending()
    if self._confirming:
        self.flush_confirms()  # the batch's publisher confirms, coalesced
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
            self.channel_gone(ch.number)
        return
    self._channel_failure = None
    if fatal is not None:
        self._fatal_frame_error(fatal)
        return
    if failure is None and channel_failure is None:
        return
    self.handle_exception(failure if failure is not None else channel_failure)  # type: ignore[arg-type]
    if self.state == "closed" and not self.stopped and not self.closed and self.reader.pending():
        # the rest of the chunk is read in the closing state (a client's close-ok in the same write counts)
        self._process()


def _flush_pending(self: AMQPConnection) -> None:
    """Run the channel methods the reader handed on (see :meth:`_process`), in order.

    The list is taken whole (no ``pop(0)`` per method); methods handed on while it runs go to a fresh list, run
    after it, and whatever is left when the connection closes goes back in front, as before."""
    dead = self._dead_channels
    while self._pending and not self.closed:
        batch, self._pending = self._pending, []
        for i, (ch, fn) in enumerate(batch):
            if self.closed:
                self._pending[:0] = batch[i:]
                return
            if ch.number in dead or self.state == "closed":
                continue
            try:
                fn()
                if self._late:
                    self._out.extend(self._late)
                    self._late.clear()
            except errors.AMQPError as exc:  # a hard error: this channel is dead, the connection will close
                dead.add(ch.number)
                if self._channel_failure is None:
                    self._channel_failure = exc
            except Exception as exc:  # never let a bug take the broker down
                self.log_internal_error("handling a channel method", exc)
                dead.add(ch.number)
                if self._channel_failure is None:
                    self._channel_failure = errors.InternalError("")


_METHOD, _HEADER, _BODY = framing.FRAME_METHOD, framing.FRAME_HEADER, framing.FRAME_BODY
_method_class = framing.method_class


def _handle_frame(self: AMQPConnection, ftype: int, channel: int, payload: bytes) -> None:
    """``rabbit_reader:handle_frame/4``."""
    if channel and self.state == "running":
        # the hot path: a frame for a channel of a running connection, each frame classified once
        if ftype == _METHOD and len(payload) >= 4:
            cls = _method_class(payload)  # unknown ids: the reader crashes before the channel sees it
        elif ftype == _BODY or (ftype == _HEADER and len(payload) >= 12):
            cls = None
        elif ftype == framing.FRAME_HEARTBEAT and not payload:
            raise errors.UnexpectedFrame(erlfmt.unexpected_frame_text(ftype, payload, unicode=self.rules.unicode_texts))
        else:
            raise errors.FrameError(
                erlfmt.frame_error_text(ftype, payload, Atom("unknown_frame"), unicode=self.rules.unicode_texts)
            )
        ch = self.channels.get(channel)
        if ch is None:
            if len(self.channels) >= self.channel_max:
                raise errors.NotAllowed(texts.channel_max_reached(len(self.channels), self.channel_max))
            ch = self.channels[channel] = ChannelHandler(self, channel)
        if cls is not None:
            deferred = ch.method_frame(payload, cls)
            if deferred is not None:
                self._pending.append((ch, deferred))
            return
        deferred = ch.handle_frame(ftype, payload)
        if deferred is not None:
            self._pending.append((ch, deferred))
        if not self.closed and self.server.alarms.blocking:
            self.publish_received()  # (which checks blocking itself: only under an alarm is there work)
        return
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
            raise errors.UnexpectedFrame(erlfmt.unexpected_frame_text(ftype, payload, unicode=self.rules.unicode_texts))
        else:
            raise errors.FrameError(
                erlfmt.frame_error_text(ftype, payload, Atom("unknown_frame"), unicode=self.rules.unicode_texts)
            )
        return
    if self.state != "running":
        raise errors.UnexpectedFrame(erlfmt.unexpected_frame_text(ftype, payload, unicode=self.rules.unicode_texts))
    if ftype == framing.FRAME_METHOD and len(payload) >= 4:
        framing.method_class(payload)  # unknown ids: the reader crashes before the channel sees it
    elif ftype == framing.FRAME_HEARTBEAT and not payload:
        raise errors.UnexpectedFrame(erlfmt.unexpected_frame_text(ftype, payload, unicode=self.rules.unicode_texts))
    elif not (ftype == framing.FRAME_BODY or (ftype == framing.FRAME_HEADER and len(payload) >= 12)):
        raise errors.FrameError(
            erlfmt.frame_error_text(ftype, payload, Atom("unknown_frame"), unicode=self.rules.unicode_texts)
        )
    ch = self.channels.get(channel)
    if ch is None:
        if len(self.channels) >= self.channel_max:
            raise errors.NotAllowed(texts.channel_max_reached(len(self.channels), self.channel_max))
        ch = self.channels[channel] = ChannelHandler(self, channel)
    deferred = ch.handle_frame(ftype, payload)
    if deferred is not None:
        self._pending.append((ch, deferred))
    if ftype != framing.FRAME_METHOD and not self.closed:
        self.publish_received()
