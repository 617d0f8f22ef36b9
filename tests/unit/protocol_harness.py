"""A fake transport and a client that drives fakerabbit's protocol layer without a socket: bytes go straight
into ``AMQPConnection.data_received`` and come back as frames from what the connection wrote. Methods are
encoded and decoded with ``pika.spec`` (a codec independent of the pamqp fakerabbit uses)."""

from __future__ import annotations

import asyncio
import struct
from typing import Any

from pika import spec

from fakerabbit.broker.broker import Broker
from fakerabbit.clock import VirtualClock
from fakerabbit.protocol.connection import AMQPConnection
from fakerabbit.protocol.listener import Listener

HEADER = b"AMQP\x00\x00\x09\x01"


class FakeTransport:
    """What an asyncio transport gives a connection, recording what happens to it. Closing it tells the
    protocol (if it was given one) at the loop's next turn, as asyncio's transports do."""

    def __init__(self, protocol: asyncio.BaseProtocol | None = None) -> None:
        self.protocol = protocol
        self.out = bytearray()
        self.writes = 0
        self.reading = True
        self.closed = False
        self.aborted = False

    def write(self, data: bytes) -> None:
        assert not self.closed, "write after close"
        self.out += data
        self.writes += 1

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 40000), "sockname": ("127.0.0.1", 5672)}.get(name, default)

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def close(self) -> None:
        if not self.closed and self.protocol is not None:
            asyncio.get_running_loop().call_soon(self.protocol.connection_lost, None)
        self.closed = True

    def abort(self) -> None:
        self.close()
        self.aborted = True

    def is_closing(self) -> bool:
        return self.closed

    def get_write_buffer_size(self) -> int:
        return 0


def frame(ftype: int, channel: int, payload: bytes, end: bytes = b"\xce") -> bytes:
    return struct.pack(">BHI", ftype, channel, len(payload)) + payload + end


def method(channel: int, m: Any) -> bytes:
    return frame(1, channel, struct.pack(">HH", m.INDEX >> 16, m.INDEX & 0xFFFF) + b"".join(m.encode()))


def content(channel: int, body: bytes, props: bytes = b"\x00\x00", size: int | None = None) -> bytes:
    head = frame(2, channel, struct.pack(">HHQ", 60, 0, len(body) if size is None else size) + props)
    return head + (frame(3, channel, body) if body else b"")


def publish(channel: int, routing_key: str, body: bytes, props: bytes = b"\x00\x00", exchange: str = "") -> bytes:
    return method(channel, spec.Basic.Publish(exchange=exchange, routing_key=routing_key)) + content(
        channel, body, props
    )


def parse(data: bytes) -> list[tuple[int, int, bytes]]:
    out, pos = [], 0
    while pos < len(data):
        ftype, channel, size = struct.unpack_from(">BHI", data, pos)
        assert data[pos + 7 + size] == 0xCE
        out.append((ftype, channel, bytes(data[pos + 7 : pos + 7 + size])))
        pos += 8 + size
    return out


def decode(payload: bytes) -> Any:
    class_id, method_id = struct.unpack_from(">HH", payload)
    m = spec.methods[(class_id << 16) | method_id]()
    m.decode(payload, 4)
    return m


class Client:
    """One connection of a broker of its own, driven by hand."""

    def __init__(self, version: str | None = None, *, capabilities: dict[str, bool] | None = None) -> None:
        self.broker = Broker(VirtualClock(), rabbitmq_version=version)
        self.listener = Listener(self.broker)
        self.conn = AMQPConnection(self.listener)
        self.transport = FakeTransport(self.conn)
        self.capabilities = capabilities if capabilities is not None else {"connection.blocked": True}
        self.conn.connection_made(self.transport)  # type: ignore[arg-type]

    def send(self, *data: bytes) -> None:
        self.conn.data_received(b"".join(data))

    def frames(self) -> list[tuple[int, int, bytes]]:
        """The frames written since the last call."""
        data, self.transport.out = bytes(self.transport.out), bytearray()
        return parse(data)

    def methods(self) -> list[tuple[int, Any]]:
        """(channel, pika method) of the method frames written since the last call."""
        return [(ch, decode(p)) for t, ch, p in self.frames() if t == 1]

    def names(self) -> list[str]:
        return [m.NAME for _, m in self.methods()]

    def open(self, *, heartbeat: int = 0, channel_max: int = 2047, frame_max: int = 131072) -> Client:
        """Handshake up to open-ok (the frames it produced are read)."""
        self.send(HEADER)
        self.send(
            method(
                0,
                spec.Connection.StartOk(
                    client_properties={"capabilities": self.capabilities},
                    mechanism="PLAIN",
                    response="\0guest\0guest",
                ),
            )
        )
        self.send(method(0, spec.Connection.TuneOk(channel_max=channel_max, frame_max=frame_max, heartbeat=heartbeat)))
        self.send(method(0, spec.Connection.Open(virtual_host="/")))
        names = self.names()
        assert names[-1] == "Connection.OpenOk", names
        return self

    def channel(self, number: int = 1) -> None:
        self.send(method(number, spec.Channel.Open()))
        assert self.names() == ["Channel.OpenOk"]

    def close_text(self) -> tuple[int, str, int, int]:
        """The connection.close the connection sent (and nothing else)."""
        (ch, m), *rest = self.methods()
        assert (ch, m.NAME, rest) == (0, "Connection.Close", []), (ch, m, rest)
        return m.reply_code, m.reply_text, m.class_id, m.method_id
