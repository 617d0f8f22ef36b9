"""RabbitMQ's own ``x-local-random`` exchange (4.0+, ``rabbit_exchange_type_local_random``): each message goes to
one of the bound queues, chosen at random among those local to the publishing node (every queue of the fake)."""

from __future__ import annotations

import random
from collections.abc import Sequence

from fakerabbit.broker import errors
from fakerabbit.broker.exchange_types.base import Binding, ExchangeKind, ExchangeType
from fakerabbit.broker.fields import Table
from fakerabbit.broker.profile import Profile

__all__ = ["LocalRandom"]


class LocalRandom(ExchangeKind):
    __slots__ = ()
    name = ExchangeType.LOCAL_RANDOM.value
    description = "Picks one random local binding (queue) to route via (to)."

    def match(self, routing_keys: Sequence[str], headers: Table | None) -> list[Binding]:
        # route/3: one of the bindings with key "" (all of them: the binding rules allow nothing else)
        local = self.by_key.get("", ())
        return [random.choice(local)] if local else []

    @classmethod
    def validate_binding(
        cls, routing_key: str, arguments: Table, destination_queue_type: str | None, profile: Profile
    ) -> None:
        """``validate_binding/2``: an empty key, to a classic queue (texts verified on 4.0.5 and 4.3.6)."""
        if routing_key != "":
            raise errors.PreconditionFailed(f"Non empty binding '{routing_key}' key not permitted")
        if destination_queue_type is None:
            raise errors.PreconditionFailed("Destination not found")
        if destination_queue_type != "classic":
            raise errors.PreconditionFailed(
                f"Queue type rabbit_{destination_queue_type}_queue not valid for this exchange type"
            )
