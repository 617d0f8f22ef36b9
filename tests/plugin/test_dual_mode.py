"""Dual mode: ``--fakerabbit-url`` runs the same user tests against a real RabbitMQ (skipped if none is reachable).

The real broker's URL comes from ``FAKERABBIT_REAL_URL`` (default ``amqp://guest:guest@127.0.0.1:5672/%2F``).
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from fakerabbit_pytest.management import ManagementClient, default_management_url
from fakerabbit_pytest.wire import AMQPClosed, AmqpUrl, MiniClient

pytest_plugins = ["pytester"]

REAL_URL = os.environ.get("FAKERABBIT_REAL_URL", "amqp://guest:guest@127.0.0.1:5672/%2F")
INI = """
[pytest]
asyncio_mode = auto
asyncio_default_fixture_loop_scope = function
"""


def _reachable() -> bool:
    try:
        MiniClient(AmqpUrl.parse(REAL_URL), timeout=2).close()
    except (OSError, AMQPClosed):
        return False
    return True


pytestmark = pytest.mark.skipif(not _reachable(), reason=f"no real RabbitMQ at {REAL_URL}")


def queue_exists(name: str) -> bool:
    with MiniClient(AmqpUrl.parse(REAL_URL)) as c:
        try:
            c.queue_declare_passive(c.open_channel(), name)
        except AMQPClosed as exc:
            assert exc.code == 404
            return False
        return True


SOURCE = """
import pika, pytest
from fakerabbit import FakeRabbit

PREFIX = "{prefix}"

def channel(url):
    return pika.BlockingConnection(pika.URLParameters(url)).channel()

def test_plain(fakerabbit, fakerabbit_url):
    ch = channel(fakerabbit_url)
    ch.exchange_declare(PREFIX + "x", "fanout")
    ch.queue_declare(PREFIX + "q", durable=True)
    ch.queue_bind(PREFIX + "q", PREFIX + "x")
    ch.queue_declare("", exclusive=False, auto_delete=False)  # server-named: found in declare-ok
    ch.confirm_delivery()
    ch.basic_publish(PREFIX + "x", "", b"m")
    assert fakerabbit.queue(PREFIX + "q").message_count == 1
    print("NAMES", ch.queue_declare("", exclusive=False).method.queue)

def test_ttl(fakerabbit, fakerabbit_url, fakerabbit_clock):
    ch = channel(fakerabbit_url)
    ch.queue_declare(PREFIX + "dlq")
    ch.queue_declare(PREFIX + "ttl", arguments={{"x-message-ttl": 300, "x-dead-letter-exchange": "",
                                                "x-dead-letter-routing-key": PREFIX + "dlq"}})
    ch.basic_publish("", PREFIX + "ttl", b"m")
    fakerabbit_clock.advance(0.3)
    for _ in range(50):  # a real broker dead-letters just after the TTL: the wait is exactly 0.3 s
        method, props, body = ch.basic_get(PREFIX + "dlq", auto_ack=True)
        if body is not None or isinstance(fakerabbit, FakeRabbit):
            break
        ch.connection.sleep(0.01)
    assert body == b"m" and props.headers["x-death"][0]["reason"] == "expired"

@pytest.mark.fakerabbit(fake_only=True)
def test_inspection(fakerabbit):
    assert fakerabbit.events is not None

def test_close_connections(fakerabbit, fakerabbit_url):
    ch = channel(fakerabbit_url)
    assert fakerabbit.close_connections() == 1
    with pytest.raises(pika.exceptions.ConnectionClosedByBroker) as info:
        ch.queue_declare(PREFIX + "never")
    assert info.value.reply_code == 320
"""


@pytest.fixture
def source(pytester: pytest.Pytester) -> str:
    prefix = f"fr-dual-{uuid.uuid4().hex[:8]}-"
    pytester.makeini(INI)
    pytester.makepyfile(test_user=SOURCE.format(prefix=prefix))
    return prefix


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest(
        "-p", "no:cacheprovider", "-q", "-rs", "-s", "-W", "ignore::pytest.PytestAssertRewriteWarning", *args
    )


def test_same_tests_pass_on_the_fake(pytester: pytest.Pytester, source: str) -> None:
    _run(pytester).assert_outcomes(passed=4)


def test_against_a_real_broker_skips_virtual_clock_and_cleans_up(pytester: pytest.Pytester, source: str) -> None:
    result = _run(pytester, f"--fakerabbit-url={REAL_URL}")
    result.assert_outcomes(passed=2, skipped=2)
    out = result.stdout.str()
    assert (
        "needs fakerabbit's virtual clock (clock.advance); against a real RabbitMQ run with --fakerabbit-real-wait"
        in out
    )
    assert "marked fake_only: needs fakerabbit; this run uses a real RabbitMQ" in out
    server_named = next(line.split()[1] for line in out.splitlines() if line.startswith("NAMES "))
    for name in (source + "q", source + "ttl", source + "dlq", server_named):
        assert not queue_exists(name), f"{name} was left behind"
    with MiniClient(AmqpUrl.parse(REAL_URL)) as c:
        assert c.exchange_exists(c.open_channel(), "amq.fanout")
        assert not c.exchange_exists(c.open_channel(), source + "x")


def test_real_wait_runs_clock_tests_in_real_time(pytester: pytest.Pytester, source: str) -> None:
    result = _run(pytester, f"--fakerabbit-url={REAL_URL}", "--fakerabbit-real-wait", "-k", "ttl")
    result.assert_outcomes(passed=1)
    assert not queue_exists(source + "dlq")


# ======================================================================================================
# against the live 3.10 and 4.3 brokers: helpers, policies, where=, start_time, exact waits, xdist vhosts

LIVE = {
    "3.10": os.environ.get("FAKERABBIT_REAL_URL_310", "amqp://guest:guest@127.0.0.1:5672/%2F"),
    "4.3": os.environ.get("FAKERABBIT_REAL_URL_43", "amqp://guest:guest@127.0.0.1:5674/%2F"),
}


def _live(version: str) -> str:
    url = LIVE[version]
    try:
        MiniClient(AmqpUrl.parse(url), timeout=2).close()
    except (OSError, AMQPClosed):
        pytest.skip(f"no live RabbitMQ {version} at {url}")
    return url


@pytest.fixture(params=sorted(LIVE))
def live_url(request: pytest.FixtureRequest) -> str:
    return _live(request.param)


def _api(url: str) -> ManagementClient:
    target = AmqpUrl.parse(url)
    return ManagementClient(default_management_url(target), target.user, target.password)


HELPERS = """
import asyncio, time
import pika, pytest
from fakerabbit import FakeRabbit
from fakerabbit.testing import assert_bodies, assert_empty, assert_message_count

P = "{prefix}"

def channel(url, name=None):
    params = pika.URLParameters(url)
    if name:
        params.client_properties = {{"connection_name": name}}
    ch = pika.BlockingConnection(params).channel()
    ch.confirm_delivery()
    return ch

def settle(check):
    for _ in range(100):  # a real broker applies a policy or an expiry a moment later
        if check():
            return
        time.sleep(0.02)
    assert check()

def test_policy(fakerabbit, fakerabbit_url):
    ch = channel(fakerabbit_url)
    ch.queue_declare(P + "pq")
    fakerabbit.set_policy(P + "pol", "^" + P + "pq$", {{"max-length": 1}})
    for body in (b"a", b"b", b"c"):
        ch.basic_publish("", P + "pq", body)
    settle(lambda: fakerabbit.queue(P + "pq").message_count == 1)

def test_counts(fakerabbit, fakerabbit_url):
    ch = channel(fakerabbit_url)
    ch.queue_declare(P + "cq")
    ch.basic_publish("", P + "cq", b"a")
    ch.basic_publish("", P + "cq", b"b")
    assert_message_count(fakerabbit.queue(P + "cq"), 2, unacked=0)
    with pytest.raises(AssertionError, match="counts differ|bodies differ"):
        assert_bodies(fakerabbit.queue(P + "cq"), [b"a"])
    method, _props, _body = ch.basic_get(P + "cq")
    with pytest.raises(AssertionError, match="is not empty: 1 ready, 1 unacked"):
        assert_empty(fakerabbit.queue(P + "cq"))
    ch.basic_get(P + "cq", auto_ack=True)
    assert_message_count(fakerabbit.queue(P + "cq"), 0, unacked=1)
    with pytest.raises(AssertionError, match="is not empty: 0 ready, 1 unacked"):
        assert_empty(fakerabbit.queue(P + "cq"))
    ch.basic_ack(method.delivery_tag)
    assert_empty(fakerabbit.queue(P + "cq"))
    assert_bodies(fakerabbit.queue(P + "cq"), [])

def test_consumer_unacked(fakerabbit, fakerabbit_url):
    ch = channel(fakerabbit_url)
    ch.queue_declare(P + "uq")
    for body in (b"1", b"2", b"3"):
        ch.basic_publish("", P + "uq", body)
    tags = []
    ch.basic_qos(prefetch_count=10)
    ch.basic_consume(P + "uq", lambda c, m, p, b: tags.append(m.delivery_tag))
    while len(tags) < 3:
        ch.connection.process_data_events(0.05)
    assert_message_count(fakerabbit.queue(P + "uq"), 0, unacked=3)
    ch.basic_ack(tags[1], multiple=True)
    assert_message_count(fakerabbit.queue(P + "uq"), 0, unacked=1)
    ch.basic_nack(tags[2], requeue=True)
    settle(lambda: fakerabbit.queue(P + "uq").unacked_count == 1)  # redelivered to the same consumer

def test_bodies_skip(fakerabbit, fakerabbit_url):
    ch = channel(fakerabbit_url)
    ch.queue_declare(P + "bq")
    ch.basic_publish("", P + "bq", b"x")
    assert_bodies(fakerabbit.queue(P + "bq"), [b"x"])

def test_where(fakerabbit, fakerabbit_url):
    worker = channel(fakerabbit_url, "worker")
    other = channel(fakerabbit_url, "other")
    assert sorted(c.connection_name for c in fakerabbit.connections()) == ["other", "worker"]
    assert fakerabbit.close_connections(where=lambda c: c.connection_name == "worker") == 1
    with pytest.raises(pika.exceptions.ConnectionClosedByBroker) as info:
        worker.queue_declare(P + "never")
    assert info.value.reply_code == 320
    other.queue_declare(P + "alive")
    assert fakerabbit.drop_connections(where=lambda c: c.connection_name == "other") == 1
    with pytest.raises(pika.exceptions.AMQPConnectionError):
        other.queue_declare(P + "never")

@pytest.mark.fakerabbit(start_time="2024-01-01T00:00:00Z")
def test_start_time(fakerabbit):
    assert fakerabbit.clock.now().year == 2024

def test_exact_wait(fakerabbit, fakerabbit_url, fakerabbit_clock):
    ch = channel(fakerabbit_url)
    ch.queue_declare(P + "wdlq")
    ch.queue_declare(P + "wq", arguments={{"x-message-ttl": 1000, "x-dead-letter-exchange": "",
                                           "x-dead-letter-routing-key": P + "wdlq"}})
    ch.basic_publish("", P + "wq", b"m")
    t0 = time.monotonic()
    fakerabbit_clock.advance(0.6)
    waited = time.monotonic() - t0
    if not isinstance(fakerabbit, FakeRabbit):
        assert 0.6 <= waited < 0.68, waited
    assert fakerabbit.queue(P + "wq").message_count == 1  # not yet expired
    fakerabbit_clock.advance(0.5)
    settle(lambda: fakerabbit.queue(P + "wdlq").message_count == 1)

async def test_async_wait_keeps_the_loop_running(fakerabbit, fakerabbit_clock):
    ticks = 0
    async def tick():
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1
    task = asyncio.create_task(tick())
    t0 = time.monotonic()
    await fakerabbit_clock.advance_async(0.3)
    waited = time.monotonic() - t0
    task.cancel()
    if not isinstance(fakerabbit, FakeRabbit):
        assert 0.3 <= waited < 0.38 and ticks >= 15, (waited, ticks)

async def test_sync_advance_in_async_test(fakerabbit, fakerabbit_clock):
    fakerabbit_clock.advance(0.1)

def test_management_url(fakerabbit_management_url):
    import base64, json, urllib.request
    req = urllib.request.Request(fakerabbit_management_url + "/api/overview")
    req.add_header("Authorization", "Basic " + base64.b64encode(b"guest:guest").decode())
    with urllib.request.urlopen(req, timeout=5) as resp:
        assert "rabbitmq_version" in json.load(resp)
"""


@pytest.fixture
def helpers(pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    prefix = f"fr-help-{uuid.uuid4().hex[:8]}-"
    pytester.makeini(INI)
    pytester.makepyfile(test_helpers=HELPERS.format(prefix=prefix))
    # A rabbitmqctl on PATH must never be used (it would change another broker's policies).
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    ctl = bin_dir / "rabbitmqctl"
    ctl.write_text(f"#!/bin/sh\ntouch {tmp_path / 'rabbitmqctl-ran'}\nexit 1\n")
    ctl.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    return prefix


def test_helpers_on_the_fake(pytester: pytest.Pytester, helpers: str) -> None:
    _run(pytester, "test_helpers.py").assert_outcomes(passed=10)


def test_helpers_against_live_brokers(pytester: pytest.Pytester, helpers: str, live_url: str, tmp_path: Path) -> None:
    result = _run(pytester, "test_helpers.py", f"--fakerabbit-url={live_url}", "--fakerabbit-real-wait")
    result.assert_outcomes(passed=7, skipped=3)
    out = result.stdout.str()
    assert "rabbit.queue(...).messages needs fakerabbit; this run uses a real RabbitMQ (--fakerabbit-url)" in out
    assert "sets the broker's start time (2024-01-01T00:00:00+00:00" in out
    assert "clock.advance() inside a running event loop would block it" in out
    assert not (tmp_path / "rabbitmqctl-ran").exists()
    api = _api(live_url)
    assert not [p for p in api.request("GET", "/api/policies/%2F") if p["name"].startswith(helpers)]
    for name in ("pq", "cq", "uq", "bq", "alive", "wq", "wdlq"):
        assert not _exists(live_url, "/", helpers + name), name


def _exists(url: str, vhost: str, queue: str) -> bool:
    with MiniClient(AmqpUrl.parse(url), vhost=vhost) as c:
        try:
            c.queue_declare_passive(c.open_channel(), queue)
        except AMQPClosed as exc:
            assert exc.code == 404
            return False
        return True


XDIST = """
import os, pika, pytest

@pytest.mark.parametrize("n", range(6))
def test_shared_names(fakerabbit, fakerabbit_url, n, tmp_path_factory):
    worker = os.environ["PYTEST_XDIST_WORKER"]
    vhost = fakerabbit.vhost
    assert vhost.startswith("fakerabbit-" + worker + "-") and fakerabbit_url.endswith("/" + vhost)
    out = tmp_path_factory.getbasetemp().parent.parent / ("vhost-" + worker)
    out.write_text(vhost)
    ch = pika.BlockingConnection(pika.URLParameters(fakerabbit_url)).channel()
    ch.confirm_delivery()
    ch.queue_declare("shared-name", durable=True)  # the same name in every worker: no collisions
    ch.basic_publish("", "shared-name", str(n).encode())
    assert fakerabbit.queue("shared-name").message_count == 1
    tags = []
    ch.basic_consume("shared-name", lambda c, m, p, b: tags.append(m.delivery_tag))
    while not tags:
        ch.connection.process_data_events(0.05)
    assert fakerabbit.queue("shared-name").unacked_count == 1
    fakerabbit.set_policy("limit", "^shared", {"max-length": 5})
"""


def test_xdist_workers_get_vhosts_of_their_own(pytester: pytest.Pytester, live_url: str) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(test_xdist=XDIST)
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-q", "-n", "2", f"--fakerabbit-url={live_url}", timeout=300
    )
    result.assert_outcomes(passed=6)
    vhosts = {p.read_text() for p in pytester.path.rglob("vhost-gw*")}
    assert len(vhosts) == 2, vhosts
    existing = {v["name"] for v in _api(live_url).request("GET", "/api/vhosts")}
    assert not vhosts & existing, "the workers' vhosts were left behind"


def test_xdist_refused_at_start_without_the_management_api(pytester: pytest.Pytester) -> None:
    url = _live("3.10")
    pytester.makeini(INI)
    pytester.makepyfile(test_xdist=XDIST)
    result = pytester.runpytest_subprocess(
        "-p",
        "no:cacheprovider",
        "-q",
        "-n",
        "2",
        f"--fakerabbit-url={url}",
        "--fakerabbit-management-url=http://127.0.0.1:9",
        timeout=120,
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert "--fakerabbit-url with pytest-xdist gives every worker a vhost of its own" in err
    assert "which does not answer at http://127.0.0.1:9" in err
    assert "passed" not in result.stdout.str()


def test_policies_skip_clearly_without_the_management_api(pytester: pytest.Pytester) -> None:
    url = _live("3.10")
    pytester.makeini(INI)
    pytester.makepyfile(
        test_policy="""
        def test_policy(fakerabbit):
            fakerabbit.set_policy("p", "^never$", {"max-length": 1})
        """
    )
    result = _run(pytester, f"--fakerabbit-url={url}", "--fakerabbit-management-url=http://127.0.0.1:9")
    result.assert_outcomes(skipped=1)
    assert (
        "policies against a real RabbitMQ: its management API (--fakerabbit-management-url) does not answer at "
        "http://127.0.0.1:9" in " ".join(result.stdout.str().split())
    )
