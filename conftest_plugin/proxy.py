"""A recording TCP proxy in front of a real RabbitMQ (dual mode).

Tests connect to the proxy, which forwards every byte unchanged and, reading the frames as they pass, records
the queues and exchanges each test declares (including server-named queues, from ``queue.declare-ok``) so the
plugin can delete them afterwards. It works for every client library, and under pytest-xdist each worker's
proxy sees only its own tests' traffic. Because it sits on the connection it can also inject faults the way
the fake does: ``connection.close``, socket resets, ``connection.blocked`` / ``unblocked``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import struct
import threading
from collections.abc import Callable
from typing import TypeVar

from fakerabbit.broker.fields import FieldError, decode_table
from fakerabbit_pytest.wire import (
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


class Link:
    """One proxied client connection."""

    def __init__(self, proxy: RecordingProxy, client: asyncio.StreamWriter, upstream: asyncio.StreamWriter) -> None:
        self.proxy = proxy
        self.client = client
        self.upstream = upstream
        self.vhost = "/"
        self.blocked_capable = False
        self.open = False  # connection.open seen: frames may be injected
        self.closing = False  # a close was injected: forward nothing more
        self._server_named: set[int] = set()  # channels awaiting queue.declare-ok for a server-named queue

    # -- client -> server -----------------------------------------------------------------------------------
    def from_client(self, channel: int, payload: bytes) -> None:
        ids = method_ids(payload)
        try:
            if ids == (10, 11):  # connection.start-ok: capabilities
                props, _ = decode_table(payload, 4)
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
        except (IndexError, struct.error, FieldError):
            pass  # not ours to judge: the broker will answer a malformed frame

    # -- server -> client -----------------------------------------------------------------------------------
    def from_server(self, channel: int, payload: bytes) -> None:
        if method_ids(payload) == (50, 11) and channel in self._server_named:
            self._server_named.discard(channel)
            with contextlib.suppress(IndexError):
                name, _ = read_shortstr(payload, 4)
                self.proxy.declared_queues.add((self.vhost, name))

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

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
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

    def for_each_link(self, fn: Callable[[Link], None]) -> int:
        """Apply ``fn`` to every live link on the proxy's loop; returns how many."""

        def run() -> int:
            links = list(self.links)
            for link in links:
                fn(link)
            return len(links)

        return self.call(run)

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
