"""The ``x-delayed-message`` exchange of the ``rabbitmq_delayed_message_exchange`` plugin, as a type: its declare
rule. It routes as its ``x-delayed-type`` (an exchange of this type uses that type's class to match), once a
message is due: holding messages until then is :mod:`fakerabbit.broker.delayed`'s."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from fakerabbit.broker import errors
from fakerabbit.broker.exchange_types.base import ExchangeKind, ExchangeType, check_type
from fakerabbit.broker.fields import Table

if TYPE_CHECKING:
    from fakerabbit.broker.profile import Profile

__all__ = ["DelayedMessage", "validate_declare"]

_NOT_SELF = "Invalid argument, 'x-delayed-message' can't be used for 'x-delayed-type'"
_NOT_A_TYPE = "Invalid argument, 'x-delayed-type' must be an existing exchange type"


class DelayedMessage(ExchangeKind):
    __slots__ = ()
    name = ExchangeType.DELAYED.value
    description = "Delayed Message Exchange."  # the plugin's description/0

    @classmethod
    def validate(cls, arguments: Table, exchange_types: Iterable[str], profile: Profile) -> None:
        validate_declare(arguments, exchange_types, profile)


def validate_declare(arguments: Table, exchange_types: Iterable[str], profile: Profile) -> None:
    """``rabbit_exchange_type_delayed_message:validate/1`` for a new ``x-delayed-message`` exchange."""
    field = arguments.get("x-delayed-type")
    value = field[1] if field is not None else None
    if isinstance(value, bytes):  # any binary: a longstr or a byte array
        value = value.decode("utf-8", "surrogateescape")
    if not isinstance(value, str):
        raise errors.PreconditionFailed(_NOT_A_TYPE)
    if value == ExchangeType.DELAYED:
        raise errors.PreconditionFailed(_NOT_SELF)
    check_type(value, exchange_types, profile)  # as for the declared type itself
