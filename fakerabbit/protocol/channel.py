"""One channel: content assembly (``rabbit_command_assembler``), the channel's state machine, soft errors, and
the broker session's sink.

A channel exists from the first frame on its number (as in ``rabbit_reader``, which counts it against
``channel_max`` right away) but only ``channel.open`` opens it. Methods that carry content (``basic.publish`` —
and the server-only ``basic.deliver``, ``basic.return``, ``basic.get-ok`` a broken client might send) are
handed on only once their content is complete.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from fakerabbit.broker import errors, texts
from fakerabbit.broker.properties import PropertiesError, RawProperties
from fakerabbit.broker.session import Session
from fakerabbit.protocol import erlfmt, framing
from fakerabbit.protocol.codec import (
    Cancel,
    ChannelOpenOk,
    Deliver,
    MethodDecodeError,
    Return,
    base,
    check_properties,
    commands,
    decode_args,
)
from fakerabbit.protocol.erlfmt import write as erl_write
from fakerabbit.protocol.handlers import HANDLERS

if TYPE_CHECKING:
    from fakerabbit.protocol.connection import AMQPConnection

_PUBLISH_IDS = (60, 40)
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
#: RabbitMQ's default max_message_size: 128 MiB up to 3.13, 16 MiB from 4.0.
_MAX_MESSAGE_SIZE_3 = 134217728
_MAX_MESSAGE_SIZE_4 = 16777216
#: rabbit.hrl's ?MAX_MSG_SIZE: the largest body size 4.3's assembler takes (512 MiB).
MAX_MSG_SIZE = 536870912


#: Property blocks found valid (a pure function of the octets): most publishers repeat a few blocks.
_valid_blocks: set[bytes] = {b"\x00\x00"}
_VALID_BLOCK_MAX = 512
_VALID_ENTRIES = 4096


def _properties_valid(props: bytes) -> bool:
    """RabbitMQ can decode the block (else its channel crashes: 541)."""
    if props in _valid_blocks:
        return True
    if not check_properties(props):
        return False
    try:
        RawProperties(props).validate()
    except PropertiesError:
        return False
    if len(props) <= _VALID_BLOCK_MAX:
        if len(_valid_blocks) >= _VALID_ENTRIES:
            _valid_blocks.clear()
            _valid_blocks.add(b"\x00\x00")
        _valid_blocks.add(props)
    return True


class ChannelHandler:
    """Protocol state of one channel; the broker-side state lives in :attr:`session` once it is open."""

    def __init__(self, conn: AMQPConnection, number: int) -> None:
        self.conn = conn
        self.number = number
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
        major = int(conn.broker.profile.server_version.split(".")[0])
        self._max_message_size = _MAX_MESSAGE_SIZE_4 if major >= 4 else _MAX_MESSAGE_SIZE_3

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
        for the connection to run when the reader is done with its input (see AMQPConnection._process)."""
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
            self.conn.channel_gone(self.number)
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
        if body_size > MAX_MSG_SIZE and self.conn.rules.strict_content_size:
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
        if len(payload) > self._remaining and self.conn.rules.strict_content_size:
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
            try:
                self.session.ack(method.delivery_tag or 0, bool(method.multiple))
            except errors.SoftError as exc:
                self.close_with(exc, ids)
            except errors.AMQPError as exc:
                if exc.method_ids == (0, 0) and exc.explanation:
                    exc.at(ids)
                raise
            return
        if content is not None and type(method) is _PUBLISH and self.state == "open":
            # the hot path: none of the checks below applies to a complete basic.publish on an open channel
            props, body, size = content
            try:
                self._publish(method, props, body, size)
            except errors.SoftError as exc:
                self.close_with(exc, ids)
            except errors.AMQPError as exc:
                if exc.method_ids == (0, 0) and exc.explanation:
                    exc.at(ids)
                raise
            return
        # rabbit_channel expands the "" queue shortcut before it looks at the channel's state: even a closing
        # channel sends (another) channel.close for it
        no_last_queue = self._session is None or not self._session.last_queue
        if isinstance(method, _SHORTCUT_METHODS) and not method.queue and no_last_queue:
            self.close_with(errors.NotFound(texts.NO_PREVIOUS_QUEUE), ids)
            return
        if self.state == "closing":
            if isinstance(method, commands.Channel.CloseOk):
                self.conn.channel_gone(self.number)
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
            self.run(ids, lambda: self._publish(method, props, body, size))
            return
        handler = HANDLERS.get(type(method))
        if handler is None:
            raise errors.CommandInvalid(texts.UNIMPLEMENTED_METHOD).at(ids)
        self.run(ids, lambda: handler(self, method, payload))

    def _open(self) -> None:
        info = self.conn.info
        assert info is not None
        self._session = Session(info, self.number, self.conn.broker.vhost(info.vhost), self)
        info.sessions[self.number] = self._session
        self.state = "open"
        self.send(ChannelOpenOk(channel_id=""))

    def _publish(self, m: commands.Basic.Publish, props: bytes, body: bytes, size: int) -> None:
        if m.immediate:
            raise errors.NotImplemented_("immediate=true")
        if size > self._max_message_size:
            raise errors.PreconditionFailed(
                f"message size {size} is larger than configured max size {self._max_message_size}"
            )
        if len(props) >= 2 and props[1] & 0x03:
            # RabbitMQ ignores flag bits 1 and 0 (no continuation word); fakerabbit's property reader does not,
            # so they are cleared (a consumer sees them cleared: a documented difference).
            props = props[:1] + bytes([props[1] & 0xFC]) + props[2:]
        self.session.publish(
            m.exchange or "",
            m.routing_key or "",
            bool(m.mandatory),
            False,
            props,
            body,
            props_valid=_properties_valid,
        )

    def run(self, ids: tuple[int, int], fn: Callable[[], object]) -> None:
        """Run a broker call; soft errors close this channel, hard ones propagate to the connection."""
        try:
            fn()
        except errors.SoftError as exc:
            self.close_with(exc, ids)
        except errors.AMQPError as exc:
            if exc.method_ids == (0, 0) and exc.explanation:
                exc.at(ids)
            raise

    # -- frames out -----------------------------------------------------------------------------------------
    def send(self, method: base.Frame) -> None:
        if self._confirmed or self._rejected:
            self.flush_confirms()  # a reply never overtakes the confirms of earlier publishes
        self.conn.send(self.number, method)

    def close_with(self, exc: errors.AMQPError, ids: tuple[int, int]) -> None:
        """A channel error: release the session and send channel.close; wait for close-ok."""
        if self._confirmed or self._rejected:
            self.flush_confirms()
        self.conn.write(
            framing.encode_close(
                self.number,
                exc.code,
                erlfmt.text_octets(exc.reply_text, unicode=self.conn.rules.unicode_texts),
                ids[0],
                ids[1],
            )
        )
        self.state = "closing"
        self.release()

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
        return not self.conn.write_paused

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
            self.number, consumer_tag, delivery_tag, redelivered, exchange, routing_key, props, body
        )
        if whole is not None:
            self.conn.write_many([whole])
            return
        method = framing.encode_deliver(self.number, consumer_tag, delivery_tag, redelivered, exchange, routing_key)
        if method is None:  # a name over 255 octets: pamqp's path (and its error)
            method = framing.encode_method(
                self.number, Deliver(consumer_tag, delivery_tag, redelivered, exchange, routing_key)
            )
        if len(body) <= _SMALL_BODY:
            self.conn.write_many([framing.encode_small_content(method, self.number, props, body)])
            return
        parts = framing.encode_content(self.number, props, body, self.conn.frame_max)
        parts.insert(0, method)
        self.conn.write_many(parts)

    def send_return(
        self, reply_code: int, reply_text_: str, exchange: str, routing_key: str, props: bytes, body: bytes
    ) -> None:
        method = framing.encode_method(self.number, Return(reply_code, reply_text_, exchange, routing_key))
        self.conn.write_many([method, *framing.encode_content(self.number, props, body, self.conn.frame_max)])

    def send_confirm(self, ack: bool, delivery_tag: int, multiple: bool) -> None:
        """Record a publish's confirm; it goes out with the others of the same batch (:meth:`flush_confirms`).

        RabbitMQ's channel collects the confirms its queues send and flushes them once its mailbox is empty
        (``noreply_coalesce``): a burst of pipelined publishes is acked with few ``multiple`` acks. Here a batch
        is what the connection handles from one read of the socket."""
        (self._confirmed if ack else self._rejected).append(delivery_tag)
        self.conn.confirms_waiting(self)

    def flush_confirms(self) -> None:
        """``rabbit_channel:send_confirms_and_nacks``: acks, then nacks, each coalesced below the cutoff (the
        oldest publish of the other kind: every publish of the batch is settled here)."""
        confirmed, rejected = self._confirmed, self._rejected
        if not confirmed and not rejected:
            return
        self._confirmed, self._rejected = [], []
        if self.state == "closing" or self.conn.closed:
            return
        out: list[bytes] = []
        if len(confirmed) == 1:
            out.append(framing.encode_ack(self.number, confirmed[0], False))
        elif confirmed:
            out += self._coalesce(confirmed, rejected, ack=True)
        if rejected:
            out += self._coalesce(rejected, confirmed, ack=False)
        for frame in out:
            self.conn.write(frame)

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
        if self.conn.capabilities.get("consumer_cancel_notify") is True:
            self.conn.write_late(framing.encode_method(self.number, Cancel(consumer_tag, nowait=True)))

    def close_channel(self, exc: errors.AMQPError) -> None:
        """The broker closes this channel on its own (a consumer timeout: class and method ids 0)."""
        if self.state == "open":
            self.close_with(exc, (0, 0))

    def send_get(self, method: base.Frame, props: bytes, body: bytes) -> None:
        if self._confirmed or self._rejected:
            self.flush_confirms()
        head = framing.encode_method(self.number, method)
        if len(body) <= _SMALL_BODY:
            self.conn.write_many([framing.encode_small_content(head, self.number, props, body)])
            return
        self.conn.write_many([head, *framing.encode_content(self.number, props, body, self.conn.frame_max)])
