"""Node's amqplib: ``node/session.js`` runs a whole session and prints what it saw as JSON; the same JSON on
fakerabbit and on RabbitMQ, and the values this test expects.

``npm ci`` installs the pinned amqplib into ``tests/clients/node/node_modules`` once per test session (skipped
when it is already installed at the locked version); without ``node``/``npm`` or a working install the tests
skip with the reason.
"""

from __future__ import annotations

import copy
import fcntl
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from fakerabbit import FakeRabbit
from tests.clients.conftest import REAL_URL, ClientTarget, not_found
from tests.netsupport import IPV6_PROBLEM
from tests.realbrokers import real_brokers

NODE_DIR = Path(__file__).parent / "node"
TIMEOUT = 30.0


def install_amqplib(npm: str) -> str | None:
    """Install the locked amqplib unless it is there already; the reason it could not, or None. A file lock
    keeps pytest-xdist workers from installing into the directory at the same time."""
    locked = json.loads((NODE_DIR / "package-lock.json").read_text())["packages"]["node_modules/amqplib"]["version"]
    installed = NODE_DIR / "node_modules" / "amqplib" / "package.json"
    with (NODE_DIR / ".install.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if installed.exists() and json.loads(installed.read_text())["version"] == locked:
            return None
        cmd = [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error", "--fetch-retries=1", "--fetch-timeout=30000"]
        try:
            subprocess.run(cmd, cwd=NODE_DIR, check=True, capture_output=True, text=True, timeout=120)
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as exc:
            stderr = getattr(exc, "stderr", "") or ""
            return f"npm ci of amqplib {locked} failed: {exc}: {stderr.strip()[-500:]}"
    return None


@pytest.fixture(scope="session")
def amqplib_session_script() -> Path:
    """``node/session.js`` with its dependencies installed; skips when Node or the install is not available."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.skip("node and npm are needed for the amqplib tests")
    version = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30).stdout.strip()
    if int(version.lstrip("v").split(".")[0] or 0) < 18:
        pytest.skip(f"amqplib needs Node 18 or later, found {version}")
    reason = install_amqplib(npm)
    if reason is not None:
        pytest.skip(reason)
    return NODE_DIR / "session.js"


QUEUES = ("work", "delay", "dead", "lost", "missing")
EXCHANGES = ("events", "unrouted", "dlx")


def run_node_session(script: Path, broker: ClientTarget, ca_file: str | None = None) -> dict[str, Any]:
    """Run the script, letting the TTL pass when it asks (``WAIT ttl``); return its JSON. ``ca_file``: the CA an
    ``amqps://`` URL's certificate is checked against."""
    for base in QUEUES:
        broker.name(base)  # the script's names, so that the real broker is cleaned up even if it fails
    for base in EXCHANGES:
        broker.exchange(base)
    proc = subprocess.Popen(
        ["node", script.name, broker.url, broker.prefix, broker.kind],
        cwd=script.parent,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "AMQP_CA_FILE": ca_file} if ca_file is not None else None,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        lines = []
        for line in proc.stdout:  # the script's own watchdog ends it if it hangs
            if line.startswith("WAIT "):
                assert line.strip() == "WAIT ttl"
                broker.expire()
                proc.stdin.write("go\n")
                proc.stdin.flush()
            else:
                lines.append(line)
        proc.stdin.close()
        rc = proc.wait(timeout=TIMEOUT)
        stderr = proc.stderr.read() if proc.stderr else ""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert rc == 0, f"node session failed ({rc}):\n{stderr}\nstdout: {''.join(lines)}"
    return json.loads(lines[-1])


@pytest.fixture(scope="session")
def node_outputs() -> dict[str, dict[str, Any]]:
    """Each broker kind's JSON, kept for :func:`test_node_amqplib_same_json_on_both_brokers`."""
    return {}


def comparable(out: dict[str, Any]) -> dict[str, Any]:
    """The output without what depends on the RabbitMQ version: the x-last-death-* headers (3.13+; the fake
    behaves like the newest RabbitMQ by default)."""
    out = copy.deepcopy(out)
    for key in ("rejected", "expired"):
        out[key]["headers"] = {k: v for k, v in out[key]["headers"].items() if not k.startswith("x-last-death-")}
    return out


def test_node_amqplib_session(
    amqplib_session_script: Path, broker: ClientTarget, node_outputs: dict[str, dict[str, Any]]
) -> None:
    out = run_node_session(amqplib_session_script, broker)
    node_outputs[broker.real.param if broker.real is not None else "fake"] = copy.deepcopy(out)
    assert out.pop("server") == {"product": "RabbitMQ"}
    assert out.pop("declareOk") == {"queue": "P-work", "messageCount": 0, "consumerCount": 0}
    assert out.pop("returned") == [
        {"body": "lost", "routingKey": "P-nobody", "exchange": "", "reply": [312, "NO_ROUTE"]}
    ]
    headers = {
        "byte": 7,
        "short": 1000,
        "int": 100000,
        "long": 2**40,
        "negative": -3,
        "double": 2.5,
        "text": "héllo",
        "flag": True,
        "nothing": None,
        "list": [1, "a", False],
        "table": {"k": "v", "deep": {"n": 1}},
        "buffer": {"buffer": "00ff"},
        "when": {"!": "timestamp", "value": 1714566615},
        "price": {"!": "decimal", "value": {"places": 2, "digits": 1234}},
        "unsigned": 4000000000,
        "float": 0.5,
    }
    props = {
        "contentType": "application/json",
        "contentEncoding": "utf-8",
        "deliveryMode": 2,
        "priority": 4,
        "correlationId": "corr-1",
        "replyTo": "replies",
        "expiration": "60000",
        "messageId": "msg-1",
        "timestamp": 1714566615,
        "type": "order.created",
        "userId": "guest",
        "appId": "node-app",
    }
    assert out.pop("first") == {
        "body": '{"id":1}',
        "exchange": "P-events",
        "routingKey": "order.created",
        "redelivered": False,
        "messageCount": 0,
        "props": props,
        "headers": headers,
    }
    assert out.pop("redelivered") == {"body": '{"id":1}', "redelivered": True}
    rejected = out.pop("rejected")
    death = {
        "count": 1,
        "reason": "rejected",
        "queue": "P-work",
        "time": "timestamp",
        "exchange": "P-events",
        "routing-keys": ["order.created"],
        "original-expiration": "60000",
    }
    assert rejected["headers"].pop("x-death") == [death]
    assert {k: v for k, v in rejected["headers"].items() if not k.startswith("x-")} == headers
    assert rejected["headers"]["x-first-death-reason"] == "rejected"
    assert rejected["props"] == {k: v for k, v in props.items() if k != "expiration"}
    assert (rejected["exchange"], rejected["routingKey"], rejected["body"]) == ("P-dlx", "dead", '{"id":1}')
    assert out.pop("alternate") == {
        "body": "to the AE",
        "exchange": "P-events",
        "routingKey": "invoice.sent",
        "redelivered": False,
        "messageCount": 0,
        "props": {},
        "headers": {"n": 1},
    }
    assert out.pop("empty") is False
    assert out.pop("consumerTag") == "node-1"
    assert out.pop("readyWhileTwoInFlight") == 2
    assert out.pop("consumed") == [
        ["m0", False, 0],
        ["m1", False, 1],
        ["m1", True, 1],
        ["m2", False, 2],
        ["m3", False, 3],
    ]
    expired = out.pop("expired")
    assert (expired["body"], expired["routingKey"], expired["props"]) == ("later", "dead", {"messageId": "late-1"})
    assert expired["headers"]["attempt"] == 1
    assert [(d["reason"], d["queue"], d["count"]) for d in expired["headers"]["x-death"]] == [("expired", "P-delay", 1)]
    assert out.pop("missingQueue") == {
        "code": 404,
        "classId": 50,
        "methodId": 10,
        "message": f'Operation failed: QueueDeclare; 404 (NOT-FOUND) with message "{not_found("P-missing")}"',
    }
    inequivalent = (
        "PRECONDITION_FAILED - inequivalent arg 'type' for exchange 'P-events' in vhost '/': received 'direct' but "
        "current is 'topic'"
    )
    assert out.pop("inequivalent") == {
        "code": 406,
        "classId": 40,
        "methodId": 10,
        "message": f'Operation failed: ExchangeDeclare; 406 (PRECONDITION-FAILED) with message "{inequivalent}"',
    }
    assert out.pop("channelErrors") == [
        f'Channel closed by server: 404 (NOT-FOUND) with message "{not_found("P-missing")}"',
        f'Channel closed by server: 406 (PRECONDITION-FAILED) with message "{inequivalent}"',
    ]
    assert out.pop("afterErrors") == 0
    assert out.pop("closed") is True
    assert out == {}, f"unchecked output: {out}"


@pytest.mark.skipif(REAL_URL is None, reason="no real RabbitMQ is configured")
def test_node_amqplib_same_json_on_both_brokers(
    amqplib_session_script: Path, node_outputs: dict[str, dict[str, Any]]
) -> None:
    """The whole JSON the script printed is the same on each real RabbitMQ and on fakerabbit with that version's
    profile (the sessions above ran first; run here if they did not)."""
    for real in real_brokers():
        if real.param not in node_outputs:
            target = ClientTarget("real", real.url, None, real)
            try:
                node_outputs[real.param] = run_node_session(amqplib_session_script, target)
            finally:
                target.cleanup()
        key = f"fake-{real.profile}"
        if key not in node_outputs:
            with FakeRabbit(rabbitmq_version=real.profile) as rabbit:
                node_outputs[key] = run_node_session(amqplib_session_script, ClientTarget("fake", rabbit.url, rabbit))
        assert comparable(node_outputs[key]) == comparable(node_outputs[real.param]), real.param


def test_node_amqplib_over_amqps_and_ipv6(amqplib_session_script: Path) -> None:
    """The same session over amqps (amqplib's ``ca`` socket option with ``rabbit.ca_file``) and over IPv6
    loopback (``amqp://guest:guest@[::1]:port/%2F``, as amqplib's own ipv6 test connects) prints the same JSON as
    over plain IPv4. Fake only: the live brokers have no TLS listener and listen on 127.0.0.1 only."""
    with FakeRabbit() as rabbit:
        plain = run_node_session(amqplib_session_script, ClientTarget("fake", rabbit.url, rabbit))
    with FakeRabbit(tls=True) as rabbit:
        over_tls = run_node_session(
            amqplib_session_script, ClientTarget("fake", rabbit.amqps_url, rabbit), ca_file=rabbit.ca_file
        )
        assert rabbit.connections() == []  # the session closed its connection
    assert over_tls == plain
    if IPV6_PROBLEM is not None:
        pytest.skip(IPV6_PROBLEM)
    with FakeRabbit(host="::1") as rabbit:
        assert rabbit.url.startswith("amqp://guest:guest@[::1]:")
        assert run_node_session(amqplib_session_script, ClientTarget("fake", rabbit.url, rabbit)) == plain
