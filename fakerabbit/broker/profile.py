"""Version profiles: the RabbitMQ behaviours that differ between releases, as plain switches.

``FakeRabbit(rabbitmq_version="3.12")`` picks a profile with :func:`get_profile`; broker code asks the profile
and never compares version strings. Each field says what changed and, where it is not obvious, the RabbitMQ
code that changed; tests/unit/test_profile.py pins every family's values and the conformance tests check them
against the live brokers.

Families:

========  ==============  ==========================================================================
family    versions        notes
========  ==============  ==========================================================================
``3.10``  3.0 - 3.11      LEGACY messages. Checked against a live 3.10.8 broker.
``3.12``  3.12            LEGACY messages; queue-type-specific policy ``apply-to`` values.
``3.13``  3.13            MC (message containers), 3.13.3 - 3.13.7 semantics.
``4.0``   4.0, 4.1, 4.2   client x-death ignored; quorum delivery-limit 20 counting acquisitions. Live 4.0.5.
``4.3``   4.3             delivery-limit counts failed deliveries; declare-argument changes. Live 4.3.6.
========  ==============  ==========================================================================

The ``inequivalent arg`` rendering is the same in every version (checked in ``rabbit_misc.erl`` of 3.8 -
4.x and on the live 3.10.8 broker): when *both* values are present they are printed without types
(``received '20' but current is '10'``); the typed form (``the value '20' of type 'signedint'``) is only used
for the side that is present when the other side is absent (``... but current is none``).
:attr:`Profile.typed_inequivalence_text` therefore stays ``False`` in every profile.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Final, Literal

__all__ = ["ACCEPTED_VERSIONS", "AMQPRules", "ConsumerTimeoutRule", "Profile", "get_profile"]

ClientXDeath = Literal["edit", "parse", "ignore"]
DeliveryLimitCounter = Literal["returns", "acquired", "failed"]
QueueMasterLocator = Literal["crash-if-invalid", "ignored", "denied"]
QuorumPriorities = Literal["none", "two", "strict"]
ConsumerTimeoutRule = Literal["node", "queue", "quorum"]


@dataclass(frozen=True, slots=True)
class AMQPRules:
    """AMQP 0-9-1 wire rules of ``rabbit_reader``, ``rabbit_command_assembler`` and ``rabbit_channel`` that
    changed between releases (checked live on 3.10.8, 4.0.5 and 4.3.6, and in RabbitMQ's source)."""

    #: Octets in texts are printed with ``~tp`` and the text is sent as UTF-8 (3.12+): a Latin-1 binary reads
    #: ``<<"été">>``, a UTF-8 one ``<<"ét"/utf8>>``; before, ``~p`` and the raw octets.
    unicode_texts: bool = False
    #: A protocol header that is not 0-9-1 is answered with the AMQP 1.0 SASL header ``AMQP 3 1 0 0`` unless
    #: it is ``AMQP 0 0 9+ x`` (4.0+, native AMQP 1.0); before, always with the 0-9-1 header.
    sasl_refusal_header: bool = False
    #: A delivery mode other than 1 or 2 is a 406 ``delivery_mode_unknown`` (up to 3.13; 4.x accepts any).
    check_delivery_mode: bool = True
    #: ``basic.credit`` is a channel method (up to 3.13); from 4.0 it is 503 ``unimplemented method``.
    basic_credit: bool = True
    #: ``?FRAME_MIN_SIZE``: the frame_max before tune-ok and the lowest tune-ok value (4096; 8192 from 4.1).
    frame_min_size: int = 4096
    #: The assembler refuses a body frame longer than what remains and a body size above 512 MiB with 501
    #: FRAME_ERROR (4.3+); before, a longer body leaves the assembler waiting.
    strict_content_size: bool = False
    #: A client's ``basic.cancel-ok`` cancels that consumer without a reply (an unknown tag crashes the channel:
    #: 541) (4.3+); before, 503 ``unimplemented method``.
    client_cancel_ok: bool = False
    #: RabbitMQ's default ``max_message_size``: a larger body is a 406 (128 MiB up to 3.13, 16 MiB from 4.0).
    max_message_size: int = 134217728
    #: ``connection.start``'s ``copyright`` server property.
    copyright: str = "Copyright (c) 2007-2022 VMware, Inc. or its affiliates."
    #: The Erlang/OTP release in the ``platform`` server property.
    erlang_otp: str = "25.2.3"


@dataclass(frozen=True, slots=True)
class Profile:
    """Behaviour switches of one RabbitMQ release family."""

    #: The requested ``major.minor`` ("3.12", "4.1", ...).
    name: str
    #: The server-properties ``version`` the fake announces.
    server_version: str

    # -- dead-lettering -------------------------------------------------------------------------------------
    #: ``x-last-death-{reason,queue,exchange}`` headers (3.13+, ``mc:record_death``).
    last_death_headers: bool
    #: Keep the ``CC`` header on a dead-lettered copy when a DLRK replaced the routing keys (3.13+,
    #: ``dead_lettering_SUITE:dead_letter_headers_CC_with_routing_key``).
    keep_cc_with_dlrk: bool
    #: A client-published ``x-death`` is edited in place (≤3.12), parsed (3.13) or ignored (4.x: 4.0.1 release notes).
    client_x_death: ClientXDeath
    #: x-death table field order of the MC code (3.13+, ``mc_amqpl:death_table/7``) instead of the LEGACY order.
    x_death_mc_order: bool
    #: Re-render ``expiration`` / ``original-expiration`` from the parsed number ("007" -> "7") (3.13+).
    normalise_expiration: bool

    # -- quorum queue delivery limit ------------------------------------------------------------------------
    #: The limit when none is configured: ``None`` (no limit) ≤3.13, 20 in 4.x.
    delivery_limit_default: int | None
    #: What the limit counts (``rabbit_fifo:return_one``): every return (≤3.13), acquisitions (4.0-4.2), failed
    #: deliveries (4.3+).
    delivery_limit_counter: DeliveryLimitCounter
    #: ``x-acquired-count`` header on redelivered quorum messages (4.3+).
    acquired_count_header: bool
    #: ``x-delivery-count`` is already present (as 0) on the first ``basic.get`` (LEGACY; seen on 3.10.8;
    #: a consumer's first delivery has none).
    delivery_count_header_from_zero: bool
    #: A negative delivery limit means "unlimited" and wins over a positive one (max),
    #: and the ``delivery-limit`` policy accepts negative integers (4.x). Before, the policy must be ≥ 0.
    negative_delivery_limit_unlimited: bool

    # -- consumers ------------------------------------------------------------------------------------------
    #: ``basic.qos`` with ``global=true`` limits the whole channel (≤4.2). From 4.3.0 the deprecated feature
    #: ``global_qos`` is ``denied_by_default``: rabbit_channel handles it as ``global=false`` (a per-consumer
    #: prefetch for consumers started later; quorum queues consume on such a channel). Live 4.0.5 vs 4.3.6.
    global_qos: bool
    #: 4.3: failed deliveries travel with a dead-lettered message (mc annotation ``delivery_count``): a classic
    #: queue counts them (``rabbit_variable_queue``: ``basic.reject`` and a consumer's channel going down count,
    #: ``basic.nack`` does not), a copy dead-lettered with a count is delivered as redelivered from the next
    #: queue (a quorum queue also shows it as ``x-delivery-count`` / ``x-acquired-count`` and counts its
    #: delivery limit on from it). Live 4.3.6; 4.0.5 never shows a dead-lettered copy as redelivered.
    dead_letter_delivery_count: bool
    #: 4.3: ``queue.purge`` of an at-least-once quorum queue purges the dead letters it holds too
    #: (``rabbit_fifo`` ``dlx_purge``, new in 4.3.0): ``purge-ok`` counts them (live 4.3.6: 3 for 1 ready + 2
    #: held; 4.0.5: 1), they stop counting against the length limits (a channel that ``reject-publish`` blocked
    #: is let in again), yet the worker still delivers those it had taken.
    purge_takes_held_dead_letters: bool
    #: Message priorities in quorum queues: none (≤3.13, FIFO); 4.0-4.2 two classes, priority > 4 "high", taken
    #: two high to one normal unless the normal one is older (``rabbit_fifo_q``, weight 2); 4.3 strict order of
    #: 32 levels, no priority counting as 4 (``rabbit_fifo_pq``). Returned messages come first in every version.
    #: Live 3.10.8, 4.0.5, 4.3.6.
    quorum_priorities: QuorumPriorities
    #: 4.x quorum queues with single active consumer honour consumer priorities (rabbit_fifo
    #: ``activate_next_consumer``): a waiting consumer of higher priority takes over once the active one has no
    #: unacknowledged messages (the active one gets nothing more meanwhile). Live 4.0.5 and 4.3.6; 3.10.8 not.
    quorum_sac_priority: bool
    #: Direct reply-to is a volatile queue (4.3, ``rabbit_volatile_queue``): a reply takes the requester
    #: channel's next delivery tag, and a reply whose token names a channel of this node counts as routed
    #: (mandatory: no return, even when that channel has gone). Before, replies reuse the next tag without
    #: taking it, a mandatory reply is always returned (312 NO_ROUTE) and a token with two parts whose first
    #: is not an encoded pid crashes the connection (541). Live 3.10.8, 4.0.5, 4.3.6.
    reply_to_volatile_queue: bool

    # -- policies ---------------------------------------------------------------------------------------------
    #: Keys an operator policy may contain (``rabbit_policies:register/0``).
    operator_policy_keys: frozenset[str]
    #: Policy keys that make a policy skip quorum queues (``rabbit_quorum_queue`` ``unsupported_policies``).
    unsupported_qq_policy_keys: frozenset[str]
    #: Policy keys that make a policy skip classic queues (``rabbit_classic_queue`` ``unsupported_policies``).
    unsupported_classic_policy_keys: frozenset[str]
    #: ``apply-to`` may name a queue type (``classic_queues``, ``quorum_queues``, ``streams``) (3.12+).
    queue_type_apply_to: bool
    #: The classic mirroring keys (``ha-*``) are still recognised policy settings (≤3.13).
    ha_policy_keys: bool
    #: Policy keys recognised only from some version on (3.12: ``consumer-timeout``; 3.13: ``target-group-size``,
    #: ``stream-filter-size-bytes``; 4.3: ``consumer-disconnected-timeout``, ``delayed-retry-*``).
    extra_policy_keys: frozenset[str]

    # -- queue.declare -----------------------------------------------------------------------------------------
    #: Render both sides of an ``inequivalent arg`` error with types. No released version does.
    typed_inequivalence_text: bool
    #: 4.x: a declare without ``x-queue-type`` gets ``x-queue-type = "classic"`` stored in its arguments (the
    #: vhost default queue type), so a later redeclare as quorum reads ``received 'quorum' but current is
    #: 'classic'`` instead of ``... but current is none``.
    inject_default_queue_type: bool
    #: 4.3: a queue that is neither durable nor exclusive is refused with 541 INTERNAL_ERROR
    #: (deprecated feature ``transient_nonexcl_queues`` denied by default).
    transient_nonexclusive_queues: bool
    #: ``rabbit_classic_queue:capabilities()`` ``queue_arguments``, in order (equivalence check order).
    classic_queue_arguments: tuple[str, ...]
    #: ``rabbit_quorum_queue:capabilities()`` ``queue_arguments``, in order.
    quorum_queue_arguments: tuple[str, ...]
    #: ``rabbit_stream_queue:capabilities()`` ``queue_arguments`` (only used to reject them on other types).
    stream_queue_arguments: tuple[str, ...]
    #: ``x-queue-mode`` is validated (``default`` / ``lazy``); 4.3 dropped the validator and accepts any value.
    validate_queue_mode: bool
    #: The ``x-queue-version`` values accepted: 1 and 2 before 4.3, only 2 in 4.3.
    queue_versions: tuple[int, ...]
    #: 4.3: ``x-queue-type = ""`` means the default queue type (stored as sent); before, 406 ``unsupported
    #: queue type ''``.
    empty_queue_type_is_default: bool
    #: ``x-queue-master-locator`` on a classic queue: ``"crash-if-invalid"`` (≤3.13: a value that is not a
    #: known locator, on a queue that is not exclusive, crashes the declare: 541 INTERNAL_ERROR without text),
    #: ``"ignored"`` (4.0 - 4.2) or ``"denied"`` (4.3: deprecated feature ``queue_master_locator`` denied by
    #: default, 541 with the deprecation warning, exclusive queues too).
    queue_master_locator: QueueMasterLocator

    # -- queue.delete, exchange.declare -------------------------------------------------------------------
    #: 3.13.3+: an unknown exchange type is a channel error 406 PRECONDITION_FAILED instead of a connection
    #: error 503 COMMAND_INVALID (rabbitmq-server #11214).
    unknown_exchange_type_is_channel_error: bool
    #: The exchange types a declare accepts: the four AMQP ones, ``x-local-random`` (4.0+) and
    #: ``x-modulus-hash`` (4.3+).
    exchange_types: tuple[str, ...]

    # -- access control -----------------------------------------------------------------------------------
    #: 4.x: a refused resource access names the permission (``ACCESS_REFUSED - read access to queue 'q' in
    #: vhost '/' refused for user 'u'``); 3.x says ``access to queue …`` (checked live on 3.10.8, 4.0.5, 4.3.6).
    access_refused_names_permission: bool = False
    #: 3.13+: messages are message containers (``mc``). Plugins built on them read typed ``x-`` headers through
    #: ``mc:x_header`` and add ``x-`` annotations that are delivered as ``long`` headers (the delayed-message
    #: exchange's ``x-delay``: see fakerabbit/broker/delayed.py).
    message_containers: bool = False
    # -- AMQP 0-9-1 wire rules --------------------------------------------------------------------------
    #: What the reader, the content assembler and the channel accept on the wire.
    amqp: AMQPRules = AMQPRules()
    #: 4.3: a quorum queue counts a message's property block with its body in ``message_bytes`` and the
    #: ``x-max-length-bytes`` limit (live 4.3.6: a 2-byte body with ``content_type: text/plain`` counts 15);
    #: 4.0.5 and 3.10.8 count the body only.
    quorum_bytes_include_properties: bool = False
    #: 4.2+: the 405 for ``basic.get`` on a quorum queue with single active consumer prints the queue type as an
    #: Erlang term (``… not supported by <<"quorum">> queues …``); before, ``quorum queues`` (live: 3.10.8 and
    #: 4.0.5 the latter, 4.3.6 the former; the text changed in rabbit_channel in 4.2.0).
    sac_get_error_prints_type_term: bool = False
    #: Who times out a delivery left unacknowledged (``fakerabbit.broker.consumer_timeout``): ``"node"``
    #: (≤3.11) the channel, on its 60 s tick, after the node's ``consumer_timeout``; ``"queue"`` (3.12 - 4.2)
    #: the same, with the queue's ``consumer-timeout`` policy / ``x-consumer-timeout`` argument in place of the
    #: node's value; ``"quorum"`` (4.3) quorum queues only, at the deadline, with ``x-consumer-timeout`` also a
    #: consumer argument: the deliveries are returned and the consumer cancelled. RabbitMQ's source
    #: (rabbit_channel, rabbit_fifo, rabbit_queue_type) and live 3.10.8, 4.0.5, 4.3.6.
    consumer_timeout: ConsumerTimeoutRule = "node"

    # -- stream queues (fakerabbit/broker/stream.py; notes/rabbitmq-streams-observed.md) -------------------------
    #: ``rabbit_stream_queue:capabilities()`` ``unsupported_policies``: a policy with any of these keys skips
    #: streams.
    unsupported_stream_policy_keys: frozenset[str] = frozenset()
    #: The stream's ``consumer_arguments`` (refused on other queue types: ``invalid arg … of queue type``):
    #: ``x-stream-offset``, and from 4.0 ``x-stream-filter`` and ``x-stream-match-unfiltered``.
    stream_consumer_arguments: tuple[str, ...] = ("x-stream-offset",)
    #: Other queue types' consumer arguments, refused on a stream (3.x: ``x-priority``, ``x-cancel-on-ha-failover``;
    #: 4.0: ``x-priority``; 4.3: ``x-priority``, ``x-consumer-timeout``).
    stream_foreign_consumer_arguments: tuple[str, ...] = ("x-priority", "x-cancel-on-ha-failover")
    #: 4.x texts: ``… is not set for stream queue 'q' …``, ``… not supported by stream queue 'q' …``; 3.x says
    #: ``for 'queue 'q' in vhost '/''`` and ``by stream queues queue 'q' …``.
    stream_v4_texts: bool = False
    #: 3.13+: ``basic.nack``, ``basic.reject`` and ``basic.recover`` credit a stream consumer like an ack; before,
    #: nack/reject are 540 and recover crashes the channel (541).
    stream_settle_any: bool = False
    #: 3.13+: stream filtering (``x-stream-filter-value``, ``x-stream-filter``, ``x-stream-match-unfiltered``).
    stream_filtering: bool = False
    #: ``x-stream-filter-size-bytes`` on a stream: ``"none"`` (unknown argument, ≤3.12), ``"loose"`` (3.13 - 4.2:
    #: not a validated queue argument; anything but an integer in 16..255 is ``Invalid value for  x-stream-…``,
    #: two spaces), ``"strict"`` (4.3: validated integer, then ``Invalid value for x-stream-…``).
    stream_filter_size_check: Literal["none", "loose", "strict"] = "none"
    #: ``x-max-age`` (and an interval ``x-stream-offset``) without leading digits crashes ``check_max_age/1``
    #: (541) up to 4.2; 4.3 refuses it with ``invalid_max_age`` (rabbitmq-server #16282).
    max_age_crashes_without_digits: bool = True
    #: 4.3.6: ``x-max-age`` is compared in milliseconds when a stream is redeclared (``24h`` equals ``1D``).
    stream_max_age_equivalence_ms: bool = False
    #: osiris ≥ 1.4 (RabbitMQ 3.11+) re-evaluates an age limit every hour while more than one segment remains.
    stream_hourly_retention: bool = False
    #: 3.12+: a message that does not come from a channel (dead-lettered, from a delayed exchange) is written to a
    #: stream; 3.10.8 drops it (``rabbit_stream_queue:deliver/2``: "TODO what do we do with stateless?").
    stream_stateless_writes: bool = False
    #: 4.x management API shows a stream's statistics (``leader``, ``members``, ``messages``, ``segments`` …);
    #: 3.10.8 shows only its declare fields.
    stream_management_stats: bool = False

    @property
    def release(self) -> tuple[int, int]:
        """The requested ``(major, minor)``: code that differs by release and has no switch of its own (the
        management API's shapes) compares this, never a version string."""
        major, _, minor = self.name.partition(".")
        return int(major), int(minor)


# -------------------------------------------------------------------------------------------------------
# building blocks

_OPERATOR_KEYS_312: Final = frozenset(
    {
        "expires",
        "message-ttl",
        "max-length",
        "max-length-bytes",
        "max-in-memory-length",
        "max-in-memory-bytes",
        "delivery-limit",
    }
)
_OPERATOR_KEYS_313: Final = _OPERATOR_KEYS_312 | {"queue-version", "overflow", "target-group-size"}
_OPERATOR_KEYS_40: Final = _OPERATOR_KEYS_313 | {"queue-master-locator"}  # live 4.0.5
_OPERATOR_KEYS_43: Final = _OPERATOR_KEYS_40 | {"delayed-retry-type", "delayed-retry-min", "delayed-retry-max"}

_HA_KEYS: Final = frozenset({"ha-mode", "ha-params", "ha-sync-mode", "ha-promote-on-shutdown", "ha-promote-on-failure"})
_UNSUPPORTED_CLASSIC: Final = frozenset(
    {
        "delivery-limit",
        "dead-letter-strategy",
        "max-in-memory-length",
        "max-in-memory-bytes",
        "target-group-size",
        "max-age",
        "stream-max-segment-size-bytes",
        "initial-cluster-size",
    }
)
_UNSUPPORTED_QQ: Final = frozenset(
    {
        "max-priority",
        "queue-mode",
        "queue-master-locator",
        "max-age",
        "stream-max-segment-size-bytes",
        "initial-cluster-size",
    }
    | _HA_KEYS
)

_UNSUPPORTED_STREAM_310: Final = frozenset(
    {
        "expires",
        "message-ttl",
        "dead-letter-exchange",
        "dead-letter-routing-key",
        "max-length",
        "max-in-memory-length",
        "max-in-memory-bytes",
        "max-priority",
        "overflow",
        "queue-mode",
        "single-active-consumer",
        "delivery-limit",
        "queue-master-locator",
        "dead-letter-strategy",
    }
    | _HA_KEYS
)

_CLASSIC_ARGS: Final = (
    "x-expires",
    "x-message-ttl",
    "x-dead-letter-exchange",
    "x-dead-letter-routing-key",
    "x-max-length",
    "x-max-length-bytes",
    "x-max-priority",
    "x-overflow",
    "x-queue-mode",
    "x-queue-version",
    "x-single-active-consumer",
    "x-queue-type",
    "x-queue-master-locator",
)
_QUORUM_ARGS: Final = (
    "x-dead-letter-exchange",
    "x-dead-letter-routing-key",
    "x-dead-letter-strategy",
    "x-expires",
    "x-max-length",
    "x-max-length-bytes",
    "x-max-in-memory-length",
    "x-max-in-memory-bytes",
    "x-overflow",
    "x-single-active-consumer",
    "x-queue-type",
    "x-quorum-initial-group-size",
    "x-delivery-limit",
    "x-message-ttl",
    "x-queue-leader-locator",
)
_STREAM_ARGS: Final = (
    "x-max-length-bytes",
    "x-queue-type",
    "x-max-age",
    "x-stream-max-segment-size-bytes",
    "x-initial-cluster-size",
    "x-queue-leader-locator",
)

_AMQP_EXCHANGE_TYPES: Final = ("direct", "fanout", "topic", "headers")

_P310: Final = Profile(
    name="3.10",
    server_version="3.10.8",
    last_death_headers=False,
    keep_cc_with_dlrk=False,
    client_x_death="edit",
    x_death_mc_order=False,
    normalise_expiration=False,
    delivery_limit_default=None,
    delivery_limit_counter="returns",
    acquired_count_header=False,
    delivery_count_header_from_zero=True,
    negative_delivery_limit_unlimited=False,
    global_qos=True,
    reply_to_volatile_queue=False,
    dead_letter_delivery_count=False,
    purge_takes_held_dead_letters=False,
    quorum_priorities="none",
    quorum_sac_priority=False,
    operator_policy_keys=_OPERATOR_KEYS_312,
    unsupported_qq_policy_keys=_UNSUPPORTED_QQ,
    unsupported_classic_policy_keys=_UNSUPPORTED_CLASSIC,
    queue_type_apply_to=False,
    ha_policy_keys=True,
    extra_policy_keys=frozenset(),
    typed_inequivalence_text=False,
    inject_default_queue_type=False,
    transient_nonexclusive_queues=True,
    classic_queue_arguments=_CLASSIC_ARGS,
    quorum_queue_arguments=_QUORUM_ARGS,
    stream_queue_arguments=_STREAM_ARGS,
    validate_queue_mode=True,
    queue_versions=(1, 2),
    empty_queue_type_is_default=False,
    queue_master_locator="crash-if-invalid",
    unknown_exchange_type_is_channel_error=False,
    exchange_types=_AMQP_EXCHANGE_TYPES,
    unsupported_stream_policy_keys=_UNSUPPORTED_STREAM_310,
)
_P312: Final = replace(
    _P310,
    name="3.12",
    server_version="3.12.14",
    queue_type_apply_to=True,
    amqp=AMQPRules(unicode_texts=True),
    stream_hourly_retention=True,
    stream_stateless_writes=True,
    consumer_timeout="queue",
    extra_policy_keys=frozenset({"consumer-timeout"}),  # rabbit_policies from 3.12.0
)
_P313: Final = replace(
    _P312,
    name="3.13",
    server_version="3.13.7",
    amqp=replace(
        _P312.amqp, copyright="Copyright (c) 2007-2024 Broadcom Inc and/or its subsidiaries", erlang_otp="26.2.5"
    ),
    last_death_headers=True,
    keep_cc_with_dlrk=True,
    client_x_death="parse",
    x_death_mc_order=True,
    message_containers=True,
    normalise_expiration=True,
    delivery_count_header_from_zero=False,
    operator_policy_keys=_OPERATOR_KEYS_313,
    unsupported_qq_policy_keys=_UNSUPPORTED_QQ | {"single-active-consumer"},
    unknown_exchange_type_is_channel_error=True,
    extra_policy_keys=frozenset({"target-group-size", "consumer-timeout", "stream-filter-size-bytes"}),
    stream_settle_any=True,
    stream_filtering=True,
    stream_filter_size_check="loose",
)
_P40: Final = replace(
    _P313,
    name="4.0",
    server_version="4.0.0",
    access_refused_names_permission=True,
    client_x_death="ignore",
    quorum_priorities="two",
    quorum_sac_priority=True,
    delivery_limit_default=20,
    delivery_limit_counter="acquired",
    negative_delivery_limit_unlimited=True,
    ha_policy_keys=False,
    extra_policy_keys=frozenset({"target-group-size", "consumer-timeout", "stream-filter-size-bytes"}),
    operator_policy_keys=_OPERATOR_KEYS_40,
    unsupported_qq_policy_keys=_UNSUPPORTED_QQ,
    inject_default_queue_type=True,
    classic_queue_arguments=(*_CLASSIC_ARGS, "x-queue-leader-locator"),
    queue_master_locator="ignored",
    exchange_types=(*_AMQP_EXCHANGE_TYPES, "x-local-random"),
    amqp=replace(
        _P313.amqp, sasl_refusal_header=True, check_delivery_mode=False, basic_credit=False, max_message_size=16777216
    ),
    unsupported_stream_policy_keys=_UNSUPPORTED_STREAM_310 | {"target-group-size"},
    stream_consumer_arguments=("x-stream-offset", "x-stream-filter", "x-stream-match-unfiltered"),
    stream_foreign_consumer_arguments=("x-priority",),
    stream_v4_texts=True,
    stream_management_stats=True,
)
_AMQP_41: Final = replace(
    _P40.amqp,
    frame_min_size=8192,
    copyright="Copyright (c) 2007-2025 Broadcom Inc and/or its subsidiaries",
    erlang_otp="27.3",
)
_P43: Final = replace(
    _P40,
    name="4.3",
    server_version="4.3.0",
    delivery_limit_counter="failed",
    quorum_bytes_include_properties=True,
    acquired_count_header=True,
    global_qos=False,
    reply_to_volatile_queue=True,
    dead_letter_delivery_count=True,
    purge_takes_held_dead_letters=True,
    quorum_priorities="strict",
    # Permitted on purpose (docs/compatibility.md): RabbitMQ gates this deprecated feature by node
    # configuration (``deprecated_features.permit.transient_nonexcl_queues``), and test suites declare such
    # queues everywhere.
    transient_nonexclusive_queues=True,
    quorum_queue_arguments=(
        *_QUORUM_ARGS,
        "x-consumer-disconnected-timeout",
        "x-consumer-timeout",
        "x-delayed-retry-type",
        "x-delayed-retry-min",
        "x-delayed-retry-max",
    ),
    stream_queue_arguments=(*_STREAM_ARGS[:4], "x-stream-filter-size-bytes", *_STREAM_ARGS[4:]),
    validate_queue_mode=False,
    queue_versions=(2,),
    empty_queue_type_is_default=True,
    queue_master_locator="denied",
    operator_policy_keys=_OPERATOR_KEYS_43,
    extra_policy_keys=_P40.extra_policy_keys
    | {"consumer-disconnected-timeout", "delayed-retry-type", "delayed-retry-min", "delayed-retry-max"},
    exchange_types=(*_AMQP_EXCHANGE_TYPES, "x-local-random", "x-modulus-hash"),
    amqp=replace(_AMQP_41, strict_content_size=True, client_cancel_ok=True),
    sac_get_error_prints_type_term=True,
    # 4.3 streams accept a single-active-consumer policy (it is for the stream protocol)
    unsupported_stream_policy_keys=_P40.unsupported_stream_policy_keys - {"single-active-consumer"},
    stream_foreign_consumer_arguments=("x-priority", "x-consumer-timeout"),
    stream_filter_size_check="strict",
    max_age_crashes_without_digits=False,
    stream_max_age_equivalence_ms=True,
    consumer_timeout="quorum",
)
_P42: Final = replace(_P40, sac_get_error_prints_type_term=True)

# requested major.minor -> (family profile, announced server version)
_VERSIONS: Final[dict[str, tuple[Profile, str]]] = {
    "3.10": (_P310, "3.10.8"),
    "3.11": (_P310, "3.11.0"),
    "3.12": (_P312, "3.12.14"),
    "3.13": (_P313, "3.13.7"),
    "4.0": (_P40, "4.0.0"),
    "4.1": (replace(_P40, amqp=_AMQP_41), "4.1.0"),
    "4.2": (replace(_P42, amqp=_AMQP_41), "4.2.0"),
    "4.3": (_P43, "4.3.0"),
}
#: The versions :func:`get_profile` accepts (any earlier 3.x maps to the 3.10 profile too).
ACCEPTED_VERSIONS: Final = tuple(_VERSIONS)
_NEWEST: Final = "4.3"
_VERSION_RE: Final = re.compile(r"(\d+)\.(\d+)(?:\.\d+)?")


def get_profile(version: str | None = None) -> Profile:
    """The profile for a RabbitMQ version: ``"3.12"``, ``"4.1"``, ``"3.13.7"`` …; ``None`` means the newest.

    A patch number is accepted and ignored. Any 3.x older than 3.10 gets the 3.10 profile. Anything else
    raises ``ValueError`` listing the accepted versions.
    """
    if version is None:
        version = _NEWEST
    m = _VERSION_RE.fullmatch(version.strip())
    if m is not None:
        major, minor = int(m.group(1)), int(m.group(2))
        key = f"{major}.{minor}"
        if key in _VERSIONS:
            profile, server_version = _VERSIONS[key]
            return replace(profile, name=key, server_version=server_version)
        if major == 3 and minor < 10:
            return replace(_P310, name=key, server_version=f"{key}.0")
    raise ValueError(
        f"unsupported RabbitMQ version {version!r}; accepted: {', '.join(ACCEPTED_VERSIONS)} "
        "(or any earlier 3.x, treated as 3.10)"
    )
