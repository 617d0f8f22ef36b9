"""A small HTTP/1.1 server on ``asyncio.start_server``: just enough for the management API.

Why not a framework: the API must run on the same event loop as the AMQP server (every broker access happens on
that loop, without locks), it serves a few dozen JSON routes to test suites, and fakerabbit keeps its runtime
dependencies to pamqp. The standard library's ``http.server`` is thread-based, so it would need locks or
marshalling for every request; aiohttp would add a sizeable dependency tree for what fits in this module.

What it does: request line and headers, ``Content-Length`` and ``chunked`` bodies, ``Expect: 100-continue``,
keep-alive (HTTP/1.1 default, HTTP/1.0 on request), ``HEAD``, bounded header and body sizes. Handlers are plain
synchronous functions called on the loop; they return a :class:`Response`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from email.utils import formatdate
from http import HTTPStatus
from urllib.parse import parse_qsl, unquote

log = logging.getLogger("fakerabbit.management")

MAX_HEADER_BYTES = 64 * 1024
MAX_BODY_BYTES = 64 * 1024 * 1024


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


Handler = Callable[[Request], Response]


class HTTPServer:
    """Serves ``handler`` on a TCP port of the running loop."""

    def __init__(self, handler: Handler, *, server_name: str = "fakerabbit") -> None:
        self.handler = handler
        self.server_name = server_name
        self._server: asyncio.base_events.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self.port = 0

    async def start(self, host: str, port: int) -> int:
        """Listen on ``host:port`` (0 picks a free port); returns the port."""
        self._server = await asyncio.start_server(self._client, host, port, reuse_address=True, limit=MAX_HEADER_BYTES)
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self.port

    async def stop(self) -> None:
        """Stop listening and close every open client connection."""
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        for w in list(self._writers):
            w.close()
        tasks = [t for t in self._tasks if not t.done()]
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=2)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(server.wait_closed(), timeout=2)

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        self._writers.add(writer)
        try:
            while True:
                try:
                    request = await self._read_request(reader, writer)
                except BadHTTP as exc:
                    body = ('{"error":"bad_request","reason":' + _json_str(exc.reason) + "}").encode()
                    await self._write(writer, "HEAD", Response(exc.status, body), keep_alive=False, head=False)
                    return
                if request is None:
                    return
                keep_alive = _keep_alive(request)
                try:
                    response = self.handler(request)
                except Exception as exc:  # a bug: report it without a stack trace, keep serving
                    log.exception("management API: internal error on %s %s", request.method, request.target)
                    body = ('{"error":"internal_error","reason":' + _json_str(f"fakerabbit: {exc!r}") + "}").encode()
                    response = Response(500, body, {"content-type": "application/json"})
                await self._write(
                    writer, request.method, response, keep_alive=keep_alive, head=request.method == "HEAD"
                )
                if not keep_alive:
                    return
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            return
        finally:
            self._writers.discard(writer)
            with contextlib.suppress(Exception):
                writer.close()

    async def _read_request(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> Request | None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError as exc:
            if exc.partial.strip():
                raise BadHTTP(400, "incomplete request") from None
            return None
        except asyncio.LimitOverrunError:
            raise BadHTTP(431, "request headers too large") from None
        lines = head[:-4].decode("latin-1").split("\r\n")
        while lines and lines[0] == "":  # tolerate stray CRLFs between requests
            lines.pop(0)
        if not lines:
            return None
        parts = lines[0].split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            raise BadHTTP(400, "malformed request line")
        method, target, version = parts
        headers: dict[str, str] = {"__version__": version}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if not sep or not name.strip():
                raise BadHTTP(400, "malformed header")
            key = name.strip().lower()
            value = value.strip()
            headers[key] = f"{headers[key]}, {value}" if key in headers else value
        if headers.get("expect", "").lower() == "100-continue":
            writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            await writer.drain()
        body = await self._read_body(reader, headers)
        segments, query = split_target(target)
        return Request(method.upper(), target, headers, body, segments, query)

    async def _read_body(self, reader: asyncio.StreamReader, headers: dict[str, str]) -> bytes:
        if "chunked" in headers.get("transfer-encoding", "").lower():
            chunks: list[bytes] = []
            total = 0
            while True:
                size_line = await reader.readuntil(b"\r\n")
                try:
                    size = int(size_line.split(b";")[0].strip(), 16)
                except ValueError:
                    raise BadHTTP(400, "malformed chunk size") from None
                if size == 0:
                    while (await reader.readuntil(b"\r\n")) != b"\r\n":  # trailers
                        pass
                    return b"".join(chunks)
                total += size
                if total > MAX_BODY_BYTES:
                    raise BadHTTP(413, "request body too large")
                chunks.append(await reader.readexactly(size))
                await reader.readexactly(2)
        length_text = headers.get("content-length", "0") or "0"
        try:
            length = int(length_text)
        except ValueError:
            raise BadHTTP(400, "malformed content-length") from None
        if length < 0:
            raise BadHTTP(400, "malformed content-length")
        if length > MAX_BODY_BYTES:
            raise BadHTTP(413, "request body too large")
        return await reader.readexactly(length) if length else b""

    async def _write(
        self, writer: asyncio.StreamWriter, method: str, response: Response, *, keep_alive: bool, head: bool
    ) -> None:
        status = response.status
        try:
            phrase = HTTPStatus(status).phrase
        except ValueError:
            phrase = "Unknown"
        headers = {
            "server": self.server_name,
            "date": formatdate(usegmt=True),
            "vary": "origin",
            **response.headers,
            "content-length": str(len(response.body)),
            "connection": "keep-alive" if keep_alive else "close",
        }
        if status == 204:
            del headers["content-length"]
        lines = [f"HTTP/1.1 {status} {phrase}"] + [f"{k}: {v}" for k, v in headers.items()]
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        if response.body and not head and status not in (204, 304):
            writer.write(response.body)
        await writer.drain()


def _keep_alive(request: Request) -> bool:
    conn = request.header("connection").lower()
    if request.header("__version__") == "HTTP/1.0":
        return "keep-alive" in conn
    return "close" not in conn


def _json_str(text: str) -> str:
    return json.dumps(text)
