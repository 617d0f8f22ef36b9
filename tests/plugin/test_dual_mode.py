"""Dual mode: ``--fakerabbit-url`` runs the same user tests against a real RabbitMQ (skipped if none is reachable).

The real broker's URL comes from ``FAKERABBIT_REAL_URL`` (default ``amqp://guest:guest@127.0.0.1:5672/%2F``).
"""

from __future__ import annotations

import os
import uuid

import pytest

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
    method, props, body = ch.basic_get(PREFIX + "dlq", auto_ack=True)
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
