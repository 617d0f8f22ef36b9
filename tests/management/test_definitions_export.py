"""Definitions exported by a real RabbitMQ 4.3 load into fakerabbit (``serve --definitions``, ``ctl
import_definitions``, ``POST /api/definitions``): ``amq.*`` exchanges such as ``amq.rabbitmq.log`` are skipped
silently, as RabbitMQ's import skips them, and users keep their RabbitMQ password hashes.

``fixtures/rabbitmq-4.3.6-definitions.json`` is a real export of the live 4.3.6 broker, made by :func:`live_export`
(``python -m tests.management.test_definitions_export > tests/management/fixtures/…`` regenerates it); when the
live 4.3 broker is up, a fresh export is made and loaded too.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pika
import pytest

from fakerabbit import FakeRabbit
from tests.cli.conftest import run_ctl
from tests.cli.test_serve import serve
from tests.management.conftest import http
from tests.realbrokers import RealBroker, real_brokers

FIXTURE = Path(__file__).parent / "fixtures" / "rabbitmq-4.3.6-definitions.json"
USER, PASSWORD = "fixture-user", "fixture-pw"


def _q(name: str) -> str:
    return quote(name, safe="")


def live_export(real: RealBroker, tag: str) -> dict[str, Any]:
    """Create a small topology in a vhost of its own on the live broker, export the node's definitions, keep what
    belongs to it (plus the node's ``amq.*`` exchanges and users it made), and delete it again."""
    vhost, user = f"defs-{tag}", f"{USER}-{tag}" if tag != "fixture" else USER
    steps: list[tuple[str, str, Any]] = [
        ("PUT", f"/api/vhosts/{_q(vhost)}", {}),
        ("PUT", f"/api/users/{_q(user)}", {"password": PASSWORD, "tags": "management,policymaker"}),
        ("PUT", f"/api/permissions/{_q(vhost)}/{_q(user)}", {"configure": "^app-", "write": ".*", "read": ".*"}),
        ("PUT", f"/api/exchanges/{_q(vhost)}/app-events", {"type": "topic", "durable": True}),
        ("PUT", f"/api/exchanges/{_q(vhost)}/app-dlx", {"type": "fanout", "durable": True}),
        (
            "PUT",
            f"/api/queues/{_q(vhost)}/app-orders",
            {"durable": True, "arguments": {"x-queue-type": "quorum", "x-dead-letter-exchange": "app-dlx"}},
        ),
        ("PUT", f"/api/queues/{_q(vhost)}/app-dead", {"durable": True, "arguments": {"x-message-ttl": 60000}}),
        ("POST", f"/api/bindings/{_q(vhost)}/e/app-events/q/app-orders", {"routing_key": "order.*"}),
        ("POST", f"/api/bindings/{_q(vhost)}/e/app-dlx/q/app-dead", {"routing_key": ""}),
        (
            "PUT",
            f"/api/policies/{_q(vhost)}/app-limit",
            {"pattern": "^app-", "definition": {"max-length": 1000}, "apply-to": "queues"},
        ),
    ]
    try:
        for method, path, body in steps:
            status, answer = real.http(method, path, body)
            assert status in (201, 204), (path, status, answer)
        status, defs = real.http("GET", "/api/definitions")
        assert status == 200
    finally:
        real.http("DELETE", f"/api/vhosts/{_q(vhost)}")
        real.http("DELETE", f"/api/users/{_q(user)}")
    keep_vhosts = {vhost, "/"}
    defs["users"] = [u for u in defs["users"] if u["name"] in ("guest", user)]
    defs["vhosts"] = [v for v in defs["vhosts"] if v["name"] in keep_vhosts]
    defs["permissions"] = [p for p in defs["permissions"] if p["vhost"] in keep_vhosts and p["user"] in ("guest", user)]
    defs["topic_permissions"] = []
    for key in ("queues", "bindings", "policies", "parameters"):
        defs[key] = [x for x in defs.get(key, []) if x.get("vhost") == vhost]
    defs["exchanges"] = [
        x for x in defs["exchanges"] if x["vhost"] == vhost or (x["vhost"] == "/" and x["name"].startswith("amq."))
    ]
    return dict(defs)


def _check_loaded(management_url: str, amqp_port: int, defs: dict[str, Any]) -> None:
    vhost = next(v["name"] for v in defs["vhosts"] if v["name"] != "/")
    user = next(u["name"] for u in defs["users"] if u["name"] != "guest")
    queues = http(management_url, "GET", f"/api/queues/{_q(vhost)}").body
    assert sorted(x["name"] for x in queues) == ["app-dead", "app-orders"]
    assert {x["name"]: x["type"] for x in queues}["app-orders"] == "quorum"
    exchanges = {x["name"] for x in http(management_url, "GET", f"/api/exchanges/{_q(vhost)}").body}
    assert {"app-events", "app-dlx"} <= exchanges
    assert "amq.rabbitmq.log" not in {x["name"] for x in http(management_url, "GET", "/api/exchanges/%2F").body}
    bindings = http(management_url, "GET", f"/api/bindings/{_q(vhost)}").body
    assert ("app-events", "app-orders", "order.*") in {
        (b["source"], b["destination"], b["routing_key"]) for b in bindings
    }
    assert [p["name"] for p in http(management_url, "GET", f"/api/policies/{_q(vhost)}").body] == ["app-limit"]
    assert http(management_url, "GET", f"/api/users/{_q(user)}").body["tags"] == ["management", "policymaker"]
    # the user logs in with its password, checked against RabbitMQ's own hash
    url = f"amqp://{user}:{PASSWORD}@127.0.0.1:{amqp_port}/{_q(vhost)}"
    conn = pika.BlockingConnection(pika.URLParameters(url))
    conn.channel().queue_declare("app-orders", passive=True)
    conn.close()


def _fixture() -> dict[str, Any]:
    defs: dict[str, Any] = json.loads(FIXTURE.read_text())
    assert defs["rabbitmq_version"] == "4.3.6"
    assert "amq.rabbitmq.log" in {x["name"] for x in defs["exchanges"]}
    return defs


def test_a_rabbitmq_43_export_loads_with_serve_definitions(tmp_path: Path) -> None:
    s = serve("--definitions", str(FIXTURE))
    try:
        port = int(s.amqp_url.rsplit(":", 1)[1].split("/")[0])
        _check_loaded(s.management_url, port, _fixture())
    finally:
        s.proc.kill()
        s.proc.wait()


def test_a_rabbitmq_43_export_loads_with_ctl_import_definitions() -> None:
    with FakeRabbit(management=True) as rabbit:
        r = run_ctl(rabbit, "import_definitions", str(FIXTURE))
        assert (r.returncode, r.stderr) == (0, ""), r.stderr
        _check_loaded(rabbit.management_url, rabbit.port, _fixture())


@pytest.mark.skipif(
    not any(b.label == "4.3" and b.management_up() for b in real_brokers()), reason="no live RabbitMQ 4.3"
)
def test_a_fresh_export_from_the_live_43_broker_loads() -> None:
    real = next(b for b in real_brokers() if b.label == "4.3")
    defs = live_export(real, uuid.uuid4().hex[:8])
    with FakeRabbit(management=True) as rabbit:
        a = http(rabbit.management_url, "POST", "/api/definitions", defs)
        assert a.status == 204, a.text
        _check_loaded(rabbit.management_url, rabbit.port, defs)


def test_amq_exchanges_are_skipped_silently_but_others_still_refused() -> None:
    with FakeRabbit(management=True) as rabbit:
        defs = {"exchanges": [{"name": "amq.custom", "vhost": "/", "type": "topic", "durable": True}]}
        assert http(rabbit.management_url, "POST", "/api/definitions", defs).status == 204
        assert http(rabbit.management_url, "GET", "/api/exchanges/%2F/amq.custom").status == 404


if __name__ == "__main__":  # regenerate the fixture from the live 4.3 broker
    import sys

    broker = next(b for b in real_brokers() if b.label == "4.3")
    json.dump(live_export(broker, "fixture"), sys.stdout, indent=2, sort_keys=True)
    sys.stdout.write("\n")
