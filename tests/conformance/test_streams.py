"""Stream queues over AMQP 0-9-1: declare rules, consuming with ``x-stream-offset``, credit and settlement, refused
operations, and what a stream delivers (checked on the live 3.10.8, 4.0.5 and 4.3.6; see
notes/rabbitmq-streams-observed.md). Retention and filtering: test_streams_log.py.

Each publish on a confirm channel is confirmed before the next, so on RabbitMQ each lands in a chunk of its own
(what ``last`` and timestamps depend on); the fake closes a chunk on each confirm as well.
"""

from __future__ import annotations

import datetime
from decimal import Decimal
from typing import Any

import pika
import pytest

from fakerabbit.broker.properties import build_properties
from tests.conformance.conftest import Target, pump, settle
from tests.conformance.streamhelpers import (
    STREAM,
    StreamReader,
    bodies_from,
    channel_error,
    collect,
    connection_error,
    consume_error,
    declare_stream,
    now,
    publish_each,
    rs,
)
from tests.conformance.ttlhelpers import eventually
from tests.conformance.versions import for_versions

# -- declare ---------------------------------------------------------------------------------------------------


def test_declare_a_stream(broker: Target, ch: Any) -> None:
    q = broker.name("s")
    ok = ch.queue_declare(q, durable=True, arguments={**STREAM, "x-max-age": "7D", "x-foo": 1}).method
    assert (ok.queue, ok.message_count, ok.consumer_count) == (q, 0, 0)
    assert ch.queue_declare(q, passive=True).method.message_count == 0


@pytest.mark.parametrize(
    ("props", "prop"),
    [
        ({"durable": False}, "non-durable"),
        ({"durable": True, "exclusive": True}, "exclusive-owner"),
        ({"durable": True, "auto_delete": True}, "auto-delete"),
        ({"durable": False, "exclusive": True, "auto_delete": True}, "auto-delete"),
    ],
)
def test_declare_properties_refused(broker: Target, ch: Any, props: dict[str, bool], prop: str) -> None:
    q = broker.name("s")
    code, text = channel_error(lambda: ch.queue_declare(q, arguments=STREAM, **props))
    assert (code, text) == (406, f"PRECONDITION_FAILED - invalid property '{prop}' for {rs(q)}")


def test_server_named_stream_refused(broker: Target, ch: Any) -> None:
    code, text = channel_error(lambda: ch.queue_declare("", durable=True, arguments=STREAM))
    assert (code, text) == (
        406,
        "PRECONDITION_FAILED - Cannot declare a server-named queue for type rabbit_stream_queue",
    )


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("x-message-ttl", 1000),
        ("x-dead-letter-exchange", "dlx"),
        ("x-max-length", 10),
        ("x-overflow", "drop-head"),
        ("x-max-priority", 10),
        ("x-expires", 1000),
        ("x-single-active-consumer", True),
        ("x-delivery-limit", 3),
        ("x-quorum-initial-group-size", 3),
    ],
)
def test_other_queue_types_arguments_refused(broker: Target, ch: Any, key: str, value: Any) -> None:
    q = broker.name("s")
    code, text = channel_error(lambda: ch.queue_declare(q, durable=True, arguments={**STREAM, key: value}))
    assert (code, text) == (
        406,
        f"PRECONDITION_FAILED - invalid arg '{key}' for {rs(q)} of queue type rabbit_stream_queue",
    )


@pytest.mark.parametrize(
    ("args", "error"),
    [
        ({"x-max-age": "1h"}, None),
        ({"x-max-age": "7D"}, None),
        ({"x-max-age": "1Y"}, None),
        ({"x-max-age": "1x"}, "x-max-age': invalid_max_age"),
        ({"x-max-age": "1.5h"}, "x-max-age': invalid_max_age"),
        ({"x-max-age": "0s"}, "x-max-age': invalid_max_age"),
        ({"x-max-age": 10}, "x-max-age': {unacceptable_type,signedint}"),
        ({"x-max-length-bytes": -1}, "x-max-length-bytes': {value_negative,-1}"),
        ({"x-max-length-bytes": "a"}, 'x-max-length-bytes\': "expected integer, got longstr"'),
        ({"x-stream-max-segment-size-bytes": 3_000_000_000}, None),
        ({"x-stream-max-segment-size-bytes": -5}, "x-stream-max-segment-size-bytes': {value_negative,-5}"),
        ({"x-initial-cluster-size": 0}, "x-initial-cluster-size': {value_zero,0}"),
        ({"x-initial-cluster-size": 3}, None),
        ({"x-queue-leader-locator": "balanced"}, None),
        ({"x-queue-leader-locator": "bad"}, "x-queue-leader-locator': invalid_queue_locator_arg"),
    ],
)
def test_stream_arguments(broker: Target, ch: Any, args: dict[str, Any], error: str | None) -> None:
    q = broker.name("s")
    if error is None:
        ch.queue_declare(q, durable=True, arguments={**STREAM, **args})
        return
    key, _, term = error.partition("': ")
    code, text = channel_error(lambda: ch.queue_declare(q, durable=True, arguments={**STREAM, **args}))
    assert (code, text) == (406, f"PRECONDITION_FAILED - invalid arg '{key}' for {rs(q)}: {term}")


def test_segment_size_limit(broker: Target, ch: Any) -> None:
    q = broker.name("s")
    code, text = channel_error(
        lambda: ch.queue_declare(
            q, durable=True, arguments={**STREAM, "x-stream-max-segment-size-bytes": 3_000_000_001}
        )
    )
    assert (code, text) == (406, "PRECONDITION_FAILED - Exceeded max value for x-stream-max-segment-size-bytes")


@for_versions("3.10", "4.0", "4.3")
def test_max_age_without_digits(broker: Target, conn: Any) -> None:
    q = broker.name("s")
    ch = conn.channel()
    if broker.at_least("4.3"):  # rabbitmq-server #16282: [0-9]+
        code, text = channel_error(lambda: ch.queue_declare(q, durable=True, arguments={**STREAM, "x-max-age": "D"}))
        assert (code, text) == (406, f"PRECONDITION_FAILED - invalid arg 'x-max-age' for {rs(q)}: invalid_max_age")
    else:  # list_to_integer("") crashes
        code, text = connection_error(lambda: ch.queue_declare(q, durable=True, arguments={**STREAM, "x-max-age": ""}))
        assert (code, text) == (541, "INTERNAL_ERROR")


@for_versions("3.10", "4.0", "4.3")
@pytest.mark.parametrize("value", [10, 300, 32, "a"])
def test_filter_size(broker: Target, ch: Any, value: Any) -> None:
    q = broker.name("s")

    def declare() -> None:
        ch.queue_declare(q, durable=True, arguments={**STREAM, "x-stream-filter-size-bytes": value})

    if not broker.at_least("4.0") or value == 32:  # unknown to 3.10: anything goes
        declare()
        return
    code, text = channel_error(declare)
    if broker.at_least("4.3") and value == "a":
        assert text.endswith("x-stream-filter-size-bytes' for " + rs(q) + ': "expected integer, got longstr"')
    else:
        space = " " if broker.at_least("4.3") else "  "
        assert (code, text) == (406, f"PRECONDITION_FAILED - Invalid value for{space}x-stream-filter-size-bytes")


@for_versions("3.10", "4.0", "4.3")
def test_redeclare(broker: Target, conn: Any) -> None:
    q = declare_stream(broker, conn.channel(), **{"x-max-age": "1D", "x-stream-max-segment-size-bytes": 1000})
    args = {**STREAM, "x-stream-max-segment-size-bytes": 1000}

    def redeclare(extra: dict[str, Any], durable: bool = True) -> tuple[int, str] | None:
        ch = conn.channel()
        try:
            ch.queue_declare(q, durable=durable, arguments={**args, **extra})
        except pika.exceptions.ChannelClosedByBroker as exc:
            return exc.reply_code, exc.reply_text
        return None

    prefix = f"PRECONDITION_FAILED - inequivalent arg 'x-max-age' for {rs(q)}: "
    assert redeclare({"x-max-age": "1D", "x-foo": 1}) is None
    assert redeclare({"x-max-age": "1D"}, durable=False) == (
        406,
        f"PRECONDITION_FAILED - inequivalent arg 'durable' for {rs(q)}: received 'false' but current is 'true'",
    )
    if broker.at_least("4.3"):  # 4.3.6 compares a valid max age in milliseconds
        assert redeclare({"x-max-age": "24h"}) is None
        assert redeclare({"x-max-age": "2D"}) == (406, prefix + "received '172800000' but current is '86400000'")
        assert redeclare({}) == (406, prefix + "received none but current is the value '86400000' of type 'longstr'")
    else:
        assert redeclare({"x-max-age": "24h"}) == (406, prefix + "received '24h' but current is '1D'")
        assert redeclare({}) == (406, prefix + "received none but current is the value '1D' of type 'longstr'")
    _, text = redeclare({"x-max-age": "1D", "x-initial-cluster-size": 2}) or (0, "")
    assert text.endswith("received the value '2' of type 'signedint' but current is none")


# -- consuming ---------------------------------------------------------------------------------------------------


@for_versions("3.10", "4.0", "4.3")
def test_consume_needs_a_prefetch(broker: Target, ch: Any) -> None:
    q = declare_stream(broker, ch)
    where = f"stream {rs(q)}" if broker.at_least("4.0") else f"'{rs(q)}'"
    expected = ("channel", 406, f"PRECONDITION_FAILED - consumer prefetch count is not set for {where}")
    assert consume_error(broker, q, prefetch=None) == expected
    assert consume_error(broker, q, prefetch=None, auto_ack=True) == expected  # checked before no-ack


@for_versions("3.10", "4.0", "4.3")
def test_consume_needs_manual_acks(broker: Target, ch: Any) -> None:
    q = declare_stream(broker, ch)
    kind = "stream" if broker.at_least("4.0") else "stream queues"
    assert consume_error(broker, q, auto_ack=True) == (
        "connection",
        540,
        f"NOT_IMPLEMENTED - automatic acknowledgement not supported by {kind} {rs(q)}",
    )


@for_versions("3.10", "4.0", "4.3")
def test_global_qos(broker: Target, conn: Any) -> None:
    q = declare_stream(broker, conn.channel())
    got = consume_error(broker, q, prefetch=5, global_qos=True)
    if broker.at_least("4.3"):  # global qos is per-consumer qos from 4.3 (deprecated feature denied)
        assert got == ("ok", 0, "")
        return
    where = f"stream {rs(q)}" if broker.at_least("4.0") else f"'{rs(q)}'"
    assert got == ("channel", 406, f"PRECONDITION_FAILED - consumer prefetch count is not set for {where}")
    ch = conn.channel()
    ch.basic_qos(prefetch_count=5)
    ch.basic_qos(prefetch_count=5, global_qos=True)
    code, text = connection_error(lambda: ch.basic_consume(q, lambda *a: None))
    assert (code, text) == (540, f"NOT_IMPLEMENTED - {rs(q)} does not support global qos")


def test_exclusive_consume_is_ignored(broker: Target, ch: Any) -> None:
    q = declare_stream(broker, ch)
    ch.basic_qos(prefetch_count=1)
    ch.basic_consume(q, lambda *a: None)
    ch.basic_consume(q, lambda *a: None, exclusive=True)
    ch.basic_consume(q, lambda *a: None)
    ch.queue_declare(q, passive=True)


def test_offsets(broker: Target, ch: Any) -> None:
    q = declare_stream(broker, ch)
    ch.confirm_delivery()
    publish_each(ch, q, [b"m0", b"m1", b"m2", b"m3", b"m4"])
    everything = [(i, f"m{i}".encode()) for i in range(5)]
    assert collect(broker, q, {"x-stream-offset": "first"}, n=5) == everything
    assert collect(broker, q, {"x-stream-offset": 0}, n=5) == everything
    assert collect(broker, q, {"x-stream-offset": -1}, n=5) == everything  # below the first: from the first
    assert collect(broker, q, {"x-stream-offset": 2}, n=3) == everything[2:]
    assert collect(broker, q, {"x-stream-offset": "last"}, n=1) == [(4, b"m4")]  # the last chunk
    assert collect(broker, q, {"x-stream-offset": "next"}, n=1) == []
    assert collect(broker, q, None, n=1) == []  # default: next


def test_offset_beyond_the_end(broker: Target, ch: Any) -> None:
    q = declare_stream(broker, ch)
    ch.confirm_delivery()
    publish_each(ch, q, [b"m0", b"m1", b"m2", b"m3", b"m4"])
    conn = broker.connect()
    reader = conn.channel()
    got: list[bytes] = []
    reader.basic_qos(prefetch_count=10)
    reader.basic_consume(q, lambda _c, m, p, b: got.append(b), arguments={"x-stream-offset": 7})
    settle(conn, 0.2)
    publish_each(ch, q, [b"m5", b"m6", b"m7", b"m8", b"m9"])
    pump(conn, lambda: len(got) >= 3)
    settle(conn, 0.2)
    conn.close()
    assert got == [b"m7", b"m8", b"m9"]  # attached at the end, and what is below 7 skipped


def test_timestamp_and_interval_offsets(broker: Target, ch: Any) -> None:
    q = declare_stream(broker, ch)
    ch.confirm_delivery()
    publish_each(ch, q, [b"a0", b"a1"])
    broker.advance(2.2)
    between = now(broker) - datetime.timedelta(seconds=1)
    publish_each(ch, q, [b"b0", b"b1"])
    assert bodies_from(broker, q, {"x-stream-offset": "2s"}, n=2) == [b"b0", b"b1"]  # now minus 2 s
    second = datetime.datetime.fromtimestamp(int(between.timestamp()), datetime.UTC)
    assert bodies_from(broker, q, {"x-stream-offset": second}, n=2) == [b"b0", b"b1"]
    assert bodies_from(broker, q, {"x-stream-offset": datetime.datetime(2000, 1, 1)}, n=4) == [
        b"a0",
        b"a1",
        b"b0",
        b"b1",
    ]
    later = now(broker) + datetime.timedelta(seconds=100)
    assert bodies_from(broker, q, {"x-stream-offset": later}, n=1) == []  # after everything: next
    assert bodies_from(broker, q, {"x-stream-offset": "1h"}, n=4) == [b"a0", b"a1", b"b0", b"b1"]


@for_versions("3.10", "4.0", "4.3")
@pytest.mark.parametrize("value", ["1x", "0s", "foo", ""])
def test_invalid_interval_offsets(broker: Target, ch: Any, value: str) -> None:
    q = declare_stream(broker, ch)
    got = consume_error(broker, q, {"x-stream-offset": value})
    if value in ("foo", "") and not broker.at_least("4.3"):
        assert got == ("connection", 541, "INTERNAL_ERROR")  # check_max_age/1: list_to_integer("")
        return
    raw = value.encode()
    shown = f'<<"{value}">>' if raw else "<<>>"
    assert got == (
        "channel",
        406,
        f"PRECONDITION_FAILED - invalid arg 'x-stream-offset' for {rs(q)}: "
        f"{{invalid_stream_offset_arg,{{longstr,{shown}}}}}",
    )


@pytest.mark.parametrize("value", [True, Decimal("1.5"), {"a": 1}, [1]])
def test_offsets_of_other_types_crash(broker: Target, ch: Any, value: Any) -> None:
    q = declare_stream(broker, ch)
    assert consume_error(broker, q, {"x-stream-offset": value}) == ("connection", 541, "INTERNAL_ERROR")


def test_deliveries_carry_their_offset(broker: Target, ch: Any) -> None:
    q = declare_stream(broker, ch)
    with StreamReader(broker.url) as r:
        r.confirm()
        for i in range(3):
            r.publish_confirmed(q, build_properties(headers={"n": ("I", i)}), b"m%d" % i)
        r.qos(10)
        r.consume(q, {"x-stream-offset": 1})
        for i in (1, 2):
            method, props, body = r.delivery()
            assert (body, method.redelivered, method.exchange, method.routing_key) == (b"m%d" % i, False, "", q)
            assert list((props.headers or {}).items()) == [("n", ("I", i)), ("x-stream-offset", ("l", i))]


def test_consumers_read_independently(broker: Target, ch: Any) -> None:
    q = declare_stream(broker, ch)
    ch.confirm_delivery()
    publish_each(ch, q, [b"m0", b"m1", b"m2"])
    conn = broker.connect()
    got: dict[str, list[bytes]] = {"a": [], "b": [], "c": []}
    for tag, offset in (("a", "first"), ("b", 1), ("c", "next")):
        c = conn.channel()
        c.basic_qos(prefetch_count=10)
        c.basic_consume(q, lambda _c, m, p, b, t=tag: got[t].append(b), arguments={"x-stream-offset": offset})
    pump(conn, lambda: len(got["a"]) >= 3 and len(got["b"]) >= 2)
    publish_each(ch, q, [b"m3"])
    pump(conn, lambda: len(got["c"]) >= 1 and len(got["a"]) >= 4)
    settle(conn, 0.2)
    conn.close()
    assert got == {"a": [b"m0", b"m1", b"m2", b"m3"], "b": [b"m1", b"m2", b"m3"], "c": [b"m3"]}


def test_acks_give_credit_and_remove_nothing(broker: Target, ch: Any) -> None:
    q = declare_stream(broker, ch)
    ch.confirm_delivery()
    publish_each(ch, q, [b"m%d" % i for i in range(6)])
    conn = broker.connect()
    c = conn.channel()
    c.basic_qos(prefetch_count=2)
    tags: list[int] = []
    c.basic_consume(q, lambda _c, m, p, b: tags.append(m.delivery_tag), arguments={"x-stream-offset": "first"})
    pump(conn, lambda: len(tags) >= 2)
    settle(conn, 0.2)
    assert len(tags) == 2  # the prefetch count is the consumer's credit
    c.basic_qos(prefetch_count=10)  # a later qos does not change it
    settle(conn, 0.2)
    assert len(tags) == 2
    c.basic_ack(2, multiple=True)
    pump(conn, lambda: len(tags) >= 4)
    settle(conn, 0.2)
    assert tags == [1, 2, 3, 4]
    c.basic_ack(0, multiple=True)
    pump(conn, lambda: len(tags) >= 6)
    conn.close()
    assert tags == [1, 2, 3, 4, 5, 6]
    assert bodies_from(broker, q, {"x-stream-offset": "first"}, n=6) == [b"m%d" % i for i in range(6)]


def test_unknown_delivery_tag(broker: Target, ch: Any) -> None:
    q = declare_stream(broker, ch)
    ch.basic_qos(prefetch_count=1)
    ch.basic_consume(q, lambda *a: None)
    ch.basic_ack(99)
    code, text = channel_error(lambda: ch.queue_declare(q, passive=True))
    assert (code, text) == (406, "PRECONDITION_FAILED - unknown delivery tag 99")


@for_versions("3.10", "4.0", "4.3")
@pytest.mark.parametrize("how", ["nack", "nack-requeue", "reject", "reject-requeue", "recover"])
def test_nack_reject_recover(broker: Target, ch: Any, how: str) -> None:
    q = declare_stream(broker, ch)
    ch.confirm_delivery()
    publish_each(ch, q, [b"m0", b"m1", b"m2"])
    conn = broker.connect()
    c = conn.channel()
    c.basic_qos(prefetch_count=1)
    got: list[tuple[bytes, bool]] = []
    c.basic_consume(q, lambda _c, m, p, b: got.append((b, m.redelivered)), arguments={"x-stream-offset": "first"})
    pump(conn, lambda: len(got) >= 1)

    def settle_first() -> None:
        if how == "recover":
            c.basic_recover(requeue=True)
        elif how.startswith("nack"):
            c.basic_nack(1, requeue=how.endswith("requeue"))
        else:
            c.basic_reject(1, requeue=how.endswith("requeue"))
        pump(conn, lambda: len(got) >= 2 or not conn.is_open)
        settle(conn, 0.2)

    if broker.at_least("4.0"):  # 3.13+: every settlement is a credit; nothing is redelivered
        settle_first()
        conn.close()
        assert got == [(b"m0", False), (b"m1", False)]
    elif how == "recover":
        assert connection_error(settle_first) == (541, "INTERNAL_ERROR")
    else:
        assert connection_error(settle_first) == (
            540,
            f"NOT_IMPLEMENTED - basic.nack and basic.reject not supported by stream queues {rs(q)}",
        )


def test_cancel_then_ack(broker: Target, ch: Any) -> None:
    q = declare_stream(broker, ch)
    ch.confirm_delivery()
    publish_each(ch, q, [b"m0", b"m1"])
    conn = broker.connect()
    c = conn.channel()
    c.basic_qos(prefetch_count=5)
    tags: list[int] = []
    tag = c.basic_consume(q, lambda _c, m, p, b: tags.append(m.delivery_tag), arguments={"x-stream-offset": "first"})
    pump(conn, lambda: len(tags) >= 2)
    c.basic_cancel(tag)
    c.basic_ack(2, multiple=True)
    assert c.queue_declare(q, passive=True).method.consumer_count == 0
    conn.close()


@for_versions("3.10", "4.0", "4.3")
def test_consumer_arguments_of_other_types(broker: Target, ch: Any) -> None:
    q = declare_stream(broker, ch)
    for key, value in (("x-priority", 1), ("x-priority", "a")):
        assert consume_error(broker, q, {key: value}) == (
            "channel",
            406,
            f"PRECONDITION_FAILED - invalid arg '{key}' for {rs(q)} of queue type rabbit_stream_queue",
        )
    refused = {"x-cancel-on-ha-failover": not broker.at_least("4.0"), "x-consumer-timeout": broker.at_least("4.3")}
    for key, is_refused in refused.items():
        got = consume_error(broker, q, {key: True if key == "x-cancel-on-ha-failover" else 1000})
        assert got[0] == ("channel" if is_refused else "ok"), (key, got)
    assert consume_error(broker, q, {"x-foo": 1}) == ("ok", 0, "")
    classic = broker.name("c")
    ch.queue_declare(classic)
    for key, value in (("x-stream-offset", "first"), ("x-stream-filter", "a"), ("x-stream-match-unfiltered", True)):
        got = consume_error(broker, classic, {key: value})
        if key == "x-stream-offset" or broker.at_least("4.0"):
            assert got == (
                "channel",
                406,
                f"PRECONDITION_FAILED - invalid arg '{key}' for {rs(classic)} of queue type rabbit_classic_queue",
            )
        else:
            assert got == ("ok", 0, "")
    # validators first: a bad x-priority wins over a foreign key
    got = consume_error(broker, classic, {"x-stream-offset": "first", "x-priority": "a"})
    assert (
        got[2] == f"PRECONDITION_FAILED - invalid arg 'x-priority' for {rs(classic)}: \"expected integer, got longstr\""
    )


# -- declare-ok counts, refused operations -----------------------------------------------------------------------


def test_declare_ok_counts(broker: Target, conn: Any) -> None:
    ch = conn.channel()
    q = declare_stream(broker, ch)
    ch.confirm_delivery()
    publish_each(ch, q, [b"m0", b"m1", b"m2"])
    ch.basic_qos(prefetch_count=1)
    ch.basic_consume(q, lambda *a: None, arguments={"x-stream-offset": "first"})
    # RabbitMQ's figure comes from a statistics tick (seconds late); the consumer count is always 0
    ok = eventually(broker, lambda: ch.queue_declare(q, passive=True).method, lambda m: m.message_count == 3, 8.0)
    assert (ok.message_count, ok.consumer_count) == (3, 0)
    settle(conn, 0.1)  # (pika would reject a delivery it has not dispatched when it closes: 540 on 3.10)


def test_basic_get_refused(broker: Target, ch: Any) -> None:
    q = declare_stream(broker, ch)
    for no_ack in (False, True):
        c = broker.connect()
        code, text = connection_error(lambda c=c, no_ack=no_ack: c.channel().basic_get(q, auto_ack=no_ack))
        assert (code, text) == (540, f"NOT_IMPLEMENTED - basic.get not supported by stream queues {rs(q)}")


def test_purge_refused(broker: Target, ch: Any) -> None:
    q = declare_stream(broker, ch)
    c = broker.connect()
    code, text = connection_error(lambda: c.channel().queue_purge(q))
    assert (code, text) == (540, f"NOT_IMPLEMENTED - queue.purge not supported by stream queues {rs(q)}")


def test_delete_ignores_its_flags(broker: Target, conn: Any) -> None:
    ch = conn.channel()
    q = declare_stream(broker, ch)
    ch.confirm_delivery()
    publish_each(ch, q, [b"m0", b"m1"])
    consumer = broker.connect()
    c = consumer.channel()
    c.basic_qos(prefetch_count=1)
    cancelled: list[str] = []
    c.add_on_cancel_callback(lambda frame: cancelled.append(frame.method.consumer_tag))
    tag = c.basic_consume(q, lambda *a: None, arguments={"x-stream-offset": "first"})
    settle(consumer, 0.2)
    ok = conn.channel().queue_delete(q, if_unused=True, if_empty=True).method
    assert ok.message_count == 0
    pump(consumer, lambda: bool(cancelled))
    assert cancelled == [tag]
    consumer.close()
    code, _ = channel_error(lambda: conn.channel().queue_declare(q, passive=True))
    assert code == 404


# -- what a stream delivers ----------------------------------------------------------------------------------


def test_delivered_properties(broker: Target, ch: Any) -> None:
    """RabbitMQ stores the message as AMQP 1.0 and converts it back: headers sorted, cluster_id dropped; 3.x drops
    array and table headers, 4.x keeps them under x- keys (and CC), turns binary into longstr and sets
    delivery_mode 1 when absent."""
    q = declare_stream(broker, ch)
    headers = {
        "zz": ("S", "z"),
        "bin": ("x", b"\x00\x01"),
        "arr": ("A", [("S", "a")]),
        "x-arr": ("A", [("I", 1)]),
        "x-tab": ("F", {"k": ("S", "v")}),
        "num": ("I", 7),
        "x-stream-offset": ("S", "mine"),
    }
    props = build_properties(headers=headers, content_type="text/plain", priority=3, cluster_id="cl", type="t")
    with StreamReader(broker.url) as r:
        r.confirm()
        r.publish_confirmed(q, props, b"rich")
        r.publish_confirmed(q, b"\x00\x00", b"bare")
        r.qos(10)
        r.consume(q, {"x-stream-offset": "first"})
        _, rich, _ = r.delivery()
        _, bare, _ = r.delivery()
    v4 = broker.at_least("4.0")
    got = rich.to_dict()
    assert got.pop("cluster_id", None) is None
    assert (got["content_type"], got["priority"], got["type"]) == ("text/plain", 3, "t")
    assert got.get("delivery_mode") == (1 if v4 else None)
    kept = [("bin", "S" if v4 else "x"), ("num", "I")]
    if v4:
        kept += [("x-arr", "A"), ("x-stream-offset", "l"), ("x-tab", "F"), ("zz", "S")]
    else:
        kept += [("x-stream-offset", "l"), ("zz", "S")]
    assert [(k, t) for k, (t, _) in (rich.headers or {}).items()] == kept
    assert (bare.headers or {}) == {"x-stream-offset": ("l", 1)}
    assert bare.delivery_mode == (1 if v4 else None)


@pytest.mark.parametrize("where", ["header", "x-header"])
def test_decimal_header_crashes_the_publish(broker: Target, ch: Any, where: str) -> None:
    q = declare_stream(broker, ch)
    key = "d" if where == "header" else "x-d"
    with StreamReader(broker.url) as r:
        r.confirm()
        r.publish("", q, build_properties(headers={key: ("D", Decimal("1.2"))}), b"x")
        with pytest.raises(RuntimeError, match="541 INTERNAL_ERROR"):
            r.sync()


def test_stream_survives_time(broker: Target, ch: Any) -> None:
    """Nothing expires by itself: no retention, no TTL, no x-expires."""
    q = declare_stream(broker, ch)
    ch.confirm_delivery()
    publish_each(ch, q, [b"m0"], pika.BasicProperties(expiration="100"))
    broker.advance(0.5)
    assert bodies_from(broker, q, {"x-stream-offset": "first"}, n=1) == [b"m0"]


@for_versions("3.10", "4.0", "4.3")
def test_dead_lettered_into_a_stream(broker: Target, ch: Any) -> None:
    s = declare_stream(broker, ch)
    source = broker.name("c")
    ch.queue_declare(source, arguments={"x-dead-letter-exchange": "", "x-dead-letter-routing-key": s})
    ch.basic_publish("", source, b"dead", pika.BasicProperties(expiration="0", headers={"h": "v"}))
    got = eventually(
        broker, lambda: collect(broker, s, {"x-stream-offset": "first"}, n=1, wait=0.1), lambda g: bool(g), 2.0
    )
    if not broker.at_least("4.0"):  # 3.10's stream drops what comes from no channel ("stateless")
        assert got == []
        return
    assert [b for _, b in got] == [b"dead"]
    with StreamReader(broker.url) as r:
        r.qos(1)
        r.consume(s, {"x-stream-offset": "first"})
        method, props, _ = r.delivery()
    assert (method.exchange, method.routing_key) == ("", s)
    keys = [k for k in props.headers or {}]
    assert keys == [
        "h",
        "x-death",
        "x-first-death-exchange",
        "x-first-death-queue",
        "x-first-death-reason",
        "x-last-death-exchange",
        "x-last-death-queue",
        "x-last-death-reason",
        "x-stream-offset",
    ]
