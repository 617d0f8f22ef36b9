"""Policies, operator policies and argument precedence, as ``rabbit_policy``, ``rabbit_policies`` and the queue types'
``process_args_policy`` / ``gather_policy_config`` combine them (conformance: tests/conformance/test_policies.py).

"live 3.10.8" means checked with rabbitmqctl / pika against the local RabbitMQ 3.10.8 on 2026-11-21.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from fakerabbit.broker.fields import Table, table_from_python
from fakerabbit.broker.policy import (
    Policy,
    PolicyError,
    QueueSettings,
    effective_alternate_exchange,
    effective_policy_definition,
    effective_settings,
    policy_value,
    select_policy,
    validate_policy,
)
from fakerabbit.broker.profile import Profile, get_profile

P310 = get_profile("3.10")
P312 = get_profile("3.12")
P313 = get_profile("3.13")
P40 = get_profile("4.0")
P43 = get_profile("4.3")


def pol(
    definition: dict[str, Any],
    *,
    name: str = "p",
    pattern: str = ".*",
    priority: int = 0,
    apply_to: str = "all",
    vhost: str = "/",
) -> Policy:
    return Policy(name, vhost, pattern, definition, priority, apply_to)


def T(**kw: Any) -> Table:
    return table_from_python({k.replace("_", "-"): v for k, v in kw.items()})


def refused(definition: dict[str, Any], **kw: Any) -> str:
    with pytest.raises(PolicyError) as ei:
        validate_policy(definition, **kw)
    return str(ei.value)


# ======================================================================================================
# validation (texts live 3.10.8) (RabbitMQ: rabbit_policies:validate_policy0; rabbit_amqqueue:check_expires_arg/2)


@pytest.mark.parametrize(
    ("definition", "text"),
    [
        ({"message-ttl": "abc"}, '<<"abc">> is not a valid message TTL'),
        ({"message-ttl": -1}, "-1 is not a valid message TTL"),
        ({"message-ttl": 1.5}, "1.5 is not a valid message TTL"),
        ({"message-ttl": 1e20}, "1.0e20 is not a valid message TTL"),
        ({"message-ttl": 0.1}, "0.1 is not a valid message TTL"),
        ({"message-ttl": None}, "null is not a valid message TTL"),
        ({"message-ttl": True}, "true is not a valid message TTL"),
        ({"message-ttl": [1, "a"]}, '[1,<<"a">>] is not a valid message TTL'),
        ({"message-ttl": {"a": 1}}, '#{<<"a">> => 1} is not a valid message TTL'),
        ({"message-ttl": "é"}, '<<"é">> is not a valid message TTL'),  # the UTF-8 bytes, shown by ~p
        ({"expires": 0}, "0 is not a valid queue expiry"),
        ({"max-length": -1}, "-1 is not a valid maximum length"),
        ({"max-length-bytes": "x"}, '<<"x">> is not a valid maximum length in bytes'),
        ({"max-in-memory-length": -1}, "-1 is not a valid maximum memory in bytes"),
        ({"overflow": "foo"}, '<<"foo">> is not a valid overflow value'),
        ({"overflow": 1}, "1 is not a valid overflow value"),
        ({"dead-letter-exchange": 1}, "1 is not a valid dead letter exchange name"),
        ({"dead-letter-routing-key": 1}, "1 is not a valid dead letter routing key"),
        ({"dead-letter-strategy": "x"}, '<<"x">> is not a valid dead letter strategy'),
        ({"delivery-limit": "x"}, '<<"x">> is not a valid delivery limit'),
        ({"delivery-limit": -1}, "-1 is not a valid delivery limit"),  # 3.x; allowed in 4.x
        ({"queue-mode": "x"}, '<<"x">> is not a valid queue-mode value'),
        ({"queue-version": 3}, "3 is not a valid queue-version value"),
        ({"alternate-exchange": 1}, "1 is not a valid alternate exchange name"),
        ({"queue-leader-locator": "x"}, '<<"x">> is not a valid queue leader locator value'),
        ({"queue-master-locator": "x"}, '<<"x">> invalid queue-master-locator value'),
        ({"initial-cluster-size": "x"}, '<<"x">> is not a valid cluster size'),
        ({"stream-max-segment-size-bytes": "x"}, '<<"x">> is not a valid segment size'),
        ({"ha-mode": "x"}, '<<"x">> is not a valid ha-mode value'),
        (
            {"ha-sync-batch-size": "x"},
            "ha-mode must be specified to specify ha-params, ha-sync-mode or ha-promote-on-shutdown",
        ),
        ({"foo": 1}, '[{<<"foo">>,1}] are not recognised policy settings'),
        ({"foo": 1, "bar": "x"}, '[{<<"bar">>,<<"x">>},{<<"foo">>,1}] are not recognised policy settings'),
        # no priority key (rabbit_policies:register/0)
        ({"max-priority": 5}, '[{<<"max-priority">>,5}] are not recognised policy settings'),
        (
            {"single-active-consumer": True},
            '[{<<"single-active-consumer">>,true}] are not recognised policy settings',
        ),
        ({"consumer-timeout": 1}, '[{<<"consumer-timeout">>,1}] are not recognised policy settings'),
        ({"target-group-size": 1}, '[{<<"target-group-size">>,1}] are not recognised policy settings'),
        # several bad keys: the first in key order; recognised keys before unknown ones
        ({"message-ttl": "abc", "expires": 0}, "0 is not a valid queue expiry"),
        ({"expires": 0, "message-ttl": "abc"}, "0 is not a valid queue expiry"),
        ({"foo": 1, "message-ttl": -1}, "-1 is not a valid message TTL"),
        ({}, "no policy provided"),
    ],
)
def test_policy_validation(definition: dict[str, Any], text: str) -> None:
    assert refused(definition, profile=P310) == text


@pytest.mark.parametrize(
    "definition",
    [
        {"message-ttl": 0},
        {"message-ttl": 315360000001},  # no upper bound (RabbitMQ: rabbit_policies:validate_policy0; live 3.10.8)
        {"expires": 1},
        {"max-length": 0},
        {"dead-letter-exchange": "dlx", "dead-letter-routing-key": "rk"},
        {"dead-letter-strategy": "at-least-once"},
        {"overflow": "reject-publish-dlx"},
        {"queue-mode": "lazy"},
        {"queue-version": 1},
        {"alternate-exchange": "é"},
        {"ha-mode": "all"},
        {"delivery-limit": 0},
    ],
)
def test_policy_validation_accepts(definition: dict[str, Any]) -> None:
    validate_policy(definition, profile=P310)


def test_policy_validation_by_version() -> None:
    # 4.x accepts a negative delivery-limit ("not an int" is the only error)
    # (RabbitMQ: rabbit_quorum_queue:resolve_delivery_limit/2)
    validate_policy({"delivery-limit": -1}, profile=P40)
    assert refused({"delivery-limit": "x"}, profile=P40) == '<<"x">> is not a valid delivery limit'
    # mirroring keys are gone in 4.x
    assert refused({"ha-mode": "all"}, profile=P40) == '[{<<"ha-mode">>,<<"all">>}] are not recognised policy settings'
    validate_policy({"ha-mode": "all"}, profile=P313)
    # target-group-size is a 4.x key
    validate_policy({"target-group-size": 3}, profile=P40)
    assert refused({"target-group-size": 0}, profile=P40) == "0 is not a valid qq target count value"


def test_operator_policy_keys() -> None:
    # live 3.10.8: operator policies recognise only their keys
    # (RabbitMQ: unit_operator_policy_SUITE:merge_operator_policy_definitions)
    validate_policy(
        {
            "delivery-limit": 5,
            "max-in-memory-length": 5,
            "max-in-memory-bytes": 5,
            "max-length": 1,
            "max-length-bytes": 1,
            "message-ttl": 1,
            "expires": 1,
        },
        operator=True,
        profile=P310,
    )
    assert (
        refused({"dead-letter-exchange": "x"}, operator=True, profile=P310)
        == '[{<<"dead-letter-exchange">>,<<"x">>}] are not recognised policy settings'
    )
    assert (
        refused({"expires": 1, "dead-letter-exchange": "x", "max-priority": 1}, operator=True, profile=P310)
        == '[{<<"dead-letter-exchange">>,<<"x">>},{<<"max-priority">>,1}] are not recognised policy settings'
    )
    assert refused({"message-ttl": -1}, operator=True, profile=P310) == "-1 is not a valid message TTL"
    # overflow and queue-version: 3.13+
    assert (
        refused({"overflow": "drop-head"}, operator=True, profile=P312)
        == '[{<<"overflow">>,<<"drop-head">>}] are not recognised policy settings'
    )
    assert (
        refused({"queue-version": 2}, operator=True, profile=P310)
        == '[{<<"queue-version">>,2}] are not recognised policy settings'
    )
    validate_policy({"overflow": "drop-head", "queue-version": 2}, operator=True, profile=P313)


def test_apply_to_validation() -> None:
    # live 3.10.8
    assert refused({"message-ttl": 1}, apply_to="foo", profile=P310) == (
        "apply-to 'foo' unrecognised; should be 'queues', 'exchanges' or 'all'"
    )
    assert refused({"message-ttl": 1}, apply_to="classic_queues", profile=P310).startswith("apply-to")
    # 3.12+: rabbit_policy:apply_to_validation/2's text (read in the source), double space included
    assert refused({"message-ttl": 1}, apply_to="foo", profile=P312) == (
        "apply-to 'foo' unrecognised; should be one of: 'queues', 'classic_queues',  'quorum_queues', "
        "'streams', 'exchanges', or 'all'"
    )
    for a in ("queues", "classic_queues", "quorum_queues", "streams", "exchanges", "all"):
        validate_policy({"message-ttl": 1}, apply_to=a, profile=P312)
    # apply-to is checked before the definition
    assert refused({}, apply_to="foo", profile=P310).startswith("apply-to 'foo'")


def test_pattern_validation() -> None:
    assert refused({"message-ttl": 1}, pattern="(", profile=P310).startswith(
        "pattern should be regular expression but is invalid: "
    )
    validate_policy({"message-ttl": 1}, pattern="^a.*$", profile=P310)


def test_default_profile_is_newest() -> None:
    validate_policy({"delivery-limit": -1})


# ======================================================================================================
# matching (RabbitMQ: rabbit_policy:match_all/3; rabbit_queue_type:is_policy_applicable/2)


def test_pattern_is_unanchored() -> None:
    p = pol({"message-ttl": 1}, pattern="ord")
    assert select_policy([p], "orders") is p
    assert select_policy([p], "new-orders") is p
    anchored = pol({"message-ttl": 1}, pattern="^ord$")
    assert select_policy([anchored], "orders") is None
    assert select_policy([anchored], "ord") is anchored


def test_highest_priority_wins_and_definitions_are_not_merged() -> None:
    low = pol({"message-ttl": 1, "max-length": 5}, name="low", priority=1)
    high = pol({"message-ttl": 2}, name="high", priority=5)
    assert select_policy([low, high], "q") is high
    assert select_policy([high, low], "q") is high
    s = effective_settings("classic", {}, select_policy([low, high], "q"), None, P310)
    assert s.message_ttl == 2 and s.max_length is None


def test_equal_priority_first_wins() -> None:
    a, b = pol({"message-ttl": 1}, name="a"), pol({"message-ttl": 2}, name="b")
    assert select_policy([a, b], "q") is a


def test_apply_to_matching() -> None:
    queues = pol({"message-ttl": 1}, apply_to="queues")
    exchanges = pol({"alternate-exchange": "ae"}, apply_to="exchanges")
    everything = pol({"message-ttl": 1}, apply_to="all")
    classic = pol({"message-ttl": 1}, apply_to="classic_queues")
    quorum = pol({"message-ttl": 1}, apply_to="quorum_queues")
    streams = pol({"message-ttl": 1}, apply_to="streams")
    assert select_policy([queues], "q", "classic") is queues
    assert select_policy([exchanges], "q", "classic") is None
    assert select_policy([exchanges], "x", kind="exchange") is exchanges
    assert select_policy([queues], "x", kind="exchange") is None
    assert select_policy([everything], "x", kind="exchange") is everything
    assert select_policy([classic], "q", "classic") is classic
    assert select_policy([classic], "q", "quorum") is None
    assert select_policy([quorum], "q", "quorum") is quorum
    assert select_policy([quorum], "q", "classic") is None
    assert select_policy([streams], "q", "classic") is None


def test_vhost_filter() -> None:
    other = pol({"message-ttl": 1}, vhost="other")
    assert select_policy([other], "q", vhost="/") is None
    assert select_policy([other], "q", vhost="other") is other


def test_invalid_pattern_matches_nothing() -> None:
    assert select_policy([pol({"message-ttl": 1}, pattern="(")], "q") is None


def test_unsupported_key_skips_the_policy() -> None:
    # rabbit_queue_type:is_policy_applicable/2, live 3.10.8: {dlx, delivery-limit} (priority 5) skips the classic queue,
    # which gets the priority-1 policy instead; the quorum queue gets the priority-5 one.
    high = pol({"dead-letter-exchange": "dlx", "delivery-limit": 5}, name="ptest", priority=5, apply_to="queues")
    low = pol({"message-ttl": 100}, name="ptest2", priority=1, apply_to="queues")
    assert select_policy([high, low], "probe_pol_c", "classic", profile=P310) is low
    assert select_policy([high, low], "probe_pol_q", "quorum", profile=P310) is high
    # and the same rule for operator policies (live 3.10.8)
    op = pol({"message-ttl": 50, "max-length": 3, "delivery-limit": 2}, name="otest")
    assert select_policy([op], "probe_pol_c", "classic", profile=P310) is None
    assert select_policy([op], "probe_pol_q", "quorum", profile=P310) is op
    # quorum queues skip classic-only keys
    prio = pol({"max-priority": 5})
    assert select_policy([prio], "q", "quorum") is None
    mode = pol({"queue-mode": "lazy"})
    assert select_policy([mode], "q", "quorum") is None
    assert select_policy([mode], "q", "classic") is mode
    # exchanges are not filtered by queue-type support
    both = pol({"dead-letter-exchange": "dlx", "delivery-limit": 5, "alternate-exchange": "ae"})
    assert select_policy([both], "x", kind="exchange") is both


# ======================================================================================================
# user + operator policy (RabbitMQ: unit_operator_policy_SUITE:merge_operator_policy_definitions)


def test_effective_policy_definition() -> None:
    # live 3.10.8: ptest {dlx, delivery-limit 5} + otest {message-ttl 50, max-length 3, delivery-limit 2}
    user = pol({"dead-letter-exchange": "dlx", "delivery-limit": 5})
    op = pol({"message-ttl": 50, "max-length": 3, "delivery-limit": 2})
    merged = effective_policy_definition(user, op, P310)
    assert merged == {"dead-letter-exchange": "dlx", "delivery-limit": 2, "max-length": 3, "message-ttl": 50}
    assert list(merged) == sorted(merged)
    # live 3.10.8: {message-ttl 100} + {message-ttl 50, max-length 3}
    assert effective_policy_definition(pol({"message-ttl": 100}), pol({"message-ttl": 50, "max-length": 3}), P310) == {
        "max-length": 3,
        "message-ttl": 50,
    }
    assert effective_policy_definition(None, None, P310) == {}


@pytest.mark.parametrize(
    ("key", "user", "op", "profile", "expected"),
    [
        ("message-ttl", 100, 50, P310, 50),
        ("message-ttl", 10, 50, P310, 10),
        ("expires", 1000, 2000, P40, 1000),
        ("max-length", 5, 3, P40, 3),
        ("max-length-bytes", 5, 30, P40, 5),
        ("max-in-memory-length", 5, 3, P40, 3),
        ("delivery-limit", 5, 2, P313, 2),
        ("delivery-limit", -1, 5, P40, 5),  # max when either is negative (4.x)
        ("delivery-limit", 5, -1, P40, 5),
        ("delivery-limit", -1, -5, P40, -1),
        ("overflow", "drop-head", "reject-publish", P313, "reject-publish"),  # operator wins
        ("overflow", "reject-publish", "drop-head", P313, "drop-head"),
        ("queue-version", 1, 2, P313, 2),
    ],
)
def test_merge(key: str, user: Any, op: Any, profile: Profile, expected: Any) -> None:
    assert policy_value(key, pol({key: user}), pol({key: op}), profile) == expected


def test_one_sided_keys_are_kept() -> None:
    assert policy_value("message-ttl", pol({"message-ttl": 5}), None, P40) == 5
    assert policy_value("message-ttl", None, pol({"message-ttl": 6}), P40) == 6
    assert policy_value("message-ttl", None, None, P40) is None


# ======================================================================================================
# arguments + effective policy (RabbitMQ: rabbit_amqqueue_process:process_args_policy)


def test_defaults() -> None:
    s = effective_settings("classic", {}, None, None, P40)
    assert s == QueueSettings()
    assert s.overflow == "drop-head" and s.delivery_limit is None and not s.single_active_consumer


def test_ttl_expires_lengths_take_the_minimum() -> None:
    # RabbitMQ: rabbit_amqqueue_process:process_args_policy; rabbit_amqqueue:check_expires_arg/2;
    # rabbit_quorum_queue:gather_policy_config
    args = T(x_message_ttl=100, x_expires=1000, x_max_length=10, x_max_length_bytes=500)
    for qt in ("classic", "quorum"):
        s = effective_settings(qt, args, pol({"message-ttl": 50, "expires": 5000, "max-length": 20}), None, P40)
        assert (s.message_ttl, s.expires, s.max_length, s.max_length_bytes) == (50, 1000, 10, 500)
    # user and operator policy min'd first, then min'd with the argument
    # (RabbitMQ: rabbit_amqqueue_process:process_args_policy)
    s = effective_settings("classic", T(x_message_ttl=30), pol({"message-ttl": 100}), pol({"message-ttl": 50}), P40)
    assert s.message_ttl == 30
    s = effective_settings("classic", T(x_message_ttl=300), pol({"message-ttl": 100}), pol({"message-ttl": 50}), P40)
    assert s.message_ttl == 50
    # only one side set: that value
    assert effective_settings("classic", T(x_message_ttl=7), None, None, P40).message_ttl == 7
    assert effective_settings("classic", {}, pol({"expires": 9}), None, P40).expires == 9


def test_dead_letter_settings_argument_wins_per_key() -> None:
    # RabbitMQ: rabbit_amqqueue_process:process_args_policy
    p = pol({"dead-letter-exchange": "pdlx", "dead-letter-routing-key": "prk"})
    for qt in ("classic", "quorum"):
        s = effective_settings(qt, T(x_dead_letter_exchange=""), p, None, P40)
        assert (s.dead_letter_exchange, s.dead_letter_routing_key) == ("", "prk")
        s = effective_settings(qt, T(x_dead_letter_exchange="a", x_dead_letter_routing_key="b"), p, None, P40)
        assert (s.dead_letter_exchange, s.dead_letter_routing_key) == ("a", "b")
        s = effective_settings(qt, {}, p, None, P40)
        assert (s.dead_letter_exchange, s.dead_letter_routing_key) == ("pdlx", "prk")


def test_overflow_precedence() -> None:
    # classic -> argument wins (even over an operator policy); quorum -> policy wins
    # (RabbitMQ: rabbit_quorum_queue:gather_policy_config)
    args = T(x_overflow="reject-publish")
    user = pol({"overflow": "drop-head"})
    assert effective_settings("classic", args, user, None, P313).overflow == "reject-publish"
    assert effective_settings("classic", args, None, user, P313).overflow == "reject-publish"
    assert effective_settings("quorum", args, user, None, P313).overflow == "drop-head"
    assert effective_settings(
        "quorum", T(x_overflow="drop-head"), pol({"overflow": "reject-publish"}), None, P313
    ).overflow == ("reject-publish")
    # operator overflow beats the user policy's
    s = effective_settings("quorum", {}, pol({"overflow": "drop-head"}), pol({"overflow": "reject-publish"}), P313)
    assert s.overflow == "reject-publish"
    # quorum runs reject-publish-dlx as drop-head; classic keeps it (RabbitMQ: rabbit_quorum_queue:overflow/3)
    assert effective_settings("quorum", T(x_overflow="reject-publish-dlx"), None, None, P40).overflow == "drop-head"
    assert effective_settings("classic", T(x_overflow="reject-publish-dlx"), None, None, P40).overflow == (
        "reject-publish-dlx"
    )


def test_delivery_limit() -> None:
    # default 20 in 4.x, none before (RabbitMQ: quorum_queue_SUITE:delivery_limit_policy_update)
    assert effective_settings("quorum", {}, None, None, P40).delivery_limit == 20
    assert effective_settings("quorum", {}, None, None, P43).delivery_limit == 20
    assert effective_settings("quorum", {}, None, None, P313).delivery_limit is None
    # classic queues never have one (and a delivery-limit policy would not even match them)
    assert effective_settings("classic", T(x_delivery_limit=3), None, None, P40).delivery_limit is None
    # min of argument and policy, max if either is negative; negative = unlimited (4.x)
    # (RabbitMQ: rabbit_quorum_queue:resolve_delivery_limit/2)
    assert (
        effective_settings("quorum", T(x_delivery_limit=3), pol({"delivery-limit": 5}), None, P40).delivery_limit == 3
    )
    assert (
        effective_settings("quorum", T(x_delivery_limit=-1), pol({"delivery-limit": 5}), None, P40).delivery_limit == 5
    )
    assert effective_settings("quorum", T(x_delivery_limit=-1), None, None, P40).delivery_limit is None
    assert effective_settings("quorum", {}, pol({"delivery-limit": -1}), None, P40).delivery_limit is None
    assert effective_settings("quorum", T(x_delivery_limit=0), None, None, P40).delivery_limit == 0
    # 3.x: plain min; a negative argument stays (the first return already exceeds it)
    assert (
        effective_settings("quorum", T(x_delivery_limit=-1), pol({"delivery-limit": 5}), None, P313).delivery_limit
        == -1
    )
    assert effective_settings("quorum", T(x_delivery_limit=4), None, None, P313).delivery_limit == 4
    # user + operator + argument
    s = effective_settings("quorum", T(x_delivery_limit=9), pol({"delivery-limit": 5}), pol({"delivery-limit": 7}), P40)
    assert s.delivery_limit == 5
    # a non-numeric argument (it has no validator) never limits, and loses to a policy value
    assert effective_settings("quorum", T(x_delivery_limit="5"), None, None, P40).delivery_limit is None
    assert (
        effective_settings("quorum", T(x_delivery_limit="5"), pol({"delivery-limit": 8}), None, P40).delivery_limit == 8
    )


def test_dead_letter_strategy() -> None:
    # at-least-once only with a DLX and effective overflow reject-publish; argument wins over policy
    # (RabbitMQ: rabbit_quorum_queue:dlh/5)
    ok = T(x_dead_letter_exchange="dlx", x_dead_letter_strategy="at-least-once", x_overflow="reject-publish")
    assert effective_settings("quorum", ok, None, None, P40).dead_letter_strategy == "at-least-once"
    drop_head = T(x_dead_letter_exchange="dlx", x_dead_letter_strategy="at-least-once")
    assert effective_settings("quorum", drop_head, None, None, P40).dead_letter_strategy == "at-most-once"
    no_dlx = T(x_dead_letter_strategy="at-least-once", x_overflow="reject-publish")
    s = effective_settings("quorum", no_dlx, None, None, P40)
    assert s.dead_letter_strategy == "at-most-once" and s.dead_letter_exchange is None
    via_policy = pol(
        {"dead-letter-exchange": "dlx", "dead-letter-strategy": "at-least-once", "overflow": "reject-publish"}
    )
    assert effective_settings("quorum", {}, via_policy, None, P40).dead_letter_strategy == "at-least-once"
    arg_wins = T(x_dead_letter_strategy="at-most-once")
    assert effective_settings("quorum", arg_wins, via_policy, None, P40).dead_letter_strategy == "at-most-once"
    assert effective_settings("classic", ok, None, None, P40).dead_letter_strategy == "at-most-once"


def test_priority_and_single_active_consumer() -> None:
    assert effective_settings("classic", T(x_max_priority=5), None, None, P40).max_priority == 5
    assert effective_settings("quorum", T(x_max_priority=5), None, None, P40).max_priority is None
    assert effective_settings("classic", T(x_single_active_consumer=True), None, None, P40).single_active_consumer
    assert effective_settings("quorum", T(x_single_active_consumer=True), None, None, P40).single_active_consumer
    assert not effective_settings("classic", T(x_single_active_consumer=False), None, None, P40).single_active_consumer


def test_settings_carry_the_merged_definition_but_compare_without_it() -> None:
    s = effective_settings("classic", {}, pol({"alternate-exchange": "ae"}), None, P40)
    assert s.policy_definition == {"alternate-exchange": "ae"}
    assert s == QueueSettings()
    assert dataclasses.replace(s, message_ttl=1) != s


def test_alternate_exchange() -> None:
    p = pol({"alternate-exchange": "pae"})
    assert effective_alternate_exchange(T(alternate_exchange="aae"), p) == "aae"  # argument wins
    assert effective_alternate_exchange({}, p) == "pae"
    assert effective_alternate_exchange({}, None) is None
    assert effective_alternate_exchange({}, pol({"message-ttl": 1})) is None
