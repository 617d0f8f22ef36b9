"""The clocks on their own (no server): firing order, chained timers, following freezegun / time-machine, and
real time that neither library can reach."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from freezegun import freeze_time

from fakerabbit import clock as clock_module
from fakerabbit.clock import (
    FollowingClock,
    SystemClock,
    VirtualClock,
    followed_time,
    real_monotonic,
    real_time,
    use_real_time,
)

START = datetime(2030, 1, 1, tzinfo=UTC)
START_MS = int(START.timestamp() * 1000)


# -- VirtualClock ------------------------------------------------------------------------------------------------


def test_virtual_clock_starts_at_start_time_and_stands_still() -> None:
    c = VirtualClock(START)
    assert c.now() == START and c.now().tzinfo is UTC
    assert c.now_ms() == START_MS
    assert c.now_ms() == START_MS


def test_virtual_clock_defaults_to_wall_time() -> None:
    before = time.time()
    c = VirtualClock()
    assert before - 1 <= c.now_ms() / 1000 <= time.time() + 1


def test_naive_start_time_is_utc() -> None:
    assert VirtualClock(datetime(2030, 1, 1)).now() == START


def test_advance_fires_due_timers_in_deadline_order_and_reports_count() -> None:
    c = VirtualClock(START)
    fired: list[tuple[str, int]] = []
    for name, at in (("c", 3000), ("a", 1000), ("b", 2000), ("late", 10_000)):
        c.call_at(START_MS + at, lambda n=name: fired.append((n, c.now_ms() - START_MS)))
    assert c.advance(5) == 3
    assert fired == [("a", 1000), ("b", 2000), ("c", 3000)]
    assert c.now_ms() == START_MS + 5000
    assert c.pending() == 1
    assert c.next_deadline() == START + timedelta(seconds=10)


def test_timers_with_equal_deadlines_fire_in_scheduling_order() -> None:
    c = VirtualClock(START)
    fired: list[int] = []
    for i in range(5):
        c.call_at(START_MS + 100, lambda i=i: fired.append(i))
    c.advance(0.1)
    assert fired == [0, 1, 2, 3, 4]


def test_timers_scheduled_by_firings_fire_as_often_as_fit() -> None:
    """A retry loop (fire, reschedule 10 s later) goes round as many times as fit in the advance."""
    c = VirtualClock(START)
    rounds: list[int] = []

    def again() -> None:
        rounds.append(c.now_ms() - START_MS)
        c.call_at(c.now_ms() + 10_000, again)

    c.call_at(START_MS + 10_000, again)
    assert c.advance(35) == 3
    assert rounds == [10_000, 20_000, 30_000]
    assert c.advance(timedelta(seconds=5)) == 1
    assert rounds[-1] == 40_000


def test_timer_at_now_fires_on_zero_advance() -> None:
    c = VirtualClock(START)
    fired: list[bool] = []
    c.call_at(START_MS, lambda: fired.append(True))
    assert c.advance(0) == 1
    assert fired == [True]


def test_cancelled_timers_do_not_fire_and_are_compacted() -> None:
    c = VirtualClock(START)
    fired: list[int] = []
    handles = [c.call_at(START_MS + i, lambda i=i: fired.append(i)) for i in range(1000)]
    for h in handles[:900]:
        c.cancel(h)
        c.cancel(h)  # twice is harmless
    assert c.pending() == 100
    assert len(c._timers) < 1000  # compacted
    c.advance(1)
    assert fired == list(range(900, 1000))


def test_advance_to_and_backwards() -> None:
    c = VirtualClock(START)
    c.advance_to(datetime(2030, 1, 2))  # naive is UTC
    assert c.now() == START + timedelta(days=1)
    with pytest.raises(ValueError, match="backwards"):
        c.advance_to(START)
    with pytest.raises(ValueError, match="backwards"):
        c.advance(-1)
    c.set(START + timedelta(days=2))
    assert c.now() == START + timedelta(days=2)


def test_reset_drops_timers() -> None:
    c = VirtualClock(START)
    c.call_at(START_MS + 1, lambda: None)
    c.reset(START + timedelta(hours=1))
    assert c.pending() == 0 and c.now() == START + timedelta(hours=1)


def test_runner_before_and_after_wrap_the_firing() -> None:
    c = VirtualClock(START)
    log: list[str] = []
    c.call_at(START_MS + 1, lambda: log.append("timer"))

    def runner(fn):  # type: ignore[no-untyped-def]
        log.append("runner")
        return fn()

    c.attach(runner, lambda: log.append("drain"), lambda: log.append("flush"))
    assert c.advance(1) == 1
    assert log == ["runner", "drain", "timer", "flush"]


def test_message_published_during_drain_is_stamped_before_time_moves() -> None:
    """``before`` (the server reading what clients sent) runs at the old time."""
    c = VirtualClock(START)
    seen: list[int] = []
    c.attach(None, lambda: seen.append(c.now_ms()), None)
    c.advance(30)
    assert seen == [START_MS]


# -- FollowingClock ------------------------------------------------------------------------------------------------


class Source:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def test_following_clock_reads_its_source_and_fires_on_tick() -> None:
    src = Source(START.timestamp())
    c = FollowingClock(src, poll_interval=None)
    assert c.now() == START
    fired: list[int] = []

    def again() -> None:
        fired.append(c.now_ms() - START_MS)
        c.call_at(c.now_ms() + 10_000, again)

    c.call_at(START_MS + 10_000, again)
    assert c.tick() == 0
    src.t += 25
    assert c.now_ms() == START_MS + 25_000
    assert c.tick() == 2
    assert fired == [10_000, 20_000]  # each callback saw its own deadline
    assert c.now_ms() == START_MS + 25_000


def test_following_clock_catch_up_and_moving_backwards() -> None:
    src = Source(START.timestamp())
    c = FollowingClock(src, poll_interval=None)
    fired: list[str] = []
    c.call_at(START_MS + 1000, lambda: fired.append("x"))
    src.t -= 3600  # the test moved its time back: nothing is due, nothing breaks
    assert c.catch_up() == 0
    src.t += 3601
    assert c.catch_up() == 1
    assert fired == ["x"]


def test_following_clock_cannot_be_advanced() -> None:
    c = FollowingClock(Source(0.0))
    with pytest.raises(RuntimeError, match="time library"):
        c.advance(1)
    with pytest.raises(RuntimeError, match="time library"):
        c.advance_to(START)


def test_following_clock_follows_freezegun() -> None:
    c = FollowingClock(poll_interval=None)
    with freeze_time("2030-01-01 00:00:00") as frozen:
        assert c.now() == START
        fired: list[int] = []
        c.call_at(START_MS + 30_000, lambda: fired.append(c.now_ms()))
        frozen.tick(29)
        assert c.tick() == 0
        frozen.tick(timedelta(seconds=1))
        assert c.tick() == 1
        assert fired == [START_MS + 30_000]


def test_followed_time_ignores_freezegun_ignore_list() -> None:
    """freezegun hands real time to callers from ignored modules; the broker must see the frozen time anyway."""
    with freeze_time("2030-01-01", ignore=["fakerabbit", "tests"]):
        assert abs(time.time() - real_time()) < 5  # this module is ignored: real time
        assert followed_time() == START.timestamp()


def test_following_clock_follows_time_machine() -> None:
    c = FollowingClock(poll_interval=None)
    with time_machine.travel(START, tick=False) as traveller:
        assert c.now() == START
        fired: list[bool] = []
        c.call_at(START_MS + 500, lambda: fired.append(True))
        traveller.shift(0.5)
        assert c.tick() == 1 and fired == [True]


# -- real time, out of reach of freezegun and time-machine -------------------------------------------------------


def test_real_monotonic_keeps_moving_under_freezegun() -> None:
    with freeze_time("2030-01-01"):
        frozen_a, real_a = time.monotonic(), real_monotonic()
        time.sleep(0.02)
        assert time.monotonic() == frozen_a
        assert real_monotonic() - real_a >= 0.015
        # freezegun rewrites module attributes that *are* time.monotonic; ours is not one of them
        assert clock_module.real_monotonic is real_monotonic


def test_real_time_ignores_freezegun_and_time_machine() -> None:
    wall = time.time()
    with freeze_time("2001-01-01"):
        assert abs(real_time() - wall) < 5
        assert SystemClock().now().year >= 2024
    with time_machine.travel(datetime(2001, 1, 1, tzinfo=UTC), tick=False):
        assert time.time() < 1e9 + 2e7
        assert abs(real_time() - wall) < 5


def test_use_real_time_keeps_a_loop_running_under_freezegun() -> None:
    loop = asyncio.new_event_loop()
    try:
        use_real_time(loop)
        with freeze_time("2030-01-01"):
            fired: list[bool] = []
            loop.call_later(0.01, lambda: fired.append(True))
            loop.run_until_complete(asyncio.sleep(0.03))
            assert fired == [True]
    finally:
        loop.close()


def test_unpatched_loop_stalls_under_freezegun() -> None:
    """Why use_real_time exists: a plain loop's timers never fall due while time.monotonic is frozen."""
    loop = asyncio.new_event_loop()
    try:
        with freeze_time("2030-01-01"):
            fired: list[bool] = []
            loop.call_later(0.01, lambda: fired.append(True))
            deadline = real_monotonic() + 0.05
            while real_monotonic() < deadline:
                loop.run_until_complete(asyncio.sleep(0))
            assert fired == []
    finally:
        loop.close()
