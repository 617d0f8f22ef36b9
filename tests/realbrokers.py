"""The live RabbitMQ brokers the tests compare against.

``FAKERABBIT_REAL_URLS="3.10=amqp://…:5672/%2F,4.0=amqp://…:5675/%2F,4.3=amqp://…:5674/%2F"`` names one broker per
version (``scripts/real-rabbitmq.sh VERSION`` starts each and prints its URL); the older ``FAKERABBIT_REAL_URL``
names a single broker whose version is read from its ``connection.start``. Each broker's management API is on its
AMQP port + 10000 (5672 -> 15672, 5674 -> 15674, 5675 -> 15675) unless ``FAKERABBIT_REAL_MANAGEMENT_URLS`` says
otherwise (same ``VERSION=URL,…`` form).

A test parametrized over the brokers gets the ids ``fake`` and ``real-3.10``, ``real-4.0``, ``real-4.3``: the real
half of a version-specific test runs only against the brokers whose version falls under its profile.
"""

from __future__ import annotations

import base64
import functools
import html
import json
import os
import pathlib
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit

from tests.rawamqp import HEADER, RawAMQP

SCRIPT = pathlib.Path(__file__).resolve().parent.parent / "scripts" / "real-rabbitmq.sh"


def _parse_map(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        label, sep, url = item.partition("=")
        if not sep:
            raise ValueError(f"expected VERSION=URL in {item!r}")
        out[label.strip()] = url.strip()
    return out


def server_version(url: str) -> str:
    """The ``version`` a broker announces in ``connection.start`` ("0" if it announces none)."""
    c = RawAMQP.socket_to(url)
    try:
        c.send(HEADER)
        start = c.read_frame()
    finally:
        c.sock.close()
    if start is None or start.name != "Connection.Start":
        return "0"
    version = start.method.server_properties.get("version")
    if isinstance(version, bytes):
        version = version.decode()
    return version if isinstance(version, str) else "0"


def profile_matches(profile: str, version: str) -> bool:
    """Does a real RabbitMQ ``version`` (or a version label such as ``4.3``) fall under fakerabbit's ``profile``?"""
    major_minor = tuple(int(x) for x in version.split(".")[:2])
    p = tuple(int(x) for x in profile.split(".")[:2])
    if p <= (3, 12):
        return major_minor <= (3, 12) and (p >= (3, 12) or major_minor == p)
    if p == (3, 13):
        return major_minor == (3, 13)
    if p == (4, 0):
        return (4, 0) <= major_minor <= (4, 2)
    return major_minor >= p


def profile_for(label: str) -> str:
    """The fake's profile that copies a real broker of this version."""
    major_minor = tuple(int(x) for x in label.split(".")[:2])
    if major_minor <= (3, 12):
        return "3.12" if major_minor == (3, 12) else "3.10"
    if major_minor == (3, 13):
        return "3.13"
    if major_minor < (4, 3):
        return "4.0"
    return "4.3"


@dataclass(frozen=True)
class RealBroker:
    """One live RabbitMQ: its version label, AMQP URL and management API base URL."""

    label: str
    url: str
    management_url: str

    @property
    def param(self) -> str:
        """The test id of this broker's half of a test."""
        return f"real-{self.label}"

    @property
    def profile(self) -> str:
        return profile_for(self.label)

    @functools.cached_property
    def version(self) -> str:
        return server_version(self.url)

    @property
    def vhost(self) -> str:
        path = urlsplit(self.url).path
        return path[1:].replace("%2F", "/").replace("%2f", "/") if len(path) > 1 else "/"

    def management_up(self) -> bool:
        parts = urlsplit(self.management_url)
        try:
            with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 15672), timeout=1):
                return True
        except OSError:
            return False

    def http(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        """One management API request as guest; returns (status, parsed JSON or None)."""
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.management_url + path, data=data, method=method)
        req.add_header("Authorization", "Basic " + base64.b64encode(b"guest:guest").decode())
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                status, raw = resp.status, resp.read()
        except urllib.error.HTTPError as exc:
            status, raw = exc.code, exc.read()
        try:
            parsed = json.loads(raw) if raw.strip() else None
        except ValueError:
            parsed = raw.decode("utf-8", "replace")
        return status, parsed

    def set_policy(
        self,
        name: str,
        pattern: str,
        definition: dict[str, Any],
        *,
        priority: int = 0,
        apply_to: str = "queues",
        operator: bool = False,
        vhost: str = "/",
    ) -> None:
        kind = "operator-policies" if operator else "policies"
        status, body = self.http(
            "PUT",
            f"/api/{kind}/{quote(vhost, safe='')}/{quote(name, safe='')}",
            {"pattern": pattern, "definition": definition, "priority": priority, "apply-to": apply_to},
        )
        if status == 400 and isinstance(body, dict):
            raise PolicyRefused(validation_message(str(body.get("reason", ""))) or str(body))
        if status >= 300:
            raise RuntimeError(f"set {kind} {name} on RabbitMQ {self.label}: {status} {body}")
        time.sleep(0.05)  # policies are applied to queues asynchronously

    def clear_policy(self, name: str, *, operator: bool = False, vhost: str = "/") -> None:
        kind = "operator-policies" if operator else "policies"
        self.http("DELETE", f"/api/{kind}/{quote(vhost, safe='')}/{quote(name, safe='')}")
        time.sleep(0.05)

    def add_user(self, name: str, password: str, tags: str = "") -> None:
        status, body = self.http("PUT", f"/api/users/{quote(name, safe='')}", {"password": password, "tags": tags})
        if status >= 300:
            raise RuntimeError(f"add user {name}: {status} {body}")

    def delete_user(self, name: str) -> None:
        self.http("DELETE", f"/api/users/{quote(name, safe='')}")

    def set_permissions(self, user: str, configure: str, write: str, read: str, vhost: str = "/") -> None:
        status, body = self.http(
            "PUT",
            f"/api/permissions/{quote(vhost, safe='')}/{quote(user, safe='')}",
            {"configure": configure, "write": write, "read": read},
        )
        if status >= 300:
            raise RuntimeError(f"set permissions {user}: {status} {body}")

    def clear_permissions(self, user: str, vhost: str = "/") -> None:
        self.http("DELETE", f"/api/permissions/{quote(vhost, safe='')}/{quote(user, safe='')}")

    def ctl(self, *args: str) -> subprocess.CompletedProcess[str]:
        """Run this broker's own ``rabbitmqctl`` (through ``scripts/real-rabbitmq.sh ctl``)."""
        return subprocess.run(["bash", str(SCRIPT), "ctl", self.label, *args], capture_output=True, text=True)


class PolicyRefused(Exception):
    """A live broker refused a policy; ``str()`` is its validation message (as rabbitmqctl prints it)."""


def validation_message(text: str) -> str:
    """RabbitMQ's validation message in a refusal (the management API's ``reason``, HTML-escaped, or
    rabbitmqctl's stderr): the text after ``Validation failed``, its ``~p`` line wrapping undone."""
    text = html.unescape(text).split("Validation failed", 1)[-1].strip()
    return text.replace("\n ", "").replace("\n", "")


def _management_for(url: str) -> str:
    parts = urlsplit(url)
    return f"http://{parts.hostname or '127.0.0.1'}:{(parts.port or 5672) + 10000}"


@functools.cache
def real_brokers() -> tuple[RealBroker, ...]:
    """The configured live brokers, oldest first (none when neither variable is set)."""
    urls = _parse_map(os.environ.get("FAKERABBIT_REAL_URLS", ""))
    single = os.environ.get("FAKERABBIT_REAL_URL")
    if not urls and single:
        version = server_version(single)
        urls = {".".join(version.split(".")[:2]): single}
    mgmt = _parse_map(os.environ.get("FAKERABBIT_REAL_MANAGEMENT_URLS", ""))
    if single and len(urls) == 1 and "FAKERABBIT_REAL_MANAGEMENT_URL" in os.environ:
        mgmt.setdefault(next(iter(urls)), os.environ["FAKERABBIT_REAL_MANAGEMENT_URL"])
    brokers = [RealBroker(label, url, mgmt.get(label) or _management_for(url)) for label, url in urls.items()]
    brokers.sort(key=lambda b: tuple(int(x) for x in b.label.split(".")[:2]))
    return tuple(brokers)


def by_param(param: str) -> RealBroker:
    """The broker of a test id such as ``real-4.3``."""
    for b in real_brokers():
        if b.param == param:
            return b
    raise KeyError(param)


def real_params(profile: str | None = None) -> list[str]:
    """The real halves a test with this profile marker runs: every broker whose version falls under it."""
    return [b.param for b in real_brokers() if profile is None or profile_matches(profile, b.label)]


def newest() -> RealBroker | None:
    """The newest configured broker (for tests that compare with one broker only)."""
    brokers = real_brokers()
    return brokers[-1] if brokers else None
