"""The raw-socket AMQP 0-9-1 client of the test suite (conformance, robustness, the differential fuzzer).

It does its own framing, so a test can send any bytes (truncated frames, a wrong frame-end octet, content on
channel 0, unknown method ids) and see every byte that comes back. Method payloads and the property blocks a test
builds are encoded and decoded with ``pika.spec`` — a codec independent of the one fakerabbit uses (pamqp) — so
the two cannot agree on a mistake.

pika decodes a headers table into a dict and so hides the wire type of each value (``l`` long vs ``I`` signedint,
``T`` timestamp) and, from 3.13, the order of the keys. For those, :meth:`RawAMQP.basic_get` returns a
:class:`RawMessage` that keeps the content-header property block exactly as received
(:class:`~fakerabbit.broker.properties.RawProperties`, read with fakerabbit's tag-preserving table codec), and
:meth:`RawAMQP.publish` sends a property block given as bytes unchanged, for headers with exact types.
"""

from __future__ import annotations

import socket
import struct
import time
from dataclasses import dataclass, field
from typing import Any, TypeAlias
from urllib.parse import unquote, urlparse

from pika import data as pika_data
from pika import spec

from fakerabbit.broker.fields import Field, Table
from fakerabbit.broker.properties import RawProperties

HEADER = b"AMQP\x00\x00\x09\x01"
FRAME_END = b"\xce"

DEFAULT_CLIENT_PROPERTIES: dict[str, Any] = {
    "product": "rawamqp",
    "capabilities": {
        "authentication_failure_close": True,
        "basic.nack": True,
        "connection.blocked": True,
        "consumer_cancel_notify": True,
        "publisher_confirms": True,
        "exchange_exchange_bindings": True,
    },
}


def frame(ftype: int, channel: int, payload: bytes, end: bytes = FRAME_END) -> bytes:
    return struct.pack(">BHI", ftype, channel, len(payload)) + payload + end


def method_payload(method: Any) -> bytes:
    return struct.pack(">I", method.INDEX) + b"".join(method.encode())


def method_frame(channel: int, method: Any) -> bytes:
    return frame(1, channel, method_payload(method))


#: A content header's property block: pika properties (encoded by pika), or the exact bytes to send.
Properties: TypeAlias = "spec.BasicProperties | RawProperties | bytes"


def property_block(props: Properties | None) -> bytes:
    if isinstance(props, bytes):
        return props
    if isinstance(props, RawProperties):
        return props.raw
    return b"".join((props or spec.BasicProperties()).encode())


def header_frame(
    channel: int, body_size: int, props: Properties | None = None, class_id: int = 60, weight: int = 0
) -> bytes:
    return frame(2, channel, struct.pack(">HHQ", class_id, weight, body_size) + property_block(props))


def body_frame(channel: int, body: bytes) -> bytes:
    return frame(3, channel, body)


def amqplain_response(user: str, password: str) -> bytes:
    pieces: list[bytes] = []
    pika_data.encode_table(pieces, {"LOGIN": user, "PASSWORD": password})
    return b"".join(pieces)[4:]  # AMQPLAIN sends the table without its length prefix


@dataclass
class Frame:
    type: int
    channel: int
    payload: bytes
    raw: bytes
    method: Any = None
    properties: spec.BasicProperties | None = None
    body_size: int = 0

    @property
    def name(self) -> str | None:
        return None if self.method is None else str(self.method.NAME)

    @classmethod
    def parse(cls, ftype: int, channel: int, payload: bytes, raw: bytes) -> Frame:
        f = cls(ftype, channel, payload, raw)
        if ftype == 1 and len(payload) >= 4:
            index = struct.unpack_from(">I", payload)[0]
            method_cls = spec.methods.get(index)
            if method_cls is not None:
                f.method = method_cls()
                f.method.decode(payload, 4)
        elif ftype == 2:
            _class_id, _weight, f.body_size = struct.unpack_from(">HHQ", payload)
            f.properties = spec.BasicProperties()
            try:
                f.properties.decode(payload[12:])
            except RecursionError:  # pika's table decoder recurses: a deeply nested header is read raw
                f.properties = None
        return f

    def __repr__(self) -> str:
        if self.method is not None:
            return f"<ch{self.channel} {self.method!r}>"
        return f"<ch{self.channel} type{self.type} {self.payload[:40]!r}>"


@dataclass(frozen=True)
class Close:
    """A connection.close or channel.close the peer sent."""

    channel: int
    reply_code: int
    reply_text: str
    class_id: int
    method_id: int

    @property
    def is_connection(self) -> bool:
        return self.channel == 0


class Timeout(AssertionError):
    pass


@dataclass
class Delivery:
    method: Any
    properties: spec.BasicProperties
    body: bytes


@dataclass(frozen=True)
class RawMessage:
    """A ``basic.get-ok`` with its content, as received: the property block's bytes kept as they came."""

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


@dataclass
class RawAMQP:
    """One TCP connection speaking (or mis-speaking) AMQP."""

    host: str
    port: int
    sock: socket.socket
    buf: bytearray = field(default_factory=bytearray)
    pos: int = 0  # start of unread data in buf
    eof: bool = False
    start: Frame | None = None
    tune: Frame | None = None
    seen: list[Frame] = field(default_factory=list)
    opened: bool = False  # connection.open-ok arrived

    # -- construction -----------------------------------------------------------------------------------------
    @classmethod
    def socket_to(cls, url: str) -> RawAMQP:
        u = urlparse(url)
        host, port = u.hostname or "127.0.0.1", u.port or 5672
        sock = socket.create_connection((host, port), timeout=5)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return cls(host, port, sock)

    @classmethod
    def connect(
        cls,
        url: str,
        *,
        user: str | None = None,
        password: str | None = None,
        vhost: str | None = None,
        mechanism: str = "PLAIN",
        response: bytes | None = None,
        client_properties: dict[str, Any] | bytes | None = None,
        channel_max: int = 2047,
        frame_max: int = 131072,
        heartbeat: int = 0,
        open: bool = True,
    ) -> RawAMQP:
        """Handshake up to open-ok (or stop earlier: ``open=False`` stops after tune-ok).

        ``client_properties`` as bytes is an encoded field table (length included), sent as it is: for tables
        pika cannot encode, such as ones nested thousands deep. If the broker refuses, the connection is returned
        as it stands; check :attr:`start` / :attr:`tune` / :attr:`opened`.
        """
        u = urlparse(url)
        user = unquote(u.username or "guest") if user is None else user
        password = unquote(u.password or "guest") if password is None else password
        if vhost is None:
            vhost = unquote(u.path[1:]) if len(u.path) > 1 else "/"
        c = cls.socket_to(url)
        c.send(HEADER)
        c.start = c.read_frame()
        assert c.start is not None and c.start.name == "Connection.Start", c.start
        if response is None:
            response = (
                b"\x00" + user.encode() + b"\x00" + password.encode()
                if mechanism == "PLAIN"
                else amqplain_response(user, password)
            )
        if isinstance(client_properties, bytes):
            shortstr, longstr = struct.Struct(">B"), struct.Struct(">I")
            args = (
                client_properties
                + shortstr.pack(len(mechanism))
                + mechanism.encode()
                + longstr.pack(len(response))
                + response
                + b"\x05en_US"
            )
            c.send(frame(1, 0, struct.pack(">HH", 10, 11) + args))
        else:
            c.send_method(
                0,
                spec.Connection.StartOk(
                    client_properties=DEFAULT_CLIENT_PROPERTIES if client_properties is None else client_properties,
                    mechanism=mechanism,
                    response=response,
                    locale="en_US",
                ),
            )
        f = c.read_frame()
        if f is None or f.name != "Connection.Tune":
            if f is not None:
                c.seen.append(f)
            return c
        c.tune = f
        c.send_method(0, spec.Connection.TuneOk(channel_max=channel_max, frame_max=frame_max, heartbeat=heartbeat))
        if open:
            reply = c.rpc(0, spec.Connection.Open(virtual_host=vhost), "Connection.OpenOk")
            c.opened = reply.name == "Connection.OpenOk"
            if not c.opened:
                c.seen.append(reply)
        return c

    @classmethod
    def with_channel(cls, url: str, channel: int = 1, **kwargs: Any) -> RawAMQP:
        """:meth:`connect` (same keywords), then open ``channel``."""
        c = cls.connect(url, **kwargs)
        c.open_channel(channel)
        return c

    # -- output -----------------------------------------------------------------------------------------------
    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send_method(self, channel: int, method: Any) -> None:
        self.send(method_frame(channel, method))

    def publish(
        self,
        channel: int,
        exchange: str,
        routing_key: str,
        body: bytes = b"x",
        props: Properties | None = None,
        *,
        mandatory: bool = False,
        immediate: bool = False,
        frame_max: int = 131072,
    ) -> None:
        data = method_frame(
            channel,
            spec.Basic.Publish(exchange=exchange, routing_key=routing_key, mandatory=mandatory, immediate=immediate),
        ) + header_frame(channel, len(body), props)
        step = frame_max - 8
        for i in range(0, len(body), step):
            data += body_frame(channel, body[i : i + step])
        self.send(data)

    # -- input ------------------------------------------------------------------------------------------------
    def _fill(self, deadline: float) -> bool:
        remaining = deadline - time.monotonic()
        if remaining <= 0 or self.eof:
            return False
        self.sock.settimeout(remaining)
        try:
            data = self.sock.recv(262144)
        except TimeoutError:
            return False
        except (ConnectionResetError, BrokenPipeError):
            data = b""
        if not data:
            self.eof = True
            return False
        if self.pos:
            del self.buf[: self.pos]
            self.pos = 0
        self.buf += data
        return True

    def read_frame(self, timeout: float = 5.0) -> Frame | None:
        """The next frame, or None on timeout or EOF (see :attr:`eof`)."""
        deadline = time.monotonic() + timeout
        while True:
            pos = self.pos
            if len(self.buf) - pos >= 7:
                ftype, channel, size = struct.unpack_from(">BHI", self.buf, pos)
                if len(self.buf) - pos >= size + 8:
                    raw = bytes(self.buf[pos : pos + size + 8])
                    self.pos = pos + size + 8
                    assert raw[-1:] == FRAME_END, f"peer sent a bad frame end: {raw!r}"
                    return Frame.parse(ftype, channel, raw[7:-1], raw)
            if not self._fill(deadline):
                return None

    def read_raw(self, timeout: float = 2.0) -> bytes:
        """Every byte that arrives until EOF or ``timeout`` (for protocol-header replies)."""
        deadline = time.monotonic() + timeout
        while self._fill(deadline):
            pass
        data = bytes(self.buf[self.pos :])
        self.buf, self.pos = bytearray(), 0
        return data

    def wait(self, *names: str, timeout: float = 5.0) -> Frame:
        """Read until a method named in ``names`` or a close arrives (heartbeats skipped)."""
        deadline = time.monotonic() + timeout
        while True:
            f = self.read_frame(max(deadline - time.monotonic(), 0.001))
            if f is None:
                raise Timeout(f"waiting for {names}; eof={self.eof}; seen {self.seen[-5:]!r}")
            if f.type == 8:
                continue
            self.seen.append(f)
            if f.name in names or f.name in ("Connection.Close", "Channel.Close"):
                return f

    def rpc(self, channel: int, method: Any, *reply: str, timeout: float = 5.0) -> Frame:
        self.send_method(channel, method)
        return self.wait(*reply, timeout=timeout)

    def expect_close(self, timeout: float = 5.0) -> Close:
        """The next connection.close or channel.close (other frames skipped)."""
        f = self.wait("Connection.Close", "Channel.Close", timeout=timeout)
        if f.name not in ("Connection.Close", "Channel.Close"):
            raise AssertionError(f"expected a close, got {f!r}")
        m = f.method
        return Close(f.channel, m.reply_code, m.reply_text, m.class_id, m.method_id)

    def last_close(self) -> Close | None:
        for f in reversed(self.seen):
            if f.name in ("Connection.Close", "Channel.Close"):
                m = f.method
                return Close(f.channel, m.reply_code, m.reply_text, m.class_id, m.method_id)
        return None

    def wait_eof(self, timeout: float = 5.0) -> bool:
        """True if the peer closes the TCP connection within ``timeout`` (frames before that are dropped)."""
        deadline = time.monotonic() + timeout
        while not self.eof:
            if not self._fill(deadline):
                break
            self.buf, self.pos = bytearray(), 0
        return self.eof

    def quiet(self, timeout: float = 0.3) -> list[Frame]:
        """Frames (not heartbeats) arriving within ``timeout``."""
        out: list[Frame] = []
        deadline = time.monotonic() + timeout
        while True:
            f = self.read_frame(max(deadline - time.monotonic(), 0.001))
            if f is None:
                return out
            if f.type != 8:
                self.seen.append(f)
                out.append(f)

    def _content(self, channel: int, timeout: float) -> tuple[Frame, bytes]:
        head = self.read_frame(timeout)
        assert head is not None and head.type == 2, head
        body = b""
        while len(body) < head.body_size:
            f = self.read_frame(timeout)
            assert f is not None and f.type == 3 and f.channel == channel, f
            body += f.payload
        return head, body

    def get_message(self, channel: int, timeout: float = 5.0) -> Delivery:
        """After a deliver / get-ok / return method frame: read its header and body frames."""
        head, body = self._content(channel, timeout)
        assert head.properties is not None, head
        return Delivery(None, head.properties, body)

    def basic_get(
        self, queue: str, *, no_ack: bool = True, channel: int = 1, timeout: float = 5.0
    ) -> RawMessage | None:
        """``basic.get``: the message with its property block as received, or None when the queue is empty."""
        f = self.rpc(
            channel, spec.Basic.Get(queue=queue, no_ack=no_ack), "Basic.GetOk", "Basic.GetEmpty", timeout=timeout
        )
        if f.name == "Basic.GetEmpty":
            return None
        assert f.name == "Basic.GetOk", f"basic.get on {queue!r}: {f!r}"
        head, body = self._content(channel, timeout)
        m = f.method
        return RawMessage(
            int(m.delivery_tag),
            bool(m.redelivered),
            str(m.exchange),
            str(m.routing_key),
            int(m.message_count),
            RawProperties(head.payload[12:]),
            body,
        )

    # -- conveniences -----------------------------------------------------------------------------------------
    def open_channel(self, channel: int = 1) -> None:
        f = self.rpc(channel, spec.Channel.Open(), "Channel.OpenOk")
        assert f.name == "Channel.OpenOk", f

    def sync(self, channel: int = 1) -> None:
        """A round trip (``basic.qos``, prefetch 0), so every method sent before it has been processed."""
        f = self.rpc(channel, spec.Basic.Qos(0, 0, False), "Basic.QosOk")
        assert f.name == "Basic.QosOk", f

    def ack(self, delivery_tag: int, *, multiple: bool = False, channel: int = 1) -> None:
        self.send_method(channel, spec.Basic.Ack(delivery_tag, multiple))

    def reject(self, delivery_tag: int, *, requeue: bool = False, channel: int = 1) -> None:
        self.send_method(channel, spec.Basic.Reject(delivery_tag, requeue))

    def close_ok(self, channel: int = 0) -> None:
        self.send_method(channel, spec.Connection.CloseOk() if channel == 0 else spec.Channel.CloseOk())

    def close(self) -> None:
        """Close politely if still possible, then the socket."""
        try:
            if not self.eof:
                self.send_method(0, spec.Connection.Close(200, "bye", 0, 0))
                self.wait("Connection.CloseOk", timeout=2)
        except (OSError, AssertionError):
            pass
        self.sock.close()

    def __enter__(self) -> RawAMQP:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
