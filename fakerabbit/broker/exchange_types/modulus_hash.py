"""RabbitMQ's own ``x-modulus-hash`` exchange (4.3+, ``rabbit_exchange_type_modulus_hash``): each message goes to
one bound destination, picked by a hash of its routing keys."""

from __future__ import annotations

from collections.abc import Sequence

from fakerabbit.broker.erlhash import phash2_binaries
from fakerabbit.broker.exchange_types.base import Binding, ExchangeKind, ExchangeType
from fakerabbit.broker.fields import Table

__all__ = ["ModulusHash"]

#: ``rabbit_exchange_type_modulus_hash``'s hash range (2^27).
_PHASH2_RANGE = 1 << 27


class ModulusHash(ExchangeKind):
    __slots__ = ()
    name = ExchangeType.MODULUS_HASH.value
    description = "Modulus Hashing Exchange"

    def match(self, routing_keys: Sequence[str], headers: Table | None) -> list[Binding]:
        """``route/3``: every binding's destination (one per binding, whatever its key), sorted as Erlang sorts
        ``#resource{}`` records (exchanges before queues, then by name), and the one at
        ``phash2(RoutingKeys, 2^27) rem N``. The routing keys include the CC and BCC keys."""
        if not self.bindings:
            return []
        ordered = sorted(
            self.bindings,
            key=lambda b: (b.destination_kind != "exchange", b.destination.encode("utf-8", "surrogateescape")),
        )
        keys = [k.encode("utf-8", "surrogateescape") for k in routing_keys]
        return [ordered[phash2_binaries(keys, _PHASH2_RANGE) % len(ordered)]]
