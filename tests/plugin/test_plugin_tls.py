"""The pytest plugin and TLS: ``@pytest.mark.fakerabbit(tls=True)``, the ``fakerabbit_amqps_url`` fixture, the
``fakerabbit_tls`` ini option, ``management_tls``, and dual mode against an ``amqps://`` broker with
``--fakerabbit-ca-file`` (a ``FakeRabbit(tls=True)`` stands in for it: the live brokers have no TLS listener)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
import trustme  # noqa: F401  # imported once here: cryptography cannot be imported again by each in-process run

from fakerabbit import FakeRabbit

pytest_plugins = ["pytester"]

INI = """
[pytest]
asyncio_mode = auto
asyncio_default_fixture_loop_scope = function
{extra}
"""

Run = Callable[..., pytest.RunResult]


@pytest.fixture
def run(pytester: pytest.Pytester) -> Run:
    def go(source: str, *args: str, ini: str = "") -> pytest.RunResult:
        pytester.makeini(INI.format(extra=ini))
        pytester.makepyfile(test_user=source)
        return pytester.runpytest(
            "-p", "no:cacheprovider", "-q", "-rs", "-W", "ignore::pytest.PytestAssertRewriteWarning", *args
        )

    return go


CLIENT = """
import base64, json, ssl, urllib.request
import pika, pytest

def publish_and_get(url, ca_file, queue):
    params = pika.URLParameters(url)
    params.ssl_options = pika.SSLOptions(ssl.create_default_context(cafile=ca_file), "localhost")
    conn = pika.BlockingConnection(params)
    ch = conn.channel()
    ch.queue_declare(queue, auto_delete=True)
    ch.basic_publish("", queue, b"tls")
    method, props, body = ch.basic_get(queue, auto_ack=True)
    conn.close()
    return body
"""

FAKE = (
    CLIENT
    + """
@pytest.mark.fakerabbit(tls=True)
def test_marker(fakerabbit):
    assert fakerabbit.amqps_url.startswith("amqps://guest:guest@127.0.0.1:")
    assert publish_and_get(fakerabbit.amqps_url, fakerabbit.ca_file, "marker") == b"tls"

def test_fixture_turns_it_on(fakerabbit, fakerabbit_amqps_url):
    assert fakerabbit_amqps_url == fakerabbit.amqps_url
    assert publish_and_get(fakerabbit_amqps_url, fakerabbit.ca_file, "fixture") == b"tls"

def test_off_by_default(fakerabbit):
    with pytest.raises(RuntimeError, match="TLS is off"):
        fakerabbit.amqps_url

@pytest.mark.fakerabbit(management_tls=True)
def test_management_over_https(fakerabbit):
    req = urllib.request.Request(fakerabbit.management_https_url + "/api/whoami")
    req.add_header("Authorization", "Basic " + base64.b64encode(b"guest:guest").decode())
    ctx = ssl.create_default_context(cafile=fakerabbit.ca_file)
    with urllib.request.urlopen(req, timeout=5, context=ctx) as resp:
        assert json.load(resp)["name"] == "guest"
"""
)


def test_marker_fixture_and_management_tls(run: Run) -> None:
    run(FAKE).assert_outcomes(passed=4)


def test_the_ini_option_serves_amqps_in_every_test(run: Run) -> None:
    source = CLIENT + (
        "\ndef test_one(fakerabbit):\n"
        "    assert publish_and_get(fakerabbit.amqps_url, fakerabbit.ca_file, 'ini') == b'tls'\n"
    )
    run(source, ini="fakerabbit_tls = true").assert_outcomes(passed=1)


DUAL = (
    CLIENT
    + """
def test_amqps_broker(fakerabbit, fakerabbit_url, fakerabbit_amqps_url):
    assert fakerabbit_url == fakerabbit_amqps_url  # the broker's own URL: no recording proxy for amqps
    assert publish_and_get(fakerabbit_amqps_url, fakerabbit.ca_file, "dual-{tag}") == b"tls"
    assert fakerabbit.queue("dual-{tag}").message_count == 0  # a passive declare over TLS by the plugin

def test_client_cert_is_the_fakes_own(fakerabbit):
    fakerabbit.client_cert
"""
)


@pytest.fixture(scope="module")
def tls_broker() -> Iterator[FakeRabbit]:
    with FakeRabbit(tls=True, clock="system") as rabbit:
        yield rabbit


def test_dual_mode_against_an_amqps_broker(run: Run, tls_broker: FakeRabbit) -> None:
    result = run(
        DUAL.replace("{tag}", "a"),
        "--fakerabbit-url",
        tls_broker.amqps_url,
        "--fakerabbit-ca-file",
        tls_broker.ca_file,
    )
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(["*rabbit.client_cert is the fake's own client certificate*"])


def test_dual_mode_without_the_ca_fails_verification(run: Run, tls_broker: FakeRabbit) -> None:
    result = run(DUAL.replace("{tag}", "b"), "--fakerabbit-url", tls_broker.amqps_url)
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(["*CERTIFICATE_VERIFY_FAILED*"])


def test_dual_mode_against_a_plain_broker_skips_amqps_tests(run: Run, tls_broker: FakeRabbit) -> None:
    source = "def test_needs_amqps(fakerabbit_amqps_url):\n    raise AssertionError('not reached')\n"
    result = run(source, "--fakerabbit-url", tls_broker.url)
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*needs amqps (TLS); the real RabbitMQ is reached over amqp://*"])
