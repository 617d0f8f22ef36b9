"""A recording TCP proxy in front of a real RabbitMQ (dual mode).

Tests connect to the proxy, which forwards every byte unchanged and, reading the frames as they pass, records
the queues and exchanges each test declares (including server-named queues, from ``queue.declare-ok``) so the
plugin can delete them afterwards. It works for every client library, and under pytest-xdist each worker's
proxy sees only its own tests' traffic. Because it sits on the connection it can also inject faults the way
the fake does: ``connection.close``, socket resets, ``connection.blocked`` / ``unblocked``, and pick the
connections to act on by what ``connection.start-ok`` told (``where=lambda c: c.connection_name == ...``). It
also counts the deliveries its clients have not settled yet, per queue (``unacked_count``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import itertools
import struct
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from fakerabbit.broker.fields import FieldError, decode_table, table_to_python
from fakerabbit.testing.snapshots import ConnectionSnapshot

from .wire import (
    FRAME_METHOD,
    PROTOCOL_HEADER,
    connection_close_frame,
    method_frame,
    method_ids,
    read_shortstr,
    shortstr,
    split_frames,
)

T = TypeVar("T")
_U64 = struct.Struct(">Q")
_ids = itertools.count(1)


class Link:
    """One proxied client connection."""

    def __init__(self, proxy: RecordingProxy, client: asyncio.StreamWriter, upstream: asyncio.StreamWriter) -> None:
        self.proxy = proxy
        self.client = client
        self.upstream = upstream
        self.id = next(_ids)
        peer = client.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self.client_properties: dict[str, Any] = {}
        self.vhost = "/"
        self.channels: set[int] = set()
        # Deliveries the client has not settled: channel -> delivery tag -> queue (acks / rejects remove them).
        self.unacked: dict[int, dict[int, str]] = {}
        self._consumers: dict[tuple[int, str], tuple[str, bool]] = {}  # (channel, tag) -> (queue, no_ack)
        self._consuming: dict[int, list[tuple[str, str, bool]]] = {}  # channel -> consumes awaiting consume-ok
        self._getting: dict[int, list[tuple[str, bool]]] = {}  # channel -> basic.get awaiting get-ok / empty
        self.blocked_capable = False
        self.open = False  # connection.open seen: frames may be injected
        self.closing = False  # a close was injected: forward nothing more
        self._server_named: set[int] = set()  # channels awaiting queue.declare-ok for a server-named queue

    # -- client -> server -----------------------------------------------------------------------------------
    def from_client(self, channel: int, payload: bytes) -> None:
        ids = method_ids(payload)
        try:
            if ids == (10, 11):  # connection.start-ok: client properties and capabilities
                props, _ = decode_table(payload, 4)
                self.client_properties = table_to_python(props)
                caps = props.get("capabilities")
                if caps is not None and caps[0] == "F":
                    flag = caps[1].get("connection.blocked")
                    self.blocked_capable = bool(flag is not None and flag[1])
            elif ids == (10, 40):  # connection.open
                self.vhost, _ = read_shortstr(payload, 4)
                self.open = True
            elif ids == (50, 10):  # queue.declare: ticket, queue, bits (passive = bit 0)
                name, pos = read_shortstr(payload, 6)
                if not payload[pos] & 1:
                    if name:
                        self.proxy.declared_queues.add((self.vhost, name))
                    else:
                        self._server_named.add(channel)
            elif ids == (40, 10):  # exchange.declare: ticket, exchange, type, bits (passive = bit 0)
                name, pos = read_shortstr(payload, 6)
                _type, pos = read_shortstr(payload, pos)
                if not payload[pos] & 1 and name:
                    self.proxy.declared_exchanges.add((self.vhost, name))
            elif ids == (10, 51) and self.closing:  # close-ok for an injected close
                self.client.close()
            else:
                self._track_client(channel, ids, payload)
        except (IndexError, struct.error, FieldError, UnicodeDecodeError):
            pass  # not ours to judge: the broker will answer a malformed frame

    def _track_client(self, channel: int, ids: tuple[int, int], payload: bytes) -> None:
        if ids == (20, 10):  # channel.open
            self.channels.add(channel)
        elif ids in ((20, 40), (20, 41)):  # channel.close / close-ok (for the server's close)
            self._forget_channel(channel)
        elif ids == (60, 20):  # basic.consume: ticket, queue, consumer-tag, bits (no-ack = bit 1)
            queue, pos = read_shortstr(payload, 6)
            tag, pos = read_shortstr(payload, pos)
            no_ack = bool(payload[pos] & 2)
            if tag:
                self._consumers[(channel, tag)] = (queue, no_ack)
            self._consuming.setdefault(channel, []).append((queue, tag, no_ack))
        elif ids == (60, 70):  # basic.get: ticket, queue, bits (no-ack = bit 0)
            queue, pos = read_shortstr(payload, 6)
            self._getting.setdefault(channel, []).append((queue, bool(payload[pos] & 1)))
        elif ids in ((60, 80), (60, 90), (60, 120)):  # ack / reject / nack: delivery-tag, bits (multiple = bit 0)
            (tag,) = _U64.unpack_from(payload, 4)
            multiple = ids != (60, 90) and bool(payload[12] & 1)
            pending = self.unacked.get(channel, {})
            if multiple:
                for t in [t for t in pending if tag == 0 or t <= tag]:
                    del pending[t]
            else:
                pending.pop(tag, None)
        elif ids == (60, 110):  # basic.recover: everything unacked goes back
            self.unacked.pop(channel, None)

    def _forget_channel(self, channel: int) -> None:
        self.channels.discard(channel)
        self.unacked.pop(channel, None)
        self._consuming.pop(channel, None)
        self._getting.pop(channel, None)
        for key in [k for k in self._consumers if k[0] == channel]:
            del self._consumers[key]

    def snapshot(self) -> ConnectionSnapshot:
        """This connection as ``where=`` filters see it (like the fake's ``rabbit.connections()``)."""
        return ConnectionSnapshot(
            id=self.id,
            name=f"{self.peer} -> {self.proxy.target[0]}:{self.proxy.target[1]}",
            user=self.proxy.user,
            vhost=self.vhost,
            peer=self.peer,
            client_properties=dict(self.client_properties),
            channels=len(self.channels),
        )

    # -- server -> client -----------------------------------------------------------------------------------
    def from_server(self, channel: int, payload: bytes) -> None:
        ids = method_ids(payload)
        if ids == (50, 11) and channel in self._server_named:
            self._server_named.discard(channel)
            with contextlib.suppress(IndexError):
                name, _ = read_shortstr(payload, 4)
                self.proxy.declared_queues.add((self.vhost, name))
            return
        with contextlib.suppress(IndexError, struct.error, UnicodeDecodeError):
            if ids == (60, 21):  # basic.consume-ok: the tag of the oldest pending consume
                tag, _ = read_shortstr(payload, 4)
                waiting = self._consuming.get(channel)
                if waiting:
                    queue, _asked, no_ack = waiting.pop(0)
                    self._consumers[(channel, tag)] = (queue, no_ack)
            elif ids == (60, 60):  # basic.deliver: consumer-tag, delivery-tag
                tag, pos = read_shortstr(payload, 4)
                (dtag,) = _U64.unpack_from(payload, pos)
                consumer = self._consumers.get((channel, tag))
                if consumer is not None and not consumer[1]:
                    self.unacked.setdefault(channel, {})[dtag] = consumer[0]
            elif ids in ((60, 71), (60, 72)):  # basic.get-ok (delivery-tag) / get-empty
                gets = self._getting.get(channel)
                if gets:
                    queue, no_ack = gets.pop(0)
                    if ids == (60, 71) and not no_ack:
                        (dtag,) = _U64.unpack_from(payload, 4)
                        self.unacked.setdefault(channel, {})[dtag] = queue
            elif ids in ((20, 40), (20, 41)):  # the broker closed the channel: unacked messages went back
                self._forget_channel(channel)

    # -- fault injection (on the proxy's loop) --------------------------------------------------------------
    def inject_close(self, reply_code: int, reply_text: str) -> None:
        if self.closing or self.client.is_closing():
            return
        if not self.open:  # still in the handshake: no close frame is possible yet
            self.drop()
            return
        self.closing = True
        self.client.write(connection_close_frame(reply_code, reply_text))
        self.upstream.close()
        asyncio.get_running_loop().call_later(1.0, self.drop)

    def drop(self) -> None:
        self.closing = True
        for w in (self.client, self.upstream):
            if not w.is_closing():
                w.transport.abort()

    def notify_blocked(self, blocked: bool, reason: str) -> None:
        if not self.open or self.closing or not self.blocked_capable:
            return
        self.client.write(method_frame(0, 10, 60, shortstr(reason)) if blocked else method_frame(0, 10, 61))


class RecordingProxy:
    """Forwards ``127.0.0.1:<port>`` to ``target_host:target_port`` on a private event loop in a thread."""

    def __init__(self, target_host: str, target_port: int, *, user: str = "guest") -> None:
        self.target = (target_host, target_port)
        self.user = user
        self.declared_queues: set[tuple[str, str]] = set()
        self.declared_exchanges: set[tuple[str, str]] = set()
        self.links: set[Link] = set()
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.base_events.Server | None = None

    # -- lifecycle ------------------------------------------------------------------------------------------
    def start(self) -> RecordingProxy:
        ready: concurrent.futures.Future[int] = concurrent.futures.Future()
        loop = asyncio.new_event_loop()

        def run() -> None:
            asyncio.set_event_loop(loop)
            try:
                self._server = loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", 0))
            except BaseException as exc:
                ready.set_exception(exc)
                loop.close()
                return
            ready.set_result(int(self._server.sockets[0].getsockname()[1]))
            loop.run_forever()
            for link in list(self.links):
                link.drop()
            self._server.close()
            loop.run_until_complete(asyncio.sleep(0))
            loop.close()

        self._loop = loop
        self._thread = threading.Thread(target=run, name="fakerabbit-proxy", daemon=True)
        self._thread.start()
        self.port = ready.result(timeout=10)
        return self

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=5)
        self._loop = self._thread = None

    def call(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` on the proxy's loop and wait for its result."""
        loop = self._loop
        if loop is None:
            return fn()
        fut: concurrent.futures.Future[T] = concurrent.futures.Future()

        def run() -> None:
            try:
                fut.set_result(fn())
            except BaseException as exc:
                fut.set_exception(exc)

        loop.call_soon_threadsafe(run)
        return fut.result(timeout=10)

    # -- per test -------------------------------------------------------------------------------------------
    def take_declared(self) -> tuple[set[tuple[str, str]], set[tuple[str, str]]]:
        """The (vhost, name) queues and exchanges declared since the last call; forgets them."""

        def take() -> tuple[set[tuple[str, str]], set[tuple[str, str]]]:
            out = (set(self.declared_queues), set(self.declared_exchanges))
            self.declared_queues.clear()
            self.declared_exchanges.clear()
            return out

        return self.call(take)

    def for_each_link(
        self, fn: Callable[[Link], None], where: Callable[[ConnectionSnapshot], bool] | None = None
    ) -> int:
        """Apply ``fn`` to every live link (that ``where`` picks, by its snapshot) on the proxy's loop; returns
        how many."""

        def run() -> int:
            links = [link for link in self.links if where is None or (link.open and where(link.snapshot()))]
            for link in links:
                fn(link)
            return len(links)

        return self.call(run)

    def connections(self) -> list[ConnectionSnapshot]:
        """The open client connections (past ``connection.open``), oldest first."""
        return self.call(lambda: sorted((link.snapshot() for link in self.links if link.open), key=lambda c: c.id))

    def unacked_count(self, vhost: str, queue: str) -> int:
        """Deliveries from ``queue`` that clients of this proxy hold unsettled."""

        def count() -> int:
            return sum(
                1
                for link in self.links
                if link.vhost == vhost and not link.closing
                for pending in link.unacked.values()
                for q in pending.values()
                if q == queue
            )

        return self.call(count)

    # -- pumping --------------------------------------------------------------------------------------------
    async def _handle(self, creader: asyncio.StreamReader, cwriter: asyncio.StreamWriter) -> None:
        try:
            ureader, uwriter = await asyncio.open_connection(*self.target)
        except OSError:
            cwriter.transport.abort()
            return
        link = Link(self, cwriter, uwriter)
        self.links.add(link)
        try:
            await asyncio.gather(self._client_to_server(link, creader), self._server_to_client(link, ureader))
        finally:
            self.links.discard(link)
            link.drop()

    async def _client_to_server(self, link: Link, reader: asyncio.StreamReader) -> None:
        buf = bytearray()
        header = True
        try:
            while True:
                data = await reader.read(65536)
                if not data:
                    break
                if link.closing:
                    buf += data
                    for ftype, channel, payload, _raw in split_frames(buf):
                        if ftype == FRAME_METHOD and channel == 0:
                            link.from_client(channel, payload)
                    continue
                link.upstream.write(data)
                buf += data
                if header:
                    if len(buf) < len(PROTOCOL_HEADER):
                        continue
                    del buf[: len(PROTOCOL_HEADER)]
                    header = False
                for ftype, channel, payload, _raw in split_frames(buf):
                    if ftype == FRAME_METHOD:
                        link.from_client(channel, payload)
        except (ConnectionError, OSError):
            pass
        finally:
            if not link.upstream.is_closing():
                link.upstream.close()

    async def _server_to_client(self, link: Link, reader: asyncio.StreamReader) -> None:
        buf = bytearray()
        try:
            while True:
                data = await reader.read(65536)
                if not data or link.closing:
                    break
                buf += data
                frames = split_frames(buf)
                for ftype, channel, payload, _raw in frames:
                    if ftype == FRAME_METHOD:
                        link.from_server(channel, payload)
                if frames:
                    link.client.write(b"".join(raw for *_rest, raw in frames))
        except (ConnectionError, OSError):
            pass
        finally:
            if not link.closing and not link.client.is_closing():
                if buf:
                    link.client.write(bytes(buf))
                link.client.close()
