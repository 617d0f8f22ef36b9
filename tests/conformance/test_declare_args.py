"""``queue.declare`` argument validation and redeclare equivalence (``rabbit_amqqueue:check_declare_arguments/3``,
``rabbit_amqqueue:assert_equivalence/5``), with typed table values (byte, short, long, double) where pika alone cannot
send them."""

from __future__ import annotations

from typing import Any

import pika
import pytest
from pika.adapters.blocking_connection import BlockingChannel

from tests.conformance.conftest import Target
from tests.conformance.ttlhelpers import Typed, anchored, channel_error, typed_tables  # noqa: F401
from tests.conformance.versions import for_versions

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


# -- order of checks (RabbitMQ: rabbit_amqqueue:check_declare_arguments/3) ---------------------------------------------


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


# -- DLX of the wrong type (RabbitMQ: rabbit_channel (rabbit_misc:r_arg)) ----------------------------------------------


@pytest.mark.parametrize(("value", "type_"), [(5, "signedint"), (b"dlx", "binary"), (True, "bool"), (2**40, "long")])
def test_n2_dlx_of_wrong_type(broker: Target, ch: BlockingChannel, value: Any, type_: str) -> None:
    q = broker.name()
    assert declare_error(ch, q, {"x-dead-letter-exchange": value}) == (
        406,
        f"PRECONDITION_FAILED - invalid type '{type_}' for arg 'x-dead-letter-exchange' in queue '{q}' in vhost '/'",
    )


# -- value and type errors (RabbitMQ: rabbit_amqqueue:check_*_arg) -----------------------------------------------------


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


# -- accepted values (RabbitMQ: rabbit_amqqueue:declare_args/0) --------------------------------------------------------


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


# -- arguments of another queue type (RabbitMQ: rabbit_amqqueue:check_arguments_key/4) ---------------------------------


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


# -- a routing key without a DLX (RabbitMQ: rabbit_amqqueue:check_dlxrk_arg/2) -----------------------------------------


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


# -- order of checks for an existing queue (RabbitMQ: rabbit_amqqueue:assert_equivalence/5) ----------------------------


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


# -- integer types are interchangeable (RabbitMQ: rabbit_misc:type_class/1) --------------------------------------------


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


# -- equivalence before validation; stored arguments only (RabbitMQ: rabbit_amqqueue:assert_equivalence/5) -------------


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


# -- 4.x differences (live 3.10.8, 4.0.5, 4.3.6; notes/rabbitmq-4.x-observed-decl.md) -----------------------------

DEPRECATED_541 = (
    "INTERNAL_ERROR - Feature `queue_master_locator` is deprecated.\n"
    "By default, this feature is not permitted anymore.\n"
    "The feature will be removed from a future major RabbitMQ version, regardless of the configuration; "
    "actual version to be determined.\nTo con..."
)


def connection_error(conn: pika.BlockingConnection, fn: Any) -> tuple[int, str]:
    with pytest.raises(pika.exceptions.ConnectionClosedByBroker) as exc:
        fn(conn.channel())
    return exc.value.reply_code, exc.value.reply_text


def err(conn: pika.BlockingConnection, q: str, args: dict[str, Any], **kw: Any) -> tuple[int, str]:
    """The channel error of a declare, on a channel of its own."""
    return declare_error(conn.channel(), q, args, **kw)


def foreign(q: str, key: str, queue_type: str) -> tuple[int, str]:
    return 406, f"PRECONDITION_FAILED - invalid arg '{key}' for queue '{q}' in vhost '/' of queue type {queue_type}"


@for_versions("3.10", "4.0", "4.3")
def test_empty_queue_type_is_the_default_in_43(broker: Target, conn: pika.BlockingConnection) -> None:
    """4.3: ``x-queue-type = ""`` declares a queue of the default type and is stored as sent."""
    q = broker.name()
    if not broker.at_least("4.3"):
        assert err(conn, q, {"x-queue-type": ""}, durable=True) == invalid(
            q, "x-queue-type", "\"unsupported queue type ''\""
        )
        return
    conn.channel().queue_declare(q, durable=True, arguments={"x-queue-type": ""})
    conn.channel().queue_declare(q, durable=True, arguments={"x-queue-type": ""})
    # it is a classic queue: quorum arguments are another type's
    assert err(conn, broker.name("q2"), {"x-queue-type": "", "x-delivery-limit": 5}, durable=True) == (
        foreign(broker.name("q2"), "x-delivery-limit", "rabbit_classic_queue")
    )
    assert err(conn, q, {}, durable=True) == inequivalent(q, "x-queue-type", "'classic'", "''")


@for_versions("3.10", "4.0", "4.3")
@pytest.mark.parametrize("mode", ["bogus", 5])
def test_queue_mode_is_not_validated_in_43(broker: Target, conn: pika.BlockingConnection, mode: Any) -> None:
    q = broker.name()
    if broker.at_least("4.3"):
        conn.channel().queue_declare(q, arguments={"x-queue-mode": mode})
        assert err(conn, q, {"x-queue-mode": "other"}) == inequivalent(q, "x-queue-mode", "'other'", f"'{mode}'")
    else:
        term = "\"unsupported queue mode 'bogus'\"" if mode == "bogus" else "{unacceptable_type,signedint}"
        assert err(conn, q, {"x-queue-mode": mode}) == invalid(q, "x-queue-mode", term)
    q2 = broker.name("qq")
    assert err(conn, q2, {"x-queue-type": "quorum", "x-queue-mode": "lazy"}, durable=True) == foreign(
        q2, "x-queue-mode", "rabbit_quorum_queue"
    )


@for_versions("3.10", "4.0", "4.3")
def test_queue_version_1_is_refused_in_43(broker: Target, conn: pika.BlockingConnection) -> None:
    q = broker.name()
    conn.channel().queue_declare(broker.name("v2"), arguments={"x-queue-version": 2})
    if broker.at_least("4.3"):
        assert err(conn, q, {"x-queue-version": 1}) == invalid(
            q, "x-queue-version", "\"unsupported queue version '1'\""
        )
    else:
        conn.channel().queue_declare(q, arguments={"x-queue-version": 1})
    q3 = broker.name("v3")
    assert err(conn, q3, {"x-queue-version": 3}) == invalid(q3, "x-queue-version", "\"unsupported queue version '3'\"")


@for_versions("3.10", "4.0", "4.3")
@pytest.mark.parametrize("key", ["x-consumer-timeout", "x-consumer-disconnected-timeout"])
def test_consumer_timeouts_are_quorum_arguments_in_43(broker: Target, conn: pika.BlockingConnection, key: str) -> None:
    """4.3: a quorum queue argument (non-negative integer); a classic queue refuses it as another type's.
    Before, no queue type knows them: any value is accepted on any queue."""
    cq, qq = broker.name("c"), broker.name("q")
    qargs = {"x-queue-type": "quorum"}
    if not broker.at_least("4.3"):
        for value in (-1, "a", 1000):
            conn.channel().queue_declare(broker.name(f"c{value}"), arguments={key: value})
            conn.channel().queue_declare(broker.name(f"q{value}"), durable=True, arguments={**qargs, key: value})
        return
    assert err(conn, cq, {key: 1000}) == foreign(cq, key, "rabbit_classic_queue")
    assert err(conn, qq, {**qargs, key: -1}, durable=True) == invalid(qq, key, "{value_negative,-1}")
    assert err(conn, qq, {**qargs, key: "a"}, durable=True) == invalid(qq, key, '"expected integer, got longstr"')
    conn.channel().queue_declare(qq, durable=True, arguments={**qargs, key: 0})
    assert err(conn, qq, {**qargs, key: 1}, durable=True) == inequivalent(qq, key, "'1'", "'0'")


@for_versions("3.10", "4.0", "4.3")
@pytest.mark.parametrize(
    ("key", "since"),
    [
        ("x-delayed-retry-type", "4.3"),  # a quorum queue argument in 4.3
        ("x-stream-filter-size-bytes", "4.3"),  # a stream queue argument in 4.3 (not in 4.0.5)
        ("x-quorum-target-group-size", None),  # a policy key, no queue argument
    ],
)
def test_other_types_arguments_by_version(
    broker: Target, conn: pika.BlockingConnection, key: str, since: str | None
) -> None:
    q = broker.name()
    if since is not None and broker.at_least(since):
        assert err(conn, q, {key: 5}) == foreign(q, key, "rabbit_classic_queue")
    else:
        conn.channel().queue_declare(q, arguments={key: 5})


@for_versions("3.10", "4.0", "4.3")
@pytest.mark.parametrize("locator", ["client-local", "min-masters", "balanced", 5])
def test_queue_master_locator(broker: Target, conn: pika.BlockingConnection, locator: Any) -> None:
    """``x-queue-master-locator`` on a classic queue: ≤3.13 crashes the declare (541 without text) when the
    value is no known locator and the queue is not exclusive; 4.0 - 4.2 accept anything; 4.3 refuses the
    deprecated argument (541 with the deprecation warning, cut to 255 bytes), exclusive queues too."""
    q = broker.name()
    known = locator in ("client-local", "min-masters", "random")

    def declare(ch: BlockingChannel, exclusive: bool = False) -> None:
        ch.queue_declare(q, exclusive=exclusive, arguments={"x-queue-master-locator": locator})

    if broker.at_least("4.3"):
        assert connection_error(conn, declare) == (541, DEPRECATED_541)
        return
    if broker.at_least("4.0") or known:
        declare(conn.channel())
        return
    assert connection_error(conn, declare) == (541, "INTERNAL_ERROR")
    with broker.connect() as other:
        declare(other.channel(), exclusive=True)


@for_versions("3.10", "4.0", "4.3")
def test_queue_master_locator_on_quorum_is_another_types_argument(
    broker: Target, conn: pika.BlockingConnection
) -> None:
    q = broker.name()
    args = {"x-queue-type": "quorum", "x-queue-master-locator": "client-local"}
    assert err(conn, q, args, durable=True) == foreign(q, "x-queue-master-locator", "rabbit_quorum_queue")


@for_versions("3.10", "4.0", "4.3")
@pytest.mark.parametrize("queue_type", ["classic", "quorum"])
def test_queue_leader_locator_min_masters(broker: Target, conn: pika.BlockingConnection, queue_type: str) -> None:
    """4.x accepts the old master locator name ``min-masters`` as a leader locator; 3.10 refuses it (and knows
    the argument only on quorum queues)."""
    q = broker.name()
    args = {"x-queue-type": queue_type, "x-queue-leader-locator": "min-masters"}
    if broker.at_least("4.0"):
        conn.channel().queue_declare(q, durable=True, arguments=args)
    elif queue_type == "quorum":
        assert err(conn, q, args, durable=True) == invalid(q, "x-queue-leader-locator", "invalid_queue_locator_arg")
    else:
        assert err(conn, q, args, durable=True) == foreign(q, "x-queue-leader-locator", "rabbit_classic_queue")
