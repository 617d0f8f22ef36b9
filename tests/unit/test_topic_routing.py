"""Topic routing by word trie (fakerabbit/broker/exchange_types/topic.py) against the reference matcher
``topic_matches``."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fakerabbit.broker.exchange import Binding, Exchange
from fakerabbit.broker.exchange_types import topic
from fakerabbit.broker.exchange_types.topic import Topic, TopicTrie

# Few distinct words, so that random patterns and keys often match; "" makes empty words ("a..b", ".a", "").
PATTERN_WORDS = st.sampled_from(["a", "b", "", "*", "#", "a*", "#a"])
KEY_WORDS = st.sampled_from(["a", "b", "", "c", "*", "#"])
patterns = st.lists(PATTERN_WORDS, min_size=1, max_size=6).map(".".join)
keys = st.lists(KEY_WORDS, min_size=1, max_size=7).map(".".join)


# The reference matcher (the broker routes with the trie; this is the definition it is checked against).
def topic_matches(pattern: str, key: str) -> bool:
    """AMQP topic matching: words split on '.', '*' matches one word, '#' zero or more."""
    return _match(pattern.split("."), 0, key.split("."), 0)


def _match(p: list[str], i: int, k: list[str], j: int) -> bool:
    while i < len(p):
        word = p[i]
        if word == "#":
            if i == len(p) - 1:
                return True
            return any(_match(p, i + 1, k, jj) for jj in range(j, len(k) + 1))
        if j >= len(k):
            return False
        if word != "*" and word != k[j]:
            return False
        i += 1
        j += 1
    return j == len(k)


def binding(pattern: str, dest: str = "q") -> Binding:
    return Binding("x", dest, "queue", pattern, {})


def reference(bindings: list[Binding], routing_keys: list[str]) -> list[Binding]:
    """What Exchange.match returned before the trie: a linear scan, in binding order, each binding once."""
    return [b for b in bindings if any(topic_matches(b.routing_key, rk) for rk in routing_keys)]


@pytest.mark.parametrize(
    ("pattern", "key", "expected"),
    [
        ("#", "", True),
        ("#", "a.b.c", True),
        ("a.#", "a", True),
        ("#.a", "a", True),
        ("a.#.b", "a.b", True),
        ("a.#.b", "a.x.y.b", True),
        ("a.#.b", "a.x.y", False),
        ("*", "", True),
        ("*", "a.b", False),
        ("", "", True),
        ("", "a", False),
        ("a..b", "a..b", True),
        ("a.*.b", "a..b", True),
        ("#.#", "a", True),
        ("a.#.#.b", "a.b", True),
        ("*.#", "", True),
        ("#.*", "", True),
        ("a*", "ab", False),
        ("a*", "a*", True),
    ],
)
def test_examples(pattern: str, key: str, expected: bool) -> None:
    assert topic_matches(pattern, key) is expected
    trie: TopicTrie[str] = TopicTrie()
    trie.add(pattern, 0, "b")
    assert trie.match([key]) == (["b"] if expected else [])


@settings(max_examples=400, deadline=None)
@given(st.lists(patterns, max_size=12), st.lists(keys, min_size=1, max_size=3))
def test_trie_matches_reference(pats: list[str], routing_keys: list[str]) -> None:
    x = Exchange("x", "topic")
    for i, p in enumerate(pats):
        x.add_binding(binding(p, f"q{i}"))
    assert x.match(routing_keys, None) == reference(x.bindings, routing_keys)
    for rk in routing_keys:  # single keys go through the per-key cache: twice, to read it back
        assert x.match([rk], None) == reference(x.bindings, [rk])
        assert x.match([rk], None) == reference(x.bindings, [rk])


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.booleans(), patterns, st.integers(0, 3)), max_size=30),
    st.lists(keys, min_size=1, max_size=4),
)
def test_bind_unbind_sequences(ops: list[tuple[bool, str, int]], probe_keys: list[str]) -> None:
    """Random binds and unbinds (same pattern to several queues, re-binding, unbinding what is not bound):
    routing, the binding order and the per-destination index stay those of a plain list."""
    x = Exchange("x", "topic")
    model: list[Binding] = []
    for add, pattern, dest in ops:
        b = binding(pattern, f"q{dest}")
        if add:
            if all(m.key() != b.key() for m in model):
                model.append(b)
            x.add_binding(b)
        else:
            model = [m for m in model if m.key() != b.key()]
            x.remove_binding(b)
        assert [m.key() for m in x.bindings] == [m.key() for m in model]
        for rk in probe_keys:
            assert [m.key() for m in x.match([rk], None)] == [m.key() for m in reference(model, [rk])]
    for dest in range(4):
        gone = x.remove_destination("queue", f"q{dest}")
        assert [g.key() for g in gone] == [m.key() for m in model if m.destination == f"q{dest}"]
    assert x.bindings == []
    assert isinstance(x.kind, Topic)
    assert x.kind.trie.size == 0
    assert x.kind.trie._root.empty()  # every branch was pruned


def test_order_and_duplicates_across_keys() -> None:
    x = Exchange("x", "topic")
    for i, p in enumerate(["a.*", "#", "a.b", "*.b", "#.#"]):
        x.add_binding(binding(p, f"q{i}"))
    got = x.match(["a.b", "a.c", "z.b"], None)
    assert [b.destination for b in got] == ["q0", "q1", "q2", "q3", "q4"]


def test_cache_invalidated_on_bind_and_unbind() -> None:
    x = Exchange("x", "topic")
    assert x.match(["a.b"], None) == []
    b1 = binding("a.*", "q1")
    x.add_binding(b1)
    assert x.match(["a.b"], None) == [b1]
    b2 = binding("#", "q2")
    x.add_binding(b2)
    assert x.match(["a.b"], None) == [b1, b2]
    x.remove_binding(binding("a.*", "q1"))
    assert x.match(["a.b"], None) == [b2]


def test_result_is_a_fresh_list() -> None:
    x = Exchange("x", "topic")
    x.add_binding(binding("a", "q"))
    first = x.match(["a"], None)
    first.clear()
    assert len(x.match(["a"], None)) == 1


def count_walks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the trie nodes visited (calls of ``topic._walk``, which recurses through the module global)."""
    calls = [0]
    real = topic._walk

    def counting(*args: Any) -> None:
        calls[0] += 1
        real(*args)

    monkeypatch.setattr(topic, "_walk", counting)
    return calls


def test_routing_work_does_not_grow_with_bindings(monkeypatch: pytest.MonkeyPatch) -> None:
    """Work, not seconds (speed is benchmarks/bench_scale.py's business): nodes visited per publish."""
    calls = count_walks(monkeypatch)

    def per_publish(n: int) -> float:
        x = Exchange("x", "topic")
        for i in range(n):
            x.add_binding(binding(f"svc{i}.*.event", f"q{i}"))
        x.add_binding(binding("#.event", "all"))
        # a new middle word each time: no key is routed twice, so the per-key cache never answers
        ks = [[f"svc{(i * 7919) % n}.k{i}.event"] for i in range(2000)]
        calls[0] = 0
        for k in ks:
            assert len(x.match(k, None)) == 2
        return calls[0] / len(ks)

    small, large = per_publish(100), per_publish(10_000)
    assert small > 0
    assert large <= small * 1.5  # scanning every binding would be ~100x


def test_many_hashes_are_not_exponential(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = count_walks(monkeypatch)
    x = Exchange("x", "topic")
    pattern = "#.a.#.a.#.a.#.a.#.b"
    x.add_binding(binding(pattern))
    key = ".".join(["a"] * 40)
    assert x.match([key], None) == []
    assert x.match([key + ".b"], None) != []
    assert 0 < calls[0] < 5_000  # each (node, word position) once; backtracking would be ~40^4
    assert topic_matches(pattern, key + ".b")


def test_delete_bound_queue_through_the_vhost() -> None:
    from fakerabbit.broker.broker import Broker
    from fakerabbit.clock import VirtualClock

    broker = Broker(VirtualClock())
    v = broker.vhost("/")
    conn = broker.open_connection("guest", "/", client_properties={})
    v.declare_exchange(
        conn, "tx", "topic", passive=False, durable=False, auto_delete=False, internal=False, arguments={}
    )
    qs = [
        v.declare_queue(conn, f"q{i}", passive=False, durable=False, exclusive=False, auto_delete=False, arguments={})
        for i in range(5)
    ]
    for i in range(5):
        v.bind(conn, "queue", f"q{i}", "tx", f"k{i}.*", {})
        v.bind(conn, "queue", f"q{i}", "tx", "all.#", {})
    v.delete_queue(qs[2])
    x = v.exchanges["tx"]
    assert [(b.destination, b.routing_key) for b in x.bindings] == [
        ("q0", "k0.*"),
        ("q0", "all.#"),
        ("q1", "k1.*"),
        ("q1", "all.#"),
        ("q3", "k3.*"),
        ("q3", "all.#"),
        ("q4", "k4.*"),
        ("q4", "all.#"),
    ]
    assert [b.destination for b in x.match(["all.x"], None)] == ["q0", "q1", "q3", "q4"]
    assert [b.destination for b in x.match(["k2.x"], None)] == []
