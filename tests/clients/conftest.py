"""Client harness: every test runs a real client library over TCP against fakerabbit and, when
``FAKERABBIT_REAL_URL`` is set, against that real RabbitMQ, and asserts the same results on both.

It reuses the conformance harness's :class:`~tests.conformance.conftest.Target` (unique names, cleanup on the real
broker) and adds what client sessions need: letting a TTL pass (the virtual clock on the fake, a short sleep on
the real broker, also from a coroutine without blocking the client's loop) and polling for an effect on the real
broker only (on the fake the effect must already be there: nothing here ever sleeps against the fake).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import TypeVar
from urllib.parse import unquote, urlsplit

import pytest

from fakerabbit import FakeRabbit
from tests.conformance.conftest import Target
from tests.realbrokers import by_param, real_brokers, real_params

T = TypeVar("T")

REAL_URL = REAL_BROKERS[-1].url if (REAL_BROKERS := real_brokers()) else None
"""The newest configured real broker's URL (``None`` without one)."""
TTL_MS = 50
"""The TTL the sessions use: tiny, so that the real broker needs only a short wait."""
REAL_TIMEOUT = 5.0
"""How long (real seconds) to wait on the real broker for an effect before failing."""


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "broker" in metafunc.fixturenames:
        metafunc.parametrize("broker", ["fake", *real_params()], indirect=True)


class ClientTarget(Target):
    """One broker under test, as seen by a client library."""

    @property
    def prefix(self) -> str:
        """The unique prefix of this test's names (:meth:`name` adds it)."""
        return self._prefix

    @property
    def host(self) -> str:
        return urlsplit(self.url).hostname or "127.0.0.1"

    @property
    def port(self) -> int:
        return urlsplit(self.url).port or 5672

    @property
    def userid(self) -> str:
        return unquote(urlsplit(self.url).username or "guest")

    @property
    def password(self) -> str:
        return unquote(urlsplit(self.url).password or "guest")

    @property
    def vhost(self) -> str:
        path = urlsplit(self.url).path
        return unquote(path[1:]) if len(path) > 1 else "/"

    def expire(self, ms: int = TTL_MS) -> None:
        """Let a TTL of ``ms`` pass: the virtual clock on the fake, a real sleep on the real broker."""
        if self.fake is not None:
            self.fake.clock.advance(ms / 1000)  # type: ignore[union-attr]
        else:
            time.sleep(ms / 1000 + 0.02)

    async def expire_async(self, ms: int = TTL_MS) -> None:
        """:meth:`expire` from a coroutine (the real-broker wait does not block the client's loop)."""
        if self.fake is not None:
            self.fake.clock.advance(ms / 1000)  # type: ignore[union-attr]
        else:
            await asyncio.sleep(ms / 1000 + 0.02)

    def eventually(self, fn: Callable[[], T | None], what: str = "the effect") -> T:
        """``fn()``'s first truthy result. On the fake the first call must succeed; on the real broker (which
        dead-letters asynchronously) it is retried for up to :data:`REAL_TIMEOUT` seconds."""
        deadline = time.monotonic() + REAL_TIMEOUT
        while True:
            result = fn()
            if result or self.fake is not None:
                assert result, f"{what}: not there on the fake right after the clock moved"
                return result
            if time.monotonic() > deadline:
                raise AssertionError(f"{what}: not seen within {REAL_TIMEOUT} s on the real broker")
            time.sleep(0.02)

    async def eventually_async(self, fn: Callable[[], Awaitable[T | None]], what: str = "the effect") -> T:
        """:meth:`eventually` for coroutines."""
        deadline = time.monotonic() + REAL_TIMEOUT
        while True:
            result = await fn()
            if result or self.fake is not None:
                assert result, f"{what}: not there on the fake right after the clock moved"
                return result
            if time.monotonic() > deadline:
                raise AssertionError(f"{what}: not seen within {REAL_TIMEOUT} s on the real broker")
            await asyncio.sleep(0.02)


def not_found(queue: str, vhost: str = "/") -> str:
    """RabbitMQ's reply text for a passive declare (or get, consume, bind) of a missing queue."""
    return f"NOT_FOUND - no queue '{queue}' in vhost '{vhost}'"


@pytest.fixture
def broker(request: pytest.FixtureRequest) -> Iterator[ClientTarget]:
    if request.param != "fake":
        real = by_param(request.param)
        target = ClientTarget("real", real.url, None, real)
        yield target
        target.cleanup()
        return
    with FakeRabbit() as rabbit:
        yield ClientTarget("fake", rabbit.url, rabbit)
        problems = rabbit.problems
        if request.node.get_closest_marker("xfail") is None:  # a known fakerabbit bug may record problems
            assert not problems, f"fakerabbit recorded problems: {problems}"
