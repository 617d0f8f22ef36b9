"""Version profiles (docs/architecture.md "Version profiles"): which RabbitMQ release behaves how."""

from __future__ import annotations

import dataclasses
import re

import pytest

from fakerabbit.broker.profile import ACCEPTED_VERSIONS, Profile, get_profile


def test_default_is_newest() -> None:
    assert get_profile(None).name == "4.3"
    assert get_profile().server_version == "4.3.0"


@pytest.mark.parametrize(
    ("version", "name", "server_version"),
    [
        ("3.10", "3.10", "3.10.8"),
        ("3.11", "3.11", "3.11.0"),
        ("3.12", "3.12", "3.12.14"),
        ("3.13", "3.13", "3.13.7"),
        ("4.0", "4.0", "4.0.0"),
        ("4.1", "4.1", "4.1.0"),
        ("4.2", "4.2", "4.2.0"),
        ("4.3", "4.3", "4.3.0"),
        ("3.13.7", "3.13", "3.13.7"),  # a patch number is ignored
        (" 4.2 ", "4.2", "4.2.0"),
        ("3.9", "3.9", "3.9.0"),  # any earlier 3.x: the 3.10 rules
    ],
)
def test_accepted_versions(version: str, name: str, server_version: str) -> None:
    p = get_profile(version)
    assert (p.name, p.server_version) == (name, server_version)


@pytest.mark.parametrize("bad", ["5.0", "2.8", "3", "latest", "", "4.4", "3.14"])
def test_unknown_version(bad: str) -> None:
    with pytest.raises(ValueError, match=re.escape("accepted: 3.10, 3.11, 3.12, 3.13, 4.0, 4.1, 4.2, 4.3")):
        get_profile(bad)


def test_accepted_list() -> None:
    assert ACCEPTED_VERSIONS == ("3.10", "3.11", "3.12", "3.13", "4.0", "4.1", "4.2", "4.3")


def _same_rules(a: Profile, b: Profile) -> bool:
    skip = {"name", "server_version"}
    return all(getattr(a, f.name) == getattr(b, f.name) for f in dataclasses.fields(Profile) if f.name not in skip)


def test_families() -> None:
    assert _same_rules(get_profile("3.10"), get_profile("3.11"))
    assert _same_rules(get_profile("3.10"), get_profile("3.1"))
    # 4.1 follows 4.0 except for the wire's ?FRAME_MIN_SIZE (8192 from 4.1)
    p41 = get_profile("4.1")
    assert _same_rules(dataclasses.replace(get_profile("4.0"), amqp=p41.amqp), p41)
    assert (get_profile("4.0").amqp.frame_min_size, p41.amqp.frame_min_size) == (4096, 8192)
    # 4.2 differs from 4.1 only in the text of one error (basic.get on a quorum SAC queue)
    p42 = dataclasses.replace(get_profile("4.2"), sac_get_error_prints_type_term=False)
    assert _same_rules(p41, p42)
    assert not get_profile("4.1").sac_get_error_prints_type_term and get_profile("4.2").sac_get_error_prints_type_term
    assert not _same_rules(get_profile("4.2"), get_profile("4.3"))
    assert not _same_rules(get_profile("3.10"), get_profile("3.12"))


def test_profile_is_frozen() -> None:
    p = get_profile("4.0")
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.name = "x"  # type: ignore[misc]


def test_dead_letter_switches() -> None:
    # x-last-death-* and CC kept with a DLRK: 3.13+. expiration normalisation: MC (3.13+).
    # (RabbitMQ: mc:record_death)
    # MC field order: 3.13+. (RabbitMQ: mc_amqpl:death_table/7)
    for v in ("3.10", "3.12"):
        p = get_profile(v)
        assert not p.last_death_headers and not p.keep_cc_with_dlrk
        assert not p.normalise_expiration and not p.x_death_mc_order
    for v in ("3.13", "4.0", "4.2", "4.3"):
        p = get_profile(v)
        assert p.last_death_headers and p.keep_cc_with_dlrk
        assert p.normalise_expiration and p.x_death_mc_order
    # client x-death: edited (≤3.12), parsed (3.13), ignored (4.x)
    assert [get_profile(v).client_x_death for v in ("3.10", "3.12", "3.13", "4.0", "4.3")] == [
        "edit",
        "edit",
        "parse",
        "ignore",
        "ignore",
    ]


def test_delivery_limit_switches() -> None:
    # no default ≤3.13, 20 in 4.x (RabbitMQ: quorum_queue_SUITE:delivery_limit_policy_update)
    assert get_profile("3.12").delivery_limit_default is None
    assert get_profile("3.13").delivery_limit_default is None
    assert get_profile("4.0").delivery_limit_default == 20
    assert get_profile("4.3").delivery_limit_default == 20
    # returns (≤3.13), acquired (4.0-4.2), failed (4.3+) (RabbitMQ: rabbit_fifo:return_one)
    assert get_profile("3.13").delivery_limit_counter == "returns"
    assert get_profile("4.2").delivery_limit_counter == "acquired"
    assert get_profile("4.3").delivery_limit_counter == "failed"
    # x-acquired-count from 4.3 (RabbitMQ: rabbit_fifo_client:add_delivery_count_header/2)
    assert not get_profile("4.2").acquired_count_header
    assert get_profile("4.3").acquired_count_header
    # x-delivery-count present as 0 on the first delivery on the live 3.10.8 (2026-11-21)
    # (RabbitMQ: rabbit_fifo_client:add_delivery_count_header/2)
    assert get_profile("3.10").delivery_count_header_from_zero
    assert not get_profile("3.13").delivery_count_header_from_zero
    # negative = unlimited (4.x) (RabbitMQ: rabbit_quorum_queue:resolve_delivery_limit/2)
    assert not get_profile("3.13").negative_delivery_limit_unlimited
    assert get_profile("4.0").negative_delivery_limit_unlimited


def test_operator_policy_keys() -> None:
    seven = {
        "expires",
        "message-ttl",
        "max-length",
        "max-length-bytes",
        "max-in-memory-length",
        "max-in-memory-bytes",
        "delivery-limit",
    }
    # 3.12 had seven keys (and so had the live 3.10.8, 2026-11-21); 3.13 added queue-version, overflow
    # (RabbitMQ: unit_operator_policy_SUITE:merge_operator_policy_definitions)
    assert get_profile("3.10").operator_policy_keys == seven
    assert get_profile("3.12").operator_policy_keys == seven
    # rabbit_quorum_queue registers target-group-size as an operator policy key too (3.13.7 source; live 4.0.5,
    # 4.3.6); 4.0's classic queue queue-master-locator, 4.3's quorum delayed-retry-* (live)
    assert get_profile("3.13").operator_policy_keys == seven | {"queue-version", "overflow", "target-group-size"}
    assert get_profile("4.0").operator_policy_keys == get_profile("3.13").operator_policy_keys | {
        "queue-master-locator"
    }
    assert get_profile("4.3").operator_policy_keys == get_profile("4.0").operator_policy_keys | {
        "delayed-retry-type",
        "delayed-retry-min",
        "delayed-retry-max",
    }


def test_unsupported_policy_keys() -> None:
    # RabbitMQ: rabbit_queue_type:is_policy_applicable/2
    p = get_profile("4.0")
    assert {"delivery-limit", "dead-letter-strategy", "max-in-memory-length", "max-age"} <= (
        p.unsupported_classic_policy_keys
    )
    assert {"max-priority", "queue-mode", "ha-mode", "queue-master-locator", "max-age"} <= (
        p.unsupported_qq_policy_keys
    )
    assert "single-active-consumer" in get_profile("3.13").unsupported_qq_policy_keys
    assert "single-active-consumer" not in get_profile("3.12").unsupported_qq_policy_keys


def test_inequivalence_rendering_is_never_fully_typed() -> None:
    # rabbit_misc:assert_args_equivalence1/4 strips the types when both values are present, in every version
    # (the live 3.10.8 and the 3.13/4.x source agree): the switch exists but is off everywhere.
    assert not any(get_profile(v).typed_inequivalence_text for v in ACCEPTED_VERSIONS)


def test_declare_switches() -> None:
    assert not get_profile("3.13").inject_default_queue_type
    assert get_profile("4.0").inject_default_queue_type
    assert get_profile("3.12").transient_nonexclusive_queues
    assert "x-queue-leader-locator" not in get_profile("3.13").classic_queue_arguments
    assert "x-queue-leader-locator" in get_profile("4.0").classic_queue_arguments
    assert "x-stream-filter-size-bytes" in get_profile("4.3").stream_queue_arguments
    assert "x-stream-filter-size-bytes" not in get_profile("4.0").stream_queue_arguments  # live 4.0.5
    assert "x-stream-filter-size-bytes" not in get_profile("3.13").stream_queue_arguments  # 3.13.7 source
    assert "x-stream-filter-size-bytes" not in get_profile("3.10").stream_queue_arguments
    assert get_profile("3.10").classic_queue_arguments[:4] == (
        "x-expires",
        "x-message-ttl",
        "x-dead-letter-exchange",
        "x-dead-letter-routing-key",
    )


def test_policy_switches() -> None:
    assert not get_profile("3.10").queue_type_apply_to
    assert get_profile("3.12").queue_type_apply_to
    assert get_profile("3.13").ha_policy_keys
    assert not get_profile("4.0").ha_policy_keys
    # policy validators per rabbit_policies / rabbit_quorum_queue; 4.0 and 4.3 checked live
    assert get_profile("3.10").extra_policy_keys == set()
    # consumer-timeout is a policy key from 3.12.0 (rabbit_policies in the v3.12.0 tag)
    assert get_profile("3.12").extra_policy_keys == {"consumer-timeout"}
    assert get_profile("4.0").extra_policy_keys == {"target-group-size", "consumer-timeout", "stream-filter-size-bytes"}
    assert get_profile("4.3").extra_policy_keys - get_profile("4.0").extra_policy_keys == {
        "consumer-disconnected-timeout",
        "delayed-retry-type",
        "delayed-retry-min",
        "delayed-retry-max",
    }


def test_43_declare_switches() -> None:
    # live 3.10.8, 4.0.5 and 4.3.6 (notes/rabbitmq-4.x-observed-decl.md)
    p40, p43 = get_profile("4.0"), get_profile("4.3")
    assert p40.validate_queue_mode and not p43.validate_queue_mode
    assert p40.queue_versions == (1, 2) and p43.queue_versions == (2,)
    assert not p40.empty_queue_type_is_default and p43.empty_queue_type_is_default
    assert [get_profile(v).queue_master_locator for v in ("3.10", "3.13", "4.0", "4.2", "4.3")] == [
        "crash-if-invalid",
        "crash-if-invalid",
        "ignored",
        "ignored",
        "denied",
    ]
    assert "x-consumer-timeout" in p43.quorum_queue_arguments
    assert "x-consumer-timeout" not in p40.quorum_queue_arguments
    assert "x-quorum-target-group-size" not in p40.quorum_queue_arguments


def test_exchange_switches() -> None:
    assert not get_profile("3.12").unknown_exchange_type_is_channel_error
    assert get_profile("3.13").unknown_exchange_type_is_channel_error  # 3.13.3+, rabbitmq-server #11214
    assert get_profile("4.0").unknown_exchange_type_is_channel_error
    assert "x-local-random" not in get_profile("3.13").exchange_types
    assert "x-local-random" in get_profile("4.0").exchange_types
    assert "x-modulus-hash" not in get_profile("4.2").exchange_types
    assert "x-modulus-hash" in get_profile("4.3").exchange_types


@pytest.mark.parametrize(
    ("version", "release"), [("3.9", (3, 9)), ("3.10.8", (3, 10)), ("3.12", (3, 12)), ("4.0", (4, 0)), ("4.3", (4, 3))]
)
def test_release_is_the_requested_major_minor(version: str, release: tuple[int, int]) -> None:
    assert get_profile(version).release == release


def test_wire_settings_by_version() -> None:
    """What channel.py and handshake.py once read off the version string."""
    assert get_profile("3.13").amqp.max_message_size == 134217728
    assert get_profile("4.0").amqp.max_message_size == 16777216
    assert [get_profile(v).amqp.erlang_otp for v in ("3.10", "3.12", "3.13", "4.0", "4.1", "4.3")] == [
        "25.2.3",
        "25.2.3",
        "26.2.5",
        "26.2.5",
        "27.3",
        "27.3",
    ]
    assert get_profile("4.0").amqp.copyright.startswith("Copyright (c) 2007-2024 Broadcom")
    assert get_profile("4.2").amqp.copyright.startswith("Copyright (c) 2007-2025 Broadcom")
