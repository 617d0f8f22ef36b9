"""Exchange types, one module each: how an exchange of that type matches messages to its bindings, and what it
checks when it is declared and bound (RabbitMQ's ``rabbit_exchange_type_*`` modules).

:data:`TYPES` is the registry: every type fakerabbit models, by name. Which of them a node offers is its
version profile's (``Profile.exchange_types``: ``x-local-random`` from 4.0, ``x-modulus-hash`` from 4.3) and its
plugins' (``x-delayed-message``); :func:`kind_of` gives the class for a name.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from fakerabbit.broker.exchange_types.base import Binding, ExchangeKind, ExchangeType, check_type
from fakerabbit.broker.exchange_types.delayed import DelayedMessage
from fakerabbit.broker.exchange_types.direct import Direct
from fakerabbit.broker.exchange_types.fanout import Fanout
from fakerabbit.broker.exchange_types.headers import Headers
from fakerabbit.broker.exchange_types.local_random import LocalRandom
from fakerabbit.broker.exchange_types.modulus_hash import ModulusHash
from fakerabbit.broker.exchange_types.topic import Topic

__all__ = ["TYPES", "Binding", "ExchangeKind", "ExchangeType", "check_type", "kind_of"]

#: Every exchange type fakerabbit models, by name.
TYPES: Mapping[str, type[ExchangeKind]] = MappingProxyType(
    {k.name: k for k in (Direct, Fanout, Topic, Headers, LocalRandom, ModulusHash, DelayedMessage)}
)


def kind_of(name: str) -> type[ExchangeKind]:
    """The class of exchange type ``name`` (one that matches nothing for a name fakerabbit does not model)."""
    return TYPES.get(name, ExchangeKind)
