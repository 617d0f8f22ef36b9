"""The ``topic`` exchange (``rabbit_exchange_type_topic``): binding keys are patterns of ``.``-separated words,
``*`` one word, ``#`` zero or more. Matched as a word trie, like RabbitMQ's: O(words in the key) per publish,
whatever the number of bindings.

A binding pattern is split on ``.`` once, when it is bound, and stored along a path of the trie: one edge per
word, with ``*`` and ``#`` as edges of their own. Matching a routing key walks the trie word by word, following
the literal edge, the ``*`` edge (one word) and the ``#`` edge (zero or more words). The result is exactly
the reference matcher ``topic_matches`` of ``tests/unit/test_topic_routing.py`` applied to every binding (that test
checks this on random patterns and keys), in binding order, each binding once.

Each binding is stored with a sequence number that grows in binding order; the matched bindings are sorted by
it, so routing sees them in the order the old linear scan did. Results are cached per routing key until the
next bind or unbind.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Generic, TypeVar

from fakerabbit.broker.exchange_types.base import Binding, ExchangeKind, ExchangeType
from fakerabbit.broker.fields import Table

__all__ = ["Topic", "TopicTrie"]

B = TypeVar("B")

#: Routing results kept per trie (cleared on every bind and unbind, and when full).
_CACHE_MAX = 4096


class _Node(Generic[B]):
    __slots__ = ("bindings", "children", "hash", "parent", "star", "word")

    def __init__(self, parent: _Node[B] | None, word: str) -> None:
        self.parent = parent
        self.word = word
        self.children: dict[str, _Node[B]] = {}
        self.star: _Node[B] | None = None
        self.hash: _Node[B] | None = None
        #: sequence number -> binding, for the patterns that end here
        self.bindings: dict[int, B] = {}

    def child(self, word: str) -> _Node[B] | None:
        if word == "*":
            return self.star
        if word == "#":
            return self.hash
        return self.children.get(word)

    def empty(self) -> bool:
        return not self.bindings and not self.children and self.star is None and self.hash is None


def _path(pattern: str) -> list[str]:
    """The pattern's words, with runs of ``#`` collapsed (``#.#`` matches exactly what ``#`` matches)."""
    words = pattern.split(".")
    if len(words) > 1 and "#" in words:
        out: list[str] = []
        for w in words:
            if w != "#" or not out or out[-1] != "#":
                out.append(w)
        return out
    return words


class TopicTrie(Generic[B]):
    """Bindings of one topic exchange, by pattern.

    ``add(pattern, seq, binding)`` and ``remove(pattern, seq)`` keep it; ``match(keys)`` returns the bindings
    whose pattern matches any of ``keys``, each once, ordered by ``seq``.
    """

    __slots__ = ("_cache", "_root", "size")

    def __init__(self) -> None:
        self._root: _Node[B] = _Node(None, "")
        self._cache: dict[str, tuple[B, ...]] = {}
        self.size = 0

    def add(self, pattern: str, seq: int, binding: B) -> None:
        node = self._root
        for word in _path(pattern):
            nxt = node.child(word)
            if nxt is None:
                nxt = _Node(node, word)
                if word == "*":
                    node.star = nxt
                elif word == "#":
                    node.hash = nxt
                else:
                    node.children[word] = nxt
            node = nxt
        node.bindings[seq] = binding
        self.size += 1
        self._cache.clear()

    def remove(self, pattern: str, seq: int) -> bool:
        node: _Node[B] | None = self._root
        for word in _path(pattern):
            assert node is not None
            node = node.child(word)
            if node is None:
                return False
        assert node is not None
        if node.bindings.pop(seq, None) is None:
            return False
        self.size -= 1
        self._cache.clear()
        # prune the branch that no pattern needs any more
        while node.parent is not None and node.empty():
            parent = node.parent
            if node.word == "*":
                parent.star = None
            elif node.word == "#":
                parent.hash = None
            else:
                del parent.children[node.word]
            node = parent
        return True

    def match(self, keys: Sequence[str]) -> list[B]:
        if len(keys) == 1:
            key = keys[0]
            hit = self._cache.get(key)
            if hit is None:
                hit = self._match_key(key)
                cache = self._cache
                if len(cache) >= _CACHE_MAX:
                    cache.clear()
                cache[key] = hit
            return list(hit)
        found: dict[int, B] = {}
        for key in keys:
            _walk(self._root, key.split("."), 0, found, {})
        return [found[s] for s in sorted(found)]

    def _match_key(self, key: str) -> tuple[B, ...]:
        found: dict[int, B] = {}
        _walk(self._root, key.split("."), 0, found, {})
        if len(found) > 1:
            return tuple(found[s] for s in sorted(found))
        return tuple(found.values())


def _walk(node: _Node[B], words: list[str], i: int, found: dict[int, B], hashes: dict[int, int]) -> None:
    """Collect into ``found`` the bindings below ``node`` that match ``words[i:]``.

    ``hashes`` remembers, per ``#`` node, the lowest position it was already explored from: every position
    from there on was covered, so another path reaching it later adds nothing (this keeps patterns such as
    ``#.a.#.a.#`` from taking exponential time).
    """
    n = len(words)
    while True:
        h = node.hash
        if h is not None:
            key = id(h)
            done = hashes.get(key, n + 1)
            if i < done:
                hashes[key] = i
                for j in range(i, done):
                    _walk(h, words, j, found, hashes)
        if i == n:
            if node.bindings:
                found.update(node.bindings)
            return
        word = words[i]
        star = node.star
        nxt = node.children.get(word)
        if star is not None:
            if nxt is not None:
                _walk(star, words, i + 1, found, hashes)
            else:
                nxt = star
        if nxt is None:
            return
        node = nxt
        i += 1


class Topic(ExchangeKind):
    __slots__ = ("trie",)
    name = ExchangeType.TOPIC.value
    description = "AMQP topic exchange, as per the AMQP specification"

    def __init__(self, bindings: list[Binding], by_key: dict[str, list[Binding]]) -> None:
        super().__init__(bindings, by_key)
        #: the exchange's binding patterns
        self.trie: TopicTrie[Binding] = TopicTrie()

    def bound(self, b: Binding, seq: int) -> None:
        self.trie.add(b.routing_key, seq, b)

    def unbound(self, b: Binding, seq: int) -> None:
        self.trie.remove(b.routing_key, seq)

    def match(self, routing_keys: Sequence[str], headers: Table | None) -> list[Binding]:
        return self.trie.match(routing_keys)
