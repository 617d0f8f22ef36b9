"""The plugin's per-test constructor options, the management API fixture, and errors reported once."""

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
    def go(source: str, *args: str, ini: str = "") -> pytest.RunResult:
        pytester.makeini(INI.format(extra=ini))
        pytester.makepyfile(test_user=source)
        return pytester.runpytest(
            "-p", "no:cacheprovider", "-q", "-rs", "-W", "ignore::pytest.PytestAssertRewriteWarning", *args
        )

    return go


MANAGEMENT = """
import base64, json, urllib.request
import pytest

def get(base, path):
    req = urllib.request.Request(base + path)
    req.add_header("Authorization", "Basic " + base64.b64encode(b"guest:guest").decode())
    with urllib.request.urlopen(req, timeout=5) as resp:
        return json.load(resp)

@pytest.mark.fakerabbit(management=True)
def test_marker(fakerabbit):
    assert get(fakerabbit.management_url, "/api/overview")["rabbitmq_version"].startswith("4.3")

def test_fixture_turns_it_on(fakerabbit, fakerabbit_management_url):
    assert fakerabbit_management_url == fakerabbit.management_url
    assert [v["name"] for v in get(fakerabbit_management_url, "/api/vhosts")] == ["/"]

@pytest.mark.fakerabbit(management=True, rabbitmq_version="3.13")
def test_marker_with_a_version(fakerabbit_management_url):
    assert get(fakerabbit_management_url, "/api/overview")["rabbitmq_version"].startswith("3.13")

def test_off_by_default(fakerabbit):
    with pytest.raises(RuntimeError, match="management API is off"):
        fakerabbit.management_url

@pytest.mark.fakerabbit(dead_letter_retry_interval=5, memory_high_watermark=1000)
def test_other_constructor_options(fakerabbit):
    assert fakerabbit._broker.dead_letter_confirm_timeout_ms == 5000
    assert fakerabbit._listener.alarms.memory_high_watermark == 1000

def test_defaults_again(fakerabbit):
    assert fakerabbit._broker.dead_letter_confirm_timeout_ms == 180_000
    assert fakerabbit._listener.alarms.memory_high_watermark is None
"""


def test_management_marker_and_fixture(run) -> None:  # type: ignore[no-untyped-def]
    run(MANAGEMENT).assert_outcomes(passed=6)


def test_management_for_the_whole_session_by_ini(run) -> None:  # type: ignore[no-untyped-def]
    result = run(
        """
        def test_on(fakerabbit):
            assert fakerabbit.management_url.startswith("http://127.0.0.1:")
        """,
        ini="fakerabbit_management = true",
    )
    result.assert_outcomes(passed=1)


def test_bad_per_test_options_fail_the_test_clearly(run) -> None:  # type: ignore[no-untyped-def]
    result = run(
        """
        import pytest

        @pytest.mark.fakerabbit(dead_letter_retry_interval=0)
        def test_interval(fakerabbit):
            pass

        @pytest.mark.fakerabbit(memory_high_watermark="1GB")
        def test_watermark(fakerabbit):
            pass

        @pytest.mark.fakerabbit(rabbitmq_version="9.9")
        def test_version(fakerabbit):
            pass
        """
    )
    result.assert_outcomes(errors=3)
    out = result.stdout.str()
    assert "dead_letter_retry_interval must be > 0, not 0" in out
    assert "memory_high_watermark must be bytes (an int >= 0), not '1GB'" in out
    assert "@pytest.mark.fakerabbit: unsupported RabbitMQ version '9.9'; accepted: 3.10, 3.11" in out


def test_plugins_marker(run) -> None:  # type: ignore[no-untyped-def]
    result = run(
        """
        import pytest

        def test_default_has_the_delayed_exchange(fakerabbit):
            assert "x-delayed-message" in fakerabbit._broker.exchange_types

        @pytest.mark.fakerabbit(plugins=())
        def test_off(fakerabbit):
            assert "x-delayed-message" not in fakerabbit._broker.exchange_types

        @pytest.mark.fakerabbit(plugins="rabbitmq_delayed_message_exchange")
        def test_named(fakerabbit):
            assert fakerabbit._broker.plugins == {"rabbitmq_delayed_message_exchange"}

        @pytest.mark.fakerabbit(plugins=["rabbitmq_shovel"])
        def test_unknown(fakerabbit):
            pass
        """
    )
    result.assert_outcomes(passed=3, errors=1)
    assert "@pytest.mark.fakerabbit: unknown plugin(s) rabbitmq_shovel" in result.stdout.str()


def test_unknown_version_option_errors_once_at_session_start(run) -> None:  # type: ignore[no-untyped-def]
    source = "\n".join(f"def test_{i}(fakerabbit):\n    pass\n" for i in range(5))
    result = run(source, "--fakerabbit-version=9.9")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert err.count("unsupported RabbitMQ version '9.9'") == 1, err
    assert "--fakerabbit-version / fakerabbit_rabbitmq_version: unsupported RabbitMQ version '9.9'; accepted: " in err
    assert "passed" not in result.stdout.str() and "error" not in result.stdout.str().lower()
    result = run(source, ini="fakerabbit_rabbitmq_version = 2.x")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert result.stderr.str().count("unsupported RabbitMQ version '2.x'") == 1


def test_advance_on_a_system_clock_says_what_ctl_advance_says(run) -> None:  # type: ignore[no-untyped-def]
    result = run(
        """
        import base64, json, urllib.error, urllib.request
        import pytest
        from fakerabbit.clock import SYSTEM_CLOCK_ADVANCE

        @pytest.mark.fakerabbit(clock="system", management=True)
        def test_system(fakerabbit, fakerabbit_clock):
            for move in (lambda: fakerabbit_clock.advance(1), lambda: fakerabbit_clock.advance_to(
                    fakerabbit_clock.now())):
                with pytest.raises(RuntimeError) as info:
                    move()
                assert str(info.value).startswith(SYSTEM_CLOCK_ADVANCE)
            req = urllib.request.Request(fakerabbit.management_url + "/api/fakerabbit/clock/advance",
                                         data=b'{"seconds": 1}', method="POST")
            req.add_header("Authorization", "Basic " + base64.b64encode(b"guest:guest").decode())
            req.add_header("Content-Type", "application/json")
            with pytest.raises(urllib.error.HTTPError) as http:
                urllib.request.urlopen(req, timeout=5)
            assert json.load(http.value)["reason"] == SYSTEM_CLOCK_ADVANCE  # what `fakerabbit ctl advance` prints

        @pytest.mark.fakerabbit(clock="system")
        async def test_system_async(fakerabbit_clock):
            with pytest.raises(RuntimeError, match="the clock is the system clock"):
                await fakerabbit_clock.advance_async(1)

        async def test_virtual_async(fakerabbit, fakerabbit_clock):
            before = fakerabbit_clock.now()
            await fakerabbit_clock.advance_async(30)
            assert (fakerabbit_clock.now() - before).total_seconds() == 30
        """
    )
    result.assert_outcomes(passed=3)


def test_consumer_timeout_marker(run) -> None:  # type: ignore[no-untyped-def]
    result = run(
        """
        import pytest

        @pytest.mark.fakerabbit(consumer_timeout=60)
        def test_a_minute(fakerabbit):
            assert fakerabbit._broker.consumer_timeout_ms == 60_000

        @pytest.mark.fakerabbit(consumer_timeout="none")
        def test_undefined(fakerabbit):
            assert fakerabbit._broker.consumer_timeout_ms is None

        def test_default(fakerabbit):
            assert fakerabbit._broker.consumer_timeout_ms == 1_800_000

        @pytest.mark.fakerabbit(consumer_timeout=0)
        def test_zero(fakerabbit):
            pass
        """
    )
    result.assert_outcomes(passed=3, errors=1)
    assert "consumer_timeout must be seconds > 0 or 'none', not 0" in result.stdout.str()
