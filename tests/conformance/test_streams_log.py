"""The stream's log as clients see it: chunks (``last``, filtering), segments and the offsets their tracking chunks
take, retention by ``x-max-length-bytes`` / ``x-max-age`` (whole segments, only when one rolls over or a policy
changes; hourly too from 3.11), and filtering (3.13+). Checked on the live 3.10.8, 4.0.5 and 4.3.6
(notes/rabbitmq-streams-observed.md).

Segments of 250 bytes hold one chunk of a 100-byte message (RabbitMQ: ~266 bytes; the fake estimates ~275) or two
of a tiny one, so every version rolls over at the same messages.
"""

from __future__ import annotations

from typing import Any

import pika
import pytest

from fakerabbit.broker.properties import build_properties
from tests.conformance.conftest import Target
from tests.conformance.streamhelpers import (
    StreamReader,
    bodies_from,
    burst,
    collect,
    consume_error,
    declare_stream,
    publish_each,
)
from tests.conformance.ttlhelpers import anchored, eventually
from tests.conformance.versions import for_versions

SEGMENT = {"x-stream-max-segment-size-bytes": 250}


def test_last_is_the_last_chunk(broker: Target, ch: Any) -> None:
    q = declare_stream(broker, ch)
    ch.confirm_delivery()
    publish_each(ch, q, [b"c0", b"c1"])
    burst(broker, q, [(b"b%d" % i, None) for i in range(5)])
    got = bodies_from(broker, q, {"x-stream-offset": "last"}, n=5)
    # RabbitMQ writes what its writer has received as one chunk; the fake writes a channel's unconfirmed run as one
    assert got and got[-1] == b"b4" and set(got) <= {b"b0", b"b1", b"b2", b"b3", b"b4"}
    if broker.is_fake:
        assert got == [b"b0", b"b1", b"b2", b"b3", b"b4"]
    ch.basic_publish("", q, b"c2")
    assert bodies_from(broker, q, {"x-stream-offset": "last"}, n=1) == [b"c2"]  # confirmed: a chunk of its own


def test_new_segments_start_with_a_tracking_chunk(broker: Target, ch: Any) -> None:
    q = declare_stream(broker, ch, **SEGMENT)
    ch.confirm_delivery()
    publish_each(ch, q, [b"m%d-" % i + b"x" * 97 for i in range(4)])
    got = collect(broker, q, {"x-stream-offset": "first"}, n=4)
    assert [offset for offset, _ in got] == [0, 2, 4, 6]  # one message a segment, each after a tracking chunk
    assert collect(broker, q, {"x-stream-offset": 3}, n=2) == got[2:]
    # a reader registering with the writer made it write a tracking snapshot too (the segment was full): offset 7
    ch.basic_publish("", q, b"more")
    assert collect(broker, q, {"x-stream-offset": "last"}, n=1) == [(8, b"more")]  # (and now 9: full again)
    # declare-ok counts offsets (RabbitMQ: last offset + 1 - first offset, from a stats tick)
    count = eventually(broker, lambda: ch.queue_declare(q, passive=True).method.message_count, lambda n: n == 10, 8.0)
    assert count == 10


def test_max_length_bytes_removes_whole_old_segments(broker: Target, ch: Any) -> None:
    q = declare_stream(broker, ch, **SEGMENT, **{"x-max-length-bytes": 500})
    ch.confirm_delivery()
    publish_each(ch, q, [b"m%d-" % i + b"x" * 97 for i in range(10)])
    got = [(offset, body[:3]) for offset, body in collect(broker, q, {"x-stream-offset": "first"}, n=2)]
    # RabbitMQ evaluates retention asynchronously, sometimes before the message is in the new segment (which then
    # counts the tracking chunk only): the segment before it may be kept too
    assert got[-1] == (18, b"m9-") and got[0][0] >= 16
    if broker.is_fake:
        assert got == [(18, b"m9-")]  # only the newest segment fits
        assert broker.fake is not None
        assert broker.fake.queue(q).bodies == [b"m9-" + b"x" * 97]


def test_max_age_acts_only_when_a_segment_rolls_over(broker: Target, ch: Any) -> None:
    q = declare_stream(broker, ch, **{"x-stream-max-segment-size-bytes": 400, "x-max-age": "1s"})
    ch.confirm_delivery()
    publish_each(ch, q, [b"a0", b"a1"])  # the first segment, not full yet
    broker.advance(2)
    assert bodies_from(broker, q, {"x-stream-offset": "first"}, n=2) == [b"a0", b"a1"]  # older than 1 s: still there
    publish_each(ch, q, [b"c" * 150])  # fills the segment
    broker.advance(2)
    publish_each(ch, q, [b"d"])  # a new segment (after a tracking chunk): retention drops the old one
    assert collect(broker, q, {"x-stream-offset": "first"}, n=2) == [(4, b"d")]


def test_max_age_policy_wins_over_the_argument(broker: Target, ch: Any) -> None:
    q = declare_stream(broker, ch, **SEGMENT, **{"x-max-age": "1D"})
    broker.set_policy(q + "-age", anchored(q), {"max-age": "1s"})
    ch.confirm_delivery()
    if not broker.is_fake:
        broker.advance(0.5)  # the policy reaches the stream's writer asynchronously
    publish_each(ch, q, [b"a0", b"a1"])
    broker.advance(2)
    publish_each(ch, q, [b"b0"])
    assert bodies_from(broker, q, {"x-stream-offset": "first"}, n=2) == [b"b0"]


@pytest.mark.parametrize(
    ("definition", "apply_to", "applies"),
    [
        ({"max-age": "1s", "message-ttl": 5}, "queues", False),  # a key streams do not support: not for streams
        ({"max-age": "1s", "alternate-exchange": "x"}, "queues", True),  # a key nobody reads on a queue: applies
    ],
)
def test_which_policies_apply_to_a_stream(
    broker: Target, ch: Any, definition: dict[str, Any], apply_to: str, applies: bool
) -> None:
    q = declare_stream(broker, ch, **SEGMENT)
    broker.set_policy(q + "-p", anchored(q), definition, apply_to=apply_to)
    ch.confirm_delivery()
    if not broker.is_fake:
        broker.advance(0.5)
    publish_each(ch, q, [b"a0", b"a1"])
    broker.advance(2)
    publish_each(ch, q, [b"b0"])
    got = bodies_from(broker, q, {"x-stream-offset": "first"}, n=3)
    assert got == ([b"b0"] if applies else [b"a0", b"a1", b"b0"])


@for_versions("4.0", "4.3")
def test_policy_applying_to_streams_only(broker: Target, ch: Any) -> None:
    q = declare_stream(broker, ch, **SEGMENT)
    classic = broker.name("c")
    ch.queue_declare(classic)
    broker.set_policy(q + "-p", anchored(q) + "|" + anchored(classic), {"max-age": "1s"}, apply_to="streams")
    ch.confirm_delivery()
    if not broker.is_fake:
        broker.advance(0.5)
    publish_each(ch, q, [b"a0", b"a1"])
    broker.advance(2)
    publish_each(ch, q, [b"b0"])
    assert bodies_from(broker, q, {"x-stream-offset": "first"}, n=3) == [b"b0"]


def test_a_policy_change_evaluates_retention(broker: Target, ch: Any) -> None:
    q = declare_stream(broker, ch, **SEGMENT)
    ch.confirm_delivery()
    publish_each(ch, q, [b"a0", b"a1"])  # the segment is full
    broker.advance(2)
    broker.set_policy(q + "-age", anchored(q), {"max-age": "1s"})
    # the writer takes the new configuration in a new segment; retention drops the old one at once
    got = eventually(
        broker, lambda: bodies_from(broker, q, {"x-stream-offset": "first"}, n=1, wait=0.2), lambda b: b == [], 3.0
    )
    assert got == []
    publish_each(ch, q, [b"b0"])
    assert bodies_from(broker, q, {"x-stream-offset": "first"}, n=1) == [b"b0"]


@for_versions("3.10", "4.3")
@pytest.mark.fake_only
def test_age_limit_is_evaluated_hourly_from_3_11(broker: Target, ch: Any) -> None:
    """osiris ≥ 1.4 re-evaluates an age limit every hour while more than one segment is left; 3.10's osiris only
    when a segment rolls over. On the virtual clock: no publish, two hours later."""
    q = declare_stream(broker, ch, **SEGMENT, **{"x-max-age": "1h"})
    ch.confirm_delivery()
    publish_each(ch, q, [b"m%d-" % i + b"x" * 97 for i in range(3)])
    broker.advance(2 * 3600)
    left = bodies_from(broker, q, {"x-stream-offset": "first"}, n=3)
    assert [b[:2] for b in left] == ([b"m2"] if broker.at_least("4.0") else [b"m0", b"m1", b"m2"])


# -- filtering (3.13+) ---------------------------------------------------------------------------------------


def _filtered_stream(broker: Target, ch: Any) -> str:
    q = declare_stream(broker, ch)
    ch.confirm_delivery()

    def props(value: str | None) -> Any:
        return pika.BasicProperties(headers=None if value is None else {"x-stream-filter-value": value})

    for body, value in ((b"blue1", "blue"), (b"red1", "red"), (b"none1", None), (b"empty1", "")):
        ch.basic_publish("", q, body, props(value))  # confirmed: chunks of their own
    burst(broker, q, [(b"red-b", props("red")), (b"blue-b", props("blue")), (b"none-b", props(None))])
    return q


_SINGLES = {b"blue1": "blue", b"red1": "red", b"none1": "", b"empty1": ""}
_BURST = {b"red-b": "red", b"blue-b": "blue", b"none-b": ""}


@for_versions("3.10", "4.0", "4.3")
@pytest.mark.parametrize(
    ("args", "wanted"),
    [
        ({"x-stream-filter": "blue"}, {"blue"}),
        ({"x-stream-filter": "blue", "x-stream-match-unfiltered": True}, {"blue", ""}),
        ({"x-stream-filter": ["blue", "red"]}, {"blue", "red"}),
        ({"x-stream-filter": "green"}, set()),
        ({"x-stream-filter": ""}, {""}),  # the empty value is the "unfiltered" mark
        ({"x-stream-filter": [5, "red"]}, {"red"}),  # elements that are not strings are ignored
        ({"x-stream-filter": "blue", "x-stream-match-unfiltered": "yes"}, {"blue"}),  # not a bool: false
        ({"x-stream-match-unfiltered": True}, None),  # no filter: everything
        ({"x-stream-filter": 5}, None),  # not a string or an array: no filtering
    ],
)
def test_filtering_selects_whole_chunks(broker: Target, ch: Any, args: dict[str, Any], wanted: set[str] | None) -> None:
    q = _filtered_stream(broker, ch)
    got = bodies_from(broker, q, {"x-stream-offset": "first", **args}, n=7)
    if wanted is None or not broker.at_least("4.0"):  # 3.10 has no filtering
        assert got == [*_SINGLES, *_BURST]
        return
    singles = [b for b in got if b in _SINGLES]
    assert singles == [b for b, v in _SINGLES.items() if v in wanted]
    in_burst = [b for b in got if b in _BURST]
    # a chunk holding a wanted value comes whole: the client filters again (the burst is one chunk on the fake)
    assert {b for b, v in _BURST.items() if v in wanted} <= set(in_burst)
    if broker.is_fake:
        assert in_burst == ([*_BURST] if wanted & set(_BURST.values()) else [])


@for_versions("3.10", "4.0", "4.3")
def test_filter_with_no_value_crashes(broker: Target, ch: Any) -> None:
    q = _filtered_stream(broker, ch)
    got = consume_error(broker, q, {"x-stream-offset": "first", "x-stream-filter": []})
    assert got == (("connection", 541, "INTERNAL_ERROR") if broker.at_least("4.0") else ("ok", 0, ""))


@for_versions("3.10", "4.0", "4.3")
@pytest.mark.parametrize("field", [("x", b"blue"), ("I", 5)])
def test_filter_value_must_be_a_string(broker: Target, ch: Any, field: tuple[str, Any]) -> None:
    q = declare_stream(broker, ch)
    with StreamReader(broker.url) as r:
        r.publish("", q, build_properties(headers={"x-stream-filter-value": field}), b"x")
        if broker.at_least("4.0"):  # rabbit_stream_queue:stream_message/1 only takes a UTF-8 string
            with pytest.raises(RuntimeError, match="541 INTERNAL_ERROR"):
                r.sync()
        else:
            r.sync()
