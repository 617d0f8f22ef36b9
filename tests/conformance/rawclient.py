"""A tiny blocking AMQP 0-9-1 client that shows the raw bytes a broker sends and sends raw bytes itself.

pika decodes headers into a dict, so it hides the wire types (``l`` long vs ``I`` signedint, ``T`` timestamp)
and the order of table keys. :class:`RawClient` keeps the content-header property block exactly as received
(:class:`~fakerabbit.broker.properties.RawProperties`) and decodes tables with fakerabbit's tag-preserving codec
(:func:`typed_headers`), so a conformance test can assert wire types and key order against both brokers.

It can also publish a raw property block (:meth:`RawClient.publish`), for example headers with exact types.
Only what the conformance tests need: PLAIN login, one channel, declare/bind, publish, get, ack/reject.
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlparse

from pamqp import commands
from pamqp import frame as pamqp_frame
from pamqp.base import Frame

from fakerabbit.broker.fields import Field, Table
from fakerabbit.broker.properties import RawProperties

__all__ = ["RawClient", "RawMessage", "typed_headers"]

_FRAME_END = b"\xce"
_head = struct.Struct(">BHI")
_content = struct.Struct(">HHQ")


@dataclass(frozen=True)
class RawMessage:
    """A ``basic.get-ok`` with its content, as received."""

    delivery_tag: int
    redelivered: bool
    exchange: str
    routing_key: str
    message_count: int
    props: RawProperties
    body: bytes

    @property
    def headers(self) -> Table:
        """The typed headers table (wire order, wire types); empty if there are none."""
        return self.props.headers or {}


def typed_headers(msg: RawMessage) -> Table:
    """The message's headers as ``{key: (tag, value)}`` in wire order."""
    return msg.headers


class RawClient:
    """One connection with one open channel (number 1). Use as a context manager."""

    def __init__(self, url: str, timeout: float = 5.0) -> None:
        u = urlparse(url)
        self._sock = socket.create_connection((u.hostname or "127.0.0.1", u.port or 5672), timeout=timeout)
        self._buf = b""
        user, password = unquote(u.username or "guest"), unquote(u.password or "guest")
        vhost = unquote(u.path[1:]) if len(u.path) > 1 else "/"
        self._sock.sendall(b"AMQP\x00\x00\x09\x01")
        self._expect(commands.Connection.Start)
        self._send(
            0,
            commands.Connection.StartOk(
                client_properties={"product": "rawclient"},
                mechanism="PLAIN",
                response=f"\0{user}\0{password}",
                locale="en_US",
            ),
        )
        tune = self._expect(commands.Connection.Tune)
        self.frame_max = tune.frame_max or 131072
        self._send(0, commands.Connection.TuneOk(channel_max=tune.channel_max, frame_max=self.frame_max, heartbeat=0))
        self._send(0, commands.Connection.Open(virtual_host=vhost))
        self._expect(commands.Connection.OpenOk)
        self._send(1, commands.Channel.Open())
        self._expect(commands.Channel.OpenOk)

    # -- plumbing -------------------------------------------------------------------------------------------
    def _send(self, channel: int, method: Frame) -> None:
        self._sock.sendall(pamqp_frame.marshal(method, channel))

    def _read_frame(self) -> tuple[int, int, bytes]:
        while True:
            if len(self._buf) >= 7:
                ftype, channel, size = _head.unpack_from(self._buf, 0)
                if len(self._buf) >= 8 + size:
                    payload = self._buf[7 : 7 + size]
                    assert self._buf[7 + size : 8 + size] == _FRAME_END, "bad frame end"
                    self._buf = self._buf[8 + size :]
                    if ftype == 8:  # heartbeat
                        continue
                    return ftype, channel, payload
            data = self._sock.recv(65536)
            if not data:
                raise ConnectionError("connection closed by the broker")
            self._buf += data

    def _read_method(self) -> Frame:
        ftype, channel, payload = self._read_frame()
        assert ftype == 1, f"expected a method frame, got type {ftype}"
        raw = _head.pack(ftype, channel, len(payload)) + payload + _FRAME_END
        _, _, method = pamqp_frame.unmarshal(raw)
        if isinstance(method, commands.Channel.Close | commands.Connection.Close):
            raise RuntimeError(f"broker closed: {method.reply_code} {method.reply_text}")
        return method

    def _expect(self, kind: type[Any]) -> Any:
        method = self._read_method()
        assert isinstance(method, kind), f"expected {kind.__name__}, got {method!r}"
        return method

    # -- AMQP methods ---------------------------------------------------------------------------------------
    def queue_declare(self, queue: str, arguments: dict[str, Any] | None = None, durable: bool = False) -> int:
        """Declare a queue; returns its ready message count."""
        self._send(1, commands.Queue.Declare(queue=queue, durable=durable, arguments=arguments))
        ok = self._expect(commands.Queue.DeclareOk)
        return int(ok.message_count)

    def publish(self, exchange: str, routing_key: str, props: bytes | RawProperties, body: bytes) -> None:
        """Publish with an exact property block (build one with ``fakerabbit.broker.properties``)."""
        raw = props.raw if isinstance(props, RawProperties) else props
        out = [pamqp_frame.marshal(commands.Basic.Publish(exchange=exchange, routing_key=routing_key), 1)]
        payload = _content.pack(60, 0, len(body)) + raw
        out.append(_head.pack(2, 1, len(payload)) + payload + _FRAME_END)
        chunk = self.frame_max - 8
        for i in range(0, len(body), chunk):
            part = body[i : i + chunk]
            out.append(_head.pack(3, 1, len(part)) + part + _FRAME_END)
        self._sock.sendall(b"".join(out))

    def get(self, queue: str, *, no_ack: bool = True) -> RawMessage | None:
        """``basic.get``: the message with its raw property block, or None when the queue is empty."""
        self._send(1, commands.Basic.Get(queue=queue, no_ack=no_ack))
        method = self._read_method()
        if isinstance(method, commands.Basic.GetEmpty):
            return None
        assert isinstance(method, commands.Basic.GetOk), method
        ftype, _, payload = self._read_frame()
        assert ftype == 2, f"expected a content header, got frame type {ftype}"
        _, _, size = _content.unpack_from(payload, 0)
        props = RawProperties(payload[12:])
        body = b""
        while len(body) < size:
            ftype, _, part = self._read_frame()
            assert ftype == 3
            body += part
        return RawMessage(
            int(method.delivery_tag),
            bool(method.redelivered),
            method.exchange,
            method.routing_key,
            int(method.message_count),
            props,
            body,
        )

    def reject(self, delivery_tag: int, *, requeue: bool = False) -> None:
        self._send(1, commands.Basic.Reject(delivery_tag=delivery_tag, requeue=requeue))

    def ack(self, delivery_tag: int) -> None:
        self._send(1, commands.Basic.Ack(delivery_tag=delivery_tag))

    def sync(self) -> None:
        """A round trip (``basic.qos``), so every method sent before it has been processed."""
        self._send(1, commands.Basic.Qos(prefetch_count=0))
        self._expect(commands.Basic.QosOk)

    def close(self) -> None:
        try:
            self._send(0, commands.Connection.Close(reply_code=200, reply_text="bye"))
            self._expect(commands.Connection.CloseOk)
        except Exception:
            pass
        self._sock.close()

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def field_types(table: Table) -> list[tuple[str, str]]:
    """``[(key, tag), ...]`` in wire order: what a test compares to check types and key order at once."""
    return [(k, tag) for k, (tag, _v) in table.items()]


def array_of_tables(field: Field) -> list[Table]:
    """The tables inside an ``A`` array field (asserting every element is an ``F`` table)."""
    tag, items = field
    assert tag == "A", f"expected an array, got {tag}"
    out: list[Table] = []
    for t, v in items:
        assert t == "F", f"expected a table element, got {t}"
        out.append(v)
    return out
