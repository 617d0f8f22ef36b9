"""Policies and operator policies: validation, matching and the effective queue settings (RabbitMQ's
``rabbit_policy`` and ``rabbit_policies``; pinned by tests/unit/test_policy.py and tests/conformance/test_policies.py).

* :func:`validate_policy` — ``rabbitmqctl set_policy`` / ``set_operator_policy`` validation, raising
  :class:`PolicyError` with RabbitMQ's texts (``rabbit_policy:validation/3``, ``rabbit_policies:validate_policy0``;
  verified on a live 3.10.8 with ``rabbitmqctl``).
* :func:`select_policy` — the one policy of a set that applies to a queue or exchange (``rabbit_policy:match_all/3``,
  ``rabbit_queue_type:is_policy_applicable/2``).
* :func:`effective_policy_definition` — a user policy merged with an operator policy
  (``rabbit_policies:merge_policy_value/3``), as the management API's ``effective_policy_definition`` shows it.
* :func:`effective_settings` — policies combined with the queue's arguments (``process_args_policy`` of the classic
  queue process, ``rabbit_quorum_queue:gather_policy_config``) into a :class:`QueueSettings`.
* :func:`effective_alternate_exchange` — an exchange's alternate exchange (argument wins over policy).

Policy definitions are plain JSON values (``str``, ``int``, ``float``, ``bool``, ``None``, lists, dicts).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from fakerabbit.broker import texts
from fakerabbit.broker.arguments import int_value, number_value, str_value
from fakerabbit.broker.erlterm import write
from fakerabbit.broker.fields import Table
from fakerabbit.broker.profile import Profile, get_profile

__all__ = [
    "Policy",
    "PolicyError",
    "QueueSettings",
    "effective_alternate_exchange",
    "effective_policy_definition",
    "effective_settings",
    "policy_value",
    "select_policy",
    "validate_policy",
]


class PolicyError(ValueError):
    """A policy was refused; ``str(err)`` is RabbitMQ's validation message."""


@dataclass(frozen=True)
class Policy:
    """A user or operator policy as set with ``rabbitmqctl set_policy`` (``definition`` holds JSON values)."""

    name: str
    vhost: str
    pattern: str
    definition: dict[str, Any]
    priority: int | float = 0
    apply_to: str = "all"


@dataclass(frozen=True, slots=True)
class QueueSettings:
    """What a queue actually does once arguments and policies are combined. ``None`` means "not set"."""

    queue_type: str = "classic"
    dead_letter_exchange: str | None = None
    dead_letter_routing_key: str | None = None
    #: ``at-least-once`` only for a quorum queue with a DLX and effective overflow reject-publish
    #: (``rabbit_quorum_queue:dlh/5``).
    dead_letter_strategy: Literal["at-most-once", "at-least-once"] = "at-most-once"
    message_ttl: int | None = None
    expires: int | None = None
    max_length: int | None = None
    max_length_bytes: int | None = None
    #: Effective overflow; a quorum queue runs ``reject-publish-dlx`` as ``drop-head``
    #: (``rabbit_quorum_queue:overflow/3``).
    overflow: str = "drop-head"
    #: Quorum queues: returns allowed before dead-lettering; ``None`` = unlimited (profile default applied,
    #: a negative value is unlimited in 4.x). Always ``None`` for classic queues.
    delivery_limit: int | None = None
    #: Classic queues: ``x-max-priority`` (policies cannot set it: no such key in ``rabbit_policies:register/0``).
    max_priority: int | None = None
    single_active_consumer: bool = False
    #: The merged policy definition (management API ``effective_policy_definition``).
    policy_definition: Mapping[str, Any] = field(default_factory=dict, compare=False)


# ======================================================================================================
# validation

_APPLY_TO_BASIC: Final = ("queues", "exchanges", "all")
_APPLY_TO_TYPED: Final = ("queues", "classic_queues", "quorum_queues", "streams", "exchanges", "all")


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _check(ok: bool, value: Any, what: str) -> str | None:
    return None if ok else f"{write(_json_term(value))} {what}"


def _one_of(value: Any, allowed: tuple[str, ...]) -> bool:
    return isinstance(value, str) and value in allowed


# key -> validator returning an error text or None (rabbit_policies:validate_policy0 and friends)
_VALIDATORS: Final[dict[str, Any]] = {
    "alternate-exchange": lambda v, p: _check(isinstance(v, str), v, "is not a valid alternate exchange name"),
    "dead-letter-exchange": lambda v, p: _check(isinstance(v, str), v, "is not a valid dead letter exchange name"),
    "dead-letter-routing-key": lambda v, p: _check(isinstance(v, str), v, "is not a valid dead letter routing key"),
    "dead-letter-strategy": lambda v, p: _check(
        _one_of(v, ("at-most-once", "at-least-once")), v, "is not a valid dead letter strategy"
    ),
    "message-ttl": lambda v, p: _check(_is_int(v) and v >= 0, v, "is not a valid message TTL"),
    "expires": lambda v, p: _check(_is_int(v) and v >= 1, v, "is not a valid queue expiry"),
    "max-length": lambda v, p: _check(_is_int(v) and v >= 0, v, "is not a valid maximum length"),
    "max-length-bytes": lambda v, p: _check(_is_int(v) and v >= 0, v, "is not a valid maximum length in bytes"),
    "max-in-memory-length": lambda v, p: _check(_is_int(v) and v >= 0, v, "is not a valid maximum memory in bytes"),
    "max-in-memory-bytes": lambda v, p: _check(_is_int(v) and v >= 0, v, "is not a valid maximum memory in bytes"),
    "delivery-limit": lambda v, p: _check(
        _is_int(v) and (v >= 0 or p.negative_delivery_limit_unlimited), v, "is not a valid delivery limit"
    ),
    "overflow": lambda v, p: _check(
        _one_of(v, ("drop-head", "reject-publish", "reject-publish-dlx")), v, "is not a valid overflow value"
    ),
    "queue-mode": lambda v, p: _check(_one_of(v, ("default", "lazy")), v, "is not a valid queue-mode value"),
    "queue-version": lambda v, p: _check(_is_int(v) and v in (1, 2), v, "is not a valid queue-version value"),
    "queue-master-locator": lambda v, p: _master_locator(v, p),
    "queue-leader-locator": lambda v, p: _check(
        _one_of(v, ("client-local", "balanced")), v, "is not a valid queue leader locator value"
    ),
    "initial-cluster-size": lambda v, p: _check(_is_int(v) and v > 0, v, "is not a valid cluster size"),
    "stream-max-segment-size-bytes": lambda v, p: _check(
        _is_int(v) and 0 <= v <= 3_000_000_000, v, "is not a valid segment size"
    ),
    "ha-mode": lambda v, p: _check(_one_of(v, ("all", "exactly", "nodes")), v, "is not a valid ha-mode value"),
    "max-age": lambda v, p: _check(_max_age_ms(v) is not None, v, "is not a valid max age"),
    "consumer-timeout": lambda v, p: _check(_is_int(v) and v >= 0, v, "is not a valid consumer timeout"),
    "consumer-disconnected-timeout": lambda v, p: _check(
        _is_int(v) and v >= 0, v, "is not a valid consumer disconnected timeout"
    ),
    "stream-filter-size-bytes": lambda v, p: _check(
        _is_int(v) and 16 <= v <= 255, v, "is not a valid filter size. Valid range is 16-255"
    ),
    "delayed-retry-type": lambda v, p: _check(
        _one_of(v, ("all", "failed", "returned", "disabled")),
        v,
        "is not a valid delayed retry type. Must be one of: all, failed, returned, disabled",
    ),
    "delayed-retry-min": lambda v, p: _check(
        _is_int(v) and v > 0, v, "is not a valid delayed retry minimum delay. Must be a positive integer"
    ),
    "delayed-retry-max": lambda v, p: _check(
        _is_int(v) and v > 0, v, "is not a valid delayed retry maximum delay. Must be a positive integer"
    ),
    # Recognised but not validated here (texts not verified): the value is accepted as given.
    "ha-params": lambda v, p: None,
    "ha-sync-mode": lambda v, p: None,
    "ha-sync-batch-size": lambda v, p: None,
    "ha-promote-on-shutdown": lambda v, p: None,
    "ha-promote-on-failure": lambda v, p: None,
    "target-group-size": lambda v, p: _check(_is_int(v) and v > 0, v, "is not a valid qq target count value"),
}
_HA_KEYS: Final = frozenset(k for k in _VALIDATORS if k.startswith("ha-"))
#: Keys recognised only by some versions (:attr:`Profile.extra_policy_keys`).
_VERSIONED_KEYS: Final = frozenset(
    {
        "target-group-size",
        "consumer-timeout",
        "consumer-disconnected-timeout",
        "stream-filter-size-bytes",
        "delayed-retry-type",
        "delayed-retry-min",
        "delayed-retry-max",
    }
)
_MAX_AGE_UNITS: Final = {
    "Y": 365 * 86_400_000,
    "M": 30 * 86_400_000,
    "D": 86_400_000,
    "h": 3_600_000,
    "m": 60_000,
    "s": 1000,
}


def _max_age_ms(value: Any) -> int | None:
    """``rabbit_amqqueue:check_max_age/1`` (4.3): digits then one unit of Y M D h m s, more than zero.

    RabbitMQ ≤4.2 crashes (``badarg``) on a value without leading digits instead of refusing it with the text:
    refused either way."""
    if not isinstance(value, str):
        return None
    m = re.fullmatch(r"([0-9]+)(Y|M|D|h|m|s)", value)
    if m is None or int(m.group(1)) <= 0:
        return None
    return int(m.group(1)) * _MAX_AGE_UNITS[m.group(2)]


def _master_locator(value: Any, profile: Profile) -> str | None:
    """``queue-master-locator``: ≤3.13 knows three locators; 4.0 - 4.2 take the leader locators too; 4.3 denies
    the deprecated key whatever its value (live 3.10.8, 4.0.5, 4.3.6)."""
    if profile.queue_master_locator == "denied":
        return "use of deprecated queue-master-locator argument is not permitted"
    if profile.queue_master_locator == "ignored":
        locators = ("client-local", "balanced", "random", "least-leaders", "min-masters")
        return _check(_one_of(value, locators), value, "is not a valid master locator")
    return _check(
        _one_of(value, ("min-masters", "client-local", "random")), value, "invalid queue-master-locator value"
    )


def _delayed_retry_constraints(definition: Mapping[str, Any]) -> str | None:
    """``rabbit_quorum_queue:validate_delayed_retry_constraints/1`` (4.3), after the keys' own checks."""
    type_, low, high = (definition.get(f"delayed-retry-{k}") for k in ("type", "min", "max"))
    if type_ is not None and type_ != "disabled" and low is None:
        return f"delayed-retry-min is required when delayed-retry-type is {type_}"
    if isinstance(low, int) and isinstance(high, int) and high < low:
        return f"delayed-retry-max ({high}) must not be smaller than delayed-retry-min ({low})"
    return None


def _recognised(profile: Profile, operator: bool) -> frozenset[str]:
    if operator:
        return profile.operator_policy_keys
    keys = set(_VALIDATORS)
    if not profile.ha_policy_keys:
        keys -= _HA_KEYS
    keys -= _VERSIONED_KEYS - profile.extra_policy_keys
    return frozenset(keys)


def _json_term(value: Any) -> Any:
    """A JSON value as RabbitMQ's decoder gives it: strings are binaries, ``null`` the atom ``null``."""
    if isinstance(value, str):
        return value.encode("utf-8", "surrogateescape")
    if isinstance(value, list):
        return [_json_term(v) for v in value]
    if isinstance(value, dict):
        return {_json_term(k): _json_term(v) for k, v in sorted(value.items())}
    return value


def _apply_to_error(apply_to: str, profile: Profile) -> str | None:
    if profile.queue_type_apply_to:
        if apply_to in _APPLY_TO_TYPED:
            return None
        return (
            f"apply-to '{apply_to}' unrecognised; should be one of: 'queues', 'classic_queues',  "
            "'quorum_queues', 'streams', 'exchanges', or 'all'"
        )
    if apply_to in _APPLY_TO_BASIC:
        return None
    return texts.apply_to_unrecognised(apply_to)


def validate_policy(
    definition: Mapping[str, Any],
    *,
    operator: bool = False,
    apply_to: str = "all",
    profile: Profile | None = None,
    pattern: str | None = None,
) -> None:
    """Validate a policy like ``rabbit_policy`` does; raise :class:`PolicyError` with RabbitMQ's message.

    Order: ``pattern`` (when given), ``apply-to``, an empty definition (``no policy provided``), each
    recognised key in key order (``-1 is not a valid message TTL``, ``<<"foo">> is not a valid overflow
    value``, …), then the keys nobody recognised, all together: ``[{<<"foo">>,1}] are not recognised policy
    settings``. Operator policies recognise only :attr:`Profile.operator_policy_keys`. Verified with
    rabbitmqctl on 3.10.8 (2026-11-21), except the 3.12+ ``apply-to`` text (read in ``rabbit_policy``) and the pattern
    error's detail, which is Python's regex message where RabbitMQ prints PCRE's.
    """
    profile = profile if profile is not None else get_profile()
    if pattern is not None:
        try:
            re.compile(pattern)
        except re.error as e:
            raise PolicyError(f'pattern should be regular expression but is invalid: {{"{e.msg}",{e.pos}}}') from None
    err = _apply_to_error(apply_to, profile)
    if err is not None:
        raise PolicyError(err)
    if not definition:
        raise PolicyError("no policy provided")
    recognised = _recognised(profile, operator)
    keys = sorted(definition)
    for key in keys:
        if key in recognised:
            err = _VALIDATORS[key](definition[key], profile)
            if err is not None:
                raise PolicyError(err)
    if "delayed-retry-type" in recognised:
        err = _delayed_retry_constraints(definition)
        if err is not None:
            raise PolicyError(err)
    if not operator and "ha-mode" not in definition and any(k in definition for k in _HA_KEYS & recognised):
        raise PolicyError("ha-mode must be specified to specify ha-params, ha-sync-mode or ha-promote-on-shutdown")
    unknown = [(k.encode("utf-8", "surrogateescape"), _json_term(definition[k])) for k in keys if k not in recognised]
    if unknown:
        raise PolicyError(f"{write(unknown)} are not recognised policy settings")


# ======================================================================================================
# matching


@functools.lru_cache(maxsize=512)
def _compiled(pattern: str) -> re.Pattern[str] | None:
    try:
        return re.compile(pattern)
    except re.error:
        return None


def _matches_kind(apply_to: str, kind: str, queue_type: str | None) -> bool:
    if apply_to == "all":
        return True
    if kind == "exchange":
        return apply_to == "exchanges"
    return apply_to == "queues" or apply_to == {
        "classic": "classic_queues",
        "quorum": "quorum_queues",
        "stream": "streams",
    }.get(queue_type or "classic")


def _applicable(definition: Mapping[str, Any], queue_type: str | None, profile: Profile) -> bool:
    """A policy with any key the queue type does not support does not apply to it at all
    (``rabbit_queue_type:is_policy_applicable/2``)."""
    if queue_type == "quorum":
        unsupported = profile.unsupported_qq_policy_keys
    elif queue_type in (None, "classic"):
        unsupported = profile.unsupported_classic_policy_keys
    elif queue_type == "stream":
        unsupported = profile.unsupported_stream_policy_keys
    else:
        return True
    return not any(k in unsupported for k in definition)


def select_policy(
    policies: Iterable[Policy],
    name: str,
    queue_type: str | None = None,
    *,
    kind: Literal["queue", "exchange"] = "queue",
    vhost: str | None = None,
    profile: Profile | None = None,
) -> Policy | None:
    """The policy that applies to queue (or exchange) ``name``: the matching one with the highest priority.

    Matching: ``apply-to`` fits the kind (and queue type), the pattern is found anywhere in the name
    (unanchored ``re.search``), the vhost is the same (when ``vhost`` is given) and, for queues, no key of the
    definition is unsupported by the queue type (verified on 3.10.8: a ``delivery-limit`` policy skips
    classic queues, user and operator policies alike). Equal priorities: the first in ``policies`` wins.
    Use it once for user policies and once for operator policies.
    """
    profile = profile if profile is not None else get_profile()
    best: Policy | None = None
    for p in policies:
        if vhost is not None and p.vhost != vhost:
            continue
        if not _matches_kind(p.apply_to, kind, queue_type):
            continue
        rx = _compiled(p.pattern)
        if rx is None or rx.search(name) is None:
            continue
        if kind == "queue" and not _applicable(p.definition, queue_type, profile):
            continue
        if best is None or p.priority > best.priority:
            best = p
    return best


# ======================================================================================================
# merging


def _min_delivery_limit(a: Any, b: Any, profile: Profile) -> Any:
    if profile.negative_delivery_limit_unlimited and (a < 0 or b < 0):
        return max(a, b)
    return min(a, b)


def _merge(key: str, value: Any, op_value: Any, profile: Profile) -> Any:
    """``rabbit_policies:merge_policy_value/3``."""
    if key in (
        "message-ttl",
        "max-length",
        "max-length-bytes",
        "max-in-memory-length",
        "max-in-memory-bytes",
        "expires",
    ):
        return min(value, op_value)
    if key == "delivery-limit":
        return _min_delivery_limit(value, op_value, profile)
    if key in ("target-group-size", "delayed-retry-min"):  # rabbit_quorum_queue:merge_policy_value/3
        return max(value, op_value)
    if key == "delayed-retry-max":
        return min(value, op_value)
    return op_value  # overflow, queue-version, delayed-retry-type, booleans: the operator's value


def effective_policy_definition(
    policy: Policy | None, operator_policy: Policy | None, profile: Profile | None = None
) -> dict[str, Any]:
    """The user policy's definition merged with the operator policy's, keys sorted (as ``rabbitmqctl eval
    'rabbit_policy:effective_definition(Q)'`` shows on 3.10.8: ``delivery-limit`` 5 and 2 give 2)."""
    profile = profile if profile is not None else get_profile()
    user = policy.definition if policy is not None else {}
    op = operator_policy.definition if operator_policy is not None else {}
    merged: dict[str, Any] = {}
    for key in sorted({*user, *op}):
        if key in user and key in op:
            merged[key] = _merge(key, user[key], op[key], profile)
        else:
            merged[key] = user[key] if key in user else op[key]
    return merged


def policy_value(key: str, policy: Policy | None, operator_policy: Policy | None, profile: Profile) -> Any:
    """``rabbit_policy:get/2``: one key of the merged definition, or None."""
    return effective_policy_definition(policy, operator_policy, profile).get(key)


def _lookup_min(pol: Any, arg: int | None) -> int | None:
    """``args_policy_lookup`` with ``min`` for integer settings (policy values are validated integers)."""
    if not _is_int(pol):
        return arg
    value = int(pol)
    return value if arg is None else min(value, arg)


def _delivery_limit(pol: Any, args: Table, profile: Profile) -> int | None:
    arg_field = args.get("x-delivery-limit")
    arg = number_value(arg_field)
    if arg_field is not None and arg is None:
        # A non-numeric argument (it has no validator) never compares below a count: unlimited on its own,
        # and loses to any policy value (Erlang orders numbers before everything else).
        return _finish_limit(pol, profile, missing_is_unlimited=pol is None)
    if isinstance(arg, float):
        arg = int(arg // 1)
    if pol is None:
        return _finish_limit(arg, profile)
    if arg is None:
        return _finish_limit(pol, profile)
    return _finish_limit(_min_delivery_limit(pol, arg, profile), profile)


def _finish_limit(value: Any, profile: Profile, *, missing_is_unlimited: bool = False) -> int | None:
    if value is None:
        return None if missing_is_unlimited else profile.delivery_limit_default
    if profile.negative_delivery_limit_unlimited and value < 0:
        return None
    return int(value)


def effective_settings(
    queue_type: str,
    args: Table,
    policy: Policy | None,
    operator_policy: Policy | None,
    profile: Profile,
) -> QueueSettings:
    """Combine a queue's arguments with its user and operator policy (tests/unit/test_policy.py pins each rule).

    * DLX, DLRK, dead-letter strategy: the argument wins, key by key.
    * ``message-ttl``, ``expires``, ``max-length``, ``max-length-bytes``: the smallest value wins.
    * ``overflow``: the argument wins on classic queues, the policy on quorum queues.
    * ``delivery-limit`` (quorum only): min, or max when either is negative (4.x); the profile's default when
      unset; negative means unlimited in 4.x (``rabbit_quorum_queue:resolve_delivery_limit/2``).
    """
    merged = effective_policy_definition(policy, operator_policy, profile)
    quorum = queue_type == "quorum"

    def arg_wins(key: str) -> str | None:
        a = str_value(args.get("x-" + key))
        if a is not None:
            return a
        pol = merged.get(key)
        return pol if isinstance(pol, str) else None

    dlx = arg_wins("dead-letter-exchange")
    dlrk = arg_wins("dead-letter-routing-key")
    arg_overflow = str_value(args.get("x-overflow"))
    pol_overflow = merged.get("overflow") if isinstance(merged.get("overflow"), str) else None
    overflow = (pol_overflow or arg_overflow) if quorum else (arg_overflow or pol_overflow)
    overflow = overflow or "drop-head"
    strategy: Literal["at-most-once", "at-least-once"] = "at-most-once"
    if quorum:
        if overflow == "reject-publish-dlx":
            overflow = "drop-head"
        if dlx is not None and arg_wins("dead-letter-strategy") == "at-least-once" and overflow == "reject-publish":
            strategy = "at-least-once"
    sac = args.get("x-single-active-consumer")
    return QueueSettings(
        queue_type=queue_type,
        dead_letter_exchange=dlx,
        dead_letter_routing_key=dlrk,
        dead_letter_strategy=strategy,
        message_ttl=_lookup_min(merged.get("message-ttl"), int_value(args.get("x-message-ttl"))),
        expires=_lookup_min(merged.get("expires"), int_value(args.get("x-expires"))),
        max_length=_lookup_min(merged.get("max-length"), int_value(args.get("x-max-length"))),
        max_length_bytes=_lookup_min(merged.get("max-length-bytes"), int_value(args.get("x-max-length-bytes"))),
        overflow=overflow,
        delivery_limit=_delivery_limit(merged.get("delivery-limit"), args, profile) if quorum else None,
        max_priority=None if quorum else int_value(args.get("x-max-priority")),
        single_active_consumer=sac is not None and sac[0] == "t" and bool(sac[1]),
        policy_definition=merged,
    )


def effective_alternate_exchange(args: Table, policy: Policy | None) -> str | None:
    """An exchange's alternate exchange: the ``alternate-exchange`` argument, else the policy key."""
    arg = str_value(args.get("alternate-exchange"))
    if arg is not None:
        return arg
    value = policy.definition.get("alternate-exchange") if policy is not None else None
    return value if isinstance(value, str) else None
