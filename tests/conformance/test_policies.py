"""Policies and dead-lettering: matching, precedence against arguments, live changes (``rabbit_policy``,
``dead_lettering_SUITE:dead_letter_policy`` and its override/ignore cases, Java ``Policies``).

On the real broker every policy pattern is anchored to the test's unique prefix (the broker is shared).
"""

from __future__ import annotations

import json
import re

import pika
import pytest

from fakerabbit.broker.policy import PolicyError
from tests.conformance.conftest import Target
from tests.conformance.dlhelpers import (
    QUEUE_TYPES,
    anchored,
    declare,
    drain,
    get,
    pub,
    quiet,
    ready,
    setup,
    wait_ready,
)
from tests.conformance.versions import for_versions
from tests.realbrokers import PolicyRefused, validation_message


def _dead_letter_one(broker: Target, ch, q: str) -> None:
    """Publish one message to ``q``, get it and reject it without requeue."""
    pub(ch, q, "m")
    method, _, _ = get(ch, q)
    ch.basic_reject(method.delivery_tag, requeue=False)


def _dlx_with_queue(broker: Target, ch, base: str, key: str | None = None) -> tuple[str, str]:
    """A direct exchange and a queue bound to it with ``key`` (default: the queue's name)."""
    x, q = broker.exchange(base + "-x"), broker.name(base)
    ch.exchange_declare(x, "direct")
    declare(ch, q)
    ch.queue_bind(q, x, routing_key=key if key is not None else q)
    return x, q


# ---------------------------------------------------------------------------------------------------------
# dead_lettering_SUITE:dead_letter_policy, dead_letter_override_policy, dead_letter_ignore_policy


@pytest.mark.parametrize("qtype", QUEUE_TYPES)
def test_q23_dead_letter_policy(broker: Target, ch, qtype: str) -> None:
    """A DLX policy set while a message is unacked applies when it is nacked (RabbitMQ:
    ``dead_lettering_SUITE:dead_letter_policy``)."""
    dlx, dlq = _dlx_with_queue(broker, ch, "dlq")
    q = broker.name("q")
    declare(ch, q, qtype)
    pub(ch, q, "m1")
    pub(ch, q, "m2")
    m1, _, _ = get(ch, q)
    m2, _, _ = get(ch, q)
    ch.basic_nack(m1.delivery_tag, requeue=False)
    quiet(broker)
    assert ready(ch, dlq) == 0
    broker.set_policy(broker.name("pol"), anchored(q), {"dead-letter-exchange": dlx, "dead-letter-routing-key": dlq})
    ch.basic_nack(m2.delivery_tag, requeue=False)
    wait_ready(broker, ch, dlq, 1)
    assert drain(ch, dlq) == [b"m2"]
    assert ready(ch, q) == 0


@pytest.mark.parametrize("qtype", QUEUE_TYPES)
def test_q24_dead_letter_override_policy(broker: Target, ch, qtype: str) -> None:
    """A policy set before the queue exists loses to the queue's DLX arguments (RabbitMQ:
    ``dead_lettering_SUITE:dead_letter_override_policy``; ``rabbit_amqqueue_process:process_args_policy``)."""
    q_name = broker.name("q")
    broker.set_policy(
        broker.name("pol"), anchored(q_name), {"dead-letter-exchange": "", "dead-letter-routing-key": q_name}
    )
    q, dlq, _ = setup(broker, ch, qtype)
    assert q == q_name
    _dead_letter_one(broker, ch, q)
    wait_ready(broker, ch, dlq, 1)
    assert ready(ch, q) == 0


@pytest.mark.parametrize("qtype", QUEUE_TYPES)
def test_q25_dead_letter_ignore_policy(broker: Target, ch, qtype: str) -> None:
    """A policy set after the queue also loses to its arguments (RabbitMQ:
    ``dead_lettering_SUITE:dead_letter_ignore_policy``; ``rabbit_amqqueue_process:process_args_policy``)."""
    q, dlq, _ = setup(broker, ch, qtype)
    broker.set_policy(broker.name("pol"), anchored(q), {"dead-letter-exchange": "", "dead-letter-routing-key": q})
    _dead_letter_one(broker, ch, q)
    wait_ready(broker, ch, dlq, 1)
    assert ready(ch, q) == 0


def test_dr7_argument_dlx_with_policy_dlrk(broker: Target, ch) -> None:
    """Resolved key by key: the argument DLX and the policy DLRK are both used (RabbitMQ:
    ``rabbit_amqqueue_process:process_args_policy``)."""
    dlx, dlq = _dlx_with_queue(broker, ch, "dlq", key="from-policy")
    q = broker.name("q")
    declare(ch, q, x_dead_letter_exchange=dlx)
    broker.set_policy(broker.name("pol"), anchored(q), {"dead-letter-routing-key": "from-policy"})
    _dead_letter_one(broker, ch, q)
    wait_ready(broker, ch, dlq, 1)
    method, _, _ = get(ch, dlq)
    assert (method.exchange, method.routing_key) == (dlx, "from-policy")


def test_dr7_policy_dlx_with_argument_dlrk_is_a_declare_error(broker: Target, ch) -> None:
    """An argument DLRK needs an argument DLX, even when a policy provides the DLX (RabbitMQ:
    ``rabbit_amqqueue_process:process_args_policy``; ``rabbit_amqqueue:check_dlxrk_arg/2``)."""
    q = broker.name("q")
    broker.set_policy(broker.name("pol"), anchored(q), {"dead-letter-exchange": ""})
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as e:
        ch.queue_declare(q, arguments={"x-dead-letter-routing-key": "k"})
    assert e.value.reply_code == 406
    assert e.value.reply_text == (
        f"PRECONDITION_FAILED - invalid arg 'x-dead-letter-routing-key' for queue '{q}' in vhost '/': "
        "routing_key_but_no_dlx_defined"
    )


def test_java_policies_dead_letter_exchange(broker: Target, ch) -> None:
    """Java ``Policies.deadLetterExchange``: a policy DLX with DLRK "rk" delivers with routing key "rk"."""
    dlx, dlq = _dlx_with_queue(broker, ch, "dlq", key="rk")
    q = broker.name("q")
    declare(ch, q)
    broker.set_policy(broker.name("pol"), anchored(q), {"dead-letter-exchange": dlx, "dead-letter-routing-key": "rk"})
    _dead_letter_one(broker, ch, q)
    wait_ready(broker, ch, dlq, 1)
    method, props, _ = get(ch, dlq)
    assert (method.exchange, method.routing_key) == (dlx, "rk")
    assert props.headers["x-death"][0]["queue"] == q


def test_java_policies_dead_letter_exchange_args(broker: Target, ch) -> None:
    """Java ``Policies.deadLetterExchangeArgs``: argument DLX and DLRK win over the policy's."""
    arg_x, arg_q = _dlx_with_queue(broker, ch, "arg", key="arg-rk")
    pol_x, pol_q = _dlx_with_queue(broker, ch, "pol", key="pol-rk")
    q = broker.name("q")
    declare(ch, q, x_dead_letter_exchange=arg_x, x_dead_letter_routing_key="arg-rk")
    broker.set_policy(
        broker.name("pol"), anchored(q), {"dead-letter-exchange": pol_x, "dead-letter-routing-key": "pol-rk"}
    )
    _dead_letter_one(broker, ch, q)
    wait_ready(broker, ch, arg_q, 1)
    assert ready(ch, pol_q) == 0


def test_pol5_changing_and_clearing_a_dlx_policy(broker: Target, ch) -> None:
    """A changed policy applies to the next dead-lettering; a cleared one turns it off again (RabbitMQ:
    ``dead_lettering_SUITE:dead_letter_policy``)."""
    x1, d1 = _dlx_with_queue(broker, ch, "d1")
    x2, d2 = _dlx_with_queue(broker, ch, "d2")
    q = broker.name("q")
    declare(ch, q)
    pol = broker.name("pol")
    for b in ("a", "b", "c"):
        pub(ch, q, b)
    tags = [get(ch, q)[0].delivery_tag for _ in range(3)]
    broker.set_policy(pol, anchored(q), {"dead-letter-exchange": x1, "dead-letter-routing-key": d1})
    ch.basic_nack(tags[0], requeue=False)
    broker.set_policy(pol, anchored(q), {"dead-letter-exchange": x2, "dead-letter-routing-key": d2})
    ch.basic_nack(tags[1], requeue=False)
    broker.clear_policy(pol)
    ch.basic_nack(tags[2], requeue=False)
    wait_ready(broker, ch, d1, 1)
    wait_ready(broker, ch, d2, 1)
    assert drain(ch, d1) == [b"a"] and drain(ch, d2) == [b"b"]
    assert ready(ch, q) == 0


def test_pol5_lowering_max_length_dead_letters_from_the_head_at_once(broker: Target, ch) -> None:
    """A ``max-length`` policy on a full queue drops (dead-letters, reason maxlen) the oldest at once (RabbitMQ:
    ``dead_lettering_SUITE:dead_letter_policy``)."""
    q, dlq, _ = setup(broker, ch)
    for b in ("1", "2", "3"):
        pub(ch, q, b)
    wait_ready(broker, ch, q, 3)
    broker.set_policy(broker.name("pol"), anchored(q), {"max-length": 1})
    wait_ready(broker, ch, dlq, 2)
    reasons = []
    for _ in range(2):
        _, props, body = get(ch, dlq)
        reasons.append((body, props.headers["x-death"][0]["reason"]))
    assert reasons == [(b"1", "maxlen"), (b"2", "maxlen")]
    assert drain(ch, q) == [b"3"]


# ---------------------------------------------------------------------------------------------------------
# which policy applies (RabbitMQ: rabbit_policy:match_all/3; rabbit_queue_type:is_policy_applicable/2)


def test_pol1_pattern_is_unanchored_at_the_end(broker: Target, ch) -> None:
    """The pattern is a regex searched in the name (here anchored only at the start) (RabbitMQ:
    ``rabbit_policy:match_all/3``)."""
    dlx, dlq = _dlx_with_queue(broker, ch, "dlq", key="k")
    q = broker.name("orders-work-1")
    declare(ch, q)
    prefix = q[: q.index("orders")]
    broker.set_policy(
        broker.name("pol"),
        "^" + re.escape(prefix) + "orders",
        {"dead-letter-exchange": dlx, "dead-letter-routing-key": "k"},
    )
    _dead_letter_one(broker, ch, q)
    wait_ready(broker, ch, dlq, 1)


def test_pol1_highest_priority_wins_and_definitions_are_not_merged(broker: Target, ch) -> None:
    """Only the highest-priority policy applies; its DLRK without a DLX does nothing, although a lower-priority policy
    names a DLX (RabbitMQ: ``rabbit_policy:match_all/3``; ``rabbit_amqqueue_process:with_dlx/3``)."""
    dlx, dlq = _dlx_with_queue(broker, ch, "dlq", key="k")
    q = broker.name("q")
    declare(ch, q)
    broker.set_policy(broker.name("low"), anchored(q), {"dead-letter-exchange": dlx}, priority=1)
    broker.set_policy(broker.name("high"), anchored(q), {"dead-letter-routing-key": "k"}, priority=2)
    _dead_letter_one(broker, ch, q)
    quiet(broker)
    assert ready(ch, dlq) == 0 and ready(ch, q) == 0


def test_pol1_exchange_policies_do_not_apply_to_queues(broker: Target, ch) -> None:
    """``apply-to: exchanges`` never gives a queue a DLX (RabbitMQ: ``rabbit_policy:match_all/3``)."""
    dlx, dlq = _dlx_with_queue(broker, ch, "dlq", key="k")
    q = broker.name("q")
    declare(ch, q)
    broker.set_policy(
        broker.name("pol"),
        anchored(q),
        {"dead-letter-exchange": dlx, "dead-letter-routing-key": "k"},
        apply_to="exchanges",
    )
    _dead_letter_one(broker, ch, q)
    quiet(broker)
    assert ready(ch, dlq) == 0


@pytest.mark.parametrize("qtype", QUEUE_TYPES)
def test_pol2_policy_with_unsupported_key_is_skipped(broker: Target, ch, qtype: str) -> None:
    """``delivery-limit`` is unsupported on classic queues, so the whole policy (DLX included) skips them and the
    lower-priority policy applies; quorum queues take the higher one (RabbitMQ:
    ``rabbit_queue_type:is_policy_applicable/2``)."""
    x_hi, d_hi = _dlx_with_queue(broker, ch, "hi", key="k")
    x_lo, d_lo = _dlx_with_queue(broker, ch, "lo", key="k")
    q = broker.name("q")
    declare(ch, q, qtype)
    broker.set_policy(
        broker.name("lo"), anchored(q), {"dead-letter-exchange": x_lo, "dead-letter-routing-key": "k"}, priority=1
    )
    broker.set_policy(
        broker.name("hi"),
        anchored(q),
        {"dead-letter-exchange": x_hi, "dead-letter-routing-key": "k", "delivery-limit": 5},
        priority=2,
    )
    _dead_letter_one(broker, ch, q)
    target = d_hi if qtype == "quorum" else d_lo
    other = d_lo if qtype == "quorum" else d_hi
    wait_ready(broker, ch, target, 1)
    assert ready(ch, other) == 0


# ---------------------------------------------------------------------------------------------------------
# combining values
# (RabbitMQ: unit_operator_policy_SUITE:merge_operator_policy_definitions; rabbit_amqqueue_process:process_args_policy)


def test_pol3_operator_policy_ttl_combines_with_min(broker: Target, ch) -> None:
    """A user policy TTL 60 s and an operator policy TTL 20 ms give 20 ms; the message dies ``expired`` into the user
    policy's DLX (RabbitMQ: ``unit_operator_policy_SUITE:merge_operator_policy_definitions``;
    ``rabbit_amqqueue_process:process_args_policy``)."""
    dlx, dlq = _dlx_with_queue(broker, ch, "dlq", key="k")
    q = broker.name("q")
    declare(ch, q)
    broker.set_policy(
        broker.name("pol"),
        anchored(q),
        {"message-ttl": 60_000, "dead-letter-exchange": dlx, "dead-letter-routing-key": "k"},
    )
    broker.set_policy(broker.name("op"), anchored(q), {"message-ttl": 20}, operator=True)
    pub(ch, q, "m")
    broker.advance(0.1)
    wait_ready(broker, ch, dlq, 1)
    _, props, _ = get(ch, dlq)
    assert props.headers["x-death"][0]["reason"] == "expired"


def test_java_policies_ttl_args(broker: Target, ch) -> None:
    """Java ``Policies.tTLArgs``: policy TTL 30 ms vs argument 300 ms: 30 ms applies; after clearing
    the policy the argument's 300 ms is back."""
    q, dlq, _ = setup(broker, ch, extra={"x-message-ttl": 300})
    pol = broker.name("pol")
    broker.set_policy(pol, anchored(q), {"message-ttl": 30})
    pub(ch, q, "short")
    broker.advance(0.1)
    wait_ready(broker, ch, dlq, 1)
    broker.clear_policy(pol)
    pub(ch, q, "long")
    broker.advance(0.1)
    quiet(broker)
    assert ready(ch, q) == 1
    broker.advance(0.3)
    wait_ready(broker, ch, dlq, 2)
    assert drain(ch, dlq) == [b"short", b"long"]


def test_java_policies_max_length_args(broker: Target, ch) -> None:
    """Java ``Policies.maxLengthArgs``: policy max-length 1 vs argument 2: the limit is 1."""
    q, dlq, _ = setup(broker, ch, extra={"x-max-length": 2})
    broker.set_policy(broker.name("pol"), anchored(q), {"max-length": 1})
    for b in ("1", "2", "3"):
        pub(ch, q, b)
    wait_ready(broker, ch, dlq, 2)
    assert drain(ch, q) == [b"3"]


def test_pol4_policy_dlx_alone_and_argument_dlrk_absent(broker: Target, ch) -> None:
    """A policy DLX without any DLRK dead-letters with the message's own routing key (RabbitMQ:
    ``rabbit_amqqueue_process:process_args_policy``)."""
    dlx, dlq = _dlx_with_queue(broker, ch, "dlq", key="orig-key")
    src = broker.exchange("src")
    ch.exchange_declare(src, "direct")
    q = broker.name("q")
    declare(ch, q)
    ch.queue_bind(q, src, routing_key="orig-key")
    broker.set_policy(broker.name("pol"), anchored(q), {"dead-letter-exchange": dlx})
    ch.basic_publish(src, "orig-key", b"m")
    method, _, _ = get(ch, q)
    ch.basic_reject(method.delivery_tag, requeue=False)
    wait_ready(broker, ch, dlq, 1)
    method, _, _ = get(ch, dlq)
    assert (method.exchange, method.routing_key) == (dlx, "orig-key")


# ---------------------------------------------------------------------------------------------------------
# validation (RabbitMQ: rabbit_policies:validate_policy0; rabbit_policies:register/0)


def _policy_error(broker: Target, definition: dict[str, object]) -> str:
    """The validation message for a refused policy (rabbitmqctl's on the real broker)."""
    name = broker.name("bad")
    pattern = anchored(name)
    if broker.fake is not None:
        with pytest.raises(PolicyError) as e:
            broker.fake.set_policy(name, pattern, dict(definition))
        return str(e.value)
    assert broker.real is not None
    out = broker.real.ctl("-q", "set_policy", name, pattern, json.dumps(definition), "--apply-to", "queues")
    assert out.returncode != 0
    return validation_message(out.stderr)


@pytest.mark.parametrize(
    ("definition", "message"),
    [
        ({"dead-letter-exchange": 1}, "1 is not a valid dead letter exchange name"),
        ({"dead-letter-routing-key": 2}, "2 is not a valid dead letter routing key"),
        ({"message-ttl": -1}, "-1 is not a valid message TTL"),
        ({"max-length": "x"}, '<<"x">> is not a valid maximum length'),
        ({"priority": 5}, '[{<<"priority">>,5}] are not recognised policy settings'),
    ],
)
def test_pol6_pol7_policy_validation(broker: Target, definition: dict[str, object], message: str) -> None:
    """Invalid values are refused with RabbitMQ's text; ``priority`` is not a policy key (RabbitMQ:
    ``rabbit_policies:validate_policy0``; ``rabbit_policies:register/0``)."""
    assert _policy_error(broker, definition) == message


def _policy_accepted_or_error(broker: Target, definition: dict[str, object], operator: bool = False) -> str | None:
    """None when the (operator) policy is accepted (and then cleared), else the validation message.

    The real broker is asked through its management API, whose 400 ``reason`` carries the very text rabbitmqctl
    prints (both call ``rabbit_policy``'s validation; compared for every case here on live 3.10.8, 4.0.5 and
    4.3.6), in milliseconds instead of rabbitmqctl's second; test_pol6_pol7_policy_validation keeps rabbitmqctl.
    """
    name = broker.name("pol")
    pattern = anchored(name)
    try:
        broker.set_policy(name, pattern, dict(definition), operator=operator)
    except (PolicyError, PolicyRefused) as e:
        return str(e)
    broker.clear_policy(name, operator=operator)
    return None


NOT_RECOGNISED = '[{{<<"{key}">>,{value}}}] are not recognised policy settings'


@for_versions("3.10", "4.0", "4.3")
@pytest.mark.parametrize(
    ("definition", "by_version"),
    [
        # consumer-timeout: a policy key from 3.13 (live 4.0.5, 4.3.6; unknown to 3.10.8)
        ({"consumer-timeout": 1000}, {"3.10": NOT_RECOGNISED.format(key="consumer-timeout", value=1000), "4.0": None}),
        (
            {"consumer-timeout": -1},
            {
                "3.10": NOT_RECOGNISED.format(key="consumer-timeout", value=-1),
                "4.0": "-1 is not a valid consumer timeout",
            },
        ),
        (
            {"stream-filter-size-bytes": 5},
            {
                "3.10": NOT_RECOGNISED.format(key="stream-filter-size-bytes", value=5),
                "4.0": "5 is not a valid filter size. Valid range is 16-255",
            },
        ),
        # 4.3: consumer-disconnected-timeout and the quorum delayed-retry keys
        (
            {"consumer-disconnected-timeout": "a"},
            {
                "3.10": NOT_RECOGNISED.format(key="consumer-disconnected-timeout", value='<<"a">>'),
                "4.3": '<<"a">> is not a valid consumer disconnected timeout',
            },
        ),
        (
            {"delayed-retry-type": "x"},
            {
                "3.10": NOT_RECOGNISED.format(key="delayed-retry-type", value='<<"x">>'),
                "4.3": '<<"x">> is not a valid delayed retry type. Must be one of: all, failed, returned, disabled',
            },
        ),
        (
            {"delayed-retry-type": "all"},
            {
                "3.10": NOT_RECOGNISED.format(key="delayed-retry-type", value='<<"all">>'),
                "4.3": "delayed-retry-min is required when delayed-retry-type is all",
            },
        ),
        (
            {"delayed-retry-type": "failed", "delayed-retry-min": 10, "delayed-retry-max": 5},
            {
                "3.10": '[{<<"delayed-retry-max">>,5},{<<"delayed-retry-min">>,10},'
                '{<<"delayed-retry-type">>,<<"failed">>}] are not recognised policy settings',
                "4.3": "delayed-retry-max (5) must not be smaller than delayed-retry-min (10)",
            },
        ),
        (
            {"delayed-retry-type": "disabled"},
            {"3.10": NOT_RECOGNISED.format(key="delayed-retry-type", value='<<"disabled">>'), "4.3": None},
        ),
        # queue-master-locator: 4.0 checks it against the leader locators, 4.3 denies the deprecated key
        (
            {"queue-master-locator": "bogus"},
            {
                "3.10": '<<"bogus">> invalid queue-master-locator value',
                "4.0": '<<"bogus">> is not a valid master locator',
                "4.3": "use of deprecated queue-master-locator argument is not permitted",
            },
        ),
        (
            {"queue-master-locator": "balanced"},
            {
                "3.10": '<<"balanced">> invalid queue-master-locator value',
                "4.0": None,
                "4.3": "use of deprecated queue-master-locator argument is not permitted",
            },
        ),
        (
            {"queue-master-locator": "client-local"},
            {"3.10": None, "4.3": "use of deprecated queue-master-locator argument is not permitted"},
        ),
        # max-age (4.3's text; ≤4.2 crash on a value without leading digits and refuse with the text otherwise)
        ({"max-age": "0D"}, {"3.10": '<<"0D">> is not a valid max age'}),
        ({"max-age": "7D"}, {"3.10": None}),
    ],
)
def test_policy_keys_by_version(
    broker: Target, definition: dict[str, object], by_version: dict[str, str | None]
) -> None:
    """Policy keys and texts that differ between versions (live 3.10.8, 4.0.5, 4.3.6): the newest listed
    version at or below the broker's applies (None: accepted)."""
    applicable = [v for v in by_version if broker.at_least(v)]
    expected = by_version[applicable[-1]] if applicable else None
    assert _policy_accepted_or_error(broker, definition) == expected


@for_versions("3.10", "4.0", "4.3")
@pytest.mark.parametrize(
    ("definition", "since"),
    [
        ({"target-group-size": 3}, "4.0"),  # rabbit_quorum_queue's operator key (3.13.7 source, live 4.0.5)
        ({"queue-master-locator": "client-local"}, "4.0"),  # rabbit_classic_queue's (4.3: denied, below)
        ({"delayed-retry-min": 5}, "4.3"),
        # 3.13 (RabbitMQ: unit_operator_policy_SUITE:merge_operator_policy_definitions)
        ({"overflow": "drop-head"}, "4.0"),
    ],
)
def test_operator_policy_keys_by_version(broker: Target, definition: dict[str, object], since: str) -> None:
    """Keys an operator policy may set, per version (live 3.10.8, 4.0.5, 4.3.6)."""
    key, value = next(iter(definition.items()))
    got = _policy_accepted_or_error(broker, definition, operator=True)
    if not broker.at_least(since):
        shown = f'<<"{value}">>' if isinstance(value, str) else value
        assert got == NOT_RECOGNISED.format(key=key, value=shown)
    elif key == "queue-master-locator" and broker.at_least("4.3"):
        assert got == "use of deprecated queue-master-locator argument is not permitted"
    else:
        assert got is None
