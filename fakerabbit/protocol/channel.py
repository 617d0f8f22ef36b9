"""One open channel: method dispatch, content assembly, soft errors, and the broker session's sink."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from pamqp import base, commands

from fakerabbit.broker import errors
from fakerabbit.broker.session import Session
from fakerabbit.protocol import framing
from fakerabbit.protocol.codec import Cancel, Deliver, Return, reply_text
from fakerabbit.protocol.handlers import HANDLERS

if TYPE_CHECKING:
    from fakerabbit.protocol.connection import AMQPConnection

_PUBLISH_IDS = (60, 40)


class ChannelHandler:
    """Protocol state of one channel; the broker-side state lives in :attr:`session`."""

    def __init__(self, conn: AMQPConnection, number: int) -> None:
        self.conn = conn
        self.number = number
        assert conn.info is not None
        self.session = Session(conn.info, number, conn.broker.vhost(conn.info.vhost), self)
        self.closing = False
        self._publish: commands.Basic.Publish | None = None
        self._props: bytes | None = None
        self._body_size = 0
        self._body: list[bytes] = []
        self._received = 0

    # -- frames in ------------------------------------------------------------------------------------------
    def handle_method(self, method: base.Frame, payload: bytes) -> None:
        ids = (method.index >> 16, method.index & 0xFFFF)
        if self.closing:
            if isinstance(method, commands.Channel.CloseOk):
                self.conn.channel_gone(self.number)
            elif isinstance(method, commands.Channel.Close):
                self.conn.send(self.number, commands.Channel.CloseOk())
            return
        if self._publish is not None:
            raise errors.UnexpectedFrame(
                "expected content header for class 60, got non content header frame instead"
            ).at(ids)
        handler = HANDLERS.get(type(method))
        if handler is None:
            raise errors.CommandInvalid(f"method {method.name} is not allowed from a client").at(ids)
        self.run(ids, lambda: handler(self, method, payload))

    def run(self, ids: tuple[int, int], fn: Callable[[], object]) -> None:
        """Run a broker call; soft errors close this channel, hard ones propagate to the connection."""
        try:
            fn()
        except errors.SoftError as exc:
            self.close_with(exc, ids)
        except errors.AMQPError as exc:
            raise exc.at(ids) from None

    def handle_content(self, frame: framing.RawFrame) -> None:
        if self.closing:
            return
        if frame.type == framing.FRAME_HEADER:
            if self._publish is None or self._props is not None:
                raise errors.UnexpectedFrame("expected method frame, got non method frame instead")
            class_id, size, props = framing.decode_content_header(frame.payload)
            if class_id != 60:
                raise errors.FrameError(f"content header for class {class_id} instead of 60")
            self._props, self._body_size = props, size
            if size == 0:
                self._complete()
            return
        if self._props is None:
            raise errors.UnexpectedFrame(
                "expected content header for class 60, got non content header frame instead"
                if self._publish is not None
                else "expected method frame, got non method frame instead"
            )
        self._body.append(frame.payload)
        self._received += len(frame.payload)
        if self._received > self._body_size:
            raise errors.FrameError(
                f"body size {self._received} exceeds the {self._body_size} announced in the content header"
            )
        if self._received == self._body_size:
            self._complete()

    def start_publish(self, method: commands.Basic.Publish) -> None:
        self._publish = method

    def _complete(self) -> None:
        method, props = self._publish, self._props
        body = b"".join(self._body) if len(self._body) != 1 else self._body[0]
        self._publish, self._props, self._body, self._received, self._body_size = None, None, [], 0, 0
        assert method is not None and props is not None
        self.run(
            _PUBLISH_IDS,
            lambda: self.session.publish(
                method.exchange or "",
                method.routing_key or "",
                bool(method.mandatory),
                bool(method.immediate),
                props,
                body,
            ),
        )

    # -- frames out -----------------------------------------------------------------------------------------
    def send(self, method: base.Frame) -> None:
        self.conn.send(self.number, method)

    def close_with(self, exc: errors.AMQPError, ids: tuple[int, int]) -> None:
        """A channel error: release the session and send channel.close; wait for close-ok."""
        self.send(
            commands.Channel.Close(
                reply_code=exc.code, reply_text=reply_text(exc.reply_text), class_id=ids[0], method_id=ids[1]
            )
        )
        self.closing = True
        self._publish = self._props = None
        self._body = []
        self.session.close()

    # -- SessionSink ----------------------------------------------------------------------------------------
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
        method = framing.encode_method(
            self.number, Deliver(consumer_tag, delivery_tag, redelivered, exchange, routing_key)
        )
        self.conn.write_many([method, *framing.encode_content(self.number, props, body, self.conn.frame_max)])

    def send_return(
        self, reply_code: int, reply_text_: str, exchange: str, routing_key: str, props: bytes, body: bytes
    ) -> None:
        method = framing.encode_method(self.number, Return(reply_code, reply_text_, exchange, routing_key))
        self.conn.write_many([method, *framing.encode_content(self.number, props, body, self.conn.frame_max)])

    def send_confirm(self, ack: bool, delivery_tag: int, multiple: bool) -> None:
        if ack:
            self.send(commands.Basic.Ack(delivery_tag, multiple))
        else:
            self.send(commands.Basic.Nack(delivery_tag, multiple, False))

    def send_cancel(self, consumer_tag: str) -> None:
        self.send(Cancel(consumer_tag, nowait=False))

    def send_get(self, method: base.Frame, props: bytes, body: bytes) -> None:
        head = framing.encode_method(self.number, method)
        self.conn.write_many([head, *framing.encode_content(self.number, props, body, self.conn.frame_max)])
