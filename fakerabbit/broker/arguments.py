"""``queue.declare`` / ``exchange.declare`` argument checks and the ``expiration`` property parser.

Pure functions over typed tables (``{key: (tag, value)}``, see :mod:`fakerabbit.broker.fields`) that raise
:mod:`fakerabbit.broker.errors` with RabbitMQ's exact texts (``rabbit_amqqueue:check_declare_arguments/3``,
``rabbit_amqqueue:assert_equivalence/5``, ``rabbit_basic:parse_expiration/1``; pinned by tests/unit/test_arguments.py
and tests/conformance/test_declare_args.py):

* :func:`augment_declare_args` — 4.x stores ``x-queue-type = "classic"`` when the client sent no type.
* :func:`validate_new_queue` — the checks for a queue that does not exist yet, in RabbitMQ's order.
* :func:`check_queue_equivalence` — redeclaring an existing queue.
* :func:`validate_new_exchange` / :func:`check_exchange_equivalence` — the same for exchanges.
* :func:`parse_expiration` — the ``expiration`` property.

Texts were checked against a live RabbitMQ 3.10.8 (2026-11-21) unless a docstring says otherwise; Erlang
terms in them are rendered by :mod:`fakerabbit.broker.erlterm`, including the line break Erlang's ``~p`` inserts
into a tagged pair that does not fit in 80 columns.

Stream queues (``x-queue-type = "stream"``) get their own arguments checked here (``x-max-age`` with
:func:`check_max_age`, the segment and filter sizes) and the stream's ``declare/2`` checks (properties, segment
size limit, filter size); the queue itself is :mod:`fakerabbit.broker.stream`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Final

from fakerabbit.broker import errors, texts
from fakerabbit.broker.erlterm import Atom, ErlStr, pretty, write
from fakerabbit.broker.fields import INTEGER_TAGS, Field, Table, type_name
from fakerabbit.broker.profile import Profile

__all__ = [
    "MAX_EXPIRY",
    "QUEUE_MASTER_LOCATOR_TEXT",
    "TRANSIENT_NONEXCL_TEXT",
    "augment_declare_args",
    "check_consumer_timeout_argument",
    "check_exchange_equivalence",
    "check_max_age",
    "check_queue_equivalence",
    "deprecated_feature_text",
    "int_value",
    "number_value",
    "parse_expiration",
    "queue_type_of",
    "str_value",
    "validate_new_exchange",
    "validate_new_queue",
]

#: ``?MAX_EXPIRY_TIMER``: ten years in milliseconds, the largest TTL / expiry RabbitMQ accepts.
MAX_EXPIRY: Final = 315_360_000_000
#: ``?MAX_STREAM_MAX_SEGMENT_SIZE``: the largest ``x-stream-max-segment-size-bytes`` a stream takes.
MAX_STREAM_MAX_SEGMENT_SIZE: Final = 3_000_000_000
#: Explanation of 4.3's 541 for a queue neither durable nor exclusive (``rabbit_deprecated_features``).


def deprecated_feature_text(feature: str) -> str:
    """``rabbit_deprecated_features:get_warning/1`` for a feature that is denied by default."""
    return (
        f"Feature `{feature}` is deprecated.\n"
        "By default, this feature is not permitted anymore.\n"
        "The feature will be removed from a future major RabbitMQ version, regardless of the configuration; "
        "actual version to be determined.\n"
        "To continue using this feature when it is not permitted by default, set the following parameter in your "
        "configuration:\n"
        f'    "deprecated_features.permit.{feature} = true"'
    )


TRANSIENT_NONEXCL_TEXT: Final = deprecated_feature_text("transient_nonexcl_queues")
#: Explanation of 4.3's 541 for ``x-queue-master-locator`` on a classic queue (verified on 4.3.6, truncated there
#: to 255 bytes like every reply text).
QUEUE_MASTER_LOCATOR_TEXT: Final = deprecated_feature_text("queue_master_locator")
#: The locators RabbitMQ ≤3.13 knows for ``x-queue-master-locator`` (``rabbit_queue_master_locator`` modules).
_MASTER_LOCATORS: Final = frozenset({"client-local", "min-masters", "random"})

# ======================================================================================================
# expiration (rabbit_basic:parse_expiration/1)


def parse_expiration(raw: str | bytes) -> int:
    """Parse the ``expiration`` property like ``rabbit_basic:parse_expiration/1`` (``string:to_integer``).

    An optional sign, ASCII digits, nothing else; then 0 ≤ N ≤ :data:`MAX_EXPIRY`. Raises 406, e.g.
    ``invalid expiration 'abc': no_integer``, ``invalid expiration '1.5': {leftover_string,".5"}``,
    ``invalid expiration '-1': {value_negative,-1}`` (all verified on 3.10.8, 2026-11-21).
    """
    data = raw if isinstance(raw, bytes) else raw.encode("utf-8", "surrogateescape")
    m = re.match(rb"[+-]?[0-9]+", data)
    term: Any
    if m is None:
        term = Atom("no_integer")
    elif m.end() < len(data):
        term = (Atom("leftover_string"), ErlStr(data[m.end() :]))
    else:
        n = int(m.group())
        if 0 <= n <= MAX_EXPIRY:
            return n
        term = (Atom("value_negative" if n < 0 else "value_too_large"), n)
    prefix = f"invalid expiration '{data.decode('utf-8', 'surrogateescape')}': "
    # RabbitMQ 3.10 formats the raw value with ~s, i.e. byte by byte: the column counts bytes.
    column = len("invalid expiration '") + len(data) + len("': ")
    raise errors.PreconditionFailed(prefix + pretty(term, column))


# ======================================================================================================
# Erlang values of typed fields, for the equivalence check

_INT_CLASS: Final = INTEGER_TAGS | {"D"}
_FLOAT_CLASS: Final = frozenset("fd")


def _type_class(tag: str) -> str:
    """``rabbit_misc:type_class/1``: integers (and decimal) are one class, float/double another."""
    return "int" if tag in _INT_CLASS else "float" if tag in _FLOAT_CLASS else tag


def _erl_value(field: Field) -> Any:
    """The Erlang value RabbitMQ holds for a field (binaries as bytes, bools as atoms, decimals as tuples)."""
    tag, v = field
    if tag == "S":
        return v.encode("utf-8", "surrogateescape") if isinstance(v, str) else bytes(v)
    if tag == "x":
        return bytes(v)
    if tag in INTEGER_TAGS or tag == "T":
        return int(v.timestamp()) if hasattr(v, "timestamp") else int(v)
    if tag == "t":
        return Atom("true" if v else "false")
    if tag in _FLOAT_CLASS:
        return float(v)
    if tag == "D":
        exp = Decimal(v).as_tuple().exponent
        scale = -exp if isinstance(exp, int) and exp < 0 else 0
        unscaled = int(Decimal(v).scaleb(scale))
        return (scale, unscaled)
    if tag == "V":
        return Atom("undefined")
    if tag == "A":
        return [(Atom(type_name(t)), _erl_value((t, x))) for t, x in v]
    if tag == "F":
        return [(k.encode(), Atom(type_name(t)), _erl_value((t, x))) for k, (t, x) in v.items()]
    raise ValueError(f"unknown field type tag {tag!r}")


def _exact(a: Any, b: Any) -> bool:
    """Erlang ``=:=``."""
    if type(a) is not type(b):
        return False
    if isinstance(a, tuple | list):
        return len(a) == len(b) and all(_exact(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, _Typed):
        return a.type == b.type and _exact(a.value, b.value)
    return bool(a == b)


def _equal(a: Any, b: Any) -> bool:
    """Erlang ``==`` (numbers compare by value across int/float)."""
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, tuple | list) and isinstance(b, tuple | list):
        return type(a) is type(b) and len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    return _exact(a, b)


@dataclass(frozen=True, slots=True)
class _Typed:
    """``{Type, Value}`` as ``rabbit_misc:table_lookup`` returns it."""

    type: str
    value: Any


def _val(v: Any) -> str:
    """``rabbit_misc:val/1``."""
    if v is None or v == Atom("undefined"):
        return "none"
    if isinstance(v, _Typed):
        shown = v.value.decode("utf-8", "replace") if isinstance(v.value, bytes) else write(v.value)
        return f"the value '{shown}' of type '{v.type}'"
    if isinstance(v, tuple) and len(v) == 2:
        # A decimal {Scale, Unscaled} hits val({Type, Value}) and crashes formatting ~ts with an integer.
        raise errors.InternalError("")
    return "'" + (v.decode("utf-8", "replace") if isinstance(v, bytes) else write(v)) + "'"


def _field_equivalence(current: Any, new: Any, rs: str, key: str) -> None:
    """``rabbit_misc:assert_field_equivalence/4``."""
    if _exact(current, new):
        return
    classic = _Typed("longstr", b"classic")
    if key == "x-queue-type" and (
        (current is None and _exact(new, classic)) or (new is None and _exact(current, classic))
    ):
        return
    raise errors.PreconditionFailed(
        f"inequivalent arg '{key}' for {rs}: received {_val(new)} but current is {_val(current)}"
    )


def _args_equivalence(current: Table, new: Table, rs: str, keys: Iterable[str], typed: bool) -> None:
    """``rabbit_misc:assert_args_equivalence/4``: both present -> compared (and shown) untyped."""
    for key in keys:
        cur, nxt = current.get(key), new.get(key)
        if cur is None and nxt is None:
            continue
        if cur is not None and nxt is not None:
            cv, nv = _erl_value(cur), _erl_value(nxt)
            if cur[0] == nxt[0] and _exact(cv, nv):
                continue
            if _type_class(cur[0]) == _type_class(nxt[0]) and _equal(cv, nv):
                continue
            if typed:  # no released RabbitMQ does this; kept for Profile.typed_inequivalence_text
                cv, nv = _Typed(type_name(cur[0]), cv), _Typed(type_name(nxt[0]), nv)
            _field_equivalence(cv, nv, rs, key)
            continue
        _field_equivalence(
            None if cur is None else _Typed(type_name(cur[0]), _erl_value(cur)),
            None if nxt is None else _Typed(type_name(nxt[0]), _erl_value(nxt)),
            rs,
            key,
        )


def _bool_atom(b: bool) -> Atom:
    return Atom("true" if b else "false")


# ======================================================================================================
# queue.declare validators (rabbit_amqqueue:declare_args/0, in this order)

_Check = Callable[[Field, Table], Any]  # returns None when valid, else the Erlang error term


def _unacceptable(field: Field) -> tuple[Atom, Atom]:
    return (Atom("unacceptable_type"), Atom(type_name(field[0])))


def _int(field: Field, _args: Table) -> Any:
    if field[0] in INTEGER_TAGS:
        return None
    return ErlStr.of(f"expected integer, got {type_name(field[0])}")


def _non_neg_int(field: Field, args: Table) -> Any:
    err = _int(field, args)
    if err is None and field[1] < 0:
        return (Atom("value_negative"), field[1])
    return err


def _expiry(n: int) -> Any:
    if n < 0:
        return (Atom("value_negative"), n)
    if n > MAX_EXPIRY:
        return (Atom("value_too_large"), n)
    return None


def _expires(field: Field, args: Table) -> Any:
    err = _int(field, args)
    if err is not None:
        return err
    return (Atom("value_zero"), 0) if field[1] == 0 else _expiry(field[1])


def _message_ttl(field: Field, args: Table) -> Any:
    err = _int(field, args)
    return err if err is not None else _expiry(field[1])


def _dlx(field: Field, _args: Table) -> Any:
    return None if field[0] == "S" else _unacceptable(field)


def _dlrk(field: Field, args: Table) -> Any:
    if field[0] != "S":
        return _unacceptable(field)
    return Atom("routing_key_but_no_dlx_defined") if "x-dead-letter-exchange" not in args else None


def _one_of(values: frozenset[str], error: Callable[[str], Any]) -> _Check:
    def check(field: Field, _args: Table) -> Any:
        if field[0] != "S":
            return _unacceptable(field)
        return None if field[1] in values else error(field[1])

    return check


def _max_priority(field: Field, args: Table) -> Any:
    err = _non_neg_int(field, args)
    return (Atom("max_value_exceeded"), field[1]) if err is None and field[1] > 255 else err


def _queue_version(versions: tuple[int, ...]) -> _Check:
    def check(field: Field, args: Table) -> Any:
        err = _non_neg_int(field, args)
        if err is None and field[1] not in versions:
            return ErlStr.of(f"unsupported queue version '{field[1]}'")
        return err

    return check


def _bool(field: Field, _args: Table) -> Any:
    return None if field[0] == "t" else _unacceptable(field)


def _group_size(field: Field, args: Table) -> Any:
    err = _non_neg_int(field, args)
    return (Atom("value_zero"), 0) if err is None and field[1] == 0 else err


_MAX_AGE_UNITS: Final = {
    "Y": 365 * 86_400_000,
    "M": 30 * 86_400_000,
    "D": 86_400_000,
    "h": 3_600_000,
    "m": 60_000,
    "s": 1000,
}


def check_max_age(value: str | bytes, *, crash_without_digits: bool) -> int | None:
    """``rabbit_amqqueue:check_max_age/1``: leading digits (more than zero) and one unit of ``Y M D h m s`` -> the
    age in milliseconds (``"7D"`` -> 604800000); anything else -> None (``invalid_max_age``).

    Up to 4.2 the regex is ``(^[0-9]*)(.*)`` and a value without leading digits crashes ``list_to_integer("")``:
    with ``crash_without_digits`` that raises 541 INTERNAL_ERROR (live 3.10.8 and 4.0.5; 4.3.6 refuses it)."""
    text = value if isinstance(value, str) else value.decode("utf-8", "surrogateescape")
    m = re.match(r"[0-9]*", text)
    digits = m.group() if m is not None else ""
    if not digits:
        if crash_without_digits:
            raise errors.InternalError("")
        return None
    unit = text[len(digits) :]
    if int(digits) <= 0 or unit not in _MAX_AGE_UNITS:
        return None
    return int(digits) * _MAX_AGE_UNITS[unit]


def _max_age_arg(crash: bool) -> _Check:
    """``check_max_age_arg/2``."""

    def check(field: Field, _args: Table) -> Any:
        if field[0] != "S":
            return _unacceptable(field)
        return None if check_max_age(field[1], crash_without_digits=crash) is not None else Atom("invalid_max_age")

    return check


_QUEUE_TYPES: Final = frozenset({"classic", "quorum", "stream"})
_check_queue_type: Final = _one_of(_QUEUE_TYPES, lambda v: ErlStr.of(f"unsupported queue type '{v}'"))

_QUEUE_MODE: Final = _one_of(frozenset({"default", "lazy"}), lambda v: ErlStr.of(f"unsupported queue mode '{v}'"))


@functools.cache
def _validators(profile: Profile) -> tuple[tuple[str, _Check], ...]:
    """``rabbit_amqqueue:declare_args/0`` of the profile's version, in its order."""
    return (
        ("x-expires", _expires),
        ("x-message-ttl", _message_ttl),
        ("x-dead-letter-exchange", _dlx),
        ("x-dead-letter-routing-key", _dlrk),
        (
            "x-dead-letter-strategy",
            _one_of(frozenset({"at-most-once", "at-least-once"}), lambda v: Atom("invalid_dlx_strategy")),
        ),
        ("x-max-length", _non_neg_int),
        ("x-max-length-bytes", _non_neg_int),
        ("x-max-in-memory-length", _non_neg_int),
        ("x-max-in-memory-bytes", _non_neg_int),
        ("x-max-priority", _max_priority),
        (
            "x-overflow",
            _one_of(
                frozenset({"drop-head", "reject-publish", "reject-publish-dlx"}),
                lambda v: Atom("invalid_overflow"),
            ),
        ),
        *((("x-queue-mode", _QUEUE_MODE),) if profile.validate_queue_mode else ()),
        ("x-queue-version", _queue_version(profile.queue_versions)),
        ("x-single-active-consumer", _bool),
        # 4.3: only quorum queues know these two (other versions: no queue type lists them)
        ("x-consumer-timeout", _non_neg_int),
        ("x-consumer-disconnected-timeout", _non_neg_int),
        ("x-queue-type", _check_queue_type),
        ("x-quorum-initial-group-size", _group_size),
        ("x-max-age", _max_age_arg(profile.max_age_crashes_without_digits)),
        ("x-stream-max-segment-size-bytes", _non_neg_int),
        ("x-stream-filter-size-bytes", _non_neg_int),
        ("x-initial-cluster-size", _group_size),
        (
            "x-queue-leader-locator",
            _one_of(
                # 4.0's rabbit_queue_location (the module that also stopped using x-queue-master-locator) adds
                # min-masters to the accepted locators (live 4.0.5 and 4.3.6)
                _LEADER_LOCATORS
                if profile.queue_master_locator == "crash-if-invalid"
                else _LEADER_LOCATORS | {"min-masters"},
                lambda v: Atom("invalid_queue_locator_arg"),
            ),
        ),
    )


_LEADER_LOCATORS: Final = frozenset({"client-local", "balanced", "random", "least-leaders"})


def _invalid_arg(key: str, rs: str, term: Any) -> errors.PreconditionFailed:
    prefix = f"invalid arg '{key}' for {rs}: "
    return errors.PreconditionFailed(prefix + pretty(term, len(prefix), line_length=255))


def _type_arguments(queue_type: str, profile: Profile) -> tuple[str, ...]:
    if queue_type == "quorum":
        return profile.quorum_queue_arguments
    if queue_type == "stream":
        return profile.stream_queue_arguments
    return profile.classic_queue_arguments


def queue_type_of(args: Table) -> str:
    """The queue type named by ``x-queue-type`` (``"classic"`` when absent or, in 4.3, ``""``)."""
    field = args.get("x-queue-type")
    return "classic" if field is None or field[1] in ("", b"") else str(field[1])


def augment_declare_args(args: Table, *, profile: Profile) -> Table:
    """The arguments RabbitMQ works with and stores: in 4.x a missing ``x-queue-type`` becomes ``"classic"``.

    ``rabbit_amqqueue:augment_declare_args/5`` injects the vhost's default queue type with
    ``rabbit_misc:set_table_value``, which also sorts the table by key. Call it on the client's arguments
    before :func:`validate_new_queue` and store the result; :func:`check_queue_equivalence` applies it to the
    new arguments itself. Returns ``args`` unchanged for other versions (not verified against a 4.x broker).
    """
    if not profile.inject_default_queue_type or "x-queue-type" in args:
        return args
    merged = dict(args)
    merged["x-queue-type"] = ("S", "classic")
    return {k: merged[k] for k in sorted(merged, key=lambda k: k.encode("utf-8", "surrogateescape"))}


def validate_new_queue(
    name: str,
    vhost: str,
    args: Table,
    *,
    durable: bool,
    exclusive: bool,
    auto_delete: bool,
    profile: Profile,
) -> str:
    """Check a ``queue.declare`` of a new queue; return its type, ``"classic"``, ``"quorum"`` or ``"stream"``.

    RabbitMQ's order (``rabbit_channel``'s ``queue.declare`` handler, then
    ``rabbit_amqqueue:check_declare_arguments/3``), after the caller's permission checks:

    1. ``x-dead-letter-exchange`` must be a longstr (RabbitMQ checks this before permissions, so the
       caller may already have done it);
    2. ``x-queue-type``;
    3. the type's own arguments, in ``declare_args`` order;
    4. arguments known only to other queue types, in the client's table order (``check_arguments_key/4``);
    5. 4.3: neither durable nor exclusive -> 541 INTERNAL_ERROR (:data:`TRANSIENT_NONEXCL_TEXT`);
    6. classic: ``x-queue-master-locator`` (:attr:`Profile.queue_master_locator`);
    7. quorum and stream: ``auto-delete``, then ``exclusive-owner``, then ``non-durable``
       (``rabbit_queue_type_util``); a stream's segment size (at most 3,000,000,000) and, from 3.13, its filter
       size (16 - 255).

    ``args`` should already have gone through :func:`augment_declare_args`. Unknown ``x-`` arguments are
    accepted. ``x-delivery-limit`` has no validator; ``x-consumer-timeout`` has one only in 4.3, where it is a
    quorum queue argument (classic queues refuse it as another type's argument). 4.3 accepts
    ``x-queue-type = ""`` (the default type) and any ``x-queue-mode``, and only ``x-queue-version = 2``
    (all verified on 3.10.8, 4.0.5 and 4.3.6).
    """
    rs = errors.rs_queue(name, vhost)
    dlx = args.get("x-dead-letter-exchange")
    if dlx is not None and dlx[0] != "S":
        raise errors.PreconditionFailed(texts.invalid_dlx_type(type_name(dlx[0]), rs))
    qt_field = args.get("x-queue-type")
    if qt_field is not None and not (profile.empty_queue_type_is_default and qt_field == ("S", "")):
        err = _check_queue_type(qt_field, args)
        if err is not None:
            raise _invalid_arg("x-queue-type", rs, err)
    queue_type = queue_type_of(args)
    own = _type_arguments(queue_type, profile)
    for key, check in _validators(profile):
        field = args.get(key)
        if field is not None and key in own and key != "x-queue-type":  # (checked above)
            err = check(field, args)
            if err is not None:
                raise _invalid_arg(key, rs, err)
    known = {
        *profile.classic_queue_arguments,
        *profile.quorum_queue_arguments,
        *profile.stream_queue_arguments,
    }
    foreign = known.difference(own)
    for key in args:
        if key in foreign:
            raise errors.PreconditionFailed(texts.foreign_queue_arg(key, rs, queue_type))
    if not profile.transient_nonexclusive_queues and not durable and not exclusive:
        raise errors.InternalError(TRANSIENT_NONEXCL_TEXT)
    locator = args.get("x-queue-master-locator")
    if queue_type == "classic" and locator is not None:
        # rabbit_classic_queue:declare: 4.3 refuses the deprecated argument; ≤3.13 crashes on an unknown
        # locator when it picks the queue's node (not for exclusive queues, which stay on the local node).
        if profile.queue_master_locator == "denied":
            raise errors.InternalError(QUEUE_MASTER_LOCATOR_TEXT)
        if (
            profile.queue_master_locator == "crash-if-invalid"
            and not exclusive
            and (locator[0] != "S" or locator[1] not in _MASTER_LOCATORS)
        ):
            raise errors.InternalError("")
    if queue_type in ("quorum", "stream"):
        for bad, prop in (
            (auto_delete, "auto-delete"),
            (exclusive, "exclusive-owner"),
            (not durable, "non-durable"),
        ):
            if bad:
                raise errors.PreconditionFailed(f"invalid property '{prop}' for {rs}")
    if queue_type == "stream":
        _check_stream_sizes(args, profile)
    return queue_type


def _check_stream_sizes(args: Table, profile: Profile) -> None:
    """``rabbit_stream_queue:check_max_segment_size_bytes/1`` and ``check_filter_size/1`` (after the argument
    validators, so the segment size is a non-negative integer here)."""
    seg = args.get("x-stream-max-segment-size-bytes")
    if seg is not None and seg[0] in INTEGER_TAGS and seg[1] > MAX_STREAM_MAX_SEGMENT_SIZE:
        raise errors.PreconditionFailed("Exceeded max value for x-stream-max-segment-size-bytes")
    size = args.get("x-stream-filter-size-bytes")
    check = profile.stream_filter_size_check
    if size is None or check == "none":
        return
    # "loose" (3.13 - 4.2): no validator ran and Erlang orders every non-number above 255
    number = number_value(size) if size[0] != "T" else int(size[1])
    if number is None or not 16 <= number <= 255:
        space = "  " if check == "loose" else " "
        raise errors.PreconditionFailed(f"Invalid value for{space}x-stream-filter-size-bytes")


def check_queue_equivalence(
    name: str,
    vhost: str,
    *,
    queue_type: str,
    durable: bool,
    auto_delete: bool,
    stored_args: Table,
    new_durable: bool,
    new_auto_delete: bool,
    new_args: Table,
    profile: Profile,
    exclusive: bool = False,
    new_exclusive: bool = False,
) -> None:
    """Redeclaring an existing queue (``rabbit_amqqueue:assert_equivalence/5``): ``durable``, ``auto_delete``, then
    the type's arguments in order.

    Runs *instead of* the validators: an invalid new value reads ``inequivalent arg``. The
    exclusive-owner check (405) is the caller's and comes first. RabbitMQ compares ``durable and not
    exclusive`` on both sides, so pass the stored and the requested exclusivity when they may be True.

    Texts (verified on 3.10.8, 2026-11-21): ``inequivalent arg 'durable' for queue 'q' in vhost '/': received
    'false' but current is 'true'``; ``inequivalent arg 'x-message-ttl' for queue 'q' in vhost '/': received
    '20' but current is '10'``; ``received the value 'a' of type 'longstr' but current is none``.
    """
    rs = errors.rs_queue(name, vhost)
    new_args = augment_declare_args(new_args, profile=profile)
    _field_equivalence(
        _bool_atom(durable and not exclusive), _bool_atom(new_durable and not new_exclusive), rs, "durable"
    )
    _field_equivalence(_bool_atom(auto_delete), _bool_atom(new_auto_delete), rs, "auto_delete")
    keys = _type_arguments(queue_type, profile)
    if queue_type == "stream" and profile.stream_max_age_equivalence_ms:
        stored_args, new_args = _max_age_in_ms(stored_args), _max_age_in_ms(new_args)
    _args_equivalence(stored_args, new_args, rs, keys, profile.typed_inequivalence_text)


def _max_age_in_ms(args: Table) -> Table:
    """4.3.6 compares a stream's valid ``x-max-age`` as milliseconds (a longstr): ``24h`` equals ``1D``."""
    field = args.get("x-max-age")
    if field is None or field[0] != "S":
        return args
    ms = check_max_age(field[1], crash_without_digits=False)
    if ms is None:
        return args
    return {**args, "x-max-age": ("S", str(ms))}


# ======================================================================================================
# exchanges


def validate_new_exchange(name: str, vhost: str, args: Table) -> None:
    """A new exchange's ``alternate-exchange`` argument must be a longstr (checked only on creation).

    ``invalid type 'signedint' for arg 'alternate-exchange' in exchange 'x' in vhost '/'``
    (verified on 3.10.8, 2026-11-21).
    """
    ae = args.get("alternate-exchange")
    if ae is not None and ae[0] != "S":
        raise errors.PreconditionFailed(
            f"invalid type '{type_name(ae[0])}' for arg 'alternate-exchange' in {errors.rs_exchange(name, vhost)}"
        )


def check_exchange_equivalence(
    name: str,
    vhost: str,
    *,
    current_type: str,
    current_durable: bool,
    current_auto_delete: bool,
    current_internal: bool,
    current_args: Table,
    new_type: str,
    new_durable: bool,
    new_auto_delete: bool,
    new_internal: bool,
    new_args: Table,
    profile: Profile | None = None,
) -> None:
    """Redeclaring an existing exchange: ``type``, ``durable``, ``auto_delete``, ``internal``, then only the
    ``alternate-exchange`` argument (``rabbit_exchange:assert_equivalence/6``; verified on 3.10.8, e.g.
    ``inequivalent arg 'type' for exchange 'x' in vhost '/': received 'fanout' but current is 'direct'``)."""
    rs = errors.rs_exchange(name, vhost)
    _field_equivalence(Atom(current_type), Atom(new_type), rs, "type")
    _field_equivalence(_bool_atom(current_durable), _bool_atom(new_durable), rs, "durable")
    _field_equivalence(_bool_atom(current_auto_delete), _bool_atom(new_auto_delete), rs, "auto_delete")
    _field_equivalence(_bool_atom(current_internal), _bool_atom(new_internal), rs, "internal")
    typed = profile.typed_inequivalence_text if profile is not None else False
    _args_equivalence(current_args, new_args, rs, ("alternate-exchange",), typed)


# ======================================================================================================
# numeric helpers for the policy module


def int_value(field: Field | None) -> int | None:
    """An integer-typed argument's value, else None."""
    if field is None or field[0] not in INTEGER_TAGS:
        return None
    return int(field[1])


def str_value(field: Field | None) -> str | None:
    """A longstr argument's value, else None."""
    if field is None or field[0] != "S":
        return None
    v = field[1]
    return v if isinstance(v, str) else bytes(v).decode("utf-8", "surrogateescape")


def number_value(field: Field | None) -> float | int | None:
    """A numeric argument (integer or float) as a Python number, else None (decimals are Erlang tuples)."""
    if field is None:
        return None
    if field[0] in INTEGER_TAGS:
        return int(field[1])
    if field[0] in _FLOAT_CLASS:
        return float(field[1])
    return None


def check_consumer_timeout_argument(args: Table, name: str, vhost: str, queue_type: str, profile: Profile) -> None:
    """``basic.consume``'s ``x-consumer-timeout`` (``rabbit_amqqueue:check_consume_arguments/3``): from 4.3 a
    consumer argument of quorum queues only (a non-negative integer; other queue types refuse it as another
    type's argument: live 4.3.6). Before 4.3 no queue type knows it: accepted and ignored."""
    field = args.get("x-consumer-timeout")
    if field is None or profile.consumer_timeout != "quorum":
        return
    rs = errors.rs_queue(name, vhost)
    if queue_type != "quorum":
        raise errors.PreconditionFailed(
            f"invalid arg 'x-consumer-timeout' for {rs} of queue type rabbit_{queue_type}_queue"
        )
    err = _non_neg_int(field, args)
    if err is not None:
        raise _invalid_arg("x-consumer-timeout", rs, err)
