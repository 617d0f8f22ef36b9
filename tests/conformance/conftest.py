"""Conformance harness: every test runs against fakerabbit and, when FAKERABBIT_REAL_URL is set, a real RabbitMQ.

Tests get a ``broker`` (a :class:`Target`): ``broker.url`` to connect to, ``broker.name(...)`` for unique queue and
exchange names (cleaned up afterwards on the real broker), ``broker.advance(seconds)`` to let time pass (the
virtual clock on the fake, a short real sleep on the real broker), and ``broker.set_policy(...)``.

Version-dependent expectations: ``@pytest.mark.rabbitmq_version("3.13")`` runs the fake with that profile and
runs the real broker only if its version falls under that profile (the local RabbitMQ is 3.10).
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pika
import pytest

from fakerabbit import FakeRabbit
from tests.realbrokers import RealBroker, by_param, real_brokers, real_params

REAL_BROKERS = real_brokers()
REAL_URL = REAL_BROKERS[-1].url if REAL_BROKERS else None
"""The newest configured real broker's URL (``None`` without one); tests get their own as ``broker.url``."""


def real_version() -> str:
    """The newest configured real broker's version."""
    assert REAL_BROKERS
    return REAL_BROKERS[-1].version


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "broker" in metafunc.fixturenames:
        marker = metafunc.definition.get_closest_marker("rabbitmq_version")
        profile = marker.args[0] if marker else None
        params: list[str] = []
        if metafunc.definition.get_closest_marker("real_only") is None:
            params.append("fake")
        if metafunc.definition.get_closest_marker("fake_only") is None:
            params += real_params(profile)
        metafunc.parametrize("broker", params or ["fake"], indirect=True)


def _vt(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in version.split(".")[:2])


class Target:
    """One broker under test."""

    def __init__(self, kind: str, url: str, fake: FakeRabbit | None, real: RealBroker | None = None) -> None:
        self.kind = kind
        self.url = url
        self.fake = fake
        self.real = real
        self._prefix = f"t{uuid.uuid4().hex[:8]}-"
        self._queues: set[str] = set()
        self._exchanges: set[str] = set()
        self._policies: list[tuple[str, bool]] = []

    @property
    def is_fake(self) -> bool:
        return self.kind == "fake"

    @property
    def version(self) -> str:
        """The RabbitMQ version this target behaves as: the real broker's label, or the fake's profile."""
        if self.real is not None:
            return self.real.label
        assert self.fake is not None
        return str(self.fake._broker.profile.name)

    def at_least(self, version: str) -> bool:
        """Does this target behave as RabbitMQ ``version`` or newer?"""
        return _vt(self.version) >= _vt(version)

    def name(self, base: str = "q", kind: str = "queue") -> str:
        """A unique name for this test; remembered for cleanup."""
        n = self._prefix + base
        (self._queues if kind == "queue" else self._exchanges).add(n)
        return n

    def exchange(self, base: str = "x") -> str:
        return self.name(base, kind="exchange")

    def connect(self) -> pika.BlockingConnection:
        return pika.BlockingConnection(pika.URLParameters(self.url))

    def advance(self, seconds: float) -> None:
        """Let ``seconds`` pass: the virtual clock on the fake, a real (short!) sleep on a real broker."""
        if self.fake is not None:
            self.fake.clock.advance(seconds)  # type: ignore[union-attr]
        else:
            time.sleep(seconds)

    def set_policy(
        self,
        name: str,
        pattern: str,
        definition: dict[str, Any],
        *,
        priority: int = 0,
        apply_to: str = "queues",
        operator: bool = False,
    ) -> None:
        self._policies.append((name, operator))
        if self.fake is not None:
            if operator:
                self.fake.set_operator_policy(name, pattern, definition, priority=priority, apply_to=apply_to)
            else:
                self.fake.set_policy(name, pattern, definition, priority=priority, apply_to=apply_to)
            return
        assert self.real is not None
        self.real.set_policy(name, pattern, definition, priority=priority, apply_to=apply_to, operator=operator)

    def clear_policy(self, name: str, *, operator: bool = False) -> None:
        if self.fake is not None:
            if operator:
                self.fake.clear_operator_policy(name)
            else:
                self.fake.clear_policy(name)
            return
        assert self.real is not None
        self.real.clear_policy(name, operator=operator)

    def cleanup(self) -> None:
        if self.fake is not None:
            return
        assert self.real is not None
        for name, operator in self._policies:
            with contextlib.suppress(Exception):
                self.real.http("DELETE", f"/api/{'operator-policies' if operator else 'policies'}/%2F/{name}")
        try:
            conn = self.connect()
        except Exception:
            return
        for q in self._queues:
            ch = conn.channel()
            try:
                ch.queue_delete(q)
                ch.close()
            except Exception:
                pass
        for x in self._exchanges:
            ch = conn.channel()
            try:
                ch.exchange_delete(x)
                ch.close()
            except Exception:
                pass
        with contextlib.suppress(Exception):
            conn.close()


@pytest.fixture
def broker(request: pytest.FixtureRequest) -> Iterator[Target]:
    marker = request.node.get_closest_marker("rabbitmq_version")
    profile = marker.args[0] if marker else None
    if request.param != "fake":
        real = by_param(request.param)
        target = Target("real", real.url, None, real)
        yield target
        target.cleanup()
        return
    plugins = request.node.get_closest_marker("fake_plugins")
    options = {"plugins": plugins.args[0]} if plugins is not None else {}
    with FakeRabbit(rabbitmq_version=profile, **options) as rabbit:
        yield Target("fake", rabbit.url, rabbit)


@pytest.fixture
def conn(broker: Target) -> Iterator[pika.BlockingConnection]:
    c = broker.connect()
    yield c
    if c.is_open:
        c.close()


@pytest.fixture
def ch(conn: pika.BlockingConnection) -> Any:
    return conn.channel()


def pump(conn: pika.BlockingConnection, until: Any, timeout: float = 3.0) -> None:
    """Process pika events until ``until()`` is true (or ``timeout`` real seconds pass)."""
    deadline = time.monotonic() + timeout
    while not until() and time.monotonic() < deadline:
        conn.process_data_events(time_limit=0.05)


def settle(conn: pika.BlockingConnection, seconds: float = 0.2) -> None:
    """Process pika events for a moment (to show that nothing more arrives)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        conn.process_data_events(time_limit=0.05)
