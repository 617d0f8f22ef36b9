"""Exchanges, bindings and routing (direct, fanout, topic, headers, the default exchange, RabbitMQ's own
``x-local-random`` (4.0+) and ``x-modulus-hash`` (4.3+), and the plugin type ``x-delayed-message``, which routes
as its ``x-delayed-type`` once a message is due: see :mod:`fakerabbit.broker.delayed`)."""

from __future__ import annotations

import random
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from fakerabbit.broker.erlhash import phash2_binaries
from fakerabbit.broker.fields import Table
from fakerabbit.broker.topic import TopicTrie


class ExchangeType(StrEnum):
    DIRECT = "direct"
    FANOUT = "fanout"
    TOPIC = "topic"
    HEADERS = "headers"
    LOCAL_RANDOM = "x-local-random"
    MODULUS_HASH = "x-modulus-hash"
    DELAYED = "x-delayed-message"


#: ``rabbit_exchange_type_modulus_hash``'s hash range (2^27).
_PHASH2_RANGE = 1 << 27


@dataclass(slots=True)
class Binding:
    """A binding from exchange ``source`` to a queue or exchange ``destination``."""

    source: str
    destination: str
    destination_kind: str  # "queue" | "exchange"
    routing_key: str
    arguments: Table

    def key(self) -> tuple[str, str, str, str]:
        return (
            self.destination_kind,
            self.destination,
            self.routing_key,
            repr(sorted(self.arguments.items())),
        )


_X_MATCH_MODES = ("all", "any", "all-with-x", "any-with-x")


def headers_match(binding_args: Table, headers: Table) -> bool:
    """The headers exchange's rule, on typed values; ``x-`` keys count only in the ``-with-x`` modes."""
    mode_field = binding_args.get("x-match")
    mode = mode_field[1] if mode_field is not None and mode_field[0] == "S" else "all"
    with_x = mode.endswith("-with-x")
    want_all = mode.startswith("all")
    for key, (tag, value) in binding_args.items():
        if key == "x-match" or (key.startswith("x-") and not with_x):
            continue
        have = headers.get(key)
        # a void binding argument asks only that the header be there
        ok = have is not None if tag == "V" else have is not None and _same_value(have[1], value)
        if want_all and not ok:
            return False
        if not want_all and ok:
            return True
    return want_all


def _same_value(a: object, b: object) -> bool:
    # Erlang compares the values, not the types: a longstr equals a binary with the same bytes.
    if isinstance(a, str) and isinstance(b, bytes):
        a = a.encode("utf-8", "surrogateescape")
    elif isinstance(b, str) and isinstance(a, bytes):
        b = b.encode("utf-8", "surrogateescape")
    return a == b


@dataclass(slots=True)
class Exchange:
    name: str
    type: str
    durable: bool = True
    auto_delete: bool = False
    internal: bool = False
    arguments: Table = field(default_factory=dict)
    bindings: list[Binding] = field(default_factory=list)
    # direct exchanges: routing key -> bindings, for O(1) routing
    _by_key: dict[str, list[Binding]] = field(default_factory=dict)
    # topic exchanges: the patterns as a word trie (fakerabbit/broker/topic.py)
    _topic: TopicTrie[Binding] | None = field(default=None, repr=False, compare=False)
    # every exchange: id(binding) -> sequence number, growing in binding order (``bindings`` is sorted by it, so
    # a binding is found by bisection), and (destination kind, name) -> bindings, for deleting a queue
    _seq: dict[int, int] = field(default_factory=dict, repr=False, compare=False)
    _next_seq: int = field(default=0, repr=False, compare=False)
    _by_dest: dict[tuple[str, str], list[Binding]] = field(default_factory=dict, repr=False, compare=False)
    #: The type whose rules match and validate bindings: ``type``, except for an ``x-delayed-message`` exchange,
    #: which routes as its ``x-delayed-type`` (``rabbit_exchange_type_delayed_message`` proxies to that module).
    route_type: str = field(default="", init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.route_type = self.type
        if self.type == ExchangeType.DELAYED:
            dt = self.arguments.get("x-delayed-type")
            if dt is not None and isinstance(dt[1], str | bytes):
                v = dt[1]
                self.route_type = v if isinstance(v, str) else v.decode("utf-8", "surrogateescape")

    @property
    def alternate_exchange(self) -> str | None:
        ae = self.arguments.get("alternate-exchange")
        return ae[1] if ae is not None and ae[0] == "S" else None

    def add_binding(self, b: Binding) -> bool:
        k = b.key()
        if any(x.key() == k for x in self._by_key.get(b.routing_key, ())):
            return False
        self.bindings.append(b)
        self._by_key.setdefault(b.routing_key, []).append(b)
        seq = self._next_seq
        self._next_seq = seq + 1
        self._seq[id(b)] = seq
        self._by_dest.setdefault((b.destination_kind, b.destination), []).append(b)
        if self.route_type == ExchangeType.TOPIC:
            if self._topic is None:
                self._topic = TopicTrie()
            self._topic.add(b.routing_key, seq, b)
        return True

    def remove_binding(self, b: Binding) -> bool:
        k = b.key()
        bucket = self._by_key.get(b.routing_key, [])
        for x in bucket:
            if x.key() == k:
                bucket.remove(x)
                if not bucket:
                    del self._by_key[b.routing_key]
                self._forget(x)
                return True
        return False

    def _forget(self, x: Binding) -> None:
        seqs = self._seq
        seq = seqs.pop(id(x))
        bindings = self.bindings
        i = bisect_left(bindings, seq, key=lambda y: seqs.get(id(y), seq))
        if i < len(bindings) and bindings[i] is x:
            del bindings[i]
        else:  # not reached: bindings is kept in sequence order
            bindings.remove(x)
        dest = (x.destination_kind, x.destination)
        to_dest = self._by_dest[dest]
        for j, y in enumerate(to_dest):
            if y is x:
                del to_dest[j]
                break
        if not to_dest:
            del self._by_dest[dest]
        if self._topic is not None:
            self._topic.remove(x.routing_key, seq)

    def remove_destination(self, kind: str, name: str) -> list[Binding]:
        gone = list(self._by_dest.get((kind, name), ()))
        for b in gone:
            self.remove_binding(b)
        return gone

    def has_binding(self, b: Binding) -> bool:
        k = b.key()
        return any(x.key() == k for x in self._by_key.get(b.routing_key, ()))

    def match(self, routing_keys: Sequence[str], headers: Table | None) -> list[Binding]:
        """Bindings of this exchange that the message matches (duplicates possible)."""
        t = self.route_type
        if t == ExchangeType.FANOUT:
            return list(self.bindings)
        if t == ExchangeType.DIRECT:
            out: list[Binding] = []
            for rk in routing_keys:
                out.extend(self._by_key.get(rk, ()))
            return out
        if t == ExchangeType.TOPIC:
            return self._topic.match(routing_keys) if self._topic is not None else []
        if t == ExchangeType.HEADERS:
            h = headers or {}
            return [b for b in self.bindings if headers_match(b.arguments, h)]
        if t == ExchangeType.LOCAL_RANDOM:
            # rabbit_exchange_type_local_random:route/3: one of the bindings with key "" (all of them: the
            # binding rules allow nothing else), chosen at random; every queue of the fake is local.
            local = self._by_key.get("", ())
            return [random.choice(local)] if local else []
        if t == ExchangeType.MODULUS_HASH:
            return self._modulus_hash(routing_keys)
        return []

    def _modulus_hash(self, routing_keys: Sequence[str]) -> list[Binding]:
        """``rabbit_exchange_type_modulus_hash:route/3``: every binding's destination (one per binding, whatever
        its key), sorted as Erlang sorts ``#resource{}`` records (exchanges before queues, then by name), and
        the one at ``phash2(RoutingKeys, 2^27) rem N``. The routing keys include the CC and BCC keys."""
        if not self.bindings:
            return []
        ordered = sorted(
            self.bindings,
            key=lambda b: (b.destination_kind != "exchange", b.destination.encode("utf-8", "surrogateescape")),
        )
        keys = [k.encode("utf-8", "surrogateescape") for k in routing_keys]
        return [ordered[phash2_binaries(keys, _PHASH2_RANGE) % len(ordered)]]
