"""The management API's HTTP/1.1 server: h11 parses and frames, asyncio streams carry the bytes.

Why h11: the API must run on the same event loop as the AMQP server (every broker access happens on that loop,
without locks). h11 is a sans-IO HTTP/1.1 state machine (no sockets, no threads, no event loop of its own), small,
pure Python, with a single dependency-free wheel and a long record of careful RFC 7230 parsing; fakerabbit feeds it
bytes read on its own loop. aiohttp's server would also run on that loop but brings a large dependency tree (and C
extensions) for a few dozen JSON routes; the standard library's ``http.server`` is thread-based.

On top of h11 this module refuses what RabbitMQ's Cowboy refuses and h11 tolerates (Content-Length together with
Transfer-Encoding, bare-LF line endings, HTTP versions other than 1.0/1.1), answers every malformed request with a
4xx and RabbitMQ's error JSON, and applies Cowboy's timeouts: 408 for a request head still incomplete after
``head_timeout`` (5 s) and the connection dropped when a body stalls for ``body_timeout`` (60 s). Handlers are
plain synchronous functions called on the loop; they return a :class:`Response`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import ssl
from collections.abc import Callable
from dataclasses import dataclass, field
from email.utils import formatdate
from http import HTTPStatus
from urllib.parse import parse_qsl, unquote

import h11

from fakerabbit.protocol.addresses import bind, host_port

log = logging.getLogger("fakerabbit.management")

MAX_HEADER_BYTES = 64 * 1024
#: The longest header value (431 beyond it). Approximate: live 4.3.6 accepts 9,000 bytes and refuses 12,000, 4.0.5
#: refuses 5,000 (Cowboy reads headers in buffers, so its limit is not one number).
MAX_HEADER_VALUE = 8192
MAX_BODY_BYTES = 64 * 1024 * 1024
#: Cowboy's ``request_timeout``: a request head must be complete this many seconds after it starts (408 if not).
HEAD_TIMEOUT = 5.0
#: Cowboy's ``idle_timeout``: a connection whose request body stalls this long is closed.
BODY_TIMEOUT = 60.0
#: A connection without a byte of a (next) request is closed quietly after this many seconds (Cowboy: 5 s).
IDLE_TIMEOUT = 5.0
_READ = 65536


@dataclass(slots=True)
class Request:
    """One HTTP request. ``segments`` are the path's ``/``-separated parts, each percent-decoded on its own (so
    ``%2F`` inside a segment is a literal ``/``); a trailing empty segment is dropped."""

    method: str
    target: str
    headers: dict[str, str]
    body: bytes
    segments: list[str]
    query: dict[str, str]

    def header(self, name: str, default: str = "") -> str:
        """A request header (case-insensitive name)."""
        return self.headers.get(name.lower(), default)


@dataclass(slots=True)
class Response:
    """What a handler returns: status, body bytes and extra headers (``Content-Length`` is added)."""

    status: int
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)


class BadHTTP(Exception):
    """The request could not be parsed; answered with ``status`` and the connection closed."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


class _Dropped(Exception):
    """The connection is closed without an answer (a stalled body, the peer went away)."""


def split_target(target: str) -> tuple[list[str], dict[str, str]]:
    """``/api/queues/%2F/q?columns=name`` -> (``["api", "queues", "/", "q"]``, ``{"columns": "name"}``)."""
    path, _, query = target.partition("?")
    raw = path.split("/")
    if raw and raw[0] == "":
        raw = raw[1:]
    if raw and raw[-1] == "":
        raw = raw[:-1]
    segments = [unquote(s) for s in raw]
    return segments, dict(parse_qsl(query, keep_blank_values=True))


def error_body(error: str, reason: str) -> bytes:
    """RabbitMQ's error JSON."""
    return json.dumps({"error": error, "reason": reason}, separators=(",", ":")).encode()


Handler = Callable[[Request], Response]


class HTTPServer:
    """Serves ``handler`` on a TCP port of the running loop. The timeouts are in seconds (tests shorten them)."""

    def __init__(
        self,
        handler: Handler,
        *,
        server_name: str = "fakerabbit",
        head_timeout: float = HEAD_TIMEOUT,
        body_timeout: float = BODY_TIMEOUT,
        idle_timeout: float = IDLE_TIMEOUT,
    ) -> None:
        self.handler = handler
        self.server_name = server_name
        self.head_timeout = head_timeout
        self.body_timeout = body_timeout
        self.idle_timeout = idle_timeout
        self._servers: list[asyncio.base_events.Server] = []
        #: (address, port, over TLS) of every listening socket.
        self.bound: list[tuple[str, int, bool]] = []
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self.port = 0

    async def start(self, host: str, port: int, tls: ssl.SSLContext | None = None) -> int:
        """Listen on ``host:port`` (every address ``host`` stands for; port 0 picks a free one), over HTTPS when
        ``tls`` is given; may be called again for another port. Returns the port."""
        socks = bind(host, port)
        self.port = int(socks[0].getsockname()[1])
        try:
            for sock in socks:
                self._servers.append(await asyncio.start_server(self._client, sock=sock, ssl=tls))
                self.bound.append((host_port(sock.getsockname())[0], self.port, tls is not None))
        except BaseException:
            for sock in socks:
                sock.close()
            raise
        return self.port

    async def stop(self) -> None:
        """Stop listening and close every open client connection."""
        servers, self._servers = self._servers, []
        self.bound = []
        if not servers:
            return
        for server in servers:
            server.close()
        for w in list(self._writers):
            w.close()
        tasks = [t for t in self._tasks if not t.done()]
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=2)
        for server in servers:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(server.wait_closed(), timeout=2)

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        self._writers.add(writer)
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEADER_BYTES)
        try:
            while True:
                try:
                    request = await self._read_request(conn, reader, writer)
                except BadHTTP as exc:
                    error = _ERRORS.get(exc.status, "bad_request")
                    await self._send(writer, conn, None, Response(exc.status, error_body(error, exc.reason)))
                    return
                if request is None:
                    return
                try:
                    response = self.handler(request)
                except Exception:  # a bug: log it, answer without a stack trace, keep serving
                    log.exception("management API: internal error on %s %s", request.method, request.target)
                    response = Response(
                        500, error_body("internal_error", "Internal Server Error"), {"content-type": "application/json"}
                    )
                await self._send(writer, conn, request, response)
                if conn.our_state is h11.MUST_CLOSE or conn.their_state is h11.MUST_CLOSE:
                    return
                try:
                    conn.start_next_cycle()
                except h11.LocalProtocolError:  # the client had not finished sending: close
                    return
        except (_Dropped, ConnectionError, ssl.SSLError, asyncio.CancelledError, h11.LocalProtocolError):
            return
        finally:
            self._writers.discard(writer)
            with contextlib.suppress(Exception):
                writer.close()

    async def _receive(self, conn: h11.Connection, reader: asyncio.StreamReader, timeout: float) -> bytes:
        data = await asyncio.wait_for(reader.read(_READ), timeout)
        conn.receive_data(data)
        return data

    async def _read_request(
        self, conn: h11.Connection, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> Request | None:
        loop = asyncio.get_running_loop()
        started: float | None = None  # when the first byte of this request arrived
        head: bytes | None = b""  # the head's bytes so far (checked for bare LFs until its end is seen)
        # -- the head --------------------------------------------------------------------------------------------
        while True:
            try:
                event = conn.next_event()
            except h11.RemoteProtocolError as exc:
                raise BadHTTP(exc.error_status_hint, _reason(exc)) from None
            if isinstance(event, h11.Request):
                break
            if isinstance(event, h11.ConnectionClosed) or event is h11.PAUSED:
                return None
            left = self.head_timeout - (loop.time() - started) if started is not None else 0.0
            timeout = self.idle_timeout if started is None else max(0.0, left)
            try:
                data = await self._receive(conn, reader, timeout)
            except TimeoutError:
                if started is None:
                    return None  # an idle keep-alive connection: close quietly
                raise BadHTTP(408, "request_timeout") from None
            if not data:
                if started is not None:
                    raise BadHTTP(400, "incomplete request")
                return None
            if started is None and data.strip(b"\r\n"):
                started = loop.time()
            if head is not None:
                head += data
                end = head.find(b"\r\n\r\n")
                _refuse_bare_lf(head if end < 0 else head[:end])
                if end < 0 and len(head) > MAX_HEADER_BYTES:
                    raise BadHTTP(431, "request header fields too large")
                head = None if end >= 0 else head
        headers: dict[str, str] = {}
        if any(len(value) > MAX_HEADER_VALUE for _, value in event.headers):
            raise BadHTTP(431, "request header fields too large")
        for name, value in event.headers:
            key = name.decode("latin-1").lower()
            text = value.decode("latin-1")
            headers[key] = f"{headers[key]}, {text}" if key in headers else text
        if "content-length" in headers and "transfer-encoding" in headers:
            raise BadHTTP(400, "both content-length and transfer-encoding are set")
        if event.http_version not in (b"1.0", b"1.1"):
            raise BadHTTP(505, "http version not supported")
        length = headers.get("content-length")
        if length is not None and int(length) > MAX_BODY_BYTES:
            raise BadHTTP(413, "request body too large")
        headers["__version__"] = "HTTP/" + event.http_version.decode()
        if headers.get("expect", "").lower() == "100-continue":
            writer.write(conn.send(h11.InformationalResponse(status_code=100, headers=[], reason=b"Continue")) or b"")
            await writer.drain()
        # -- the body ----------------------------------------------------------------------------------------------
        chunks: list[bytes] = []
        total = 0
        while True:
            try:
                part = conn.next_event()
            except h11.RemoteProtocolError as exc:
                raise BadHTTP(exc.error_status_hint, _reason(exc)) from None
            if isinstance(part, h11.Data):
                total += len(part.data)
                if total > MAX_BODY_BYTES:
                    raise BadHTTP(413, "request body too large")
                chunks.append(bytes(part.data))
            elif isinstance(part, h11.EndOfMessage):
                break
            elif part is h11.NEED_DATA:
                try:
                    data = await self._receive(conn, reader, self.body_timeout)
                except TimeoutError:
                    raise _Dropped from None  # Cowboy closes a connection whose body stalls, without an answer
                if not data:
                    raise _Dropped
            else:
                raise _Dropped
        target = event.target.decode("latin-1")
        segments, query = split_target(target)
        return Request(event.method.decode("latin-1").upper(), target, headers, b"".join(chunks), segments, query)

    async def _send(
        self, writer: asyncio.StreamWriter, conn: h11.Connection, request: Request | None, response: Response
    ) -> None:
        status = response.status
        head = request is not None and request.method == "HEAD"
        keep_alive = request is not None and _keep_alive(request)
        headers = {
            "server": self.server_name,
            "date": formatdate(usegmt=True),
            "vary": "origin",
            **response.headers,
            "content-length": str(len(response.body)),
            "connection": "keep-alive" if keep_alive else "close",
        }
        if status in (204, 304) or 100 <= status < 200:
            del headers["content-length"]
        if request is None and "content-type" not in headers:
            headers["content-type"] = "application/json"
        try:
            reason = HTTPStatus(status).phrase.encode()
        except ValueError:
            reason = b"Unknown"
        h11_headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]
        if request is None:
            # the request was not understood: h11 may not be in a state to frame a response, so write it raw
            lines = [f"HTTP/1.1 {status} {reason.decode()}"] + [f"{k}: {v}" for k, v in headers.items()]
            writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + response.body)
        else:
            try:
                out = conn.send(h11.Response(status_code=status, headers=h11_headers, reason=reason)) or b""
                if response.body and not head and status not in (204, 304):
                    out += conn.send(h11.Data(data=response.body)) or b""
                out += conn.send(h11.EndOfMessage()) or b""
            except h11.LocalProtocolError:
                # HEAD: h11 expects no body bytes; write what we have and close
                lines = [f"HTTP/1.1 {status} {reason.decode()}"] + [f"{k}: {v}" for k, v in headers.items()]
                out = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
                writer.write(out)
                await writer.drain()
                raise _Dropped from None
            writer.write(out)
        await writer.drain()


_ERRORS = {
    408: "request_timeout",
    413: "payload_too_large",
    431: "request_header_fields_too_large",
    501: "not_implemented",
    505: "http_version_not_supported",
}


def _reason(exc: h11.RemoteProtocolError) -> str:
    """h11's message without the request bytes it quotes (``illegal header line: bytearray(b'...')``)."""
    return str(exc).split(": bytearray(", 1)[0]


def _refuse_bare_lf(data: bytes) -> None:
    """Cowboy refuses request heads whose lines end in a bare LF (h11 tolerates them): 400."""
    start = 0
    while True:
        i = data.find(b"\n", start)
        if i < 0:
            return
        if i == 0 or data[i - 1 : i] != b"\r":
            raise BadHTTP(400, "bare LF in request head")
        start = i + 1


def _keep_alive(request: Request) -> bool:
    conn = request.header("connection").lower()
    if request.header("__version__") == "HTTP/1.0":
        return "keep-alive" in conn
    return "close" not in conn
