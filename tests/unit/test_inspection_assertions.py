"""The assertion helpers of fakerabbit.testing: they pass on matching state and fail with a readable diff."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from fakerabbit import FakeRabbit
from fakerabbit.testing import (
    Events,
    assert_bodies,
    assert_empty,
    assert_event_kinds,
    assert_headers,
    assert_message_count,
    assert_x_death,
    diff,
)
from tests.unit.test_inspection import Client


@pytest.fixture
def rabbit() -> FakeRabbit:
    return FakeRabbit(start_time=datetime(2024, 1, 1, tzinfo=UTC))


@pytest.fixture
def client(rabbit: FakeRabbit) -> Client:
    c = Client(rabbit)
    c.declare("q")
    return c


def test_assert_bodies(rabbit: FakeRabbit, client: Client) -> None:
    client.publish("q", b"a")
    client.publish("q", "é".encode())
    assert_bodies(rabbit.queue("q"), [b"a", "é"])
    assert_bodies(rabbit.queue("q").messages[1:], ["é"])
    with pytest.raises(AssertionError) as info:
        assert_bodies(rabbit.queue("q"), [b"a", b"b", b"c"])
    text = str(info.value)
    assert text.startswith("queue 'q': bodies differ")
    assert "\n   b'a',\n-  b'b',\n-  b'c',\n+  b'\\xc3\\xa9',\n" in text


def test_assert_empty_and_count(rabbit: FakeRabbit, client: Client) -> None:
    assert_empty(rabbit.queue("q"))
    assert_message_count(rabbit.queue("q"), 0, unacked=0)
    client.publish("q", b"left over")
    with pytest.raises(AssertionError, match=r"queue 'q' is not empty: 1 ready, 0 unacked\n\[b'left over'\]"):
        assert_empty(rabbit.queue("q"))
    client.get("q")
    assert_message_count(rabbit.queue("q"), 0, unacked=1)
    with pytest.raises(AssertionError) as info:
        assert_message_count(rabbit.queue("q"), 2, unacked=0)
    assert "-{'ready': 2, 'unacked': 0},\n+{'ready': 0, 'unacked': 1}," in str(info.value)


def test_assert_headers(rabbit: FakeRabbit, client: Client) -> None:
    client.publish("q", b"x", headers={"a": 1, "b": "two"})
    m = rabbit.queue("q").messages[0]
    assert_headers(m, {"a": 1})
    assert_headers(m, {"a": 1, "b": "two"}, exact=True)
    assert_headers({"a": 1}, {"a": 1})
    with pytest.raises(AssertionError) as info:
        assert_headers(m, {"a": 2, "c": 3})
    assert "missing headers: ['c']" in str(info.value) and "+{'a': 1}," in str(info.value)
    with pytest.raises(AssertionError, match=r"headers differ \(exact\)"):
        assert_headers(m, {"a": 1}, exact=True)


def test_assert_x_death(rabbit: FakeRabbit, client: Client) -> None:
    client.declare("work", x_dead_letter_exchange="", x_dead_letter_routing_key="q")
    client.publish("work", b"m")
    client.session.nack(client.get("work"), False, False)
    m = rabbit.queue("q").messages[0]
    assert_x_death(m, [{"queue": "work", "reason": "rejected", "count": 1}])
    assert_x_death(m, [{"routing-keys": ["work"], "time": datetime(2024, 1, 1, tzinfo=UTC)}])
    with pytest.raises(AssertionError) as info:
        assert_x_death(m, [{"queue": "work", "reason": "expired"}])
    text = str(info.value)
    assert "-  {'queue': 'work', 'reason': 'expired'},\n+  {'queue': 'work', 'reason': 'rejected'}," in text
    assert "full x-death:" in text
    with pytest.raises(AssertionError):
        assert_x_death(m, [])  # an unexpected death is a difference too


def test_assert_event_kinds(rabbit: FakeRabbit, client: Client) -> None:
    client.publish("q", b"m")
    events = rabbit.events
    (mid,) = events.published()
    assert_event_kinds(events, ["published", "routed"], message_id=mid)
    with pytest.raises(AssertionError) as info:
        assert_event_kinds(events, ["published", "routed", "acked"], message_id=mid)
    assert "   'routed',\n-  'acked',\n" in str(info.value) and "events:\n" in str(info.value)
    assert_event_kinds(Events(), [])


def test_diff_marks_expected_and_actual() -> None:
    assert diff([1, 2], [1, 3]).splitlines()[:2] == ["--- expected", "+++ actual"]
    assert diff("same", "same") == ""
