"""``queue.declare`` argument validation and redeclare equivalence (spec sections N: N-1 .. N-6 and O:
EQ-1 .. EQ-3), with typed table values (byte, short, long, double) where pika alone cannot send them."""

from __future__ import annotations

from typing import Any

import pika
import pytest
from pika.adapters.blocking_connection import BlockingChannel

from tests.conformance.conftest import Target
from tests.conformance.ttlhelpers import Typed, anchored, channel_error, typed_tables  # noqa: F401

pytestmark = pytest.mark.usefixtures("typed_tables")


def declare_error(ch: BlockingChannel, q: str, args: dict[str, Any], **kw: Any) -> tuple[int, str]:
    return channel_error(lambda: ch.queue_declare(q, arguments=args, **kw))


def invalid(q: str, key: str, term: str) -> tuple[int, str]:
    return 406, f"PRECONDITION_FAILED - invalid arg '{key}' for queue '{q}' in vhost '/': {term}"


def inequivalent(q: str, key: str, received: str, current: str) -> tuple[int, str]:
    return (
        406,
        f"PRECONDITION_FAILED - inequivalent arg '{key}' for queue '{q}' in vhost '/': "
        f"received {received} but current is {current}",
    )


# -- N-1: order of checks ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "key", "term"),
    [
        ({"x-max-length": -1, "x-expires": 0}, "x-expires", "{value_zero,0}"),
        ({"x-overflow": "foo", "x-message-ttl": -1}, "x-message-ttl", "{value_negative,-1}"),
        ({"x-max-priority": 300, "x-max-length-bytes": -2}, "x-max-length-bytes", "{value_negative,-2}"),
        (
            {"x-overflow": 7, "x-dead-letter-routing-key": 1},
            "x-dead-letter-routing-key",
            "{unacceptable_type,signedint}",
        ),
    ],
)
def test_n1_validators_run_in_fixed_order(
    broker: Target, ch: BlockingChannel, args: dict[str, Any], key: str, term: str
) -> None:
    q = broker.name()
    assert declare_error(ch, q, args) == invalid(q, key, term)


def test_n1_dlx_type_is_checked_first(broker: Target, ch: BlockingChannel) -> None:
    q = broker.name()
    args = {"x-expires": 0, "x-queue-type": "nope", "x-dead-letter-exchange": 5}
    assert declare_error(ch, q, args) == (
        406,
        f"PRECONDITION_FAILED - invalid type 'signedint' for arg 'x-dead-letter-exchange' in queue '{q}' in vhost '/'",
    )


def test_n1_queue_type_is_checked_before_other_arguments(broker: Target, ch: BlockingChannel) -> None:
    q = broker.name()
    args = {"x-expires": 0, "x-queue-type": "fake-queue-type"}
    assert declare_error(ch, q, args) == invalid(q, "x-queue-type", "\"unsupported queue type 'fake-queue-type'\"")


def test_n1_foreign_arguments_are_checked_after_validators(broker: Target, ch: BlockingChannel) -> None:
    q = broker.name()
    assert declare_error(ch, q, {"x-delivery-limit": 1, "x-expires": 0}) == invalid(q, "x-expires", "{value_zero,0}")


def test_n1_quorum_properties_are_checked_last(broker: Target, conn: pika.BlockingConnection) -> None:
    q = broker.name()
    args = {"x-queue-type": "quorum", "x-max-priority": 5, "x-expires": -1}
    assert declare_error(conn.channel(), q, args, durable=False) == invalid(q, "x-expires", "{value_negative,-1}")
    q2 = broker.name("q2")
    assert declare_error(conn.channel(), q2, {"x-queue-type": "quorum", "x-max-priority": 5}, durable=False) == (
        406,
        f"PRECONDITION_FAILED - invalid arg 'x-max-priority' for queue '{q2}' in vhost '/' "
        "of queue type rabbit_quorum_queue",
    )


def test_n1_unknown_arguments_are_accepted(broker: Target, ch: BlockingChannel) -> None:
    q = broker.name()
    ch.queue_declare(q, arguments={"x-foo": "bar", "no-prefix": 1, "x-message-ttl": 10})
    assert ch.queue_declare(q, passive=True).method.queue == q


# -- N-2: DLX of the wrong type ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "type_"), [(5, "signedint"), (b"dlx", "binary"), (True, "bool"), (2**40, "long")])
def test_n2_dlx_of_wrong_type(broker: Target, ch: BlockingChannel, value: Any, type_: str) -> None:
    q = broker.name()
    assert declare_error(ch, q, {"x-dead-letter-exchange": value}) == (
        406,
        f"PRECONDITION_FAILED - invalid type '{type_}' for arg 'x-dead-letter-exchange' in queue '{q}' in vhost '/'",
    )


# -- N-3: value and type errors ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "value", "term"),
    [
        ("x-message-ttl", -1, "{value_negative,-1}"),
        ("x-message-ttl", 315360000001, "{value_too_large,315360000001}"),
        ("x-message-ttl", "1000", '"expected integer, got longstr"'),
        ("x-message-ttl", Typed("d", 1.5), '"expected integer, got double"'),
        ("x-message-ttl", Typed("f", 1.5), '"expected integer, got float"'),
        ("x-message-ttl", True, '"expected integer, got bool"'),
        ("x-expires", 0, "{value_zero,0}"),
        ("x-expires", -10, "{value_negative,-10}"),
        ("x-expires", Typed("b", -3), "{value_negative,-3}"),
        ("x-max-length", -5, "{value_negative,-5}"),
        ("x-max-length", Typed("s", -300), "{value_negative,-300}"),
        ("x-max-length-bytes", -7, "{value_negative,-7}"),
        ("x-max-length-bytes", b"7", '"expected integer, got binary"'),
        ("x-dead-letter-routing-key", 144, "{unacceptable_type,signedint}"),
        ("x-overflow", "foo", "invalid_overflow"),
        ("x-overflow", 1, "{unacceptable_type,signedint}"),
        ("x-max-priority", 256, "{max_value_exceeded,256}"),
    ],
)
def test_n3_invalid_argument_values(broker: Target, ch: BlockingChannel, key: str, value: Any, term: str) -> None:
    q = broker.name()
    args = {key: value}
    if key == "x-dead-letter-routing-key":
        args["x-dead-letter-exchange"] = ""
    assert declare_error(ch, q, args) == invalid(q, key, term)


def test_n3_quorum_invalid_values(broker: Target, ch: BlockingChannel) -> None:
    q = broker.name()
    args = {"x-queue-type": "quorum", "x-max-length": -5}
    assert declare_error(ch, q, args, durable=True) == invalid(q, "x-max-length", "{value_negative,-5}")


@pytest.mark.parametrize("tag", ["b", "B", "s", "u", "I", "i", "l"])
def test_n3_every_integer_type_is_accepted(broker: Target, ch: BlockingChannel, tag: str) -> None:
    q = broker.name()
    ch.queue_declare(q, arguments={"x-message-ttl": Typed(tag, 10), "x-max-length": Typed(tag, 5)})
    assert ch.queue_declare(q, passive=True).method.queue == q


# -- N-4: accepted values ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        {"x-message-ttl": 0},
        {"x-max-length": 0},
        {"x-max-length-bytes": 0},
        {"x-dead-letter-exchange": "no-such-exchange-anywhere"},
        {"x-dead-letter-exchange": ""},
        {"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "rk"},
        {"x-max-priority": 255},
    ],
)
def test_n4_accepted_values(broker: Target, ch: BlockingChannel, args: dict[str, Any]) -> None:
    q = broker.name()
    ch.queue_declare(q, arguments=args)
    assert ch.queue_declare(q, passive=True).method.queue == q


# -- N-5: arguments of another queue type --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("qtype", "key", "value"),
    [
        ("classic", "x-delivery-limit", 3),
        ("classic", "x-dead-letter-strategy", "at-most-once"),
        ("classic", "x-quorum-initial-group-size", 3),
        ("classic", "x-max-in-memory-length", 3),
        ("classic", "x-max-age", "1D"),
        ("quorum", "x-max-priority", 5),
        ("quorum", "x-queue-mode", "lazy"),
    ],
)
def test_n5_arguments_of_other_queue_types(
    broker: Target, ch: BlockingChannel, qtype: str, key: str, value: Any
) -> None:
    q = broker.name()
    args = {key: value}
    if qtype == "quorum":
        args["x-queue-type"] = "quorum"
    assert declare_error(ch, q, args, durable=True) == (
        406,
        f"PRECONDITION_FAILED - invalid arg '{key}' for queue '{q}' in vhost '/' of queue type rabbit_{qtype}_queue",
    )


# -- N-6: a routing key without a DLX ------------------------------------------------------------------------------


def test_n6_routing_key_without_dlx_argument(broker: Target, ch: BlockingChannel) -> None:
    q = broker.name()
    assert declare_error(ch, q, {"x-dead-letter-routing-key": "rk"}) == invalid(
        q, "x-dead-letter-routing-key", "routing_key_but_no_dlx_defined"
    )


def test_n6_routing_key_without_dlx_argument_even_with_dlx_policy(broker: Target, ch: BlockingChannel) -> None:
    q = broker.name()
    broker.set_policy(q + "-dlx", anchored(q), {"dead-letter-exchange": "dlx"})
    assert declare_error(ch, q, {"x-dead-letter-routing-key": "rk"}) == invalid(
        q, "x-dead-letter-routing-key", "routing_key_but_no_dlx_defined"
    )


# -- EQ-1: order of checks for an existing queue -------------------------------------------------------------------


def test_eq1_exclusive_queue_of_another_connection_is_locked(broker: Target, conn: pika.BlockingConnection) -> None:
    q = broker.name()
    conn.channel().queue_declare(q, exclusive=True, arguments={"x-message-ttl": 10})
    other = broker.connect()
    try:
        code, text = channel_error(
            lambda: other.channel().queue_declare(q, durable=True, arguments={"x-message-ttl": 20})
        )
    finally:
        other.close()
    assert (code, text) == (
        405,
        f"RESOURCE_LOCKED - cannot obtain exclusive access to locked queue '{q}' in vhost '/'. It could be "
        "originally declared on another connection or the exclusive property value does not match that of the "
        "original declaration.",
    )


def test_eq1_durable_before_arguments(broker: Target, ch: BlockingChannel) -> None:
    q = broker.name()
    ch.queue_declare(q, durable=True, arguments={"x-message-ttl": 10})
    assert declare_error(ch, q, {"x-message-ttl": 20}, durable=False) == inequivalent(q, "durable", "'false'", "'true'")


def test_eq1_auto_delete_before_arguments(broker: Target, ch: BlockingChannel) -> None:
    q = broker.name()
    ch.queue_declare(q, arguments={"x-message-ttl": 10})
    assert declare_error(ch, q, {"x-message-ttl": 20}, auto_delete=True) == inequivalent(
        q, "auto_delete", "'true'", "'false'"
    )


def test_eq1_arguments_in_type_order(broker: Target, ch: BlockingChannel) -> None:
    q = broker.name()
    ch.queue_declare(q, arguments={"x-max-length": 1, "x-expires": 1000, "x-message-ttl": 10})
    new = {"x-max-length": 2, "x-message-ttl": 20, "x-expires": 1000}
    assert declare_error(ch, q, new) == inequivalent(q, "x-message-ttl", "'20'", "'10'")


@pytest.mark.parametrize(
    ("old", "new", "key", "received", "current"),
    [
        ({"x-message-ttl": 10}, {"x-message-ttl": 20}, "x-message-ttl", "'20'", "'10'"),
        (
            {"x-overflow": "drop-head"},
            {"x-overflow": "reject-publish"},
            "x-overflow",
            "'reject-publish'",
            "'drop-head'",
        ),
        ({}, {"x-max-length": 5}, "x-max-length", "the value '5' of type 'signedint'", "none"),
        ({"x-max-length": 5}, {}, "x-max-length", "none", "the value '5' of type 'signedint'"),
        ({}, {"x-dead-letter-exchange": "foo"}, "x-dead-letter-exchange", "the value 'foo' of type 'longstr'", "none"),
        ({"x-expires": 1000}, {"x-expires": 2000}, "x-expires", "'2000'", "'1000'"),
    ],
)
def test_eq1_inequivalent_texts(
    broker: Target,
    ch: BlockingChannel,
    old: dict[str, Any],
    new: dict[str, Any],
    key: str,
    received: str,
    current: str,
) -> None:
    q = broker.name()
    ch.queue_declare(q, arguments=old)
    assert declare_error(ch, q, new) == inequivalent(q, key, received, current)


def test_eq1_quorum_checks_delivery_limit(broker: Target, ch: BlockingChannel) -> None:
    q = broker.name()
    ch.queue_declare(q, durable=True, arguments={"x-queue-type": "quorum", "x-delivery-limit": 3})
    new = {"x-queue-type": "quorum", "x-delivery-limit": 4}
    assert declare_error(ch, q, new, durable=True) == inequivalent(q, "x-delivery-limit", "'4'", "'3'")


# -- EQ-2: integer types are interchangeable --------------------------------------------------------------------


@pytest.mark.parametrize("tag", ["b", "B", "s", "u", "I", "i", "l"])
def test_eq2_integer_types_are_equivalent(broker: Target, ch: BlockingChannel, tag: str) -> None:
    q = broker.name()
    ch.queue_declare(q, arguments={"x-message-ttl": 10})
    ch.queue_declare(q, arguments={"x-message-ttl": Typed(tag, 10)})
    assert ch.queue_declare(q, passive=True).method.queue == q


def test_eq2_int_and_double_are_not_equivalent(broker: Target, ch: BlockingChannel) -> None:
    q = broker.name()
    ch.queue_declare(q, arguments={"x-message-ttl": 10})
    assert declare_error(ch, q, {"x-message-ttl": Typed("d", 10.0)}) == inequivalent(
        q, "x-message-ttl", "'10.0'", "'10'"
    )


def test_eq2_missing_queue_type_equals_classic(broker: Target, ch: BlockingChannel) -> None:
    q = broker.name()
    ch.queue_declare(q)
    ch.queue_declare(q, arguments={"x-queue-type": "classic"})
    ch.queue_declare(q)
    assert ch.queue_declare(q, passive=True).method.queue == q


def test_eq2_unknown_arguments_are_not_compared(broker: Target, ch: BlockingChannel) -> None:
    q = broker.name()
    ch.queue_declare(q, arguments={"x-foo": 1})
    ch.queue_declare(q, arguments={"x-foo": "other", "x-bar": 2})
    assert ch.queue_declare(q, passive=True).method.queue == q


# -- EQ-3: equivalence before validation; stored arguments only ------------------------------------------------------


def test_eq3_invalid_value_on_redeclare_reads_inequivalent(broker: Target, ch: BlockingChannel) -> None:
    q = broker.name()
    ch.queue_declare(q, arguments={"x-message-ttl": 10})
    assert declare_error(ch, q, {"x-message-ttl": -1}) == inequivalent(q, "x-message-ttl", "'-1'", "'10'")


def test_eq3_routing_key_without_dlx_on_redeclare_reads_inequivalent(broker: Target, ch: BlockingChannel) -> None:
    q = broker.name()
    ch.queue_declare(q)
    assert declare_error(ch, q, {"x-dead-letter-routing-key": "rk"}) == inequivalent(
        q, "x-dead-letter-routing-key", "the value 'rk' of type 'longstr'", "none"
    )


def test_eq3_policies_do_not_matter(broker: Target, ch: BlockingChannel) -> None:
    q = broker.name()
    ch.queue_declare(q, arguments={"x-message-ttl": 10000})
    broker.set_policy(q + "-ttl", anchored(q), {"message-ttl": 5})
    ch.queue_declare(q, arguments={"x-message-ttl": 10000})
    assert declare_error(ch, q, {"x-message-ttl": 5}) == inequivalent(q, "x-message-ttl", "'5'", "'10000'")


@pytest.mark.rabbitmq_version("3.12")
def test_eq1_redeclare_classic_as_quorum_3x(broker: Target, ch: BlockingChannel) -> None:
    q = broker.name()
    ch.queue_declare(q, durable=True)
    assert declare_error(ch, q, {"x-queue-type": "quorum"}, durable=True) == inequivalent(
        q, "x-queue-type", "the value 'quorum' of type 'longstr'", "none"
    )


@pytest.mark.rabbitmq_version("4.0")
def test_eq1_4x_stores_the_default_queue_type(broker: Target, ch: BlockingChannel) -> None:
    q = broker.name()
    ch.queue_declare(q, durable=True)
    assert declare_error(ch, q, {"x-queue-type": "quorum"}, durable=True) == inequivalent(
        q, "x-queue-type", "'quorum'", "'classic'"
    )
