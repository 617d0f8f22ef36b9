"""The management HTTP listener of a :class:`~fakerabbit.FakeRabbit` (started with ``management=True``): HTTP,
and HTTPS as well when given an SSL context (RabbitMQ's ``management.ssl.port`` next to ``management.tcp.port``)."""

from __future__ import annotations

import ssl
from typing import TYPE_CHECKING

from fakerabbit.errors import ManagementListenError
from fakerabbit.management.api import ManagementAPI
from fakerabbit.management.http import HTTPServer
from fakerabbit.protocol.addresses import url_host
from fakerabbit.protocol.listener import BoundAddress

if TYPE_CHECKING:
    from fakerabbit.management.core import ServedNode

__all__ = ["ManagementListenError", "ManagementServer"]


class ManagementServer:
    """Serves the RabbitMQ-compatible management API on the FakeRabbit's event loop: over HTTP on ``port``,
    and over HTTPS on ``tls_port`` when ``tls`` (the server's SSL context) is given."""

    def __init__(
        self, rabbit: ServedNode, host: str, port: int, *, tls: ssl.SSLContext | None = None, tls_port: int = 0
    ) -> None:
        self.host = host
        self.requested_port = port
        self.port = 0
        self.tls = tls
        self.requested_tls_port = tls_port
        #: The HTTPS port (0 without HTTPS or before the start).
        self.tls_port = 0
        self.api = ManagementAPI(rabbit)
        #: The HTTP listener; its ``head_timeout``, ``body_timeout`` and ``idle_timeout`` (seconds, RabbitMQ's 5,
        #: 60 and 5 by default) may be changed before or while serving. The HTTPS port is served by the same.
        self.http = HTTPServer(self.api.handle, server_name="fakerabbit")

    @property
    def url(self) -> str:
        """``http://HOST:PORT`` (no trailing slash; an IPv6 host in brackets)."""
        return f"http://{url_host(self.host)}:{self.port}"

    @property
    def https_url(self) -> str:
        """``https://HOST:PORT`` of the HTTPS listener (RuntimeError without one)."""
        if self.tls is None:
            raise RuntimeError("the management API is not served over HTTPS: use FakeRabbit(management_tls=True)")
        return f"https://{url_host(self.host)}:{self.tls_port}"

    @property
    def bound(self) -> list[BoundAddress]:
        """The listening sockets, as ``/api/overview``'s ``listeners`` show them (``http``, ``https``)."""
        return [BoundAddress("https" if tls else "http", ip, port) for ip, port, tls in self.http.bound]

    async def start(self) -> int:
        """Listen; raises :class:`ManagementListenError` if a port cannot be bound."""
        try:
            self.port = await self.http.start(self.host, self.requested_port)
        except OSError as exc:
            address = f"{url_host(self.host)}:{self.requested_port}"
            raise ManagementListenError(exc.errno, exc.strerror, address) from exc
        if self.tls is not None:
            try:
                self.tls_port = await self.http.start(self.host, self.requested_tls_port, self.tls)
            except OSError as exc:
                await self.http.stop()
                address = f"{url_host(self.host)}:{self.requested_tls_port}"
                raise ManagementListenError(exc.errno, exc.strerror, address) from exc
        return self.port

    async def stop(self) -> None:
        await self.http.stop()
        self.tls_port = 0
