"""A connection's writer (``Output``), its publisher flow control (``Throttle``) and its heartbeats
(``HeartbeatMonitor``), each on its own: fakes stand for the connection, the alarms and the transport."""

from __future__ import annotations

import asyncio

import pytest

from fakerabbit.protocol import framing, heartbeat
from fakerabbit.protocol.codec import base, commands
from fakerabbit.protocol.heartbeat import HEARTBEAT_TIMEOUT_INTERVALS, HeartbeatMonitor
from fakerabbit.protocol.output import OUT_FLUSH_BYTES, Output
from fakerabbit.protocol.throttle import Throttle
from tests.unit.protocol_harness import FakeTransport, decode, parse


class Writer:
    def __init__(self) -> None:
        self.transport = FakeTransport()
        self.marks = 0
        self.output = Output(self.mark)
        self.output.transport = self.transport

    def mark(self) -> None:
        self.marks += 1


# -- Output ------------------------------------------------------------------------------------------------


def test_frames_of_an_event_go_out_in_one_write() -> None:
    w = Writer()
    w.output.write(b"a")
    w.output.write_many([b"b", b"c"])
    assert (w.transport.out, w.marks) == (b"", 2)  # queued; the listener was told twice
    w.output.flush()
    assert (bytes(w.transport.out), w.transport.writes) == (b"abc", 1)
    w.output.flush()
    assert w.transport.writes == 1  # nothing queued: nothing written


def test_a_backlog_is_handed_over_before_the_event_ends() -> None:
    """So that the transport's pause_writing can stop further deliveries."""
    w = Writer()
    w.output.write_many([b"x" * (OUT_FLUSH_BYTES - 1)])
    assert w.transport.writes == 0
    w.output.write_many([b"y"])
    assert (w.transport.writes, len(w.transport.out)) == (1, OUT_FLUSH_BYTES)


def test_late_frames_follow_the_reply() -> None:
    w = Writer()
    w.output.write_late(b"cancel")
    w.output.write(b"reply")
    w.output.release_late()
    w.output.write(b"next")
    w.output.flush()
    assert bytes(w.transport.out) == b"replycancelnext"


def test_confirms_are_flushed_before_the_write() -> None:
    w = Writer()

    class Holder:
        def __init__(self, frame: bytes) -> None:
            self.frame = frame
            self.flushed = 0

        def flush_confirms(self) -> None:
            self.flushed += 1
            w.output.write(self.frame)

    a, b = Holder(b"A"), Holder(b"B")
    w.output.confirms_waiting(a)
    w.output.confirms_waiting(b)
    w.output.confirms_waiting(a)  # held once
    w.output.write(b"-")
    w.output.flush()
    assert (bytes(w.transport.out), a.flushed, b.flushed) == (b"-AB", 1, 1)
    w.output.confirms_waiting(a)
    w.output.forget_confirms()
    w.output.flush()
    assert a.flushed == 1


def test_a_closed_writer_writes_nothing() -> None:
    w = Writer()
    w.output.write(b"queued")
    w.output.close()
    w.output.write(b"after")
    w.output.write_late(b"late")
    w.output.flush()
    assert (w.transport.writes, w.output.queued()) == (0, 0)


def test_send_encodes_a_method_and_the_time_of_the_last_write_is_kept() -> None:
    w = Writer()
    before = w.output.last_send
    w.output.send(3, commands.Basic.QosOk())
    w.output.flush()
    ((ftype, channel, payload),) = parse(bytes(w.transport.out))
    assert (ftype, channel, decode(payload).NAME) == (1, 3, "Basic.QosOk")
    assert w.output.last_send >= before


# -- Throttle ---------------------------------------------------------------------------------------------


class Alarms:
    def __init__(self) -> None:
        self.blocking = False

    def reason(self) -> str:
        return "low on memory"


class Conn:
    """A connection as the throttle sees it."""

    def __init__(self, capable: bool = True) -> None:
        self.running = True
        self.blocked_capable = capable
        self.reading = True
        self.processed = 0

    def hold_input(self) -> None:
        self.reading = False

    def release_input(self) -> None:
        self.reading = True
        self.processed += 1


class Monitor:
    def __init__(self) -> None:
        self.paused = False

    def pause(self) -> None:
        self.paused = True

    def resume(self) -> None:
        self.paused = False


class Sent:
    def __init__(self) -> None:
        self.methods: list[str] = []

    def send(self, channel: int, method: base.Frame) -> None:
        assert channel == 0
        self.methods.append(f"{method.name}({getattr(method, 'reason', '')})")


def throttle(capable: bool = True) -> tuple[Throttle, Conn, Alarms, Monitor, Sent, list[int]]:
    conn, alarms, monitor, sent, flushes = Conn(capable), Alarms(), Monitor(), Sent(), []
    return Throttle(conn, alarms, sent, monitor, lambda: flushes.append(1)), conn, alarms, monitor, sent, flushes


def test_a_publisher_is_blocked_under_an_alarm_and_unblocked_after() -> None:
    t, conn, alarms, monitor, sent, _ = throttle()
    t.publish_received()
    assert not t.blocked  # no alarm: nothing happens
    alarms.blocking = True
    t.publish_received()
    assert (t.blocked, conn.reading, monitor.paused) == (True, False, True)
    assert sent.methods == ["Connection.Blocked(low on memory)"]
    t.publish_received()
    assert sent.methods == ["Connection.Blocked(low on memory)"]  # told once
    alarms.blocking = False
    t.control_throttle()
    assert (t.blocked, conn.reading, monitor.paused, conn.processed) == (False, True, False, 1)
    assert sent.methods[1:] == ["Connection.Unblocked()"]


def test_a_consumer_is_not_blocked() -> None:
    t, conn, alarms, _, sent, _ = throttle()
    alarms.blocking = True
    t.control_throttle()
    assert (t.blocked, conn.reading, sent.methods) == (False, True, [])


def test_a_client_without_the_capability_is_blocked_silently() -> None:
    t, conn, alarms, _, sent, _ = throttle(capable=False)
    alarms.blocking = True
    t.publish_received()
    assert (t.blocked, conn.reading, sent.methods) == (True, False, [])


def test_fault_injection_tells_at_once() -> None:
    """``rabbit.block()``: told before publishing; unblocked when lifted, if never held back."""
    t, conn, _, _, sent, flushes = throttle()
    t.set_blocked(True, "test says so")
    assert (sent.methods, len(flushes), t.blocked) == (["Connection.Blocked(test says so)"], 1, False)
    t.control_throttle()  # alarms.blocking is False: the notice is taken back
    assert sent.methods[1:] == ["Connection.Unblocked()"]
    conn.running = False
    t.set_blocked(True, "closing")
    assert len(sent.methods) == 2


# -- HeartbeatMonitor -----------------------------------------------------------------------------------------


async def test_heartbeats_are_sent_when_nothing_else_was(monkeypatch: pytest.MonkeyPatch) -> None:
    w = Writer()
    timeouts: list[int] = []
    hb = HeartbeatMonitor(w.output, lambda: timeouts.append(1))
    now = [1000.0]
    monkeypatch.setattr(heartbeat, "real_monotonic", lambda: now[0])
    hb.start(10)
    hb.received()
    w.output.last_send = now[0]
    now[0] += 4.0
    hb._tick()
    assert w.transport.out == b""  # sent something 4 s ago: no heartbeat needed yet
    now[0] += 1.0
    hb._tick()
    assert bytes(w.transport.out) == framing.HEARTBEAT_FRAME
    assert timeouts == []
    hb.stop()


async def test_a_silent_peer_is_dropped_unless_paused(monkeypatch: pytest.MonkeyPatch) -> None:
    w = Writer()
    timeouts: list[int] = []
    hb = HeartbeatMonitor(w.output, lambda: timeouts.append(1))
    now = [1000.0]
    monkeypatch.setattr(heartbeat, "real_monotonic", lambda: now[0])
    hb.start(2)
    hb.received()
    hb.pause()  # a blocked connection is not read: it cannot miss heartbeats
    now[0] += HEARTBEAT_TIMEOUT_INTERVALS * 2 + 1
    hb._tick()
    assert timeouts == []
    hb.resume()
    now[0] += HEARTBEAT_TIMEOUT_INTERVALS * 2 - 1
    hb._tick()
    assert timeouts == []
    now[0] += 1
    hb._tick()
    assert timeouts == [1]
    assert hb._handle is None  # dropped: no more ticks
    hb.stop()


async def test_stop_cancels_the_timer() -> None:
    hb = HeartbeatMonitor(Writer().output, lambda: None)
    hb.start(60)
    handle = hb._handle
    assert handle is not None
    hb.stop()
    assert handle.cancelled() and hb._handle is None
    await asyncio.sleep(0)
