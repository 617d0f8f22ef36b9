"""The pytest plugin, run through pytester: fixtures, isolation, the marker, options, problems, async, xdist."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

INI = """
[pytest]
asyncio_mode = auto
asyncio_default_fixture_loop_scope = function
{extra}
"""


@pytest.fixture
def run(pytester: pytest.Pytester):  # type: ignore[no-untyped-def]
    """``run(source, *args, ini="")``: write a test module and run pytest on it in-process."""

    def go(source: str, *args: str, ini: str = "") -> pytest.RunResult:
        pytester.makeini(INI.format(extra=ini))
        pytester.makepyfile(test_user=source)
        return pytester.runpytest(
            "-p", "no:cacheprovider", "-q", "-W", "ignore::pytest.PytestAssertRewriteWarning", *args
        )

    return go


def test_fixtures_and_reset_between_tests(run) -> None:  # type: ignore[no-untyped-def]
    result = run(
        """
        import pika, pytest
        from fakerabbit import FakeRabbit, VirtualClock

        seen = {}

        def test_first(fakerabbit, fakerabbit_url, fakerabbit_clock):
            assert isinstance(fakerabbit, FakeRabbit) and isinstance(fakerabbit_clock, VirtualClock)
            assert fakerabbit_url == fakerabbit.url and fakerabbit_clock is fakerabbit.clock
            seen["port"], seen["start"] = fakerabbit.port, fakerabbit_clock.now()
            conn = pika.BlockingConnection(pika.URLParameters(fakerabbit_url))
            ch = conn.channel()
            ch.exchange_declare("x", "topic")
            ch.queue_declare("q", arguments={"x-message-ttl": 60_000})
            ch.queue_bind("q", "x", "#")
            ch.basic_publish("x", "k", b"m")
            fakerabbit.set_policy("p", ".*", {"max-length": 5})
            fakerabbit_clock.advance(3600)
            assert fakerabbit.queue("q").message_count == 0
            seen["conn"] = conn  # left open on purpose: the next test must not see it

        def test_second(fakerabbit):
            assert fakerabbit.port == seen["port"]  # same server ...
            assert fakerabbit.queues() == []  # ... fresh state
            assert fakerabbit.exchanges(predeclared=False) == [] and fakerabbit.bindings() == []
            assert fakerabbit.connections() == [] and len(fakerabbit.events) == 0
            assert (fakerabbit.clock.now() - seen["start"]).total_seconds() < 600
            assert fakerabbit.clock.pending() == 0
            with pytest.raises(pika.exceptions.AMQPConnectionError):  # the leftover connection was dropped
                seen["conn"].process_data_events(0.2)
        """
    )
    result.assert_outcomes(passed=2)


def test_marker_configures_one_test(run) -> None:  # type: ignore[no-untyped-def]
    result = run(
        """
        from datetime import datetime, timezone
        from urllib.parse import unquote
        import pika, pytest

        ports = {}

        def version(url):
            conn = pika.BlockingConnection(pika.URLParameters(url))
            v = conn._impl.server_properties["version"]
            conn.close()
            return v.decode() if isinstance(v, bytes) else v

        def test_default(fakerabbit):
            ports["default"] = fakerabbit.port

        @pytest.mark.fakerabbit(rabbitmq_version="3.12", start_time="2024-05-01T12:00:00Z")
        def test_version_and_start(fakerabbit):
            assert version(fakerabbit.url).startswith("3.12")
            assert fakerabbit.clock.now() == datetime(2024, 5, 1, 12, tzinfo=timezone.utc)
            assert fakerabbit.port != ports["default"]
            ports["3.12"] = fakerabbit.port

        @pytest.mark.fakerabbit(rabbitmq_version="3.12")
        def test_same_settings_share_a_server(fakerabbit):
            assert fakerabbit.port == ports["3.12"]
            assert fakerabbit.clock.now().year >= 2025  # start_time was for that test only

        @pytest.mark.fakerabbit(users={"alice": "s3cret"}, vhosts=["tenant-a", "/"])
        def test_users_and_vhosts(fakerabbit, fakerabbit_url):
            assert fakerabbit_url.startswith("amqp://alice:s3cret@") and unquote(fakerabbit_url).endswith("/tenant-a")
            conn = pika.BlockingConnection(pika.URLParameters(fakerabbit_url))
            conn.channel().queue_declare("q")
            conn.close()
            assert [q.name for q in fakerabbit.queues("tenant-a")] == ["q"] and fakerabbit.queues("/") == []

        @pytest.mark.fakerabbit(clock="system")
        def test_system_clock(fakerabbit_clock):
            from fakerabbit import SystemClock
            assert isinstance(fakerabbit_clock, SystemClock)

        @pytest.mark.fakerabbit(clock="frozen")
        def test_frozen_clock(fakerabbit_clock):
            from fakerabbit.clock import FollowingClock
            assert isinstance(fakerabbit_clock, FollowingClock)

        @pytest.mark.fakerabbit(start_time=datetime(2030, 1, 1))
        class TestClassMarker:
            def test_inherits(self, fakerabbit):
                assert fakerabbit.clock.now() == datetime(2030, 1, 1, tzinfo=timezone.utc)

            @pytest.mark.fakerabbit(start_time="2031-01-01T00:00:00")
            def test_closest_wins(self, fakerabbit):
                assert fakerabbit.clock.now().year == 2031
        """
    )
    result.assert_outcomes(passed=8)


def test_bad_marker_is_a_usage_error(run) -> None:  # type: ignore[no-untyped-def]
    result = run(
        """
        import pytest

        @pytest.mark.fakerabbit(rabbitmq_versoin="3.12")
        def test_typo(fakerabbit):
            pass
        """
    )
    result.assert_outcomes(errors=1)
    assert "unknown argument(s) ['rabbitmq_versoin']; expected ['check_problems', 'clock'," in result.stdout.str()


def test_ini_and_command_line_defaults(run) -> None:  # type: ignore[no-untyped-def]
    source = """
        from datetime import datetime, timezone
        import pika

        def test_defaults(fakerabbit, fakerabbit_url):
            conn = pika.BlockingConnection(pika.URLParameters(fakerabbit_url))
            v = conn._impl.server_properties["version"]
            conn.close()
            print("VERSION", v.decode() if isinstance(v, bytes) else v)
            assert fakerabbit_url.startswith("amqp://bob:pw@")
            assert sorted(fakerabbit._broker.vhosts) == ["/", "other"]
            assert fakerabbit.clock.now() == datetime(2024, 2, 29, tzinfo=timezone.utc)
        """
    ini = """
fakerabbit_rabbitmq_version = 3.13
fakerabbit_start_time = 2024-02-29T00:00:00Z
fakerabbit_users =
    bob:pw
fakerabbit_vhosts =
    /
    other
"""
    result = run(source, "-s", ini=ini)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["VERSION 3.13*"])
    result = run(source, "-s", "--fakerabbit-version=4.0", ini=ini)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["VERSION 4.0*"])


PROBLEM = """
import pika, pytest

def provoke(url):
    conn = pika.BlockingConnection(pika.URLParameters(url))
    with pytest.raises(pika.exceptions.ConnectionClosedByBroker):
        conn.channel().basic_qos(prefetch_size=1)

def test_fails_at_teardown(fakerabbit_url):
    provoke(fakerabbit_url)

@pytest.mark.fakerabbit(check_problems=False)
def test_opted_out(fakerabbit_url):
    provoke(fakerabbit_url)

def test_cleared(fakerabbit, fakerabbit_url):
    provoke(fakerabbit_url)
    (problem,) = fakerabbit.clear_problems()
    assert problem.endswith("closed with NOT_IMPLEMENTED - prefetch_size!=0 (1) (in reply to Basic.Qos)")
"""


def test_problems_fail_the_test_at_teardown(run) -> None:  # type: ignore[no-untyped-def]
    result = run(PROBLEM)
    result.assert_outcomes(passed=3, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*ERROR at teardown of test_fails_at_teardown*",
            "fakerabbit: 1 problem(s) during the test*",
            "  - connection 127.0.0.1:* closed with NOT_IMPLEMENTED - prefetch_size!=0 (1) (in reply to Basic.Qos)",
            "Opt out for one test with @pytest.mark.fakerabbit(check_problems=False)*",
        ]
    )
    run(PROBLEM, "--fakerabbit-ignore-problems").assert_outcomes(passed=3)
    run(PROBLEM, ini="fakerabbit_check_problems = false").assert_outcomes(passed=3)


def test_sync_and_async_clients_in_one_run(run) -> None:  # type: ignore[no-untyped-def]
    result = run(
        """
        import aio_pika, aiormq, kombu, pika, pytest

        def test_pika(fakerabbit, fakerabbit_url):
            conn = pika.BlockingConnection(pika.URLParameters(fakerabbit_url))
            conn.channel().queue_declare("pika-q")
            conn.close()
            assert [q.name for q in fakerabbit.queues()] == ["pika-q"]

        def test_kombu(fakerabbit, fakerabbit_url):
            with kombu.Connection(fakerabbit_url) as conn:
                q = conn.SimpleQueue("kombu-q")
                q.put({"n": 1})
                assert fakerabbit.queue("kombu-q").message_count == 1
                assert q.get(timeout=5).payload == {"n": 1}
                q.close()

        async def test_aio_pika(fakerabbit, fakerabbit_url):
            async with await aio_pika.connect(fakerabbit_url) as conn:
                ch = await conn.channel()
                await ch.declare_queue("aio-q", arguments={"x-message-ttl": 1000})
                await ch.default_exchange.publish(aio_pika.Message(b"m"), routing_key="aio-q")
                assert fakerabbit.queue("aio-q").message_count == 1
                fakerabbit.clock.advance(1)
                assert fakerabbit.queue("aio-q").message_count == 0

        async def test_aiormq(fakerabbit, fakerabbit_url):
            conn = await aiormq.connect(fakerabbit_url)
            ch = await conn.channel()
            await ch.queue_declare("aiormq-q")
            await ch.basic_publish(b"m", routing_key="aiormq-q")
            assert fakerabbit.queue("aiormq-q").bodies == [b"m"]
            await conn.close()

        @pytest.mark.anyio
        async def test_anyio(fakerabbit, fakerabbit_url):
            async with await aio_pika.connect(fakerabbit_url) as conn:
                await (await conn.channel()).declare_queue("anyio-q")
            fakerabbit.clock.advance(1)
            assert [q.name for q in fakerabbit.queues()] == ["anyio-q"]

        @pytest.fixture
        def anyio_backend():
            return "asyncio"
        """
    )
    result.assert_outcomes(passed=5)


def test_xdist_workers_each_get_a_server(pytester: pytest.Pytester) -> None:
    pytester.makeini(INI.format(extra=""))
    pytester.makepyfile(
        test_user="""
        import os, pika, pytest

        @pytest.mark.parametrize("n", range(8))
        def test_isolated(fakerabbit, fakerabbit_url, n):
            conn = pika.BlockingConnection(pika.URLParameters(fakerabbit_url))
            ch = conn.channel()
            ch.queue_declare("shared-name")
            ch.basic_publish("", "shared-name", str(n).encode())
            assert fakerabbit.queue("shared-name").bodies == [str(n).encode()]
            conn.close()
            print("WORKER", os.environ.get("PYTEST_XDIST_WORKER"), fakerabbit.port)
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2", "-q")
    result.assert_outcomes(passed=8)
