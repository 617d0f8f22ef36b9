"""The delayed-message exchange (``rabbitmq_delayed_message_exchange``) over TCP with pika.

The live brokers of this project do not have the plugin: what they show is that the type is unknown without it,
which the fake matches with ``plugins=()`` (per profile). Everything else is ``fake_only``: the rules come from the
plugin's source and test suite (rabbitmq/rabbitmq-delayed-message-exchange), see fakerabbit/broker/delayed.py.
"""

from __future__ import annotations

from typing import Any

import pika
import pika.exceptions
import pytest

from tests.conformance.conftest import Target
from tests.conformance.versions import for_versions

DELAYED = {"x-delayed-type": "direct"}


def _props(delay: object, **kw: Any) -> pika.BasicProperties:
    return pika.BasicProperties(headers={"x-delay": delay}, **kw)


def _setup(broker: Target, ch: Any, delayed_type: str = "direct", **kw: Any) -> tuple[str, str]:
    x, q = broker.exchange("dx"), broker.name("q")
    ch.exchange_declare(x, "x-delayed-message", arguments={"x-delayed-type": delayed_type}, **kw)
    ch.queue_declare(q, durable=bool(kw.get("durable")))
    ch.queue_bind(q, x, "k")
    return x, q


def _drain(ch: Any, q: str) -> list[tuple[bytes, Any]]:
    out = []
    while True:
        method, props, body = ch.basic_get(q, auto_ack=True)
        if method is None:
            return out
        out.append((body, props.headers))


# -- without the plugin: what the live brokers say -------------------------------------------------------------------
@for_versions("3.10", "4.0", "4.3")
@pytest.mark.fake_plugins(())
def test_without_the_plugin_the_type_is_unknown(broker: Target, conn: Any) -> None:
    """A RabbitMQ without the plugin refuses ``x-delayed-message`` as an unknown type, arguments and all: 503
    closing the connection before 3.13.3, 406 closing the channel since (live 3.10.8, 4.0.5, 4.3.6)."""
    text = "unknown exchange type 'x-delayed-message'"
    x = broker.exchange("dx")
    if broker.at_least("3.13"):
        ch = conn.channel()
        with pytest.raises(pika.exceptions.ChannelClosedByBroker) as exc:
            ch.exchange_declare(x, "x-delayed-message", durable=True, arguments=DELAYED)
        assert (exc.value.reply_code, exc.value.reply_text) == (406, f"PRECONDITION_FAILED - {text}")
        assert conn.is_open
    else:
        with pytest.raises(pika.exceptions.ConnectionClosedByBroker) as cexc:
            conn.channel().exchange_declare(x, "x-delayed-message", durable=True, arguments=DELAYED)
        assert (cexc.value.reply_code, cexc.value.reply_text) == (503, f"COMMAND_INVALID - {text}")


# -- with the plugin (the fake's default) ----------------------------------------------------------------------------
@pytest.mark.fake_only
def test_advance_releases_a_delay_at_once_and_nothing_before(broker: Target, ch: Any) -> None:
    x, q = _setup(broker, ch)
    ch.confirm_delivery()
    ch.basic_publish(x, "k", b"later", _props(60_000, content_type="text/plain"))  # confirmed at once
    assert _drain(ch, q) == []
    broker.advance(59.999)
    assert _drain(ch, q) == []
    broker.advance(0.001)
    assert _drain(ch, q) == [(b"later", {"x-delay": -60_000})]


@pytest.mark.fake_only
def test_several_delays_arrive_in_due_order_to_a_consumer(broker: Target, conn: Any, ch: Any) -> None:
    x, q = _setup(broker, ch)
    for d in (500, 100, 300, 200, 100, 400):  # the plugin suite's delay_order (signedint headers)
        ch.basic_publish(x, "k", str(d).encode(), _props(d))
    ch.basic_publish(x, "k", b"string", _props("250"))  # its string_delay_header
    ch.basic_publish(x, "k", b"now", _props(0))
    got: list[bytes] = []
    ch.basic_consume(q, lambda c, m, p, body: got.append(body), auto_ack=True)
    conn.process_data_events(time_limit=0.05)
    assert got == [b"now"]
    broker.advance(1)
    while len(got) < 8:
        conn.process_data_events(time_limit=0.05)
    assert got == [b"now", b"100", b"100", b"200", b"string", b"300", b"400", b"500"]


@pytest.mark.fake_only
@pytest.mark.parametrize("delay", [-1000, 0, 4294967296, "0", "-5", True])
def test_no_delay_routes_at_once_header_untouched(broker: Target, ch: Any, delay: object) -> None:
    x, q = _setup(broker, ch)
    ch.basic_publish(x, "k", b"m", _props(delay))
    assert _drain(ch, q) == [(b"m", {"x-delay": delay})]


@pytest.mark.fake_only
def test_mandatory_is_returned_at_once_and_delivered_when_due(broker: Target, ch: Any) -> None:
    """The plugin's route/3 gives no destination for a message it delays: the channel returns a mandatory
    publish at once (312 NO_ROUTE, then the confirm), and the message is still delivered when due."""
    x, q = _setup(broker, ch)
    ch.confirm_delivery()
    with pytest.raises(pika.exceptions.UnroutableError) as exc:
        ch.basic_publish(x, "k", b"m", _props(1000), mandatory=True)
    (returned,) = exc.value.messages
    assert (returned.method.reply_code, returned.method.reply_text, returned.body) == (312, "NO_ROUTE", b"m")
    broker.advance(1)
    assert _drain(ch, q) == [(b"m", {"x-delay": -1000})]


@pytest.mark.fake_only
def test_alternate_exchange_gets_a_delayed_message_at_once(broker: Target, ch: Any) -> None:
    x, ae, q, alt = broker.exchange("dx"), broker.exchange("ae"), broker.name("q"), broker.name("alt")
    ch.exchange_declare(ae, "fanout")
    ch.queue_declare(alt)
    ch.queue_bind(alt, ae)
    ch.exchange_declare(x, "x-delayed-message", arguments={**DELAYED, "alternate-exchange": ae})
    ch.queue_declare(q)
    ch.queue_bind(q, x, "k")
    ch.basic_publish(x, "k", b"m", _props(1000))
    assert _drain(ch, alt) == [(b"m", {"x-delay": 1000})]
    broker.advance(1)
    assert _drain(ch, q) == [(b"m", {"x-delay": -1000})]
    assert _drain(ch, alt) == []


@pytest.mark.fake_only
def test_topic_delayed_type_routes_when_due(broker: Target, ch: Any) -> None:
    x, q = _setup(broker, ch, "topic")
    ch.queue_bind(q, x, "a.*")
    for rk in ("a.b", "b.a", "k"):
        ch.basic_publish(x, rk, rk.encode(), _props(10))
    broker.advance(0.01)
    assert [b for b, _ in _drain(ch, q)] == [b"a.b", b"k"]


@pytest.mark.fake_only
@pytest.mark.parametrize(
    ("arguments", "text"),
    [
        ({}, "Invalid argument, 'x-delayed-type' must be an existing exchange type"),
        ({"x-delayed-type": 5}, "Invalid argument, 'x-delayed-type' must be an existing exchange type"),
        (
            {"x-delayed-type": "x-delayed-message"},
            "Invalid argument, 'x-delayed-message' can't be used for 'x-delayed-type'",
        ),
        ({"x-delayed-type": "nope"}, "unknown exchange type 'nope'"),
    ],
)
def test_declare_errors(broker: Target, conn: Any, arguments: dict[str, Any], text: str) -> None:
    ch = conn.channel()
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as exc:
        ch.exchange_declare(broker.exchange("bad"), "x-delayed-message", arguments=arguments)
    assert (exc.value.reply_code, exc.value.reply_text) == (406, f"PRECONDITION_FAILED - {text}")
    assert broker.fake is not None and [x.name for x in broker.fake.exchanges(predeclared=False)] == []


@pytest.mark.fake_only
@pytest.mark.rabbitmq_version("3.10")
def test_unknown_delayed_type_closes_the_connection_before_3_13_3(broker: Target, conn: Any) -> None:
    with pytest.raises(pika.exceptions.ConnectionClosedByBroker) as exc:
        conn.channel().exchange_declare(broker.exchange("bad"), "x-delayed-message", arguments={"x-delayed-type": "x"})
    assert (exc.value.reply_code, exc.value.reply_text) == (503, "COMMAND_INVALID - unknown exchange type 'x'")


@pytest.mark.fake_only
def test_a_string_delay_that_is_no_integer_crashes_the_channel(broker: Target, conn: Any, ch: Any) -> None:
    """``binary_to_integer`` raises inside the channel: RabbitMQ's reader closes the connection with 541
    ``INTERNAL_ERROR`` (no explanation, class and method 0)."""
    x, _ = _setup(broker, ch)
    with pytest.raises(pika.exceptions.ConnectionClosedByBroker) as exc:
        ch.basic_publish(x, "k", b"m", _props("10s"))
        conn.process_data_events(time_limit=0.2)
    assert (exc.value.reply_code, exc.value.reply_text) == (541, "INTERNAL_ERROR")
    assert broker.fake is not None
    assert any("INTERNAL_ERROR" in p for p in broker.fake.clear_problems())


@pytest.mark.fake_only
def test_pending_messages_survive_a_restart(broker: Target, conn: Any, ch: Any) -> None:
    x, q = _setup(broker, ch, durable=True)
    ch.basic_publish(x, "k", b"persistent", _props(5000, delivery_mode=2))
    assert broker.fake is not None
    broker.fake.restart()
    with pytest.raises(pika.exceptions.ConnectionClosedByBroker):  # 320 CONNECTION_FORCED: the node went down
        conn.process_data_events(time_limit=1)
    c2 = broker.connect()
    try:
        ch2 = c2.channel()
        broker.advance(5)
        assert _drain(ch2, q) == [(b"persistent", {"x-delay": -5000})]
    finally:
        c2.close()


@pytest.mark.fake_only
def test_inspection_shows_pending_messages(broker: Target, ch: Any) -> None:
    x, _ = _setup(broker, ch)
    ch.basic_publish(x, "k", b"b", _props(2000))
    ch.basic_publish(x, "k", b"a", _props(1000))
    rabbit = broker.fake
    assert rabbit is not None
    (snap,) = [e for e in rabbit.exchanges() if e.name == x]
    assert (snap.type, snap.arguments, snap.messages_delayed) == ("x-delayed-message", DELAYED, 2)
    pending = rabbit.delayed_messages(x)
    start = rabbit.clock.now()
    assert [(p.message.body, p.delay_ms, (p.due_at - start).total_seconds()) for p in pending] == [
        (b"a", 1000, 1.0),
        (b"b", 2000, 2.0),
    ]
    assert dict(pending[0].message.headers) == {"x-delay": 1000}
    broker.advance(2)
    assert rabbit.delayed_messages() == []
    assert [e.messages_delayed for e in rabbit.exchanges() if e.name == x] == [0]
