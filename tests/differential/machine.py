"""The hypothesis state machine: random operation sequences, each step run on both brokers and compared."""

from __future__ import annotations

from typing import Any, ClassVar

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, rule

from tests.differential import ops as O
from tests.differential.engine import Difference, Pair

queues = st.sampled_from(O.QUEUES)
exchanges = st.sampled_from(O.EXCHANGES)
channels = st.sampled_from(O.CHANNELS)
routing_keys = st.sampled_from(("k1", "k2", "k1.a", *O.QUEUES))
binding_keys = st.sampled_from(("", "k1", "k2", "k1.a", "k1.*", "#", *O.QUEUES))
header_bindings = st.sampled_from(({}, {"x-match": "any", "h": "a"}, {"x-match": "all", "h": "a", "g": "b"}))

queue_args = st.fixed_dictionaries(
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
    queue_args,
    queues,
    st.just(False),
    channels,
)
quorum_declares = st.builds(
    _declare_queue,
    st.just("quorum"),
    st.sampled_from((True, True, True, False)),
    queue_args,
    queues,
    st.just(False),
    channels,
)
passive_declares = st.builds(O.DeclareQueue, queues, passive=st.just(True), ch=channels)

publish_headers = st.one_of(
    st.none(),
    st.fixed_dictionaries(
        {},
        optional={
            "CC": st.lists(st.sampled_from(("k1", "k2", *O.QUEUES)), min_size=1, max_size=2),
            "BCC": st.lists(st.sampled_from(("k1", "k2", *O.QUEUES)), min_size=1, max_size=2),
            "h": st.sampled_from(("a", "b")),
            "g": st.just("b"),
        },
    ),
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
)


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

    def run(self, op: O.Op) -> None:
        if self.differed:
            return
        d = self.pair.step(op)
        if d is None:
            return
        self.differed = True
        if self.collect is None:
            raise AssertionError(d.render())
        self.collect.append(d)

    def teardown(self) -> None:
        self.pair.close()
        type(self).examples.append(not self.differed)

    @rule(op=st.one_of(classic_declares, classic_declares, quorum_declares, passive_declares))
    def declare_queue(self, op: O.DeclareQueue) -> None:
        self.run(op)

    @rule(q=queues, if_unused=st.booleans(), if_empty=st.booleans(), ch=channels)
    def delete_queue(self, q: str, if_unused: bool, if_empty: bool, ch: int) -> None:
        self.run(O.DeleteQueue(q, if_unused=if_unused, if_empty=if_empty, ch=ch))

    @rule(q=queues, ch=channels)
    def purge(self, q: str, ch: int) -> None:
        self.run(O.PurgeQueue(q, ch=ch))

    @rule(
        x=exchanges,
        type=st.sampled_from(("direct", "fanout", "topic", "headers")),
        alternate=st.one_of(st.none(), exchanges),
        passive=st.sampled_from((False, False, False, True)),
        ch=channels,
    )
    def declare_exchange(self, x: str, type: str, alternate: str | None, passive: bool, ch: int) -> None:
        self.run(O.DeclareExchange(x, type, alternate=alternate, passive=passive, ch=ch))

    @rule(x=exchanges, if_unused=st.booleans(), ch=channels)
    def delete_exchange(self, x: str, if_unused: bool, ch: int) -> None:
        self.run(O.DeleteExchange(x, if_unused=if_unused, ch=ch))

    @rule(q=queues, x=exchanges, key=binding_keys, args=header_bindings, unbind=st.sampled_from((False, False, True)))
    def bind(self, q: str, x: str, key: str, args: dict[str, Any], unbind: bool) -> None:
        self.run(O.Bind(q, x, key, args=args, unbind=unbind))

    @rule(d=exchanges, s=exchanges, key=binding_keys, unbind=st.sampled_from((False, False, True)))
    def bind_exchange(self, d: str, s: str, key: str, unbind: bool) -> None:
        self.run(O.BindExchange(d, s, key, unbind=unbind))

    @rule(op=publishes)
    def publish(self, op: O.Publish) -> None:
        self.run(op)

    @rule(op=publishes)
    def publish_more(self, op: O.Publish) -> None:
        self.run(op)

    @rule(q=queues, no_ack=st.booleans(), ch=channels)
    def get(self, q: str, no_ack: bool, ch: int) -> None:
        self.run(O.Get(q, no_ack=no_ack, ch=ch))

    @rule(q=queues, no_ack=st.booleans(), exclusive=st.sampled_from((False, False, False, True)), ch=channels)
    def consume(self, q: str, no_ack: bool, exclusive: bool, ch: int) -> None:
        self.run(O.Consume(q, no_ack=no_ack, exclusive=exclusive, ch=ch))

    @rule(ch=channels)
    def cancel(self, ch: int) -> None:
        self.run(O.Cancel(ch=ch))

    @rule(prefetch=st.integers(0, 2), ch=channels)
    def qos(self, prefetch: int, ch: int) -> None:
        self.run(O.Qos(prefetch, ch=ch))

    @rule(index=st.integers(0, 3), multiple=st.booleans(), ch=channels)
    def ack(self, index: int, multiple: bool, ch: int) -> None:
        self.run(O.Ack(index, multiple=multiple, ch=ch))

    @rule(index=st.integers(0, 3), multiple=st.booleans(), requeue=st.booleans(), ch=channels)
    def nack(self, index: int, multiple: bool, requeue: bool, ch: int) -> None:
        self.run(O.Nack(index, multiple=multiple, requeue=requeue, ch=ch))

    @rule(index=st.integers(0, 3), requeue=st.booleans(), ch=channels)
    def reject(self, index: int, requeue: bool, ch: int) -> None:
        self.run(O.Reject(index, requeue=requeue, ch=ch))

    @rule(
        kind=st.sampled_from(("ack-unknown", "recover", "close")),
        ch=channels,
    )
    def channel_misc(self, kind: str, ch: int) -> None:
        if kind == "ack-unknown":
            self.run(O.AckUnknown(ch=ch))
        elif kind == "recover":
            self.run(O.Recover(ch=ch))
        else:
            self.run(O.CloseChannel(ch=ch))


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
