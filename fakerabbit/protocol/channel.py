"""One channel: content assembly (``rabbit_command_assembler``), the channel's state machine, soft errors, and
the broker session's sink.

A channel exists from the first frame on its number (as in ``rabbit_reader``, which counts it against
``channel_max`` right away) but only ``channel.open`` opens it. Methods that carry content (``basic.publish`` —
and the server-only ``basic.deliver``, ``basic.return``, ``basic.get-ok`` a broken client might send) are
handed on only once their content is complete.

A channel knows its connection only as :class:`ChannelOwner` and the connection's writer as
:class:`ChannelOutput`; the method handlers (:mod:`fakerabbit.protocol.handlers`) know the channel only as
:class:`~fakerabbit.protocol.handlers.context.MethodChannel`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

from fakerabbit.broker import errors, texts
from fakerabbit.broker.erlterm import text_octets
from fakerabbit.broker.erlterm import write as erl_write
from fakerabbit.broker.profile import AMQPRules
from fakerabbit.broker.session import Session, SessionSink
from fakerabbit.protocol import framing
from fakerabbit.protocol.codec import (
    Cancel,
    ChannelOpenOk,
    Deliver,
    MethodDecodeError,
    Return,
    base,
    commands,
    decode_args,
)
from fakerabbit.protocol.handlers import HANDLERS

__all__ = ["MAX_MSG_SIZE", "ChannelHandler", "ChannelOutput", "ChannelOwner"]

_PUBLISH_IDS = (60, 40)
_ACK_IDS = (60, 80)
_PUBLISH = commands.Basic.Publish
_ACK = commands.Basic.Ack
_SHORTCUT_METHODS = (
    commands.Basic.Get,
    commands.Basic.Consume,
    commands.Queue.Delete,
    commands.Queue.Purge,
    commands.Queue.Bind,
    commands.Queue.Unbind,
)
_CONTENT_METHODS = (commands.Basic.Publish, commands.Basic.Return, commands.Basic.Deliver, commands.Basic.GetOk)
#: Deliveries with bodies up to this size go out as one bytes object (method, header and body frames).
_SMALL_BODY = 4096 - framing.EMPTY_FRAME_SIZE  # fits the smallest frame_max
#: rabbit.hrl's ?MAX_MSG_SIZE: the largest body size 4.3's assembler takes (512 MiB).
MAX_MSG_SIZE = 536870912


class _ConfirmHolder(Protocol):
    def flush_confirms(self) -> None: ...


class ChannelOutput(Protocol):
    """The connection's writer, as a channel uses it (:class:`~fakerabbit.protocol.output.Output`)."""

    @property
    def paused(self) -> bool:
        """TCP back-pressure: the client does not read."""
        ...

    @property
    def closed(self) -> bool: ...

    def write(self, data: bytes) -> None: ...

    def write_many(self, parts: list[bytes]) -> None: ...

    def write_late(self, data: bytes) -> None: ...

    def send(self, channel: int, method: base.Frame) -> None: ...

    def confirms_waiting(self, holder: _ConfirmHolder) -> None: ...


class ChannelOwner(Protocol):
    """What a channel needs of its connection."""

    @property
    def frame_max(self) -> int: ...

    @property
    def capabilities(self) -> Mapping[str, object]:
        """The client's capabilities (``connection.start-ok``)."""
        ...

    def open_session(self, number: int, sink: SessionSink) -> Session:
        """``channel.open``: the broker side of channel ``number``."""
        ...

    def channel_closing(self, ch: ChannelHandler) -> None:
        """The client closed ``ch``: close-ok goes out once the reader is done with the current input."""
        ...

    def channel_gone(self, number: int) -> None:
        """The channel's number is free again."""
        ...


class ChannelHandler:
    """Protocol state of one channel; the broker-side state lives in :attr:`session` once it is open."""

    def __init__(self, owner: ChannelOwner, output: ChannelOutput, rules: AMQPRules, number: int) -> None:
        self._owner = owner
        self.number = number
        self._shapes: framing.DeliveryShapes = {}  # the cached delivery encoders of this channel
        #: The wire rules of the RabbitMQ version the broker behaves as.
        self.rules = rules
        self._output = output
        # the writer's methods a message's path calls, bound once
        self._write = output.write
        self._write_many = output.write_many
        self._send = output.send
        self._confirms_waiting = output.confirms_waiting
        #: "starting" (no channel.open yet), "open", or "closing" (the broker sent channel.close)
        self.state = "starting"
        self._session: Session | None = None
        # content assembly: "method", "header" (a content method came) or "body" (its header came)
        self._asm = "method"
        self._method: base.Frame | None = None
        self._ids = (0, 0)
        self._props = b""
        self._body_size = 0
        self._remaining = 0
        self._body: list[bytes] = []
        # publisher confirms waiting to be sent, coalesced (see send_confirm)
        self._confirmed: list[int] = []
        self._rejected: list[int] = []
        self._max_message_size = rules.max_message_size

    @property
    def session(self) -> Session:
        assert self._session is not None, "channel is not open"
        return self._session

    @property
    def closing(self) -> bool:
        return self.state == "closing"

    # -- frames in ------------------------------------------------------------------------------------------
    def handle_frame(self, ftype: int, payload: bytes) -> Callable[[], None] | None:
        """Assemble a frame (errors here are the reader's); a complete method comes back as the channel's work,
        for the connection to run when the reader is done with its input (see ``Dispatcher.process``)."""
        if ftype == framing.FRAME_METHOD:
            return self._method_frame(payload)
        if ftype == framing.FRAME_HEADER:
            return self._header_frame(payload)
        return self._body_frame(payload)

    def _expected(self) -> errors.AMQPError:
        if self._asm == "header":
            return errors.UnexpectedFrame(
                "expected content header for class 60, got non content header frame instead"
            ).at(self._ids)
        if self._asm == "body":
            return errors.UnexpectedFrame("expected content body, got non content body frame instead").at(self._ids)
        return errors.UnexpectedFrame("expected method frame, got non method frame instead")

    def _method_frame(self, payload: bytes) -> Callable[[], None] | None:
        return self.method_frame(payload, framing.method_class(payload))

    def method_frame(self, payload: bytes, cls: type[base.Frame]) -> Callable[[], None] | None:
        """A method frame whose class the reader has looked up (``framing.method_class``)."""
        if self._asm != "method":
            raise self._expected()
        index = cls.index
        ids = (index >> 16, index & 0xFFFF)
        args = payload[4:]
        try:
            method = decode_args(cls, args)
        except MethodDecodeError as exc:
            if exc.kind == "table":
                raise framing.UnknownMethod(f"malformed field table in {cls.name} arguments") from None
            if exc.kind == "utf8":
                raise errors.FrameError(texts.MALFORMED_SHORTSTR) from None
            raise errors.FrameError(f"cannot decode {erl_write(args, pretty=False)}").at(ids) from None
        if self.state == "closing" and isinstance(method, commands.Channel.CloseOk):
            # rabbit_reader's post_process_frame: the reader forgets the channel at once, so a frame that follows
            # in the same chunk (typically a channel.open reusing the number) goes to a new channel.
            self._owner.channel_gone(self.number)
            return None
        if isinstance(method, _CONTENT_METHODS):
            self._asm, self._method, self._ids = "header", method, ids
            return None
        return lambda: self._dispatch(method, ids, payload)

    def _header_frame(self, payload: bytes) -> Callable[[], None] | None:
        if self._asm != "header":
            raise self._expected()
        parsed = framing.parse_content_header(payload)
        assert parsed is not None  # the connection checked the length
        class_id, weight, body_size, props = parsed
        if weight != 0:
            raise self._expected()
        if class_id != 60:
            raise errors.UnexpectedFrame(
                f"expected content header for class 60, got one for class {class_id} instead"
            ).at(self._ids)
        if body_size > MAX_MSG_SIZE and self.rules.strict_content_size:
            raise errors.FrameError(f"content body size {body_size} exceeds maximum allowed size {MAX_MSG_SIZE}").at(
                self._ids
            )
        self._props, self._body_size, self._remaining = props, body_size, body_size
        if body_size == 0:
            return self._complete()
        self._asm = "body"
        return None

    def _body_frame(self, payload: bytes) -> Callable[[], None] | None:
        if self._asm != "body":
            raise self._expected()
        # Up to 4.2, only a body that adds up exactly completes the message; too many octets leave the
        # assembler waiting for more body frames forever (the next other frame is a 505). 4.3 refuses them.
        if len(payload) > self._remaining and self.rules.strict_content_size:
            raise errors.FrameError("content body frame exceeds remaining content size").at(self._ids)
        self._remaining -= len(payload)
        if self._remaining == 0:
            self._body.append(payload)
            return self._complete()
        if self._remaining > 0 and self._body_size <= self._max_message_size:
            self._body.append(payload)
        else:
            self._body = []
        return None

    def _complete(self) -> Callable[[], None]:
        method, props, ids = self._method, self._props, self._ids
        body = b"".join(self._body) if len(self._body) != 1 else self._body[0]
        size = self._body_size
        self._asm, self._method, self._props, self._body, self._body_size = "method", None, b"", [], 0
        assert method is not None
        return lambda: self._dispatch(method, ids, b"", (props, body, size))

    def _dispatch(
        self, method: base.Frame, ids: tuple[int, int], payload: bytes, content: tuple[bytes, bytes, int] | None = None
    ) -> None:
        """``rabbit_channel:handle_method/3``, by channel state."""
        if type(method) is _ACK and self.state == "open":
            # the other hot path: basic.ack on an open channel (not a shortcut method, no content), as
            # handlers.basic.basic_ack
            self.ack(method.delivery_tag or 0, bool(method.multiple))
            return
        if content is not None and type(method) is _PUBLISH and self.state == "open":
            # the hot path: none of the checks below applies to a complete basic.publish on an open channel
            props, body, size = content
            bits = (1 if method.mandatory else 0) | (2 if method.immediate else 0)
            self.publish(method.exchange or "", method.routing_key or "", bits, props, body, size)
            return
        # rabbit_channel expands the "" queue shortcut before it looks at the channel's state: even a closing
        # channel sends (another) channel.close for it
        no_last_queue = self._session is None or not self._session.last_queue
        if isinstance(method, _SHORTCUT_METHODS) and not method.queue and no_last_queue:
            self.close_with(errors.NotFound(texts.NO_PREVIOUS_QUEUE), ids)
            return
        if self.state == "closing":
            if isinstance(method, commands.Channel.CloseOk):
                self._owner.channel_gone(self.number)
            elif isinstance(method, commands.Channel.Close):
                self.send(commands.Channel.CloseOk())
            return
        if self.state == "starting":
            if not isinstance(method, commands.Channel.Open):
                raise errors.ChannelError("expected 'channel.open'").at(ids)
            self._open()
            return
        if isinstance(method, commands.Channel.Open):
            raise errors.ChannelError("second 'channel.open' seen").at(ids)
        if isinstance(method, commands.Basic.Publish) and content is not None:
            props, body, size = content
            bits = (1 if method.mandatory else 0) | (2 if method.immediate else 0)
            exchange, routing_key = method.exchange or "", method.routing_key or ""
            self.run(ids, lambda: self._publish(exchange, routing_key, bits, props, body, size))
            return
        handler = HANDLERS.get(type(method))
        if handler is None:
            raise errors.CommandInvalid(texts.UNIMPLEMENTED_METHOD).at(ids)
        self.run(ids, lambda: handler(self, method, payload))

    def _open(self) -> None:
        self._session = self._owner.open_session(self.number, self)
        self.state = "open"
        self.send(ChannelOpenOk(channel_id=""))

    def publish(self, exchange: str, routing_key: str, bits: int, props: bytes, body: bytes, size: int) -> None:
        """A complete ``basic.publish`` (``bits``: mandatory 1, immediate 2), run as the reader hands it on: on an
        open channel straight to the session; otherwise as :meth:`_dispatch` takes any method."""
        if self.state != "open":
            method = _PUBLISH.__new__(_PUBLISH)  # (pamqp's constructor would check the names as a client)
            method.ticket, method.exchange, method.routing_key = 0, exchange, routing_key
            method.mandatory, method.immediate = bool(bits & 1), bool(bits & 2)
            self._dispatch(method, _PUBLISH_IDS, b"", (props, body, size))
            return
        try:
            self._publish(exchange, routing_key, bits, props, body, size)
        except errors.AMQPError as exc:
            self._failed(exc, _PUBLISH_IDS)

    def ack(self, delivery_tag: int, multiple: bool) -> None:
        """A ``basic.ack``, run as the reader hands it on (see :meth:`publish`)."""
        if self.state != "open":
            method = _ACK.__new__(_ACK)
            method.delivery_tag, method.multiple = delivery_tag, multiple
            self._dispatch(method, _ACK_IDS, b"")
            return
        try:
            self.session.ack(delivery_tag, multiple)
        except errors.AMQPError as exc:
            self._failed(exc, _ACK_IDS)

    def _publish(self, exchange: str, routing_key: str, bits: int, props: bytes, body: bytes, size: int) -> None:
        if bits & 2:
            raise errors.NotImplemented_("immediate=true")
        if size > self._max_message_size:
            raise errors.PreconditionFailed(
                f"message size {size} is larger than configured max size {self._max_message_size}"
            )
        if len(props) >= 2 and props[1] & 0x03:
            # RabbitMQ ignores flag bits 1 and 0 (no continuation word); fakerabbit's property reader does not,
            # so they are cleared (a consumer sees them cleared: a documented difference).
            props = props[:1] + bytes([props[1] & 0xFC]) + props[2:]
        self.session.publish(exchange, routing_key, bool(bits & 1), False, props, body, check_properties=True)

    def run(self, ids: tuple[int, int], fn: Callable[[], object]) -> None:
        """Run a broker call; soft errors close this channel, hard ones propagate to the connection."""
        try:
            fn()
        except errors.AMQPError as exc:
            self._failed(exc, ids)

    def _failed(self, exc: errors.AMQPError, ids: tuple[int, int]) -> None:
        """A broker call for method ``ids`` raised ``exc``: a soft error closes this channel; a hard one, given
        the method's ids if it names none, propagates to the connection."""
        if isinstance(exc, errors.SoftError):
            self.close_with(exc, ids)
            return
        if exc.method_ids == (0, 0) and exc.explanation:
            exc.at(ids)
        raise exc

    # -- frames out -----------------------------------------------------------------------------------------
    def send(self, method: base.Frame) -> None:
        if self._confirmed or self._rejected:
            self.flush_confirms()  # a reply never overtakes the confirms of earlier publishes
        self._send(self.number, method)

    def write(self, frame: bytes) -> None:
        """Queue an encoded frame (no confirm is flushed first)."""
        self._write(frame)

    def close_with(self, exc: errors.AMQPError, ids: tuple[int, int]) -> None:
        """A channel error: release the session and send channel.close; wait for close-ok."""
        if self._confirmed or self._rejected:
            self.flush_confirms()
        self._write(
            framing.encode_close(
                self.number,
                exc.code,
                text_octets(exc.reply_text, unicode=self.rules.unicode_texts),
                ids[0],
                ids[1],
            )
        )
        self.state = "closing"
        self.release()

    def close_by_client(self) -> None:
        """The client's ``channel.close`` was handled: the confirms of earlier publishes still go out, the broker
        side is released, anything more on the channel is ignored until the close-ok is out."""
        self.flush_confirms()
        self.release()
        self.state = "closing"
        self._owner.channel_closing(self)

    def drop_content(self) -> None:
        """Forget a message being assembled (its connection is gone: the body must not wait for a collection)."""
        self._asm, self._method, self._props, self._body, self._body_size, self._remaining = (
            "method",
            None,
            b"",
            [],
            0,
            0,
        )

    def release(self) -> None:
        """The channel or its connection is closing: the broker session lets go of everything it holds."""
        if self._session is not None and not self._session.closed:
            self._session.close()

    def resume_deliveries(self) -> None:
        """The socket drained: consumers on this channel may receive again."""
        if self._session is not None and not self._session.closed:
            self._session.dispatch_all()

    # -- SessionSink ----------------------------------------------------------------------------------------
    def writable(self) -> bool:
        """False while the socket's write buffer is above its high-water mark (TCP back-pressure)."""
        return not self._output.paused

    def send_deliver(
        self,
        consumer_tag: str,
        delivery_tag: int,
        redelivered: bool,
        exchange: str,
        routing_key: str,
        props: bytes,
        body: bytes,
    ) -> None:
        if self._confirmed or self._rejected:
            self.flush_confirms()  # a delivery never overtakes the confirms of publishes handled before it
        whole = framing.encode_delivery(
            self.number, consumer_tag, delivery_tag, redelivered, exchange, routing_key, props, body, self._shapes
        )
        if whole is not None:
            self._write_many([whole])
            return
        method = framing.encode_deliver(self.number, consumer_tag, delivery_tag, redelivered, exchange, routing_key)
        if method is None:  # a name over 255 octets: pamqp's path (and its error)
            method = framing.encode_method(
                self.number, Deliver(consumer_tag, delivery_tag, redelivered, exchange, routing_key)
            )
        if len(body) <= _SMALL_BODY:
            self._write_many([framing.encode_small_content(method, self.number, props, body)])
            return
        parts = framing.encode_content(self.number, props, body, self._owner.frame_max)
        parts.insert(0, method)
        self._write_many(parts)

    def send_return(
        self, reply_code: int, reply_text_: str, exchange: str, routing_key: str, props: bytes, body: bytes
    ) -> None:
        method = framing.encode_method(self.number, Return(reply_code, reply_text_, exchange, routing_key))
        self._write_many([method, *framing.encode_content(self.number, props, body, self._owner.frame_max)])

    def send_confirm(self, ack: bool, delivery_tag: int, multiple: bool) -> None:
        """Record a publish's confirm; it goes out with the others of the same batch (:meth:`flush_confirms`).

        RabbitMQ's channel collects the confirms its queues send and flushes them once its mailbox is empty
        (``noreply_coalesce``): a burst of pipelined publishes is acked with few ``multiple`` acks. Here a batch
        is what the connection handles from one read of the socket."""
        (self._confirmed if ack else self._rejected).append(delivery_tag)
        self._confirms_waiting(self)

    def flush_confirms(self) -> None:
        """``rabbit_channel:send_confirms_and_nacks``: acks, then nacks, each coalesced below the cutoff (the
        oldest publish of the other kind: every publish of the batch is settled here)."""
        confirmed, rejected = self._confirmed, self._rejected
        if not confirmed and not rejected:
            return
        self._confirmed, self._rejected = [], []
        if self.state == "closing" or self._output.closed:
            return
        out: list[bytes] = []
        if len(confirmed) == 1:
            out.append(framing.encode_ack(self.number, confirmed[0], False))
        elif confirmed:
            out += self._coalesce(confirmed, rejected, ack=True)
        if rejected:
            out += self._coalesce(rejected, confirmed, ack=False)
        write = self._write
        for frame in out:
            write(frame)

    def _coalesce(self, tags: list[int], others: list[int], *, ack: bool) -> list[bytes]:
        """``rabbit_channel:coalesce_and_send/4``."""
        tags = sorted(set(tags))
        cutoff = min([tags[-1] + 1, *others])
        below = [t for t in tags if t < cutoff]
        rest = [t for t in tags if t >= cutoff]

        def frame(tag: int, multiple: bool) -> bytes:
            if ack:
                return framing.encode_ack(self.number, tag, multiple)
            return framing.encode_nack(self.number, tag, multiple, True)  # (a nack always has requeue set)

        return ([frame(below[-1], True)] if below else []) + [frame(t, False) for t in rest]

    def send_cancel(self, consumer_tag: str) -> None:
        # Only to clients with the consumer_cancel_notify capability, with nowait=true (a client must not
        # answer with cancel-ok), and after the reply to whatever caused it: RabbitMQ's queue process tells the
        # channel afterwards (a queue.delete on the consumer's own channel gets delete-ok, then the cancel).
        if self._owner.capabilities.get("consumer_cancel_notify") is True:
            self._output.write_late(framing.encode_method(self.number, Cancel(consumer_tag, nowait=True)))

    def close_channel(self, exc: errors.AMQPError) -> None:
        """The broker closes this channel on its own (a consumer timeout: class and method ids 0)."""
        if self.state == "open":
            self.close_with(exc, (0, 0))

    def send_get(self, method: base.Frame, props: bytes, body: bytes) -> None:
        if self._confirmed or self._rejected:
            self.flush_confirms()
        head = framing.encode_method(self.number, method)
        if len(body) <= _SMALL_BODY:
            self._write_many([framing.encode_small_content(head, self.number, props, body)])
            return
        self._write_many([head, *framing.encode_content(self.number, props, body, self._owner.frame_max)])
