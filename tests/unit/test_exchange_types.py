"""The exchange-type registry (:mod:`fakerabbit.broker.exchange_types`): every type a profile or plugin offers is
modelled by a class of its own, which matches and validates (no sockets)."""

from __future__ import annotations

import pytest

from fakerabbit.broker import errors
from fakerabbit.broker.exchange import Binding, Exchange
from fakerabbit.broker.exchange_types import TYPES, ExchangeKind, kind_of
from fakerabbit.broker.exchange_types.delayed import DelayedMessage
from fakerabbit.broker.exchange_types.direct import Direct
from fakerabbit.broker.exchange_types.headers import Headers
from fakerabbit.broker.exchange_types.local_random import LocalRandom
from fakerabbit.broker.profile import ACCEPTED_VERSIONS, get_profile


@pytest.mark.parametrize("version", ACCEPTED_VERSIONS)
def test_every_type_of_every_profile_has_a_class(version: str) -> None:
    for name in (*get_profile(version).exchange_types, DelayedMessage.name):
        kind = kind_of(name)
        assert kind is TYPES[name] and kind.name == name and kind.description


def test_an_exchange_matches_with_the_class_of_its_type_or_its_delayed_type() -> None:
    assert type(Exchange("d", "direct").kind) is Direct
    delayed = Exchange("x", "x-delayed-message", arguments={"x-delayed-type": ("S", "headers")})
    assert type(delayed.kind) is Headers and delayed.kind.reads_headers
    odd = Exchange("odd", "x-delayed-message")  # no x-delayed-type: matches nothing
    odd.add_binding(Binding("odd", "q", "queue", "", {}))
    assert type(odd.kind) is DelayedMessage and odd.match([""], None) == []
    assert kind_of("nope") is ExchangeKind


def test_direct_matches_every_routing_key() -> None:
    x = Exchange("d", "direct")
    a, b = Binding("d", "qa", "queue", "a", {}), Binding("d", "qb", "queue", "b", {})
    x.add_binding(a)
    x.add_binding(b)
    assert x.match(["a"], None) == [a]
    assert x.match(["b", "a", "c"], None) == [b, a]
    x.remove_binding(a)
    assert x.match(["a"], None) == []


def test_binding_rules_of_headers_and_local_random() -> None:
    p43 = get_profile("4.3")
    Headers.validate_binding("", {"x-match": ("S", "any-with-x")}, "classic", p43)
    with pytest.raises(errors.PreconditionFailed, match="Invalid x-match field value"):
        Headers.validate_binding("", {"x-match": ("S", "some")}, "classic", p43)
    for version, shown in (("3.10", '<<"\xe9">>'), ("4.3", '<<"\xe9"/utf8>>')):  # 3.10: the octets C3 A9, raw
        with pytest.raises(errors.PreconditionFailed) as exc:  # ~p up to 3.11, ~tp from 3.12
            Headers.validate_binding("", {"x-match": ("S", "\xe9")}, "classic", get_profile(version))
        assert exc.value.explanation.encode("utf-8", "surrogateescape") == (
            f"Invalid x-match field value {shown}; expected all, any, all-with-x, or any-with-x"
        ).encode("utf-8", "surrogateescape")
    LocalRandom.validate_binding("", {}, "classic", p43)
    for key, qtype, text in (
        ("k", "classic", "Non empty binding 'k' key not permitted"),
        ("", None, "Destination not found"),
        ("", "quorum", "Queue type rabbit_quorum_queue not valid for this exchange type"),
    ):
        with pytest.raises(errors.PreconditionFailed) as exc:
            LocalRandom.validate_binding(key, {}, qtype, p43)
        assert exc.value.explanation == text
