"""Just enough AMQP 0-9-1 to look after a real RabbitMQ in dual mode, with no client library.

:class:`MiniClient` is a blocking client for the plugin's own housekeeping (deleting what a test declared,
counting a queue's messages, reading the server's version); the frame helpers are shared with the recording
proxy in :mod:`fakerabbit_pytest.proxy`.
"""

from __future__ import annotations

import socket
import ssl
import struct
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

from fakerabbit.broker.fields import decode_table, encode_table, table_to_python

PROTOCOL_HEADER = b"AMQP\x00\x00\x09\x01"
FRAME_METHOD, FRAME_HEARTBEAT = 1, 8
FRAME_END = b"\xce"
_HEAD = struct.Struct(">BHI")
_IDS = struct.Struct(">HH")


def shortstr(value: str) -> bytes:
    raw = value.encode("utf-8", "surrogateescape")
    if len(raw) > 255:
        raise ValueError(f"short string longer than 255 bytes: {value[:40]!r}")
    return bytes([len(raw)]) + raw


def read_shortstr(payload: bytes, pos: int) -> tuple[str, int]:
    n = payload[pos]
    return payload[pos + 1 : pos + 1 + n].decode("utf-8", "surrogateescape"), pos + 1 + n


def method_frame(channel: int, class_id: int, method_id: int, args: bytes = b"") -> bytes:
    payload = _IDS.pack(class_id, method_id) + args
    return _HEAD.pack(FRAME_METHOD, channel, len(payload)) + payload + FRAME_END


def connection_close_frame(reply_code: int, reply_text: str) -> bytes:
    return method_frame(0, 10, 50, struct.pack(">H", reply_code) + shortstr(reply_text[:255]) + _IDS.pack(0, 0))


def split_frames(buf: bytearray) -> list[tuple[int, int, bytes, bytes]]:
    """Remove the complete frames from the front of ``buf``: ``(type, channel, payload, raw frame bytes)``."""
    out = []
    pos = 0
    while len(buf) - pos >= 7:
        ftype, channel, size = _HEAD.unpack_from(buf, pos)
        end = pos + 7 + size + 1
        if len(buf) < end:
            break
        out.append((ftype, channel, bytes(buf[pos + 7 : end - 1]), bytes(buf[pos:end])))
        pos = end
    del buf[:pos]
    return out


def method_ids(payload: bytes) -> tuple[int, int]:
    if len(payload) < 4:
        return (0, 0)
    class_id, method_id = _IDS.unpack_from(payload, 0)
    return (class_id, method_id)


@dataclass(frozen=True, slots=True)
class AmqpUrl:
    """The parts of an ``amqp://user:password@host:port/vhost`` URL (defaults as pika applies them)."""

    host: str
    port: int
    user: str
    password: str
    vhost: str
    tls: bool
    #: The CA (PEM file) an ``amqps`` broker's certificate is checked against (None: the system's CAs).
    ca_file: str | None = None

    def ssl_context(self) -> ssl.SSLContext:
        """The client TLS context for an ``amqps`` URL."""
        return ssl.create_default_context(cafile=self.ca_file)

    @property
    def url_host(self) -> str:
        """The host as a URL writes it (an IPv6 address in brackets)."""
        return f"[{self.host}]" if ":" in self.host else self.host

    @classmethod
    def parse(cls, url: str) -> AmqpUrl:
        parts = urlsplit(url)
        if parts.scheme not in ("amqp", "amqps"):
            raise ValueError(f"not an AMQP URL: {url!r}")
        tls = parts.scheme == "amqps"
        path = parts.path[1:] if parts.path.startswith("/") else parts.path
        return cls(
            host=parts.hostname or "localhost",
            port=parts.port or (5671 if tls else 5672),
            user=unquote(parts.username or "guest"),
            password=unquote(parts.password or "guest"),
            vhost=unquote(path) if path else "/",
            tls=tls,
        )


class AMQPClosed(Exception):
    """The broker closed the channel or connection: ``code`` and ``text`` are its reply."""

    def __init__(self, code: int, text: str) -> None:
        super().__init__(f"{code} {text}")
        self.code = code
        self.text = text


class MiniClient:
    """A blocking AMQP 0-9-1 client that can open channels, delete and passively declare. Not for tests' use."""

    def __init__(self, url: AmqpUrl, *, vhost: str | None = None, timeout: float = 10.0) -> None:
        self.url = url
        sock = socket.create_connection((url.host, url.port), timeout=timeout)
        if url.tls:
            try:
                sock = url.ssl_context().wrap_socket(sock, server_hostname=url.host)
            except BaseException:
                sock.close()
                raise
        self.sock = sock
        self._buf = bytearray()
        self._next_channel = 1
        self.server_properties: dict[str, Any] = {}
        self._handshake(vhost if vhost is not None else url.vhost)

    # -- plumbing -------------------------------------------------------------------------------------------
    def _read_method(self, channel: int) -> tuple[int, int, bytes]:
        while True:
            for ftype, ch, payload, _raw in split_frames(self._buf):
                if ftype != FRAME_METHOD:
                    continue
                ids = method_ids(payload)
                if ch == 0 and ids == (10, 50):
                    code, text = _close_reason(payload)
                    self.sock.sendall(method_frame(0, 10, 51))
                    raise AMQPClosed(code, text)
                if ch == channel:
                    if ids == (20, 40):
                        code, text = _close_reason(payload)
                        self.sock.sendall(method_frame(channel, 20, 41))
                        raise AMQPClosed(code, text)
                    return ids[0], ids[1], payload
            data = self.sock.recv(65536)
            if not data:
                raise AMQPClosed(0, "connection lost")
            self._buf += data

    def _rpc(self, channel: int, class_id: int, method_id: int, args: bytes) -> bytes:
        self.sock.sendall(method_frame(channel, class_id, method_id, args))
        _c, _m, payload = self._read_method(channel)
        return payload

    def _handshake(self, vhost: str) -> None:
        self.sock.sendall(PROTOCOL_HEADER)
        _c, _m, start = self._read_method(0)
        props, _ = decode_table(start, 6)
        self.server_properties = table_to_python(props)
        response = f"\0{self.url.user}\0{self.url.password}".encode()
        start_ok = encode_table({}) + shortstr("PLAIN") + struct.pack(">I", len(response)) + response
        tune = self._rpc(0, 10, 11, start_ok + shortstr("en_US"))
        channel_max, frame_max, _hb = struct.unpack_from(">HIH", tune, 4)
        self.sock.sendall(method_frame(0, 10, 31, struct.pack(">HIH", channel_max, frame_max, 0)))
        self._rpc(0, 10, 40, shortstr(vhost) + shortstr("") + b"\x00")

    # -- API ------------------------------------------------------------------------------------------------
    @property
    def server_version(self) -> str:
        v = self.server_properties.get("version", "")
        return v.decode() if isinstance(v, bytes) else str(v)

    def open_channel(self) -> int:
        number = self._next_channel
        self._next_channel += 1
        self._rpc(number, 20, 10, shortstr(""))
        return number

    def queue_declare_passive(self, channel: int, name: str) -> tuple[int, int]:
        """``(message_count, consumer_count)``; raises :class:`AMQPClosed` (404) if there is no such queue."""
        ok = self._rpc(channel, 50, 10, b"\x00\x00" + shortstr(name) + b"\x01" + encode_table({}))
        _name, pos = read_shortstr(ok, 4)
        messages, consumers = struct.unpack_from(">II", ok, pos)
        return int(messages), int(consumers)

    def exchange_exists(self, channel: int, name: str) -> bool:
        """Passive ``exchange.declare``; a missing exchange closes ``channel`` (open another one)."""
        try:
            self._rpc(channel, 40, 10, b"\x00\x00" + shortstr(name) + shortstr("") + b"\x01" + encode_table({}))
        except AMQPClosed as exc:
            if exc.code == 404:
                return False
            raise
        return True

    def queue_delete(self, channel: int, name: str) -> None:
        self._rpc(channel, 50, 40, b"\x00\x00" + shortstr(name) + b"\x00")

    def exchange_delete(self, channel: int, name: str) -> None:
        self._rpc(channel, 40, 20, b"\x00\x00" + shortstr(name) + b"\x00")

    def close(self) -> None:
        try:
            self._rpc(0, 10, 50, struct.pack(">H", 200) + shortstr("") + _IDS.pack(0, 0))
        except (AMQPClosed, OSError):
            pass
        finally:
            self.sock.close()

    def __enter__(self) -> MiniClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _close_reason(payload: bytes) -> tuple[int, str]:
    (code,) = struct.unpack_from(">H", payload, 4)
    text, _ = read_shortstr(payload, 6)
    return int(code), text
