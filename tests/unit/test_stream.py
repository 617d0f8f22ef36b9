"""The stream model on the broker alone (no sockets, virtual clock): chunks, segments and their tracking chunks,
retention, offsets, filtering, what a stream stores, and a restart. The same rules are checked against the live
brokers in tests/conformance/test_streams.py and test_streams_log.py."""

from __future__ import annotations

from typing import Any

import pytest

from fakerabbit.broker import errors
from fakerabbit.broker.broker import Broker
from fakerabbit.broker.fields import table_from_python
from fakerabbit.broker.message import Message
from fakerabbit.broker.profile import get_profile
from fakerabbit.broker.properties import RawProperties, build_properties
from fakerabbit.broker.restart import restart_broker
from fakerabbit.broker.session import Session
from fakerabbit.broker.stream.conversion import stored_properties
from fakerabbit.broker.stream.log import StreamEntry
from fakerabbit.broker.stream.queue import StreamQueue
from fakerabbit.clock import VirtualClock


class Sink:
    def __init__(self) -> None:
        self.delivered: list[tuple[str, int, bytes, bytes]] = []

    def send_deliver(
        self, tag: str, dtag: int, redelivered: bool, exchange: str, rk: str, props: bytes, body: bytes
    ) -> None:
        self.delivered.append((tag, dtag, props, body))

    def send_return(self, *args: Any) -> None: ...
    def send_confirm(self, *args: Any) -> None: ...
    def send_cancel(self, *args: Any) -> None: ...

    def bodies(self, tag: str | None = None) -> list[bytes]:
        return [b for t, _, _, b in self.delivered if tag is None or t == tag]


class World:
    def __init__(self, version: str = "4.3") -> None:
        self.clock = VirtualClock()
        self.broker = Broker(self.clock, rabbitmq_version=version)
        self.conn = self.broker.open_connection("guest", "/", client_properties={})
        self.sink = Sink()
        self.session = Session(self.conn, 1, self.broker.vhost("/"), self.sink)
        self.session.qos(0, 100, False)

    def stream(self, name: str = "s", **args: Any) -> StreamQueue:
        q = self.broker.vhost("/").declare_queue(
            None,
            name,
            passive=False,
            durable=True,
            exclusive=False,
            auto_delete=False,
            arguments=table_from_python({"x-queue-type": "stream", **args}),
        )
        assert isinstance(q, StreamQueue)
        return q

    def publish(self, q: str, body: bytes, **props: Any) -> None:
        self.session.publish("", q, False, False, build_properties(**props), body)

    def consume(self, q: str, tag: str, **args: Any) -> None:
        c = self.session.consume(q, tag, False, False, table_from_python(args))
        self.session.start(c)

    def offsets(self, q: StreamQueue) -> list[int]:
        return [e.offset for e in q.ready_entries() if isinstance(e, StreamEntry)]


def test_offsets_chunks_and_last() -> None:
    w = World()
    q = w.stream()
    for i in range(3):
        w.publish("s", b"a%d" % i)  # one channel, no confirms, same instant: one chunk
    w.session.confirm_select()
    w.publish("s", b"c0")  # confirmed: a chunk of its own
    w.publish("s", b"c1")
    assert w.offsets(q) == [0, 1, 2, 3, 4]
    chunks = [e.chunk.id for e in q.ready_entries() if isinstance(e, StreamEntry)]
    assert chunks == [0, 0, 0, 3, 4]
    w.consume("s", "last", **{"x-stream-offset": "last"})
    assert w.sink.bodies("last") == [b"c1"]
    assert q.stat() == (5, 0)


def test_a_reader_closes_the_chunk_it_has_seen() -> None:
    w = World()
    q = w.stream()
    w.publish("s", b"a0")
    w.consume("s", "tail")  # attaches at next: a0's chunk is closed
    w.publish("s", b"a1")
    w.publish("s", b"a2")  # read by the tail consumer as it arrives: each is closed by the read
    assert w.sink.bodies("tail") == [b"a1", b"a2"]
    assert [e.chunk.id for e in q.ready_entries() if isinstance(e, StreamEntry)] == [0, 1, 2]


def test_segments_tracking_chunks_and_byte_retention() -> None:
    w = World()
    q = w.stream(**{"x-stream-max-segment-size-bytes": 250, "x-max-length-bytes": 500})
    w.session.confirm_select()
    for i in range(10):
        w.publish("s", b"m%d-" % i + b"x" * 97)
    assert w.offsets(q) == [18]  # each message in a segment of its own after a tracking chunk; one fits
    assert q.segment_count == 1
    assert q.stat() == (2, 0)  # offsets 17 (tracking) and 18


def test_age_retention_needs_a_new_segment() -> None:
    w = World()
    q = w.stream(**{"x-stream-max-segment-size-bytes": 400, "x-max-age": "1s"})
    w.session.confirm_select()
    w.publish("s", b"a0")
    w.publish("s", b"a1")
    w.clock.advance(10)
    assert w.offsets(q) == [0, 1]
    w.publish("s", b"c" * 150)  # fills the segment
    w.clock.advance(2)
    w.publish("s", b"d")  # a new segment: retention runs
    assert [e.msg.body for e in q.ready_entries()] == [b"d"]
    assert w.offsets(q) == [4]


@pytest.mark.parametrize(("version", "left"), [("3.10", 3), ("3.12", 1), ("4.3", 1)])
def test_hourly_age_evaluation(version: str, left: int) -> None:
    w = World(version)
    q = w.stream(**{"x-stream-max-segment-size-bytes": 250, "x-max-age": "1h"})
    w.session.confirm_select()
    for i in range(3):
        w.publish("s", b"m%d-" % i + b"x" * 97)
    w.clock.advance(2 * 3600)
    assert len(q.ready_entries()) == left


def test_a_consumer_finishes_the_segment_retention_deletes() -> None:
    w = World()
    q = w.stream(**{"x-stream-max-segment-size-bytes": 400, "x-max-age": "1s"})
    w.session.confirm_select()
    w.publish("s", b"a0")
    w.publish("s", b"c" * 150)  # the segment is full
    w.clock.advance(2)
    # the reader opens the segment, then its registration makes the writer roll over: retention deletes the segment
    w.consume("s", "r", **{"x-stream-offset": "first"})
    assert q.ready_entries() == []
    assert w.sink.bodies("r") == [b"a0", b"c" * 150]


def test_filtering_selects_chunks() -> None:
    w = World()
    w.stream()
    w.session.confirm_select()
    w.publish("s", b"blue1", headers=table_from_python({"x-stream-filter-value": "blue"}))
    w.publish("s", b"none1")
    w.session.confirm = False
    w.publish("s", b"red-b", headers=table_from_python({"x-stream-filter-value": "red"}))
    w.publish("s", b"blue-b", headers=table_from_python({"x-stream-filter-value": "blue"}))
    w.consume("s", "blue", **{"x-stream-offset": "first", "x-stream-filter": "blue"})
    w.consume("s", "unf", **{"x-stream-offset": "first", "x-stream-filter": "x", "x-stream-match-unfiltered": True})
    assert w.sink.bodies("blue") == [b"blue1", b"red-b", b"blue-b"]
    assert w.sink.bodies("unf") == [b"none1"]


def test_filtering_is_ignored_before_3_13() -> None:
    w = World("3.10")
    w.stream()
    w.publish("s", b"red", headers=table_from_python({"x-stream-filter-value": "red"}))
    w.consume("s", "blue", **{"x-stream-offset": "first", "x-stream-filter": "blue"})
    assert w.sink.bodies("blue") == [b"red"]


def test_credit_and_settlement() -> None:
    w = World()
    w.stream()
    w.session.qos(0, 2, False)
    for i in range(4):
        w.publish("s", b"m%d" % i)
    w.consume("s", "c", **{"x-stream-offset": "first"})
    assert w.sink.bodies() == [b"m0", b"m1"]
    w.session.nack(1, False, True)  # a credit, not a redelivery
    assert w.sink.bodies() == [b"m0", b"m1", b"m2"]
    w.session.ack(0, True)
    assert w.sink.bodies() == [b"m0", b"m1", b"m2", b"m3"]


def test_nack_before_3_13() -> None:
    w = World("3.10")
    w.stream()
    w.publish("s", b"m0")
    w.consume("s", "c", **{"x-stream-offset": "first"})
    with pytest.raises(errors.NotImplemented_):
        w.session.nack(1, False, False)


def _props(version: str, raw: bytes) -> RawProperties:
    msg = Message("", ("s",), RawProperties(raw), b"x")
    return stored_properties(msg, get_profile(version))


def test_what_a_stream_stores() -> None:
    headers = table_from_python({"arr": ["a"], "x-arr": ["a"], "bin": b"\x00", "n": 1})
    raw = build_properties(headers=headers, cluster_id="c")
    v3 = _props("3.10", raw)
    assert (v3.cluster_id, v3.delivery_mode) == (None, None)
    assert [(k, t) for k, (t, _) in (v3.headers or {}).items()] == [("bin", "x"), ("n", "I")]
    v4 = _props("4.3", raw)
    assert (v4.cluster_id, v4.delivery_mode) == (None, 1)
    assert sorted((k, t) for k, (t, _) in (v4.headers or {}).items()) == [("bin", "S"), ("n", "I"), ("x-arr", "A")]
    with pytest.raises(errors.InternalError):
        _props("4.3", build_properties(headers={"x-d": ("D", __import__("decimal").Decimal("1.5"))}))


def test_a_restart_keeps_the_log() -> None:
    w = World()
    q = w.stream()
    w.publish("s", b"m0")
    w.consume("s", "c", **{"x-stream-offset": "first"})
    restart_broker(w.broker)
    assert [e.msg.body for e in q.ready_entries()] == [b"m0"] and q.consumers == []
    assert w.broker.vhost("/").queues["s"] is q
