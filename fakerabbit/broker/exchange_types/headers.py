"""The ``headers`` exchange (``rabbit_exchange_type_headers``): a binding's arguments are matched against the
message's headers, all or any of them (``x-match``), ``x-`` keys only in the ``-with-x`` modes."""

from __future__ import annotations

from collections.abc import Sequence

from fakerabbit.broker import errors
from fakerabbit.broker.erlterm import write
from fakerabbit.broker.exchange_types.base import Binding, ExchangeKind, ExchangeType
from fakerabbit.broker.fields import Table, type_name
from fakerabbit.broker.profile import Profile

__all__ = ["Headers", "headers_match"]

_X_MATCH_MODES = ("all", "any", "all-with-x", "any-with-x")


class Headers(ExchangeKind):
    __slots__ = ()
    name = ExchangeType.HEADERS.value
    description = "AMQP headers exchange, as per the AMQP specification"
    reads_headers = True

    def match(self, routing_keys: Sequence[str], headers: Table | None) -> list[Binding]:
        h = headers or {}
        return [b for b in self.bindings if headers_match(b.arguments, h)]

    @classmethod
    def validate_binding(
        cls, routing_key: str, arguments: Table, destination_queue_type: str | None, profile: Profile
    ) -> None:
        """``rabbit_exchange_type_headers:validate_binding/2``: ``x-match`` is one of the four modes (the value is
        printed with ``~tp`` from 3.12: ``AMQPRules.unicode_texts``)."""
        from fakerabbit.broker.arguments import _erl_value

        field = arguments.get("x-match")
        if field is None:
            return
        unicode = profile.amqp.unicode_texts
        tag, value = field
        if tag == "S" and value in _X_MATCH_MODES:
            return
        if tag == "S":
            raise errors.PreconditionFailed(
                f"Invalid x-match field value {write(_erl_value(field), unicode=unicode)}; "
                "expected all, any, all-with-x, or any-with-x"
            )
        raise errors.PreconditionFailed(
            f"Invalid x-match field type {type_name(tag)} (value {write(_erl_value(field), unicode=unicode)}); "
            "expected longstr"
        )


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
