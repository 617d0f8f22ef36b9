"""The management endpoints real tools call, proven with the tools themselves against fakerabbit and every live
broker: classic ``rabbitmqadmin`` (the Python script RabbitMQ 3.x/4.0 serve at ``/cli/rabbitmqadmin``),
``rabbitmqadmin`` v2 (rabbitmqadmin-ng, shipped in the live 4.3 broker's chroot) and pyrabbit2.

Also the health checks that really check: a port nobody listens on, ``protocol-listener/mqtt`` and the alarms
check while ``rabbit.block()`` or a memory alarm is active answer 503 with RabbitMQ's JSON.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pika
import pytest

from tests.management.conftest import Api, q
from tests.realbrokers import real_brokers

#: The fake runs these tests as 3.10 and 4.0 too, beside its default 4.3.
FAKE_PROFILES = ("3.10", "4.0")

CHROOT_43 = Path("/var/cache/fakerabbit-rabbitmq/4.3")


@functools.cache
def classic_rabbitmqadmin() -> Path | None:
    """The classic rabbitmqadmin script, fetched once from a live broker that still serves it (3.x, 4.0)."""
    target = Path(os.environ.get("TMPDIR", "/tmp")) / f"fakerabbit-rabbitmqadmin-{os.getuid()}.py"
    if target.exists():
        return target
    for b in real_brokers():
        if not b.management_up():
            continue
        try:
            with urllib.request.urlopen(b.management_url + "/cli/rabbitmqadmin", timeout=5) as resp:
                script = resp.read()
        except OSError:
            continue
        if script.startswith(b"#!/usr/bin/env python"):
            target.write_bytes(script)
            return target
    return None


def rabbitmqadmin_ng_command() -> list[str] | None:
    """rabbitmqadmin v2 from the 4.3 chroot, run on the host with the chroot's libraries."""
    binary = CHROOT_43 / "usr/bin/rabbitmqadmin"
    loader = CHROOT_43 / "lib64/ld-linux-x86-64.so.2"
    if not (binary.exists() and loader.exists()):
        return None
    libs = f"{CHROOT_43}/usr/lib/x86_64-linux-gnu:{CHROOT_43}/lib/x86_64-linux-gnu"
    return [str(loader), "--library-path", libs, str(binary)]


def _host_port(api: Api) -> tuple[str, int]:
    parts = urlsplit(api.base)
    return parts.hostname or "127.0.0.1", parts.port or 15672


def classic(api: Api, *args: str) -> subprocess.CompletedProcess[str]:
    script = classic_rabbitmqadmin()
    if script is None:
        pytest.skip("classic rabbitmqadmin: no live 3.x/4.0 broker serves /cli/rabbitmqadmin")
    host, port = _host_port(api)
    cmd = [sys.executable, str(script), "-H", host, "-P", str(port), "-u", "guest", "-p", "guest", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60)


def ng(api: Api, *args: str) -> subprocess.CompletedProcess[str]:
    if not api.at_least("3.13"):
        pytest.skip("rabbitmqadmin v2 supports RabbitMQ 3.13 and later (it cannot decode 3.10.8's /api/nodes)")
    command = rabbitmqadmin_ng_command()
    if command is None:
        pytest.skip("rabbitmqadmin v2: no 4.3 chroot")
    base = f"{api.base}/api"
    return subprocess.run(
        [*command, "--base-uri", base, "--non-interactive", *args], capture_output=True, text=True, timeout=60
    )


def _publish(api: Api, queue: str, body: str) -> None:
    assert api.request("PUT", f"/api/queues/%2F/{q(queue)}", {}).status in (201, 204)
    msg = {"properties": {}, "routing_key": queue, "payload": body, "payload_encoding": "string"}
    assert api.request("POST", "/api/exchanges/%2F/amq.default/publish", msg).body == {"routed": True}


# -- classic rabbitmqadmin ---------------------------------------------------------------------------------------------
def test_classic_rabbitmqadmin_lists_nodes(api: Api) -> None:
    r = classic(api, "-f", "raw_json", "list", "nodes")
    assert r.returncode == 0, r.stderr
    nodes = json.loads(r.stdout)
    assert len(nodes) == 1 and nodes[0]["running"] is True and "@" in nodes[0]["name"]


def test_classic_rabbitmqadmin_get_sends_count_as_a_string(api: Api) -> None:
    name = api.name()
    _publish(api, name, "hello")
    r = classic(api, "-f", "raw_json", "get", f"queue={name}", "ackmode=ack_requeue_false")
    assert r.returncode == 0, r.stderr + r.stdout
    got = json.loads(r.stdout)
    assert [m["payload"] for m in got] == ["hello"]
    # the body it sent, as RabbitMQ accepts it
    a = api.request(
        "POST", f"/api/queues/%2F/{q(name)}/get", {"count": "1", "ackmode": "ack_requeue_true", "encoding": "auto"}
    )
    assert (a.status, a.body) == (200, [])


def test_get_refuses_a_count_that_is_not_a_number(api: Api) -> None:
    name = api.name()
    assert api.request("PUT", f"/api/queues/%2F/{q(name)}", {}).status == 201
    a = api.request(
        "POST", f"/api/queues/%2F/{q(name)}/get", {"count": "x", "ackmode": "ack_requeue_true", "encoding": "auto"}
    )
    assert (a.status, a.body) == (400, {"error": "bad_request", "reason": ["not_integer", "x"]})


# -- rabbitmqadmin v2 --------------------------------------------------------------------------------------------------
def test_rabbitmqadmin_v2_lists_nodes_and_feature_flags(api: Api) -> None:
    r = ng(api, "list", "nodes")
    assert r.returncode == 0, r.stderr
    assert "@" in r.stdout
    r = ng(api, "list", "feature_flags")
    assert r.returncode == 0, r.stderr
    assert "quorum_queue" in r.stdout


def test_rabbitmqadmin_v2_health_checks(api: Api) -> None:
    passed = ng(api, "health_check", "local_alarms")
    assert (passed.returncode, passed.stdout.strip()) == (0, "health check passed"), passed.stderr
    assert "health check passed" in ng(api, "health_check", "protocol_listener", "--protocol", "amqp").stdout
    failed = ng(api, "health_check", "port_listener", "--port", "1")
    assert "503" in failed.stdout and "No active listener" in failed.stdout
    failed = ng(api, "health_check", "protocol_listener", "--protocol", "mqtt")
    assert "503" in failed.stdout and "No active listener" in failed.stdout


# -- pyrabbit2 ---------------------------------------------------------------------------------------------------------
def test_pyrabbit2_nodes_and_get(api: Api) -> None:
    pyrabbit2 = pytest.importorskip("pyrabbit2")
    host, port = _host_port(api)
    client = pyrabbit2.Client(f"{host}:{port}", "guest", "guest")
    nodes = client.get_nodes()
    assert len(nodes) == 1 and nodes[0]["running"] is True
    assert client.is_alive()
    name = api.name()
    _publish(api, name, "from-pyrabbit2")
    got = client.get_messages("/", name, count=1, requeue=False)
    assert [m["payload"] for m in got] == ["from-pyrabbit2"]


# -- health checks that check ---------------------------------------------------------------------------------------
def test_port_listener_health_check(api: Api) -> None:
    _host, port = _host_port(api)
    amqp_port = urlsplit(api.amqp_url).port or 5672
    ok = api.request("GET", f"/api/health/checks/port-listener/{amqp_port}")
    assert (ok.status, ok.body) == (200, {"status": "ok", "port": amqp_port})
    bad = api.request("GET", "/api/health/checks/port-listener/1")
    assert bad.status == 503
    assert bad.body["status"] == "failed" and bad.body["reason"] == "No active listener" and bad.body["missing"] == 1
    assert {amqp_port, port} <= set(bad.body["ports"])
    invalid = api.request("GET", "/api/health/checks/port-listener/abc")
    assert (invalid.status, invalid.body) == (400, {"error": "bad_request", "reason": "Invalid port"})


def test_protocol_listener_health_check(api: Api) -> None:
    ok = api.request("GET", "/api/health/checks/protocol-listener/amqp")
    bad = api.request("GET", "/api/health/checks/protocol-listener/mqtt")
    assert (ok.status, bad.status) == (200, 503)
    assert bad.body["reason"] == "No active listener" and bad.body["status"] == "failed"
    if api.at_least("4.1"):  # 4.3.6 lists what is missing; 4.0.5 and 3.10.8 name it
        assert ok.body["status"] == "ok" and {"amqp", "http"} <= set(ok.body["protocols"])
        assert bad.body["missing"] == ["mqtt"]
    else:
        assert ok.body == {"status": "ok", "protocol": "amqp"}
        assert bad.body["missing"] == "mqtt"


@pytest.mark.fake_only
@pytest.mark.parametrize("check", ["alarms", "local-alarms"])
def test_alarm_health_checks_fail_while_blocked(api: Api, check: str) -> None:
    assert api.fake is not None
    path = f"/api/health/checks/{check}"
    assert (a := api.request("GET", path)).body == {"status": "ok"} and a.status == 200
    api.fake.block()
    where = "in the cluster" if check == "alarms" else "on the node"
    expected: dict[str, Any] = {
        "status": "failed",
        "reason": f"There are alarms in effect {where}",
        "alarms": [{"node": "rabbit@fakerabbit", "resource": "memory"}],
    }
    assert (a := api.request("GET", path)).status == 503 and a.body == expected
    api.fake.unblock()
    assert api.request("GET", path).status == 200


@pytest.mark.fake_only
def test_a_memory_alarm_fails_the_alarms_check_and_shows_in_nodes(api: Api) -> None:
    assert api.fake is not None
    api.fake._listener.alarms.memory_high_watermark = 10  # bytes of message bodies
    _publish(api, api.name(), "more than ten bytes")
    assert api.request("GET", "/api/health/checks/alarms").status == 503
    assert api.request("GET", "/api/nodes").body[0]["mem_alarm"] is True


def test_deprecated_features_used(api: Api) -> None:
    a = api.request("GET", "/api/deprecated-features/used")
    if not api.at_least("4.0"):
        assert (a.status, a.body) == (404, {"error": "Object Not Found", "reason": "Not Found"})
        return
    assert a.status == 200 and isinstance(a.body, list)
    if api.is_fake:
        assert a.body == []
        conn = pika.BlockingConnection(pika.URLParameters(api.amqp_url))
        conn.channel().queue_declare("transient", durable=False)  # neither durable nor exclusive
        names = [f["name"] for f in api.request("GET", "/api/deprecated-features/used").body]
        assert names == ["transient_nonexcl_queues"]
        conn.close()


def test_nodes_by_name(api: Api) -> None:
    name = api.request("GET", "/api/nodes").body[0]["name"]
    assert api.request("GET", f"/api/nodes/{q(name)}").body["name"] == name
    missing = api.request("GET", "/api/nodes/nobody@nowhere").status
    assert missing == (404 if api.is_fake or api.at_least("4.0") else 500)  # live 3.10.8 crashes: 500
