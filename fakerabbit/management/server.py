"""The management HTTP listener of a :class:`~fakerabbit.FakeRabbit` (started with ``management=True``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fakerabbit.errors import ManagementListenError
from fakerabbit.management.api import ManagementAPI
from fakerabbit.management.http import HTTPServer

if TYPE_CHECKING:
    from fakerabbit.management.core import ServedNode

__all__ = ["ManagementListenError", "ManagementServer"]


class ManagementServer:
    """Serves the RabbitMQ-compatible management API on the FakeRabbit's event loop."""

    def __init__(self, rabbit: ServedNode, host: str, port: int) -> None:
        self.host = host
        self.requested_port = port
        self.port = 0
        self.api = ManagementAPI(rabbit)
        #: The HTTP listener; its ``head_timeout``, ``body_timeout`` and ``idle_timeout`` (seconds, RabbitMQ's 5,
        #: 60 and 5 by default) may be changed before or while serving.
        self.http = HTTPServer(self.api.handle, server_name="fakerabbit")

    @property
    def url(self) -> str:
        """``http://HOST:PORT`` (no trailing slash)."""
        return f"http://{self.host}:{self.port}"

    async def start(self) -> int:
        """Listen; raises :class:`ManagementListenError` if the port cannot be bound."""
        try:
            self.port = await self.http.start(self.host, self.requested_port)
        except OSError as exc:
            raise ManagementListenError(exc.errno, exc.strerror, f"{self.host}:{self.requested_port}") from exc
        return self.port

    async def stop(self) -> None:
        await self.http.stop()
