"""Shared pieces of the robustness tests: an in-process FakeRabbit, a watch on escaped exceptions, and ways to find
the fake's side of a client connection.

An exception that escapes a connection handler shows up in one of two places: the fake's own ``_process`` turns it
into a 541 and records ``fakerabbit internal error: ...`` in ``broker.problems`` (and logs it on the
``fakerabbit`` logger); anything that escapes further reaches asyncio, which logs it on the ``asyncio`` logger
("Exception in callback ...", "Fatal error: protocol.data_received() call failed"). :class:`ErrorLog` collects
every ERROR record of those loggers.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from typing import Any

import pytest

from fakerabbit import FakeRabbit

REAL_URL = os.environ.get("FAKERABBIT_REAL_URL")


class ErrorLog(logging.Handler):
    """Collects ERROR (and worse) records of the fakerabbit and asyncio loggers, from any thread."""

    WATCHED = ("fakerabbit", "asyncio")

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.name.split(".")[0] in self.WATCHED:
            self.records.append(record)

    def messages(self) -> list[str]:
        out = []
        for r in self.records:
            text = f"{r.name}: {r.getMessage()}"
            if r.exc_info and r.exc_info[1] is not None:
                text += f" ({r.exc_info[1]!r})"
            out.append(text)
        return out


@pytest.fixture
def error_log() -> Iterator[ErrorLog]:
    handler = ErrorLog()
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield handler
    finally:
        root.removeHandler(handler)


def internal_errors(rabbit: FakeRabbit) -> list[str]:
    """Problems the fake recorded for a Python exception in its own code (each one a bug)."""
    return [p for p in rabbit.problems if "internal error" in p]


@pytest.fixture
def rabbit(error_log: ErrorLog) -> Iterator[FakeRabbit]:
    """A FakeRabbit on its own loop in a thread; fails the test if an exception escaped a handler."""
    with FakeRabbit() as r:
        yield r
        escaped = internal_errors(r)
    assert escaped == [], escaped
    assert error_log.messages() == []


def fake_connection(rabbit: FakeRabbit, client_port: int) -> Any:
    """The fake's AMQPConnection for the client socket bound to local port ``client_port``."""

    def find() -> Any:
        for c in rabbit._listener.connections:
            if c.peer.endswith(f":{client_port}"):
                return c
        return None

    conn = rabbit._call(find)
    assert conn is not None, f"no fake connection from port {client_port}"
    return conn
