"""The AMQP listener: accepts client connections on the broker's loop and coalesces their writes.

:class:`~fakerabbit.FakeRabbit` (``server.py``, the composition root) owns one; connections, alarms, the
management API and the testing helpers reach the listener, never the ``FakeRabbit`` above it.
"""

from __future__ import annotations

import asyncio
import os
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from fakerabbit.broker.broker import Broker, ConnectionInfo
from fakerabbit.protocol.addresses import bind, host_port
from fakerabbit.protocol.alarms import ResourceAlarms
from fakerabbit.protocol.tls import TLSDetails, drain_tls, tls_details

if TYPE_CHECKING:
    from fakerabbit.protocol.connection import AMQPConnection

__all__ = ["BoundAddress", "ConnectionDetails", "Listener"]


@dataclass(frozen=True, slots=True)
class ConnectionDetails:
    """What the wire knows of a connection and the broker does not: its local address, tuned limits and TLS."""

    local_host: str
    local_port: int
    channel_max: int
    frame_max: int
    heartbeat: int
    tls: TLSDetails | None = None


@dataclass(frozen=True, slots=True)
class BoundAddress:
    """One listening socket, as RabbitMQ's ``listeners`` show it: ``amqp`` or ``amqp/ssl``, address, port."""

    protocol: str
    ip_address: str
    port: int


class Listener:
    """The AMQP listener: accepts connections and owns write coalescing: frames produced while handling any
    event are written once per connection at the end of that event (:meth:`flush`)."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.connections: set[AMQPConnection] = set()
        self.dirty: set[AMQPConnection] = set()
        #: Called on the loop before each batch of client bytes is handled (the following clock catches up).
        self.on_inbound: Callable[[], object] | None = None
        #: Memory/disk alarms and the publisher blocking they cause (see fakerabbit.protocol.alarms).
        self.alarms = ResourceAlarms(self)
        self._servers: list[asyncio.base_events.Server] = []
        #: The listening sockets (``amqp`` and, with TLS, ``amqp/ssl``), in the order they were bound.
        self.bound: list[BoundAddress] = []
        self.loop: asyncio.AbstractEventLoop | None = None
        #: RabbitMQ's ``loopback_users``: these users may log in only from a loopback address.
        self.loopback_users: frozenset[str] = frozenset({"guest"})

    async def start(self, host: str, port: int, tls: ssl.SSLContext | None = None) -> int:
        """Listen on ``host`` (every address it stands for: see :func:`~fakerabbit.protocol.addresses.bind`) at
        ``port`` (0: a free one), with TLS when ``tls`` is given (amqps); may be called again for another port.
        Returns the port."""
        from fakerabbit.protocol.connection import AMQPConnection

        self.loop = asyncio.get_running_loop()
        socks = bind(host, port)
        bound = int(socks[0].getsockname()[1])
        try:
            for sock in socks:
                server = await self.loop.create_server(lambda: AMQPConnection(self), sock=sock, ssl=tls)
                self._servers.append(server)
                ip, _ = host_port(sock.getsockname())
                self.bound.append(BoundAddress("amqp/ssl" if tls is not None else "amqp", ip, bound))
        except BaseException:
            for sock in socks:
                sock.close()
            raise
        return bound

    async def stop(self) -> None:
        servers, self._servers = self._servers, []
        for server in servers:
            server.close()
        for c in list(self.connections):
            c.abort()
        for server in servers:
            await server.wait_closed()
        self.bound = []

    def details(self, info: ConnectionInfo) -> ConnectionDetails | None:
        """The wire details of the connection behind ``info`` (None once it is gone)."""
        for c in self.connections:
            if c.info is info:
                transport = c.transport
                host, port = host_port(transport.get_extra_info("sockname") if transport is not None else None)
                tls = tls_details(transport.get_extra_info("ssl_object")) if transport is not None else None
                return ConnectionDetails(host, port, c.channel_max, c.frame_max, c.heartbeat, tls)
        return None

    def abort_all(self) -> int:
        """Reset every client socket without a close frame (handshakes included); how many there were."""
        conns = list(self.connections)
        for c in conns:
            c.abort()
        return len(conns)

    def close_all(self, reply_text: str) -> None:
        """Close every open connection with 320 CONNECTION_FORCED ``reply_text``, in an orderly way (unacked
        messages requeued); a connection still in its handshake is reset."""
        for c in list(self.connections):
            info = c.info
            if info is not None and info.close is not None:
                info.close(320, reply_text)
            else:
                c.abort()

    def force_close_all(self, reply_text: str) -> None:
        """Tell every connection 320 ``reply_text`` and drop it without the orderly teardown (the broker is
        about to be wiped: requeueing and exclusive-queue deletion would be wasted)."""
        for c in list(self.connections):
            c.force_close(reply_text)

    def flush(self) -> None:
        if self.alarms.memory_high_watermark is not None:
            self.alarms.check()
        while self.dirty:
            conn = self.dirty.pop()
            conn.flush()

    def drain_inbound(self) -> None:
        """Process bytes clients have already sent but the loop has not read yet.

        Called before the virtual clock moves, so that a message published just before ``advance()`` is
        enqueued before time passes (loopback TCP makes the bytes readable the moment ``send`` returns).
        """
        for conn in list(self.connections):
            transport = conn.transport
            if transport is None or conn.closed:
                continue
            sock = transport.get_extra_info("socket")
            if sock is None:
                continue
            fd = sock.fileno()
            if transport.get_extra_info("sslcontext") is not None:
                drain_tls(transport, fd)
                continue
            while not conn.closed:
                try:
                    data = os.read(fd, 262144)
                except (BlockingIOError, InterruptedError):
                    break
                except OSError:
                    break
                if not data:
                    break
                conn.data_received(data)
        self.flush()
