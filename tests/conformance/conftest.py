"""Conformance harness: every test runs against fakerabbit and, when FAKERABBIT_REAL_URL is set, a real RabbitMQ.

Tests get a ``broker`` (a :class:`Target`): ``broker.url`` to connect to, ``broker.name(...)`` for unique queue and
exchange names (cleaned up afterwards on the real broker), ``broker.advance(seconds)`` to let time pass (the
virtual clock on the fake, a short real sleep on the real broker), and ``broker.set_policy(...)``.

Version-dependent expectations: ``@pytest.mark.rabbitmq_version("3.13")`` runs the fake with that profile and
runs the real broker only if its version falls under that profile (the local RabbitMQ is 3.10).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pika
import pytest

from fakerabbit import FakeRabbit

REAL_URL = os.environ.get("FAKERABBIT_REAL_URL")
_real_version: str | None = None


def real_version() -> str:
    global _real_version
    if _real_version is None:
        assert REAL_URL
        conn = pika.BlockingConnection(pika.URLParameters(REAL_URL))
        props = conn._impl.server_properties
        v = props.get("version", b"0")
        _real_version = v.decode() if isinstance(v, bytes) else str(v)
        conn.close()
    return _real_version


def profile_matches(profile: str, version: str) -> bool:
    """Does a real RabbitMQ ``version`` fall under fakerabbit's ``profile``?"""
    major_minor = tuple(int(x) for x in version.split(".")[:2])
    p = tuple(int(x) for x in profile.split(".")[:2])
    if p <= (3, 12):
        return major_minor <= (3, 12) and (p >= (3, 12) or major_minor == p)
    if p == (3, 13):
        return major_minor == (3, 13)
    if p == (4, 0):
        return (4, 0) <= major_minor <= (4, 2)
    return major_minor >= p


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "broker" in metafunc.fixturenames:
        kinds = ["fake", "real"] if REAL_URL else ["fake"]
        metafunc.parametrize("broker", kinds, indirect=True)


class Target:
    """One broker under test."""

    def __init__(self, kind: str, url: str, fake: FakeRabbit | None) -> None:
        self.kind = kind
        self.url = url
        self.fake = fake
        self._prefix = f"t{uuid.uuid4().hex[:8]}-"
        self._queues: set[str] = set()
        self._exchanges: set[str] = set()
        self._policies: list[tuple[str, bool]] = []

    @property
    def is_fake(self) -> bool:
        return self.kind == "fake"

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
        cmd = "set_operator_policy" if operator else "set_policy"
        subprocess.run(
            [
                "rabbitmqctl",
                "-q",
                cmd,
                name,
                pattern,
                json.dumps(definition),
                "--priority",
                str(priority),
                "--apply-to",
                apply_to,
            ],
            check=True,
            capture_output=True,
        )
        time.sleep(0.05)

    def clear_policy(self, name: str, *, operator: bool = False) -> None:
        if self.fake is not None:
            if operator:
                self.fake.clear_operator_policy(name)
            else:
                self.fake.clear_policy(name)
            return
        cmd = "clear_operator_policy" if operator else "clear_policy"
        subprocess.run(["rabbitmqctl", "-q", cmd, name], check=True, capture_output=True)
        time.sleep(0.05)

    def cleanup(self) -> None:
        if self.fake is not None:
            return
        for name, operator in self._policies:
            subprocess.run(
                ["rabbitmqctl", "-q", "clear_operator_policy" if operator else "clear_policy", name],
                capture_output=True,
            )
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
    if request.param == "real":
        if request.node.get_closest_marker("fake_only"):
            pytest.skip("fakerabbit-specific behaviour")
        if profile is not None and not profile_matches(profile, real_version()):
            pytest.skip(f"real RabbitMQ {real_version()} does not show the {profile} behaviour")
        assert REAL_URL
        target = Target("real", REAL_URL, None)
        yield target
        target.cleanup()
        return
    if request.node.get_closest_marker("real_only"):
        pytest.skip("real broker only")
    with FakeRabbit(rabbitmq_version=profile) as rabbit:
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
