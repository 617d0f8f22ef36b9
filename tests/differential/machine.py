"""The hypothesis state machine: random operation sequences, each step run on both brokers and compared."""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any, ClassVar

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, rule

from tests.differential import ops as O
from tests.differential.engine import Difference, Pair

queues = st.sampled_from(O.QUEUES)
exchanges = st.sampled_from(O.EXCHANGES)
channels = st.sampled_from(O.CHANNELS)
routing_keys = st.sampled_from(("k1", "k2", "k1.a", *O.QUEUES))
binding_keys = st.sampled_from(("", "k1", "k2", "k1.a", "k1.*", "#", *O.QUEUES))
header_bindings = st.sampled_from(
    (
        {},
        {"x-match": "any", "h": "a"},
        {"x-match": "all", "h": "a", "g": "b"},
        {"x-match": "any-with-x", "x-h": "a"},
        {"x-match": "all", "h": "a"},
    )
)

_dlx = {
    "x-dead-letter-exchange": st.sampled_from(("", *O.EXCHANGES)),
    "x-message-ttl": st.sampled_from((0, 60000)),
    "x-max-length": st.integers(0, 3),
}


def _with_dl_key(args: dict[str, Any], key: str | None) -> dict[str, Any]:
    if key is not None and "x-dead-letter-exchange" in args:
        return {**args, "x-dead-letter-routing-key": key}
    return args


_dl_keys = st.one_of(st.none(), st.sampled_from(("k1", *O.QUEUES)))
#: Arguments RabbitMQ accepts for a classic queue / a quorum queue, and (rarely) any mix, to compare refusals too.
classic_args = st.builds(
    _with_dl_key,
    st.fixed_dictionaries(
        {},
        optional={
            **_dlx,
            "x-overflow": st.sampled_from(("drop-head", "reject-publish", "reject-publish-dlx")),
            "x-max-priority": st.integers(1, 3),
            "x-single-active-consumer": st.just(True),
            "x-max-length-bytes": st.integers(0, 6),
        },
    ),
    _dl_keys,
)
quorum_args = st.builds(
    _with_dl_key,
    st.fixed_dictionaries(
        {},
        optional={
            **_dlx,
            "x-overflow": st.sampled_from(("drop-head", "reject-publish", "reject-publish")),
            "x-delivery-limit": st.integers(0, 2),
            "x-dead-letter-strategy": st.sampled_from(("at-least-once", "at-most-once")),
            "x-max-length-bytes": st.integers(0, 6),
            "x-single-active-consumer": st.just(True),
        },
    ),
    _dl_keys,
)
stream_args = st.fixed_dictionaries(
    {},
    optional={
        "x-max-age": st.sampled_from(("1h", "7D")),
        "x-max-length-bytes": st.integers(0, 1000),
    },
)
any_args = st.fixed_dictionaries(
    {},
    optional={
        "x-max-length": st.integers(0, 3),
        "x-overflow": st.sampled_from(("drop-head", "reject-publish", "reject-publish-dlx")),
        "x-dead-letter-exchange": st.sampled_from(("", *O.EXCHANGES)),
        "x-dead-letter-routing-key": st.sampled_from(("k1", *O.QUEUES)),
        "x-message-ttl": st.sampled_from((0, 60000)),
        "x-max-priority": st.integers(1, 3),
        "x-delivery-limit": st.integers(0, 2),
    },
)


def _declare_queue(
    kind: str, durable: bool, args: dict[str, Any], queue: str, passive: bool, ch: int
) -> O.DeclareQueue:
    return O.DeclareQueue(queue, kind=kind, durable=durable, args=args, passive=passive, ch=ch)


classic_declares = st.builds(
    _declare_queue,
    st.just("classic"),
    st.sampled_from((False, False, True)),
    st.one_of(classic_args, classic_args, classic_args, any_args),
    queues,
    st.just(False),
    channels,
)
quorum_declares = st.builds(
    _declare_queue,
    st.just("quorum"),
    st.sampled_from((True, True, True, True, True, False)),
    st.one_of(quorum_args, quorum_args, quorum_args, any_args),
    queues,
    st.just(False),
    channels,
)
stream_declares = st.builds(
    _declare_queue,
    st.just("stream"),
    st.sampled_from((True, True, True, True, True, False)),
    st.one_of(stream_args, stream_args, stream_args, any_args),
    queues,
    st.just(False),
    channels,
)
passive_declares = st.builds(O.DeclareQueue, queues, passive=st.just(True), ch=channels)

#: Header tables are published in the order generated: RabbitMQ 3.13+ delivers them sorted by key whatever order
#: they were published in, 3.10 keeps it (FOUND.md 3, modelled since). ``FAKERABBIT_DIFF_SORTED_HEADERS=1``
#: publishes them sorted (which hides that rule from a campaign).
_SORT_HEADERS = os.environ.get("FAKERABBIT_DIFF_SORTED_HEADERS", "") not in ("", "0")


def _order(headers: dict[str, Any] | None) -> dict[str, Any] | None:
    return dict(sorted(headers.items())) if headers is not None and _SORT_HEADERS else headers


publish_headers = st.one_of(
    st.none(),
    st.fixed_dictionaries(
        {},
        optional={
            "CC": st.lists(st.sampled_from(("k1", "k2", *O.QUEUES)), min_size=1, max_size=2),
            "BCC": st.lists(st.sampled_from(("k1", "k2", *O.QUEUES)), min_size=1, max_size=2),
            "h": st.sampled_from(("a", "b")),
            "x-h": st.just("a"),
            "g": st.just("b"),
        },
    ).map(_order),
)
publishes = st.builds(
    O.Publish,
    st.sampled_from(("", *O.EXCHANGES)),
    routing_keys,
    mandatory=st.booleans(),
    priority=st.one_of(st.none(), st.integers(0, 5)),
    expiration=st.sampled_from((None, None, "0", "60000")),
    persistent=st.booleans(),
    headers=publish_headers,
    ch=channels,
    immediate=st.sampled_from((False,) * 15 + (True,)),
)


_rarely_true = st.sampled_from((False, False, False, True))
topology_ops = st.one_of(
    st.builds(O.DeleteQueue, queues, if_unused=_rarely_true, if_empty=_rarely_true, ch=channels),
    st.builds(O.PurgeQueue, queues, ch=channels),
    st.builds(
        O.DeclareExchange,
        exchanges,
        st.sampled_from(("direct", "fanout", "topic", "headers")),
        alternate=st.one_of(st.none(), exchanges),
        passive=_rarely_true,
        ch=channels,
    ),
    st.builds(O.DeleteExchange, exchanges, if_unused=st.booleans(), ch=channels),
    st.builds(O.Bind, queues, exchanges, binding_keys, args=header_bindings, unbind=_rarely_true),
    st.builds(O.Bind, queues, exchanges, binding_keys, args=header_bindings, unbind=_rarely_true),
    st.builds(O.BindExchange, exchanges, exchanges, binding_keys, unbind=_rarely_true),
)
_index = st.integers(0, 3)
message_ops = st.one_of(
    st.builds(O.Get, queues, no_ack=st.booleans(), ch=channels),
    st.builds(O.Get, queues, no_ack=st.booleans(), ch=channels),
    st.builds(O.Consume, queues, no_ack=st.booleans(), exclusive=_rarely_true, ch=channels),
    st.builds(
        O.Consume,
        queues,
        no_ack=_rarely_true,
        exclusive=_rarely_true,
        ch=channels,
        offset=st.sampled_from(("first", "last", "next", 0, 1)),
    ),
    st.builds(O.Cancel, ch=channels),
    st.builds(O.Qos, st.integers(0, 2), ch=channels),
    st.builds(O.Ack, _index, multiple=st.booleans(), ch=channels),
    st.builds(O.Ack, _index, multiple=st.booleans(), ch=channels),
    st.builds(O.Nack, _index, multiple=st.booleans(), requeue=st.booleans(), ch=channels),
    st.builds(O.Nack, _index, multiple=st.booleans(), requeue=st.booleans(), ch=channels),
    st.builds(O.Reject, _index, requeue=st.booleans(), ch=channels),
    st.builds(O.Reject, _index, requeue=st.booleans(), ch=channels),
    st.builds(O.AckUnknown, ch=channels),
    st.builds(O.Recover, ch=channels, requeue=st.sampled_from((True, True, False))),
    st.builds(O.SettleAll, nack=st.booleans(), requeue=st.booleans(), ch=channels),
    st.builds(O.CloseChannel, ch=channels),
    st.builds(O.CloseConnection),
)


#: Exploration aid: ``FAKERABBIT_DIFF_AVOID=tag,...`` keeps the generator away from inputs that show a difference
#: already known (FOUND.md), so that a campaign finds new ones. It changes the operations generated, never the
#: comparison. Tags: ``delete-flags`` (no if-unused/if-empty deletes), ``quorum-sac`` (no single active consumer
#: on quorum queues), ``sac-exclusive`` (no exclusive consumers), ``quorum-get`` (no manual-ack get on quorum
#: queues: every get is no-ack), ``quorum-cancel`` (no cancel while the channel has unacked messages: settle them
#: first), ``priority`` (no message priorities), ``quorum-bytes`` (no x-max-length-bytes on quorum queues).
AVOID = frozenset(t.strip() for t in os.environ.get("FAKERABBIT_DIFF_AVOID", "").split(",") if t.strip())


def avoid(op: O.Op) -> O.Op:
    """``op`` adjusted away from the inputs of the known differences named in :data:`AVOID`."""
    if not AVOID:
        return op
    if isinstance(op, O.DeleteQueue) and "delete-flags" in AVOID:
        return replace(op, if_unused=False, if_empty=False)
    if isinstance(op, O.DeclareQueue) and op.kind == "quorum" and "quorum-sac" in AVOID:
        op = replace(op, args={k: v for k, v in op.args.items() if k != "x-single-active-consumer"})
    if isinstance(op, O.DeclareQueue) and op.kind == "quorum" and "quorum-bytes" in AVOID:
        return replace(op, args={k: v for k, v in op.args.items() if k != "x-max-length-bytes"})
    if isinstance(op, O.Consume) and "sac-exclusive" in AVOID:
        return replace(op, exclusive=False)
    if isinstance(op, O.Get) and "quorum-get" in AVOID:
        return replace(op, no_ack=True)
    if isinstance(op, O.Publish) and op.priority is not None and "priority" in AVOID:
        return replace(op, priority=None)
    return op


class DifferentialMachine(RuleBasedStateMachine):
    """Subclassed per broker by :func:`machine_for` (class attributes say which brokers and how to report)."""

    label: ClassVar[str] = ""
    fake_url: ClassVar[str] = ""
    real_url: ClassVar[str] = ""
    settle: ClassVar[float] = 0.01
    #: None: a difference fails the example (pytest); a list: differences are collected and the example goes on
    #: quietly (the ``python -m tests.differential`` runner counts identical examples).
    collect: ClassVar[list[Difference] | None] = None
    examples: ClassVar[list[bool]] = []

    def __init__(self) -> None:
        super().__init__()
        self.pair = Pair(self.label, self.fake_url, self.real_url, settle=self.settle)
        self.differed = False
        self.declared: dict[str, O.DeclareQueue | O.DeclareExchange] = {}

    def run(self, op: O.Op) -> None:
        if self.differed:
            return
        if isinstance(op, O.Cancel) and "quorum-cancel" in AVOID:
            self.run(O.SettleAll(ch=op.ch))
            if self.differed:
                return
        d = self.pair.step(avoid(op))
        if d is None:
            return
        self.differed = True
        if self.collect is None:
            raise AssertionError(d.render())
        self.collect.append(d)

    def teardown(self) -> None:
        self.pair.close()
        type(self).examples.append(not self.differed)

    # A scenario starts with its vocabulary declared (random arguments and types) and a few bindings, so that most
    # operations meet existing queues and exchanges; the rules below redeclare, delete and rebind them.
    @initialize(
        declares=st.tuples(
            *(
                st.one_of(classic_declares, classic_declares, quorum_declares, stream_declares).map(
                    lambda op, q=q: O.DeclareQueue(q, op.kind, op.durable, op.args)
                )
                for q in O.QUEUES
            )
        ),
        types=st.tuples(*(st.sampled_from(("direct", "fanout", "topic", "headers")) for _ in O.EXCHANGES)),
        alternates=st.tuples(*(st.one_of(st.none(), exchanges) for _ in O.EXCHANGES)),
        bindings=st.lists(st.tuples(queues, exchanges, routing_keys, header_bindings), min_size=1, max_size=5),
        e2e=st.lists(st.tuples(exchanges, exchanges, routing_keys), max_size=2),
    )
    def setup(
        self,
        declares: tuple[O.DeclareQueue, ...],
        types: tuple[str, ...],
        alternates: tuple[str | None, ...],
        bindings: list[tuple[str, str, str, dict[str, Any]]],
        e2e: list[tuple[str, str, str]],
    ) -> None:
        for x, type_, alternate in zip(O.EXCHANGES, types, alternates, strict=True):
            self.declared[x] = O.DeclareExchange(x, type_, alternate=alternate)
            self.run(self.declared[x])
        for op in declares:
            self.declared[op.queue] = op
            self.run(op)
        for q, x, key, args in bindings:
            self.run(O.Bind(q, x, key, args=args))
        for d, src, key in e2e:
            self.run(O.BindExchange(d, src, key))

    @rule(op=st.one_of(classic_declares, classic_declares, quorum_declares, stream_declares, passive_declares))
    def declare_queue(self, op: O.DeclareQueue) -> None:
        self.run(op)

    @rule(name=st.sampled_from(O.QUEUES + O.EXCHANGES), ch=channels)
    def redeclare(self, name: str, ch: int) -> None:
        """Declare a queue or exchange again as the scenario first declared it (equivalent, or recreating it)."""
        op = self.declared.get(name)
        if op is not None:
            self.run(replace(op, ch=ch))

    @rule(op=topology_ops)
    def topology(self, op: O.Op) -> None:
        self.run(op)

    @rule(op=publishes)
    def publish(self, op: O.Publish) -> None:
        self.run(op)

    @rule(op=publishes)
    def publish_more(self, op: O.Publish) -> None:
        self.run(op)

    @rule(op=message_ops)
    def consume_and_settle(self, op: O.Op) -> None:
        self.run(op)

    @rule(op=message_ops)
    def consume_and_settle_more(self, op: O.Op) -> None:
        self.run(op)


def machine_for(
    label: str, fake_url: str, real_url: str, *, collect: list[Difference] | None = None, settle: float = 0.01
) -> type[DifferentialMachine]:
    """A state machine class comparing fakerabbit at ``fake_url`` with the live broker at ``real_url``."""
    return type(
        f"Differential_{label.replace('.', '_')}",
        (DifferentialMachine,),
        {
            "label": label,
            "fake_url": fake_url,
            "real_url": real_url,
            "collect": collect,
            "settle": settle,
            "examples": [],
        },
    )


def machine_settings(examples: int, *, steps: int = 25, derandomize: bool = True, shrink: bool = True) -> settings:
    from hypothesis import Phase

    phases = [Phase.explicit, Phase.reuse, Phase.generate] + ([Phase.shrink] if shrink else [])
    return settings(
        max_examples=examples,
        stateful_step_count=steps,
        deadline=None,
        derandomize=derandomize,
        database=None,
        suppress_health_check=list(HealthCheck),
        phases=phases,
        print_blob=False,
    )
