"""The ``direct`` exchange (``rabbit_exchange_type_direct``): a binding matches a message whose routing key (or one
of its CC / BCC keys) equals the binding key."""

from __future__ import annotations

from collections.abc import Sequence

from fakerabbit.broker.exchange_types.base import Binding, ExchangeKind, ExchangeType
from fakerabbit.broker.fields import Table

__all__ = ["Direct"]


class Direct(ExchangeKind):
    __slots__ = ()
    name = ExchangeType.DIRECT.value
    description = "AMQP direct exchange, as per the AMQP specification"

    def match(self, routing_keys: Sequence[str], headers: Table | None) -> list[Binding]:
        by_key = self.by_key
        if len(routing_keys) == 1:
            return list(by_key.get(routing_keys[0], ()))
        out: list[Binding] = []
        for rk in routing_keys:
            out.extend(by_key.get(rk, ()))
        return out
