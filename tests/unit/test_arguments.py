"""queue.declare / exchange.declare argument checks and the expiration parser, as RabbitMQ's
``rabbit_amqqueue:check_declare_arguments/3``, ``rabbit_queue_type_util`` and ``rabbit_basic:parse_expiration/1`` do
them (the conformance side: tests/conformance/test_declare_args.py).

"live 3.10.8" means: the exact text was produced by the local RabbitMQ 3.10.8 with pika on 2026-11-21.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from fakerabbit.broker import errors
from fakerabbit.broker.arguments import (
    MAX_EXPIRY,
    TRANSIENT_NONEXCL_TEXT,
    augment_declare_args,
    check_exchange_equivalence,
    check_queue_equivalence,
    parse_expiration,
    queue_type_of,
    validate_new_exchange,
    validate_new_queue,
)
from fakerabbit.broker.fields import Table, table_from_python
from fakerabbit.broker.profile import Profile, get_profile

P310 = get_profile("3.10")
P313 = get_profile("3.13")
P40 = get_profile("4.0")
P43 = get_profile("4.3")
ALL = [P310, get_profile("3.12"), P313, P40, P43]


def T(**kw: Any) -> Table:
    """A table built the way pika encodes these values (int -> signedint, str -> longstr, ...)."""
    return table_from_python({k.replace("_", "-"): v for k, v in kw.items()})


def new_queue(
    args: Table,
    *,
    name: str = "q",
    durable: bool = False,
    exclusive: bool = False,
    auto_delete: bool = False,
    profile: Profile = P310,
) -> str:
    return validate_new_queue(
        name, "/", args, durable=durable, exclusive=exclusive, auto_delete=auto_delete, profile=profile
    )


def fails(args: Table, **kw: Any) -> str:
    with pytest.raises(errors.PreconditionFailed) as ei:
        new_queue(args, **kw)
    assert ei.value.code == 406
    return ei.value.explanation


# ======================================================================================================
# expiration (RabbitMQ: rabbit_basic:parse_expiration/1)


@pytest.mark.parametrize(
    ("raw", "text"),
    [  # all live 3.10.8
        ("abc", "invalid expiration 'abc': no_integer"),
        ("-1", "invalid expiration '-1': {value_negative,-1}"),
        ("-10", "invalid expiration '-10': {value_negative,-10}"),
        ("1.5", "invalid expiration '1.5': {leftover_string,\".5\"}"),
        ("10000foobar", "invalid expiration '10000foobar': {leftover_string,\"foobar\"}"),
        ("315360000001", "invalid expiration '315360000001': {value_too_large,315360000001}"),
        ("", "invalid expiration '': no_integer"),
        (" 10", "invalid expiration ' 10': no_integer"),
        ("\t1", "invalid expiration '\t1': no_integer"),
        ("10 ", "invalid expiration '10 ': {leftover_string,\" \"}"),
        ("1e3", "invalid expiration '1e3': {leftover_string,\"e3\"}"),
        ("0x10", "invalid expiration '0x10': {leftover_string,\"x10\"}"),
        ("1_000", "invalid expiration '1_000': {leftover_string,\"_000\"}"),
        ("+", "invalid expiration '+': no_integer"),
        ("-", "invalid expiration '-': no_integer"),
        ("+-1", "invalid expiration '+-1': no_integer"),
        ("\u0663", "invalid expiration '\u0663': no_integer"),  # non-ASCII digit
        ('1a"b\\c', 'invalid expiration \'1a"b\\c\': {leftover_string,"a\\"b\\\\c"}'),
        ("1\n\t", "invalid expiration '1\n\t': {leftover_string,\"\\n\\t\"}"),
        ("1\x1b", "invalid expiration '1\x1b': {leftover_string,\"\\e\"}"),
        ("1\x0b\x08\x0c", "invalid expiration '1\x0b\x08\x0c': {leftover_string,\"\\v\\b\\f\"}"),
        ("1\x01", "invalid expiration '1\x01': {leftover_string,[1]}"),
        ("1\x7f", "invalid expiration '1\x7f': {leftover_string,[127]}"),
        ("1é", "invalid expiration '1é': {leftover_string,\"é\"}"),
        ("1é中", "invalid expiration '1é中': {leftover_string,\"é中\"}"),
        ("1€", "invalid expiration '1€': {leftover_string,[226,130,172]}"),
        ("1~p", "invalid expiration '1~p': {leftover_string,\"~p\"}"),
    ],
)
def test_expiration_errors(raw: str, text: str) -> None:
    with pytest.raises(errors.PreconditionFailed) as ei:
        parse_expiration(raw)
    assert ei.value.explanation == text
    assert ei.value.reply_text == "PRECONDITION_FAILED - " + text


@pytest.mark.parametrize(
    ("raw", "text"),
    [  # Erlang's ~p breaks a tagged pair that does not fit in 78 columns (live 3.10.8)
        ("-" + "9" * 18, "invalid expiration '-999999999999999999': {value_negative,-999999999999999999}"),
        (
            "-" + "9" * 19,
            "invalid expiration '-9999999999999999999': {value_negative,\n" + " " * 44 + "-9999999999999999999}",
        ),
        (
            "9" * 19,
            "invalid expiration '9999999999999999999': {value_too_large,\n" + " " * 43 + "9999999999999999999}",
        ),
        (
            "99999999999999999999999",
            "invalid expiration '99999999999999999999999': {value_too_large,\n" + " " * 47 + "99999999999999999999999}",
        ),
        ("1" + "x" * 17, "invalid expiration '1" + "x" * 17 + "': {leftover_string,\"" + "x" * 17 + '"}'),
        (
            "1" + "x" * 18,
            "invalid expiration '1" + "x" * 18 + "': {leftover_string,\n" + " " * 43 + '"' + "x" * 18 + '"}',
        ),
    ],
)
def test_expiration_error_line_breaks(raw: str, text: str) -> None:
    with pytest.raises(errors.PreconditionFailed) as ei:
        parse_expiration(raw)
    assert ei.value.explanation == text


@pytest.mark.parametrize(
    ("raw", "value"),
    [("0", 0), ("007", 7), ("+10", 10), ("-0", 0), ("1000", 1000), ("315360000000", MAX_EXPIRY), (b"42", 42)],
)
def test_expiration_valid(raw: str | bytes, value: int) -> None:
    assert parse_expiration(raw) == value  # all accepted by the live 3.10.8


# ======================================================================================================
# the DLX argument type (RabbitMQ: rabbit_channel (rabbit_misc:r_arg))


@pytest.mark.parametrize(("value", "tname"), [(5, "signedint"), (b"abc", "binary"), (True, "bool"), (2**40, "long")])
def test_dlx_wrong_type(value: Any, tname: str) -> None:
    text = f"invalid type '{tname}' for arg 'x-dead-letter-exchange' in queue 'q' in vhost '/'"
    assert fails(T(x_dead_letter_exchange=value)) == text  # live 3.10.8 (signedint, binary)


def test_dlx_type_checked_first() -> None:
    # before the validators (live 3.10.8) (RabbitMQ: rabbit_amqqueue:check_declare_arguments/3)
    text = fails({"x-message-ttl": ("I", -1), "x-dead-letter-exchange": ("I", 5)})
    assert text == "invalid type 'signedint' for arg 'x-dead-letter-exchange' in queue 'q' in vhost '/'"


# ======================================================================================================
# value and type errors (all texts live 3.10.8 unless noted) (RabbitMQ: rabbit_amqqueue:check_*_arg)

CLASSIC_ERRORS: list[tuple[dict[str, Any], str]] = [
    ({"x-message-ttl": -1}, "invalid arg 'x-message-ttl' for queue 'q' in vhost '/': {value_negative,-1}"),
    (
        {"x-message-ttl": 315360000001},
        "invalid arg 'x-message-ttl' for queue 'q' in vhost '/': {value_too_large,315360000001}",
    ),
    (
        {"x-message-ttl": "1000"},
        "invalid arg 'x-message-ttl' for queue 'q' in vhost '/': \"expected integer, got longstr\"",
    ),
    (
        {"x-message-ttl": True},
        "invalid arg 'x-message-ttl' for queue 'q' in vhost '/': \"expected integer, got bool\"",
    ),
    (
        {"x-message-ttl": Decimal("1.5")},
        "invalid arg 'x-message-ttl' for queue 'q' in vhost '/': \"expected integer, got decimal\"",
    ),
    (
        {"x-message-ttl": b"1"},
        "invalid arg 'x-message-ttl' for queue 'q' in vhost '/': \"expected integer, got binary\"",
    ),
    # pika cannot send a double: tests/conformance/test_declare_args.py sends one and checks this text live
    (
        {"x-message-ttl": 1.5},
        "invalid arg 'x-message-ttl' for queue 'q' in vhost '/': \"expected integer, got double\"",
    ),
    ({"x-expires": 0}, "invalid arg 'x-expires' for queue 'q' in vhost '/': {value_zero,0}"),
    ({"x-expires": -10}, "invalid arg 'x-expires' for queue 'q' in vhost '/': {value_negative,-10}"),
    (
        {"x-expires": 315360000001},
        "invalid arg 'x-expires' for queue 'q' in vhost '/': {value_too_large,315360000001}",
    ),
    ({"x-max-length": -5}, "invalid arg 'x-max-length' for queue 'q' in vhost '/': {value_negative,-5}"),
    (
        {"x-max-length": "5"},
        "invalid arg 'x-max-length' for queue 'q' in vhost '/': \"expected integer, got longstr\"",
    ),
    (
        {"x-max-length-bytes": -1},
        "invalid arg 'x-max-length-bytes' for queue 'q' in vhost '/': {value_negative,-1}",
    ),
    (
        {"x-dead-letter-routing-key": "rk"},
        "invalid arg 'x-dead-letter-routing-key' for queue 'q' in vhost '/': routing_key_but_no_dlx_defined",
    ),
    (
        {"x-dead-letter-exchange": "x", "x-dead-letter-routing-key": 144},
        "invalid arg 'x-dead-letter-routing-key' for queue 'q' in vhost '/': {unacceptable_type,signedint}",
    ),
    (
        {"x-dead-letter-routing-key": 144},
        "invalid arg 'x-dead-letter-routing-key' for queue 'q' in vhost '/': {unacceptable_type,signedint}",
    ),
    ({"x-overflow": "foo"}, "invalid arg 'x-overflow' for queue 'q' in vhost '/': invalid_overflow"),
    ({"x-overflow": 1}, "invalid arg 'x-overflow' for queue 'q' in vhost '/': {unacceptable_type,signedint}"),
    (
        {"x-max-priority": 256},
        "invalid arg 'x-max-priority' for queue 'q' in vhost '/': {max_value_exceeded,256}",
    ),
    ({"x-max-priority": -1}, "invalid arg 'x-max-priority' for queue 'q' in vhost '/': {value_negative,-1}"),
    (
        {"x-max-priority": "5"},
        "invalid arg 'x-max-priority' for queue 'q' in vhost '/': \"expected integer, got longstr\"",
    ),
    (
        {"x-queue-type": "fake-queue-type"},
        "invalid arg 'x-queue-type' for queue 'q' in vhost '/': \"unsupported queue type 'fake-queue-type'\"",
    ),
    (
        {"x-queue-type": "Classic"},
        "invalid arg 'x-queue-type' for queue 'q' in vhost '/': \"unsupported queue type 'Classic'\"",
    ),
    (
        {"x-queue-type": ""},
        "invalid arg 'x-queue-type' for queue 'q' in vhost '/': \"unsupported queue type ''\"",
    ),
    (
        {"x-queue-type": "ü"},
        "invalid arg 'x-queue-type' for queue 'q' in vhost '/': \"unsupported queue type 'ü'\"",
    ),
    (
        {"x-queue-type": "中"},
        "invalid arg 'x-queue-type' for queue 'q' in vhost '/': \"unsupported queue type '中'\"",
    ),
    (
        {"x-queue-type": 1},
        "invalid arg 'x-queue-type' for queue 'q' in vhost '/': {unacceptable_type,signedint}",
    ),
    (
        {"x-queue-type": b"classic"},
        "invalid arg 'x-queue-type' for queue 'q' in vhost '/': {unacceptable_type,binary}",
    ),
    (
        {"x-single-active-consumer": "yes"},
        "invalid arg 'x-single-active-consumer' for queue 'q' in vhost '/': {unacceptable_type,longstr}",
    ),
    (
        {"x-single-active-consumer": 1},
        "invalid arg 'x-single-active-consumer' for queue 'q' in vhost '/': {unacceptable_type,signedint}",
    ),
    (
        {"x-queue-mode": "foo"},
        "invalid arg 'x-queue-mode' for queue 'q' in vhost '/': \"unsupported queue mode 'foo'\"",
    ),
    (
        {"x-queue-mode": "中"},
        "invalid arg 'x-queue-mode' for queue 'q' in vhost '/': \"unsupported queue mode '中'\"",
    ),
    (
        {"x-queue-mode": 1},
        "invalid arg 'x-queue-mode' for queue 'q' in vhost '/': {unacceptable_type,signedint}",
    ),
    (
        {"x-queue-version": 3},
        "invalid arg 'x-queue-version' for queue 'q' in vhost '/': \"unsupported queue version '3'\"",
    ),
    (
        {"x-queue-version": "2"},
        "invalid arg 'x-queue-version' for queue 'q' in vhost '/': \"expected integer, got longstr\"",
    ),
    # order: x-expires is validated before x-message-ttl whatever the table order
    # (RabbitMQ: rabbit_amqqueue:check_declare_arguments/3)
    (
        {"x-message-ttl": -1, "x-expires": 0},
        "invalid arg 'x-expires' for queue 'q' in vhost '/': {value_zero,0}",
    ),
]


@pytest.mark.parametrize(("args", "text"), CLASSIC_ERRORS)
def test_classic_argument_errors(args: dict[str, Any], text: str) -> None:
    assert fails(table_from_python(args)) == text


@pytest.mark.parametrize("profile", ALL, ids=lambda p: p.name)
def test_argument_errors_same_in_all_versions(profile: Profile) -> None:
    # "the same texts in 3.12 - main" (RabbitMQ: rabbit_amqqueue:check_*_arg)
    assert fails(T(x_message_ttl=-1), profile=profile).endswith(": {value_negative,-1}")


@pytest.mark.parametrize(
    ("args", "text"),
    [
        (
            {"x-dead-letter-strategy": "foo"},
            "invalid arg 'x-dead-letter-strategy' for queue 'q' in vhost '/': invalid_dlx_strategy",
        ),
        (
            {"x-dead-letter-strategy": 1},
            "invalid arg 'x-dead-letter-strategy' for queue 'q' in vhost '/': {unacceptable_type,signedint}",
        ),
        (
            {"x-max-in-memory-length": -1},
            "invalid arg 'x-max-in-memory-length' for queue 'q' in vhost '/': {value_negative,-1}",
        ),
        (
            {"x-quorum-initial-group-size": 0},
            "invalid arg 'x-quorum-initial-group-size' for queue 'q' in vhost '/': {value_zero,0}",
        ),
        (
            {"x-queue-leader-locator": "foo"},
            "invalid arg 'x-queue-leader-locator' for queue 'q' in vhost '/': invalid_queue_locator_arg",
        ),
        (
            {"x-single-active-consumer": 1},
            "invalid arg 'x-single-active-consumer' for queue 'q' in vhost '/': {unacceptable_type,signedint}",
        ),
        # validators run before the other-type check
        # (RabbitMQ: rabbit_amqqueue:check_declare_arguments/3: ttl beats max-priority)
        (
            {"x-max-priority": 5, "x-message-ttl": -1},
            "invalid arg 'x-message-ttl' for queue 'q' in vhost '/': {value_negative,-1}",
        ),
    ],
)
def test_quorum_argument_errors(args: dict[str, Any], text: str) -> None:
    args = {"x-queue-type": "quorum", **args}
    assert fails(table_from_python(args), durable=True) == text  # live 3.10.8


def test_argument_error_wraps_only_past_255_columns() -> None:
    # ~255p: a long queue name pushes the term over the line (the break lands past the 255-byte reply cut)
    text = fails(T(x_overflow=1), name="q" * 240)
    assert "{unacceptable_type,\n" in text
    assert "{unacceptable_type,signedint}" in fails(T(x_overflow=1), name="q" * 170)


# ======================================================================================================
# accepted values; unknown arguments (RabbitMQ: rabbit_amqqueue:declare_args/0)


@pytest.mark.parametrize(
    "args",
    [
        {"x-message-ttl": 0},
        {"x-message-ttl": MAX_EXPIRY},
        {"x-max-length": 0},
        {"x-max-length-bytes": 0},
        {"x-dead-letter-exchange": "does-not-exist"},
        {"x-dead-letter-exchange": ""},
        {"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "rk"},
        {"x-max-priority": 255},
        {"x-max-priority": 0},
        {"x-expires": 1},
        {"x-overflow": "reject-publish-dlx"},
        {"x-single-active-consumer": True},
        {"x-queue-mode": "lazy"},
        {"x-queue-version": 2},
        {"x-queue-type": "classic"},
        {"x-foo": "bar", "foo": 1},  # unknown keys are ignored
        {"x-consumer-timeout": "x"},  # no validator (live 3.10.8)
        {"x-quorum-target-group-size": 5},  # unknown to 3.10 (live 3.10.8)
        {"x-stream-filter-size-bytes": 5},  # unknown to 3.10 (live 3.10.8)
        {"x-queue-master-locator": "client-local"},
    ],
)
def test_classic_accepts(args: dict[str, Any]) -> None:
    assert new_queue(table_from_python(args)) == "classic"


@pytest.mark.parametrize(
    "args",
    [
        {"x-delivery-limit": -1},
        {"x-delivery-limit": "5"},  # x-delivery-limit has no validator (live 3.10.8)
        {"x-overflow": "reject-publish-dlx"},  # accepted, runs as drop-head (RabbitMQ: rabbit_quorum_queue:overflow/3)
        {"x-dead-letter-strategy": "at-least-once"},
        {"x-queue-leader-locator": "random"},
        {"x-queue-leader-locator": "client-local"},
        {"x-max-in-memory-length": 0},
        {"x-consumer-timeout": "x"},
    ],
)
def test_quorum_accepts(args: dict[str, Any]) -> None:
    assert new_queue(table_from_python({"x-queue-type": "quorum", **args}), durable=True) == "quorum"


# ======================================================================================================
# arguments of other queue types (RabbitMQ: rabbit_amqqueue:check_arguments_key/4)


@pytest.mark.parametrize(
    "key",
    [
        "x-delivery-limit",
        "x-dead-letter-strategy",
        "x-max-in-memory-length",
        "x-max-in-memory-bytes",
        "x-max-age",
        "x-quorum-initial-group-size",
        "x-queue-leader-locator",
        "x-stream-max-segment-size-bytes",
        "x-initial-cluster-size",
    ],
)
def test_classic_rejects_other_types_arguments(key: str) -> None:
    text = fails({key: ("I", 5)})
    assert text == f"invalid arg '{key}' for queue 'q' in vhost '/' of queue type rabbit_classic_queue"


@pytest.mark.parametrize(
    "key", ["x-max-priority", "x-queue-mode", "x-queue-version", "x-queue-master-locator", "x-max-age"]
)
def test_quorum_rejects_other_types_arguments(key: str) -> None:
    text = fails({"x-queue-type": ("S", "quorum"), key: ("S", "x")}, durable=True)
    assert text == f"invalid arg '{key}' for queue 'q' in vhost '/' of queue type rabbit_quorum_queue"


def test_other_type_arguments_in_table_order() -> None:
    # live 3.10.8: the first offending key of the client's table
    a = fails(T(x_delivery_limit=5, x_dead_letter_strategy="x"))
    assert a == "invalid arg 'x-delivery-limit' for queue 'q' in vhost '/' of queue type rabbit_classic_queue"
    b = fails(T(x_dead_letter_strategy="x", x_delivery_limit=5))
    assert b == ("invalid arg 'x-dead-letter-strategy' for queue 'q' in vhost '/' of queue type rabbit_classic_queue")


def test_version_dependent_argument_lists() -> None:
    # x-queue-leader-locator is a classic argument from 4.0; x-stream-filter-size-bytes a stream one only from
    # 4.3 (rabbit_stream_queue:capabilities/0 of 3.13.7 and 4.0.5 do not list it; live 4.0.5 accepts it on a
    # classic queue, 4.3.6 refuses it); x-quorum-target-group-size is no queue argument (accepted everywhere).
    assert new_queue(T(x_queue_leader_locator="balanced"), profile=P40) == "classic"
    assert new_queue(T(x_stream_filter_size_bytes=5), profile=P313) == "classic"
    assert new_queue(T(x_stream_filter_size_bytes=5), profile=P40) == "classic"
    assert "rabbit_classic_queue" in fails(T(x_stream_filter_size_bytes=5), profile=P43)
    assert new_queue(T(x_quorum_target_group_size=5), profile=P40) == "classic"
    assert new_queue(T(x_quorum_target_group_size=5), profile=P43) == "classic"


# ======================================================================================================
# queue types, quorum property restrictions (rabbit_queue_type_util:check_*), 4.3 transient queues


def test_queue_type() -> None:
    assert new_queue({}) == "classic"
    assert queue_type_of({}) == "classic"
    assert queue_type_of(T(x_queue_type="quorum")) == "quorum"


def test_stream_declare() -> None:
    # live 3.10.8, 4.0.5, 4.3.6 (notes/rabbitmq-streams-observed.md)
    assert new_queue(T(x_queue_type="stream", x_max_age="7D", x_initial_cluster_size=3), durable=True) == "stream"
    assert fails(T(x_queue_type="stream", x_max_age="1.5h"), durable=True) == (
        "invalid arg 'x-max-age' for queue 'q' in vhost '/': invalid_max_age"
    )
    assert fails(T(x_queue_type="stream", x_max_age=10), durable=True) == (
        "invalid arg 'x-max-age' for queue 'q' in vhost '/': {unacceptable_type,signedint}"
    )
    assert fails(T(x_queue_type="stream", x_message_ttl=5), durable=True) == (
        "invalid arg 'x-message-ttl' for queue 'q' in vhost '/' of queue type rabbit_stream_queue"
    )
    assert fails(T(x_queue_type="stream"), durable=False) == "invalid property 'non-durable' for queue 'q' in vhost '/'"
    assert fails(T(x_queue_type="stream", x_stream_max_segment_size_bytes=3_000_000_001), durable=True) == (
        "Exceeded max value for x-stream-max-segment-size-bytes"
    )


def test_stream_max_age_without_digits_crashes_before_4_3() -> None:
    with pytest.raises(errors.InternalError):
        new_queue(T(x_queue_type="stream", x_max_age=""), durable=True, profile=P40)
    assert fails(T(x_queue_type="stream", x_max_age=""), durable=True, profile=P43).endswith("invalid_max_age")


@pytest.mark.parametrize(
    ("profile", "value", "text"),
    [
        (P310, 300, None),  # unknown to 3.10
        (P40, 10, "Invalid value for  x-stream-filter-size-bytes"),
        (P40, "a", "Invalid value for  x-stream-filter-size-bytes"),
        (P40, 32, None),
        (P43, 300, "Invalid value for x-stream-filter-size-bytes"),
        (
            P43,
            "a",
            "invalid arg 'x-stream-filter-size-bytes' for queue 'q' in vhost '/': \"expected integer, got longstr\"",
        ),
    ],
)
def test_stream_filter_size(profile: Profile, value: Any, text: str | None) -> None:
    args = table_from_python({"x-queue-type": "stream", "x-stream-filter-size-bytes": value})
    if text is None:
        assert new_queue(args, durable=True, profile=profile) == "stream"
    else:
        assert fails(args, durable=True, profile=profile) == text


@pytest.mark.parametrize(
    ("durable", "exclusive", "auto_delete", "prop"),
    [  # live 3.10.8, including the precedence auto-delete > exclusive-owner > non-durable
        (False, False, False, "non-durable"),
        (True, True, False, "exclusive-owner"),
        (True, False, True, "auto-delete"),
        (False, True, True, "auto-delete"),
        (False, True, False, "exclusive-owner"),
    ],
)
def test_quorum_properties(durable: bool, exclusive: bool, auto_delete: bool, prop: str) -> None:
    text = fails(T(x_queue_type="quorum"), durable=durable, exclusive=exclusive, auto_delete=auto_delete)
    assert text == f"invalid property '{prop}' for queue 'q' in vhost '/'"


def test_quorum_argument_errors_come_before_properties() -> None:
    text = fails(T(x_queue_type="quorum", x_max_priority=5), durable=False)  # live 3.10.8
    assert text == "invalid arg 'x-max-priority' for queue 'q' in vhost '/' of queue type rabbit_quorum_queue"


def test_transient_nonexclusive_switch() -> None:
    import dataclasses

    strict = dataclasses.replace(P43, transient_nonexclusive_queues=False)
    with pytest.raises(errors.InternalError) as ei:
        new_queue({}, profile=strict)
    assert ei.value.code == 541 and ei.value.hard
    assert ei.value.explanation == TRANSIENT_NONEXCL_TEXT
    assert ei.value.reply_text.startswith(
        "INTERNAL_ERROR - Feature `transient_nonexcl_queues` is deprecated.\n"
        "By default, this feature is not permitted anymore.\n"
    )
    assert new_queue({}, profile=strict, exclusive=True) == "classic"
    assert new_queue({}, profile=strict, durable=True) == "classic"
    with pytest.raises(errors.InternalError):  # also for quorum, before its property checks
        new_queue(T(x_queue_type="quorum"), profile=strict)


# ======================================================================================================
# 4.x default queue type


def test_augment_declare_args() -> None:
    args = T(x_message_ttl=5, x_dead_letter_exchange="d")
    assert augment_declare_args(args, profile=P313) is args
    out = augment_declare_args(args, profile=P40)
    assert out == {**args, "x-queue-type": ("S", "classic")}
    assert list(out) == ["x-dead-letter-exchange", "x-message-ttl", "x-queue-type"]  # set_table_value sorts
    q = T(x_queue_type="quorum")
    assert augment_declare_args(q, profile=P40) is q


# ======================================================================================================
# O: equivalence


def redeclare(
    stored: dict[str, Any],
    new: dict[str, Any],
    *,
    queue_type: str = "classic",
    durable: bool = False,
    new_durable: bool | None = None,
    auto_delete: bool = False,
    new_auto_delete: bool | None = None,
    profile: Profile = P310,
) -> str | None:
    try:
        check_queue_equivalence(
            "q",
            "/",
            queue_type=queue_type,
            durable=durable,
            auto_delete=auto_delete,
            stored_args=table_from_python(stored),
            new_durable=durable if new_durable is None else new_durable,
            new_auto_delete=auto_delete if new_auto_delete is None else new_auto_delete,
            new_args=table_from_python(new),
            profile=profile,
        )
    except errors.PreconditionFailed as e:
        return e.explanation
    return None


PREFIX = "inequivalent arg '{}' for queue 'q' in vhost '/': "


@pytest.mark.parametrize(
    ("stored", "new", "key", "rest"),
    [  # all live 3.10.8
        ({"x-message-ttl": 10}, {"x-message-ttl": 20}, "x-message-ttl", "received '20' but current is '10'"),
        (
            {"x-message-ttl": 1},
            {"x-message-ttl": -1},
            "x-message-ttl",
            "received '-1' but current is '1'",
        ),  # equivalence before validation (rabbit_amqqueue:assert_equivalence/5)
        (
            {"x-message-ttl": 10},
            {"x-message-ttl": "10"},
            "x-message-ttl",
            "received '10' but current is '10'",
        ),
        (
            {"x-message-ttl": 10},
            {"x-message-ttl": b"10"},
            "x-message-ttl",
            "received '10' but current is '10'",
        ),
        (
            {"x-message-ttl": 1},
            {"x-message-ttl": True},
            "x-message-ttl",
            "received 'true' but current is '1'",
        ),
        (
            {"x-message-ttl": 10},
            {},
            "x-message-ttl",
            "received none but current is the value '10' of type 'signedint'",
        ),
        (
            {},
            {"x-message-ttl": 10},
            "x-message-ttl",
            "received the value '10' of type 'signedint' but current is none",
        ),
        (
            {"x-dead-letter-exchange": "a"},
            {"x-dead-letter-exchange": "b"},
            "x-dead-letter-exchange",
            "received 'b' but current is 'a'",
        ),
        (
            {"x-dead-letter-exchange": ""},
            {"x-dead-letter-exchange": "x"},
            "x-dead-letter-exchange",
            "received 'x' but current is ''",
        ),
        (
            {},
            {"x-dead-letter-exchange": "a"},
            "x-dead-letter-exchange",
            "received the value 'a' of type 'longstr' but current is none",
        ),
        (
            {"x-dead-letter-exchange": "a"},
            {},
            "x-dead-letter-exchange",
            "received none but current is the value 'a' of type 'longstr'",
        ),
        (
            {"x-dead-letter-exchange": "a'b"},
            {"x-dead-letter-exchange": "é"},
            "x-dead-letter-exchange",
            "received 'é' but current is 'a'b'",
        ),
        (
            {},
            {"x-dead-letter-exchange": "é"},
            "x-dead-letter-exchange",
            "received the value 'é' of type 'longstr' but current is none",
        ),
        (
            {"x-single-active-consumer": True},
            {"x-single-active-consumer": False},
            "x-single-active-consumer",
            "received 'false' but current is 'true'",
        ),
        (
            {"x-max-priority": 5},
            {},
            "x-max-priority",
            "received none but current is the value '5' of type 'signedint'",
        ),
        # order: x-expires before x-message-ttl, DLX before max-length, SAC before x-queue-type
        # (RabbitMQ: rabbit_amqqueue:assert_equivalence/5)
        (
            {"x-message-ttl": 1, "x-expires": 100},
            {"x-message-ttl": 2, "x-expires": 200},
            "x-expires",
            "received '200' but current is '100'",
        ),
        (
            {"x-max-length": 1, "x-dead-letter-exchange": "a"},
            {"x-max-length": 2, "x-dead-letter-exchange": "b"},
            "x-dead-letter-exchange",
            "received 'b' but current is 'a'",
        ),
        (
            {},
            {"x-queue-type": "quorum", "x-single-active-consumer": True},
            "x-single-active-consumer",
            "received the value 'true' of type 'bool' but current is none",
        ),
        (
            {},
            {"x-queue-type": "quorum"},
            "x-queue-type",
            "received the value 'quorum' of type 'longstr' but current is none",
        ),
        (
            {"x-queue-type": "classic"},
            {"x-queue-type": "quorum"},
            "x-queue-type",
            "received 'quorum' but current is 'classic'",
        ),
    ],
)
def test_inequivalent_args(stored: dict[str, Any], new: dict[str, Any], key: str, rest: str) -> None:
    assert redeclare(stored, new) == PREFIX.format(key) + rest


def test_inequivalent_args_quorum() -> None:
    # live 3.10.8
    assert (
        redeclare({"x-queue-type": "quorum"}, {}, queue_type="quorum", durable=True)
        == PREFIX.format("x-queue-type") + "received none but current is the value 'quorum' of type 'longstr'"
    )
    assert (
        redeclare({"x-queue-type": "quorum"}, {"x-queue-type": "classic"}, queue_type="quorum", durable=True)
        == PREFIX.format("x-queue-type") + "received 'classic' but current is 'quorum'"
    )
    assert (
        redeclare(
            {"x-queue-type": "quorum", "x-delivery-limit": 5},
            {"x-queue-type": "quorum", "x-delivery-limit": 6},
            queue_type="quorum",
            durable=True,
        )
        == PREFIX.format("x-delivery-limit") + "received '6' but current is '5'"
    )
    # a classic-only argument is not compared on a quorum queue (live 3.10.8)
    assert (
        redeclare({"x-queue-type": "quorum"}, {"x-queue-type": "quorum", "x-max-priority": 5}, queue_type="quorum")
        is None
    )


@pytest.mark.parametrize(
    ("stored", "new"),
    [  # integer types form one class (rabbit_misc:type_class/1; live 3.10.8 where pika can send it)
        ({"x-message-ttl": 10}, {"x-message-ttl": 10}),
        ({"x-dead-letter-exchange": "abc"}, {"x-dead-letter-exchange": b"abc"}),  # equal values, other types
        ({}, {"x-queue-type": "classic"}),
        ({"x-queue-type": "classic"}, {}),
        ({"x-foo": 1}, {"x-foo": 2}),  # not compared
        ({}, {"x-delivery-limit": 5}),  # not a classic argument: not compared (live 3.10.8)
    ],
)
def test_equivalent_args(stored: dict[str, Any], new: dict[str, Any]) -> None:
    assert redeclare(stored, new) is None


@pytest.mark.parametrize(
    ("a", "b"), [(("b", 10), ("I", 10)), (("s", 10), ("l", 10)), (("B", 10), ("i", 10)), (("u", 7), ("I", 7))]
)
def test_integer_types_are_interchangeable(a: tuple[str, int], b: tuple[str, int]) -> None:
    # byte/short/signedint/long/unsigned* form one class (RabbitMQ: rabbit_misc:type_class/1)
    check_queue_equivalence(
        "q",
        "/",
        queue_type="classic",
        durable=False,
        auto_delete=False,
        stored_args={"x-message-ttl": a},
        new_durable=False,
        new_auto_delete=False,
        new_args={"x-message-ttl": b},
        profile=P310,
    )


def test_int_and_float_are_not_equivalent() -> None:
    # / Java PerQueueTTL.queueReDeclareSemanticNonEquivalence (10 vs 10.0) (RabbitMQ: rabbit_misc:type_class/1)
    with pytest.raises(errors.PreconditionFailed) as ei:
        check_queue_equivalence(
            "q",
            "/",
            queue_type="classic",
            durable=False,
            auto_delete=False,
            stored_args={"x-message-ttl": ("I", 10)},
            new_durable=False,
            new_auto_delete=False,
            new_args={"x-message-ttl": ("d", 10.0)},
            profile=P310,
        )
    assert ei.value.explanation == PREFIX.format("x-message-ttl") + "received '10.0' but current is '10'"
    # float and double are one class
    check_queue_equivalence(
        "q",
        "/",
        queue_type="classic",
        durable=False,
        auto_delete=False,
        stored_args={"x-foo": ("f", 1.5), "x-message-ttl": ("f", 1.5)},
        new_durable=False,
        new_auto_delete=False,
        new_args={"x-message-ttl": ("d", 1.5)},
        profile=P310,
    )


def test_decimal_mismatch_crashes_like_rabbitmq() -> None:
    # live 3.10.8: a decimal that differs from an integer makes rabbit_misc:val/1 crash -> 541
    with pytest.raises(errors.InternalError):
        redeclare({"x-message-ttl": 10}, {"x-message-ttl": Decimal(10)})
    assert (
        redeclare({}, {"x-message-ttl": Decimal("1.5")})
        == PREFIX.format("x-message-ttl") + "received the value '{1,15}' of type 'decimal' but current is none"
    )


def test_durable_and_auto_delete() -> None:
    # live 3.10.8
    assert redeclare({}, {}, durable=True, new_durable=False) == PREFIX.format("durable") + (
        "received 'false' but current is 'true'"
    )
    assert redeclare({}, {}, durable=False, new_durable=True) == PREFIX.format("durable") + (
        "received 'true' but current is 'false'"
    )
    assert redeclare({}, {}, auto_delete=True, new_auto_delete=False) == PREFIX.format("auto_delete") + (
        "received 'false' but current is 'true'"
    )
    # durable is checked before the arguments
    assert redeclare({"x-message-ttl": 1}, {"x-message-ttl": 2}, durable=True, new_durable=False) == (
        PREFIX.format("durable") + "received 'false' but current is 'true'"
    )


def test_exclusive_queues_are_never_durable() -> None:
    # rabbit_channel: Durable = DurableDeclare andalso not ExclusiveDeclare (live 3.10.8: both orders pass)
    for stored, new in ((True, False), (False, True)):
        check_queue_equivalence(
            "q",
            "/",
            queue_type="classic",
            durable=stored,
            auto_delete=False,
            stored_args={},
            new_durable=new,
            new_auto_delete=False,
            new_args={},
            profile=P310,
            exclusive=True,
            new_exclusive=True,
        )


def test_4x_default_queue_type_in_equivalence() -> None:
    # With 4.x's injected x-queue-type, a classic queue redeclared as quorum reads 'classic' (not none).
    stored = augment_declare_args({}, profile=P40)
    with pytest.raises(errors.PreconditionFailed) as ei:
        check_queue_equivalence(
            "q",
            "/",
            queue_type="classic",
            durable=True,
            auto_delete=False,
            stored_args=stored,
            new_durable=True,
            new_auto_delete=False,
            new_args=T(x_queue_type="quorum"),
            profile=P40,
        )
    assert ei.value.explanation == PREFIX.format("x-queue-type") + "received 'quorum' but current is 'classic'"
    # and a plain redeclare still matches
    assert redeclare({"x-queue-type": "classic"}, {}, profile=P40) is None


def test_typed_rendering_switch() -> None:
    import dataclasses

    typed = dataclasses.replace(P310, typed_inequivalence_text=True)
    assert redeclare({"x-message-ttl": 10}, {"x-message-ttl": 20}, profile=typed) == PREFIX.format("x-message-ttl") + (
        "received the value '20' of type 'signedint' but current is the value '10' of type 'signedint'"
    )


# ======================================================================================================
# exchanges (all live 3.10.8)


def exchange_redeclare(cur: dict[str, Any], new: dict[str, Any]) -> str | None:
    base = {"type": "direct", "durable": False, "auto_delete": False, "internal": False, "args": {}}
    c, n = {**base, **cur}, {**base, **new}
    try:
        check_exchange_equivalence(
            "x",
            "/",
            current_type=c["type"],
            current_durable=c["durable"],
            current_auto_delete=c["auto_delete"],
            current_internal=c["internal"],
            current_args=table_from_python(c["args"]),
            new_type=n["type"],
            new_durable=n["durable"],
            new_auto_delete=n["auto_delete"],
            new_internal=n["internal"],
            new_args=table_from_python(n["args"]),
        )
    except errors.PreconditionFailed as e:
        return e.explanation
    return None


XPREFIX = "inequivalent arg '{}' for exchange 'x' in vhost '/': "


@pytest.mark.parametrize(
    ("cur", "new", "key", "rest"),
    [
        ({"type": "direct"}, {"type": "fanout"}, "type", "received 'fanout' but current is 'direct'"),
        ({"durable": True}, {"durable": False}, "durable", "received 'false' but current is 'true'"),
        (
            {"auto_delete": True},
            {"auto_delete": False},
            "auto_delete",
            "received 'false' but current is 'true'",
        ),
        ({"internal": True}, {"internal": False}, "internal", "received 'false' but current is 'true'"),
        (
            {"type": "topic", "durable": True},
            {"type": "headers", "durable": False},
            "type",
            "received 'headers' but current is 'topic'",
        ),
        (
            {},
            {"args": {"alternate-exchange": "ae"}},
            "alternate-exchange",
            "received the value 'ae' of type 'longstr' but current is none",
        ),
        (
            {"args": {"alternate-exchange": "ae"}},
            {},
            "alternate-exchange",
            "received none but current is the value 'ae' of type 'longstr'",
        ),
        (
            {"args": {"alternate-exchange": "ae"}},
            {"args": {"alternate-exchange": "ae2"}},
            "alternate-exchange",
            "received 'ae2' but current is 'ae'",
        ),
    ],
)
def test_exchange_inequivalence(cur: dict[str, Any], new: dict[str, Any], key: str, rest: str) -> None:
    assert exchange_redeclare(cur, new) == XPREFIX.format(key) + rest


def test_exchange_other_args_not_compared() -> None:
    assert exchange_redeclare({"args": {"x-foo": 1}}, {"args": {"x-foo": 2}}) is None


def test_new_exchange_alternate_exchange_type() -> None:
    validate_new_exchange("x", "/", T(alternate_exchange="ae"))
    with pytest.raises(errors.PreconditionFailed) as ei:
        validate_new_exchange("x", "/", T(alternate_exchange=1))
    assert ei.value.explanation == (
        "invalid type 'signedint' for arg 'alternate-exchange' in exchange 'x' in vhost '/'"
    )
