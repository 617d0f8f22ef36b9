"""The ``fanout`` exchange (``rabbit_exchange_type_fanout``): every binding matches every message."""

from __future__ import annotations

from collections.abc import Sequence

from fakerabbit.broker.exchange_types.base import Binding, ExchangeKind, ExchangeType
from fakerabbit.broker.fields import Table

__all__ = ["Fanout"]


class Fanout(ExchangeKind):
    __slots__ = ()
    name = ExchangeType.FANOUT.value
    description = "AMQP fanout exchange, as per the AMQP specification"

    def match(self, routing_keys: Sequence[str], headers: Table | None) -> list[Binding]:
        return list(self.bindings)
