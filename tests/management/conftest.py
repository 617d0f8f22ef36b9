"""Management API harness: every test runs against fakerabbit's API and against the management API of every live
broker configured in ``FAKERABBIT_REAL_URLS`` (or ``FAKERABBIT_REAL_URL``) whose management API is up (test ids
``fake``, ``real-3.10``, ``real-4.0``, ``real-4.3``; see tests/realbrokers.py).

Tests get an ``api`` (:class:`Api`): ``api.request(method, path, body)`` -> :class:`Answer`, ``api.name(...)`` for
unique names (deleted afterwards on the real broker, which is shared), ``api.amqp_url`` for clients, and
``api.poll(...)`` to wait out RabbitMQ's statistics delay (message counts lag a few seconds on the real API; the fake
answers at once).
"""

from __future__ import annotations

import base64
import json
import ssl
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import pytest

from fakerabbit import FakeRabbit
from tests.realbrokers import RealBroker, by_param, real_brokers

REAL_BROKERS = tuple(b for b in real_brokers() if b.management_up())


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "api" in metafunc.fixturenames:
        fakes = ["fake"]
        if getattr(metafunc.module, "FAKE_PROFILES", None):  # the fake also as older versions (per-version rules)
            fakes += [f"fake-{v}" for v in metafunc.module.FAKE_PROFILES]
        metafunc.parametrize("api", [*fakes, *(b.param for b in REAL_BROKERS)], indirect=True)


@dataclass
class Answer:
    """An HTTP answer: status, parsed JSON body (``None`` if empty) and lower-cased headers."""

    status: int
    body: Any
    headers: dict[str, str]
    text: str

    @property
    def reason(self) -> Any:
        return self.body.get("reason") if isinstance(self.body, dict) else None


def http(
    base: str,
    method: str,
    path: str,
    body: Any = None,
    *,
    auth: tuple[str, str] | None = ("guest", "guest"),
    raw: bytes | None = None,
    headers: dict[str, str] | None = None,
    context: ssl.SSLContext | None = None,
) -> Answer:
    """One request with urllib; error statuses are answers, not exceptions. ``context`` verifies an https URL."""
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    req = urllib.request.Request(base + path, data=data, method=method)
    if auth is not None:
        req.add_header("Authorization", "Basic " + base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode())
    if data is not None:
        req.add_header("Content-Type", "application/json")
    for k, v in (headers or {}).items():
        req.add_header(k, v)
    try:
        with urllib.request.urlopen(req, timeout=30, context=context) as resp:
            status, raw_body, hdrs = resp.status, resp.read(), resp.headers
    except urllib.error.HTTPError as exc:
        status, raw_body, hdrs = exc.code, exc.read(), exc.headers
    text = raw_body.decode("utf-8", "replace")
    try:
        parsed = json.loads(text) if text.strip() else None
    except (ValueError, RecursionError):  # RecursionError: nested deeper than the stdlib parser goes
        parsed = None
    return Answer(status, parsed, {k.lower(): v for k, v in hdrs.items()}, text)


def q(name: str) -> str:
    """A path segment (``/`` -> ``%2F``)."""
    return quote(name, safe="")


class Api:
    """One management API under test."""

    def __init__(
        self, kind: str, base: str, amqp_url: str, fake: FakeRabbit | None, real: RealBroker | None = None
    ) -> None:
        self.kind = kind
        self.real = real
        self.base = base
        self.amqp_url = amqp_url
        self.fake = fake
        self.prefix = f"m{uuid.uuid4().hex[:8]}-"
        self._cleanup: list[str] = []

    @property
    def is_fake(self) -> bool:
        return self.kind == "fake"

    @property
    def version(self) -> str:
        """The RabbitMQ version the target behaves as (the fake's profile: 4.3 by default)."""
        if self.real is not None:
            return self.real.version
        assert self.fake is not None
        return self.fake._broker.profile.server_version

    def at_least(self, version: str) -> bool:
        """Does the target behave as RabbitMQ ``version`` or later?"""
        have = tuple(int(x) for x in self.version.split(".")[:2])
        return have >= tuple(int(x) for x in version.split(".")[:2])

    def request(self, method: str, path: str, body: Any = None, **kw: Any) -> Answer:
        return http(self.base, method, path, body, **kw)

    def name(self, base: str = "q", kind: str = "queues") -> str:
        """A unique name; the object (``queues``, ``exchanges``, ``policies``, ``operator-policies``,
        ``vhosts``, ``users``) is deleted after the test on the real broker."""
        n = self.prefix + base
        self._cleanup.append(f"/api/{kind}/{q(n)}" if kind in ("vhosts", "users") else f"/api/{kind}/%2F/{q(n)}")
        return n

    def user(self, tags: str, *, vhost_permissions: tuple[str, str, str] | None = None) -> tuple[str, str]:
        """A new user with ``tags`` (comma-separated), optionally with permissions on ``/``; returns
        (name, password) for ``auth=``. Deleted after the test."""
        name = self.name(f"u-{tags.replace(',', '-') or 'none'}-{uuid.uuid4().hex[:4]}", "users")
        answer = self.request("PUT", f"/api/users/{q(name)}", {"password": "pw", "tags": tags})
        assert answer.status == 201, answer.text
        if vhost_permissions is not None:
            conf, write, read = vhost_permissions
            perms = {"configure": conf, "write": write, "read": read}
            answer = self.request("PUT", f"/api/permissions/%2F/{q(name)}", perms)
            assert answer.status == 201, answer.text
        return name, "pw"

    def poll(self, fetch: Callable[[], Answer], until: Callable[[Answer], bool], timeout: float = 30.0) -> Answer:
        """``fetch()`` until ``until(answer)`` (the real API's stats lag); returns the last answer."""
        deadline = time.monotonic() + (timeout if not self.is_fake else 0)
        while True:
            answer = fetch()
            if until(answer) or time.monotonic() >= deadline:
                return answer
            time.sleep(0.25)

    def queue(self, name: str, until: Callable[[dict[str, Any]], bool] = lambda _: True) -> dict[str, Any]:
        """``GET /api/queues/%2F/{name}``, polled until ``until(queue)`` holds."""
        answer = self.poll(
            lambda: self.request("GET", f"/api/queues/%2F/{q(name)}"),
            lambda a: a.status == 200 and until(a.body),
        )
        assert answer.status == 200, answer.text
        body: dict[str, Any] = answer.body
        return body

    def cleanup(self) -> None:
        for path in reversed(self._cleanup):
            self.request("DELETE", path)


@pytest.fixture
def api(request: pytest.FixtureRequest) -> Iterator[Api]:
    if request.param.startswith("real-"):
        if request.node.get_closest_marker("fake_only"):
            pytest.skip("fakerabbit-specific behaviour")
        real = by_param(request.param)
        target = Api("real", real.management_url, real.url, None, real)
        yield target
        target.cleanup()
        return
    version = request.param.partition("-")[2] or None
    with FakeRabbit(management=True, rabbitmq_version=version) as rabbit:
        yield Api("fake", rabbit.management_url, rabbit.url, rabbit)
