"""What every exchange type has: its name, the bindings it matches, and the rules it checks (the behaviour of
RabbitMQ's ``rabbit_exchange_type``: ``route/2``, ``validate/1``, ``validate_binding/2``, ``description/0``)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, ClassVar

from fakerabbit.broker import errors, texts
from fakerabbit.broker.fields import Table

if TYPE_CHECKING:
    from fakerabbit.broker.profile import Profile

__all__ = ["Binding", "ExchangeKind", "ExchangeType", "check_type"]


class ExchangeType(StrEnum):
    DIRECT = "direct"
    FANOUT = "fanout"
    TOPIC = "topic"
    HEADERS = "headers"
    LOCAL_RANDOM = "x-local-random"
    MODULUS_HASH = "x-modulus-hash"
    DELAYED = "x-delayed-message"


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


class ExchangeKind:
    """One exchange type, as one exchange uses it: it matches messages against that exchange's bindings.

    An exchange makes one instance of its type's class and tells it of every binding added and removed; the
    instance shares the exchange's ``bindings`` (in binding order) and ``by_key`` (routing key -> bindings) and
    may keep an index of its own. The class methods check declarations and bindings before they happen.
    """

    __slots__ = ("bindings", "by_key")

    #: the type's name (``exchange.declare``'s ``type``)
    name: ClassVar[str] = ""
    #: ``description/0`` (``/api/overview``'s ``exchange_types``)
    description: ClassVar[str] = ""
    #: :meth:`match` reads the message's headers (decoded, or built for a dead-lettered copy, only then)
    reads_headers: ClassVar[bool] = False

    def __init__(self, bindings: list[Binding], by_key: dict[str, list[Binding]]) -> None:
        self.bindings = bindings
        self.by_key = by_key

    def bound(self, b: Binding, seq: int) -> None:
        """``b`` was added (``seq`` grows in binding order)."""

    def unbound(self, b: Binding, seq: int) -> None:
        """``b`` (added as ``seq``) was removed."""

    def match(self, routing_keys: Sequence[str], headers: Table | None) -> list[Binding]:
        """The bindings a message with these routing keys (its CC and BCC keys included) and headers (None unless
        :attr:`reads_headers`) matches; duplicates possible."""
        return []

    @classmethod
    def validate(cls, arguments: Table, exchange_types: Iterable[str], profile: Profile) -> None:
        """``validate/1``: check a new exchange's arguments (raise the AMQP error)."""

    @classmethod
    def validate_binding(
        cls, routing_key: str, arguments: Table, destination_queue_type: str | None, profile: Profile
    ) -> None:
        """``validate_binding/2``: check a new binding (``destination_queue_type``: None for an exchange; texts
        per ``profile``)."""


def check_type(name: str, exchange_types: Iterable[str], profile: Profile) -> None:
    """``rabbit_exchange:check_type/1``: ``name`` is an exchange type of the node. It says "invalid" for a name that
    is an atom in the VM (always so for ''), else "unknown"; a 406 from 3.13.3 (rabbitmq-server #11214), a
    connection's 503 before."""
    if name in exchange_types:
        return
    text = "invalid exchange type ''" if name == "" else texts.unknown_exchange_type(name)
    if profile.unknown_exchange_type_is_channel_error:
        raise errors.PreconditionFailed(text)
    raise errors.CommandInvalid(text)
