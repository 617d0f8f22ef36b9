"""``/api/overview``'s ``exchange_types`` follow the version profile (live 3.10.8, 4.0.5, 4.3.6 when configured
with ``FAKERABBIT_REAL_URLS``), and the API's exchange declare accepts exactly those types."""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from typing import Any

import pytest

from fakerabbit import FakeRabbit
from tests.realbrokers import real_brokers

EXPECTED = {
    "3.10": ["direct", "fanout", "headers", "topic"],
    "4.0": ["direct", "fanout", "headers", "topic", "x-local-random"],
    "4.3": ["direct", "fanout", "headers", "topic", "x-local-random", "x-modulus-hash"],
}


def _request(base: str, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(base + path, data=data, method=method)
    req.add_header("Authorization", "Basic " + base64.b64encode(b"guest:guest").decode())
    req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            raw = resp.read()
            return resp.status, json.loads(raw) if raw.strip() else None
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


@pytest.mark.parametrize("version", list(EXPECTED))
def test_overview_exchange_types(version: str) -> None:
    with FakeRabbit(rabbitmq_version=version, management=True, plugins=()) as rabbit:  # as the live brokers
        assert rabbit.management is not None
        base = f"http://{rabbit.management.host}:{rabbit.management.port}"
        status, overview = _request(base, "GET", "/api/overview")
        assert status == 200
        assert [t["name"] for t in overview["exchange_types"]] == EXPECTED[version]
        for type_ in ("x-local-random", "x-modulus-hash"):
            status, body = _request(base, "PUT", f"/api/exchanges/%2F/mine-{type_}", {"type": type_})
            if type_ in EXPECTED[version]:
                assert status == 201
            else:
                assert (status, body["reason"]) == (400, f"unknown exchange type '{type_}'")


@pytest.mark.parametrize("version", list(EXPECTED))
def test_overview_exchange_types_with_the_delayed_message_plugin(version: str) -> None:
    """The plugin registers ``x-delayed-message`` (description ``Delayed Message Exchange.``); the list is sorted
    by name, so it comes before RabbitMQ's own ``x-`` types (rabbitmq-delayed-message-exchange's source)."""
    with FakeRabbit(rabbitmq_version=version, management=True) as rabbit:
        assert rabbit.management is not None
        base = f"http://{rabbit.management.host}:{rabbit.management.port}"
        status, overview = _request(base, "GET", "/api/overview")
        assert status == 200
        expected = sorted([*EXPECTED[version], "x-delayed-message"])
        assert [t["name"] for t in overview["exchange_types"]] == expected
        assert {"name": "x-delayed-message", "description": "Delayed Message Exchange.", "enabled": True} in overview[
            "exchange_types"
        ]
        body = {"type": "x-delayed-message", "arguments": {"x-delayed-type": "topic"}}
        assert _request(base, "PUT", "/api/exchanges/%2F/mine-delayed", body)[0] == 201
        status, body = _request(base, "PUT", "/api/exchanges/%2F/bad-delayed", {"type": "x-delayed-message"})
        assert (status, body["reason"]) == (400, "Invalid argument, 'x-delayed-type' must be an existing exchange type")


@pytest.mark.parametrize("broker", real_brokers(), ids=lambda b: b.param)
def test_overview_exchange_types_live(broker: Any) -> None:
    status, overview = broker.http("GET", "/api/overview")
    assert status == 200
    assert [t["name"] for t in overview["exchange_types"]] == EXPECTED[broker.label]
