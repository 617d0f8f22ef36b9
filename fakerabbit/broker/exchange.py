"""Exchanges and their bindings. How a message is matched to the bindings is the exchange type's
(:mod:`fakerabbit.broker.exchange_types`, one module per type); an ``x-delayed-message`` exchange matches as its
``x-delayed-type`` once a message is due (see :mod:`fakerabbit.broker.delayed`). Routing across exchanges
(exchange-to-exchange bindings, alternate exchanges, the default exchange) is the vhost's."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass, field

from fakerabbit.broker.exchange_types import Binding, ExchangeKind, ExchangeType, kind_of
from fakerabbit.broker.fields import Table

__all__ = ["Binding", "Exchange", "ExchangeType"]


@dataclass(slots=True)
class Exchange:
    name: str
    type: str
    durable: bool = True
    auto_delete: bool = False
    internal: bool = False
    arguments: Table = field(default_factory=dict)
    bindings: list[Binding] = field(default_factory=list)
    # routing key -> bindings: duplicates found in O(1), and direct routing
    _by_key: dict[str, list[Binding]] = field(default_factory=dict)
    # every exchange: id(binding) -> sequence number, growing in binding order (``bindings`` is sorted by it, so
    # a binding is found by bisection), and (destination kind, name) -> bindings, for deleting a queue
    _seq: dict[int, int] = field(default_factory=dict, repr=False, compare=False)
    _next_seq: int = field(default=0, repr=False, compare=False)
    _by_dest: dict[tuple[str, str], list[Binding]] = field(default_factory=dict, repr=False, compare=False)
    #: The type whose rules match and validate bindings: ``type``, except for an ``x-delayed-message`` exchange,
    #: which routes as its ``x-delayed-type`` (``rabbit_exchange_type_delayed_message`` proxies to that module).
    route_type: str = field(default="", init=False, repr=False, compare=False)
    #: That type, as this exchange uses it: matches messages to the bindings (it is told of every bind and unbind).
    kind: ExchangeKind = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.route_type = self.type
        if self.type == ExchangeType.DELAYED:
            dt = self.arguments.get("x-delayed-type")
            if dt is not None and isinstance(dt[1], str | bytes):
                v = dt[1]
                self.route_type = v if isinstance(v, str) else v.decode("utf-8", "surrogateescape")
        self.kind = kind_of(self.route_type)(self.bindings, self._by_key)

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
        self.kind.bound(b, seq)
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
        self.kind.unbound(x, seq)

    def remove_destination(self, kind: str, name: str) -> list[Binding]:
        gone = list(self._by_dest.get((kind, name), ()))
        for b in gone:
            self.remove_binding(b)
        return gone

    def has_binding(self, b: Binding) -> bool:
        k = b.key()
        return any(x.key() == k for x in self._by_key.get(b.routing_key, ()))

    def match(self, routing_keys: Sequence[str], headers: Table | None) -> list[Binding]:
        """Bindings of this exchange that the message matches (duplicates possible): its type's rule."""
        return self.kind.match(routing_keys, headers)
