"""Clocks: where the broker's time comes from.

The broker only ever asks a :class:`Clock` for the time (integer milliseconds since the Unix epoch) and to
schedule callbacks. Three clocks:

* :class:`VirtualClock` (the default) stands still until the test moves it with :meth:`~VirtualClock.advance`
  or :meth:`~VirtualClock.advance_to`.
* :class:`FollowingClock` (``FakeRabbit(clock="frozen")``) follows ``time.time()`` as the test's time library
  reports it (freezegun, time-machine); timers fall due when the test moves that time.
* :class:`SystemClock` (``clock="system"``) is real time, with timers on the server's event loop.

fakerabbit's own I/O (the event loop it runs on in a thread, heartbeats) always uses :func:`real_monotonic`,
which neither freezegun nor time-machine can patch: see ``docs/clock.md``.
"""

from __future__ import annotations

import calendar
import contextlib
import functools
import gc
import heapq
import itertools
import sys
import threading
import time as _time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

__all__ = [
    "SYSTEM_CLOCK_ADVANCE",
    "Clock",
    "FollowingClock",
    "SystemClock",
    "TimerHandle",
    "VirtualClock",
    "followed_time",
    "real_monotonic",
    "real_time",
    "use_real_time",
]

#: Why a system clock cannot be moved: the text ``fakerabbit ctl advance`` answers with (management API).
SYSTEM_CLOCK_ADVANCE = "the clock is the system clock; start fakerabbit with --clock virtual to control time"


# ======================================================================================================
# Real time that freezegun and time-machine cannot reach.
#
# freezegun replaces ``time.monotonic`` / ``time.time`` and also every *module attribute* of any loaded module
# that is identical to the original functions (so ``_monotonic = time.monotonic`` captured at import would be
# patched too). It does not patch ``time.clock_gettime``, and it never looks inside ``functools.partial``
# objects. time-machine patches the C functions behind ``time.time`` and ``clock_gettime(CLOCK_REALTIME)``, but
# never monotonic clocks.


def _capture_monotonic() -> Callable[[], float]:
    gettime = getattr(_time, "clock_gettime", None)
    clock_id = getattr(_time, "CLOCK_MONOTONIC", None)
    if gettime is not None and clock_id is not None:
        return functools.partial(gettime, clock_id)
    freezegun_api = sys.modules.get("freezegun.api")  # imported while frozen: take freezegun's saved original
    original = getattr(freezegun_api, "real_monotonic", None) or _time.monotonic
    return functools.partial(original)


def _capture_realtime() -> Callable[[], float]:
    gettime = getattr(_time, "clock_gettime", None)
    clock_id = getattr(_time, "CLOCK_REALTIME", None)
    if gettime is not None and clock_id is not None:
        return functools.partial(gettime, clock_id)
    freezegun_api = sys.modules.get("freezegun.api")
    original = getattr(freezegun_api, "real_time", None) or _time.time
    return functools.partial(original)


#: Seconds from an arbitrary origin, never frozen or shifted by freezegun / time-machine.
real_monotonic: Callable[[], float] = _capture_monotonic()
_realtime: Callable[[], float] = _capture_realtime()


_hatch: Any = None  # time_machine.escape_hatch, once time-machine is imported


def real_time() -> float:
    """Seconds since the Unix epoch, as the machine's clock says (ignores freezegun and time-machine)."""
    global _hatch
    hatch = _hatch
    if hatch is None:
        # Looked up until time-machine is imported, then kept: this runs for every timestamp the broker takes.
        time_machine = sys.modules.get("time_machine")
        if time_machine is None:
            return _realtime()
        hatch = _hatch = getattr(time_machine, "escape_hatch", None)
        if hatch is None:
            return _realtime()
    if hatch.is_travelling():
        return float(hatch.time.time())
    return _realtime()


def followed_time() -> float:
    """``time.time()`` as the test sees it: freezegun's frozen time (regardless of its ignore list, which
    would otherwise hand real time to calls made from some modules), time-machine's, or the real time."""
    freezegun_api = sys.modules.get("freezegun.api")
    factories = getattr(freezegun_api, "freeze_factories", None)
    if factories:
        frozen = factories[-1]()
        return float(calendar.timegm(frozen.timetuple()) + frozen.microsecond / 1_000_000)
    return _time.time()


def use_real_time(loop: Any) -> None:
    """Make a pure-Python asyncio loop keep real time even while freezegun freezes ``time.monotonic``.

    ``BaseEventLoop.time()`` calls ``time.monotonic()``; under ``freeze_time`` (without ``real_asyncio=True``)
    its timers would never fall due. An instance attribute shadows the method. Loops implemented in C (uvloop)
    keep their own clock and are left alone.
    """
    with contextlib.suppress(AttributeError, TypeError):
        loop.time = real_monotonic


# ======================================================================================================
# timers


class TimerHandle:
    """A scheduled callback; pass it to :meth:`Clock.cancel`."""

    __slots__ = ("_native", "_seq", "cancelled", "fn", "when_ms")

    def __init__(self, when_ms: int, fn: Callable[[], None], seq: int) -> None:
        self.when_ms = when_ms
        self.fn = fn
        self.cancelled = False
        self._seq = seq
        self._native: object = None

    def __lt__(self, other: TimerHandle) -> bool:
        return (self.when_ms, self._seq) < (other.when_ms, other._seq)


_Timer = tuple[int, int, TimerHandle]
"""A heap entry: ``(when_ms, seq, handle)``, ordered by deadline, then by scheduling order (compared in C)."""


class Clock(Protocol):
    """What the broker needs from a clock."""

    def now_ms(self) -> int: ...

    def call_at(self, when_ms: int, fn: Callable[[], None]) -> TimerHandle: ...

    def cancel(self, handle: TimerHandle) -> None: ...


Runner = Callable[[Callable[[], object]], object]
"""Runs a function on the server's event loop and returns its result (set by the server)."""


def _to_ms(value: float | timedelta) -> int:
    seconds = value.total_seconds() if isinstance(value, timedelta) else float(value)
    if seconds < 0:
        raise ValueError("cannot move a clock backwards")
    return round(seconds * 1000)


def _dt_to_ms(value: datetime) -> int:
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return round(value.timestamp() * 1000)


def _ms_to_dt(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


class _TimerClock:
    """Timers kept in a heap and fired by the test (virtual and following clocks).

    Firing runs on the server's loop (through the runner the server attaches), after the server has processed
    what clients already sent (``before``) and before it writes what the firings produced (``after``).
    """

    def __init__(self) -> None:
        self._timers: list[_Timer] = []  # a heap, changed in place only (the firing loop holds on to it)
        self._seq = itertools.count()
        self._lock = threading.RLock()
        self._runner: Runner | None = None
        self._before: Callable[[], None] | None = None
        self._after: Callable[[], None] | None = None
        self._firing_at: int | None = None
        self._cancelled = 0

    def now_ms(self) -> int:
        raise NotImplementedError

    def call_at(self, when_ms: int, fn: Callable[[], None]) -> TimerHandle:
        """Schedule ``fn`` at ``when_ms`` (used by the broker)."""
        with self._lock:
            seq = next(self._seq)
            handle = TimerHandle(when_ms, fn, seq)
            heapq.heappush(self._timers, (when_ms, seq, handle))
            return handle

    def cancel(self, handle: TimerHandle) -> None:
        """Cancel a timer. It stays in the heap, skipped when due; the heap is compacted when cancelled timers
        make up most of it (a queue re-arming its head timer cancels one per change of head)."""
        if handle.cancelled:
            return
        handle.cancelled = True
        with self._lock:
            self._cancelled += 1
            if self._cancelled > 256 and 2 * self._cancelled > len(self._timers):
                self._timers[:] = [t for t in self._timers if not t[2].cancelled]
                heapq.heapify(self._timers)
                self._cancelled = 0

    def attach(
        self, runner: Runner | None, before: Callable[[], None] | None, after: Callable[[], None] | None
    ) -> None:
        """Let the server marshal firing onto its loop and drain/flush sockets around it."""
        self._runner, self._before, self._after = runner, before, after

    def now(self) -> datetime:
        """The broker's current time, timezone-aware UTC."""
        return _ms_to_dt(self.now_ms())

    def pending(self) -> int:
        """How many timers are scheduled (cancelled ones excluded)."""
        with self._lock:
            return sum(1 for t in self._timers if not t[2].cancelled)

    def next_deadline(self) -> datetime | None:
        """When the next timer falls due, or None."""
        with self._lock:
            live = [when for when, _, handle in self._timers if not handle.cancelled]
        return _ms_to_dt(min(live)) if live else None

    def clear_timers(self) -> None:
        """Drop every timer (used between tests)."""
        with self._lock:
            self._timers.clear()
            self._cancelled = 0

    # -- firing -------------------------------------------------------------------------------------------------
    def _run(self, target: Callable[[], int]) -> int:
        if self._runner is not None:
            result = self._runner(lambda: self._fire_until(target))
            return result if isinstance(result, int) else 0
        return self._fire_until(target)

    def _fire_until(self, target: Callable[[], int]) -> int:
        if self._before is not None:
            self._before()
        try:
            return self._fire_due(target())
        finally:
            if self._after is not None:
                self._after()

    def catch_up(self) -> int:
        """Fire the timers already due at the clock's time (the server calls this on its loop before handling
        client data): a timer the broker set for "now" (a TTL-0 head a dequeue exposed, a zero timeout) fires
        before the client's next command, as RabbitMQ's would, without the clock moving."""
        timers = self._timers
        if not timers:
            return 0
        now = self.now_ms()
        if timers[0][0] > now:
            return 0
        return self._fire_due(now)

    def _fire_due(self, target_ms: int) -> int:
        """Fire, in deadline order, every timer due at ``target_ms`` (including ones the firings schedule).
        During each callback the clock reads the timer's deadline, as if the broker had run on time.

        CPython's cyclic garbage collector is paused meanwhile: expiring a large queue into a dead-letter queue
        allocates hundreds of thousands of long-lived objects (and no cycles), and the full collections that
        growth triggers would otherwise cost several times the work itself. It resumes (unless the test had
        paused it) when the firing is over.
        """
        if self._firing_at is not None:  # re-entered from a callback: the outer loop picks new timers up
            return 0
        fired = 0
        gc_was_enabled = gc.isenabled()
        if gc_was_enabled:
            gc.disable()
        timers, lock, pop = self._timers, self._lock, heapq.heappop
        try:
            while True:
                with lock:
                    while timers and timers[0][2].cancelled:
                        pop(timers)
                        self._cancelled = max(0, self._cancelled - 1)
                    if not timers or timers[0][0] > target_ms:
                        break
                    when, _, handle = pop(timers)
                    self._firing_at = self._moved_to(when)
                handle.fn()
                fired += 1
        finally:
            self._firing_at = None
            self._moved_to(target_ms)
            if gc_was_enabled:
                gc.enable()
        return fired

    def _moved_to(self, when_ms: int) -> int:
        """Time reached ``when_ms`` (a deadline, then the target); returns the time callbacks should read."""
        return when_ms


class VirtualClock(_TimerClock):
    """A clock that stands still until the test moves it.

    ``advance(30)`` fires, in deadline order, every timer due within the next 30 s — including timers those
    firings schedule — and returns once every consequence (expiry, dead-lettering, deliveries, confirms) has been
    written to the clients' sockets. Callable from the test's thread while the server runs in its own, and from a
    coroutine on the loop the server runs on (``async with FakeRabbit()``). Before time moves, the server reads
    and processes whatever clients have already sent, so a message published just before ``advance()`` is
    enqueued at the old time.
    """

    def __init__(self, start: datetime | None = None) -> None:
        super().__init__()
        self._now = _dt_to_ms(start) if start is not None else int(real_time() * 1000)

    def now_ms(self) -> int:
        """The current time in integer milliseconds since the epoch (used by the broker)."""
        return self._firing_at if self._firing_at is not None else self._now

    def advance(self, seconds: float | timedelta) -> int:
        """Move time forward by ``seconds`` (a number or a ``timedelta``), firing every timer that falls due.

        Returns how many timers fired.
        """
        step = _to_ms(seconds)
        return self._run(lambda: self._now + step)

    async def advance_async(self, seconds: float | timedelta) -> int:
        """:meth:`advance`, awaitable: the same line of an async test also runs against a real RabbitMQ in the
        pytest plugin's dual mode, where it waits with ``asyncio.sleep`` instead of blocking the loop."""
        return self.advance(seconds)

    def advance_to(self, when: datetime) -> int:
        """Move time forward to ``when`` (naive datetimes are UTC); moving backwards is an error."""
        target = _dt_to_ms(when)
        if target < self._now:
            raise ValueError("cannot move a clock backwards")
        return self._run(lambda: max(target, self._now))

    def set(self, when: datetime) -> int:
        """Alias of :meth:`advance_to`."""
        return self.advance_to(when)

    def _moved_to(self, when_ms: int) -> int:
        if when_ms > self._now:
            self._now = when_ms
        return self._now

    def reset(self, start: datetime | None = None) -> None:
        """Drop every timer and set the time (used between tests)."""
        self.clear_timers()
        self._now = _dt_to_ms(start) if start is not None else int(real_time() * 1000)


class FollowingClock(_TimerClock):
    """The broker's time follows ``time.time()`` as the test's time library reports it.

    For tests that freeze or shift time with freezegun or time-machine: the broker's *now* is the patched time
    (:func:`followed_time`), so a message published under ``freeze_time("2030-01-01")`` is stamped 2030 and a
    30 s TTL falls due when the test moves frozen time 30 s on. Timers that have fallen due fire:

    * before the broker handles anything a client sends (so ``frozen.tick(30)`` then ``basic_get`` never sees
      an expired message);
    * on :meth:`tick`, which fires them and returns once the resulting frames are written to the sockets
      (use it when the effect is a push, e.g. a dead-lettered message to a waiting consumer);
    * every ``poll_interval`` real seconds on the server's loop (``None`` turns polling off).

    Timers fire in deadline order and each callback sees its own deadline as *now*, exactly as with
    :class:`VirtualClock`. The test moves time with its library, never with this clock: :meth:`advance` raises.
    """

    def __init__(self, source: Callable[[], float] | None = None, *, poll_interval: float | None = 0.01) -> None:
        super().__init__()
        self._source = source if source is not None else followed_time
        self.poll_interval = poll_interval

    def now_ms(self) -> int:
        """The followed time in integer milliseconds (the firing timer's deadline while it runs)."""
        if self._firing_at is not None:
            return self._firing_at
        return int(self._source() * 1000)

    def tick(self) -> int:
        """Fire every timer due at the followed time; returns how many fired, once their frames are written."""
        return self._run(self.now_ms)

    def advance(self, seconds: float | timedelta) -> int:
        """Not available: move time with freezegun / time-machine, then call :meth:`tick`."""
        raise RuntimeError(
            "this FakeRabbit follows time.time(): move time with your time library "
            "(freezegun: frozen.tick(30) / frozen.move_to(...); time-machine: traveller.shift(30)), "
            "then call rabbit.clock.tick()"
        )

    def advance_to(self, when: datetime) -> int:
        """Not available: see :meth:`advance`."""
        return self.advance(0)

    async def advance_async(self, seconds: float | timedelta) -> int:
        """Not available: see :meth:`advance`."""
        return self.advance(seconds)

    def reset(self, start: datetime | None = None) -> None:
        """Drop every timer (used between tests); the time is the test library's."""
        self.clear_timers()


class SystemClock:
    """Real time: timers run on the server's event loop. It cannot be moved: :meth:`advance` raises."""

    def __init__(self) -> None:
        self._seq = itertools.count()
        self._schedule: Callable[[float, Callable[[], None]], object] | None = None
        self._unschedule: Callable[[object], None] | None = None

    def attach_loop(
        self,
        schedule: Callable[[float, Callable[[], None]], object],
        unschedule: Callable[[object], None],
    ) -> None:
        """``schedule(delay_seconds, fn)`` runs fn on the loop after the delay (set by the server)."""
        self._schedule, self._unschedule = schedule, unschedule

    def now_ms(self) -> int:
        """Real time in integer milliseconds since the epoch."""
        if _hatch is None and "time_machine" not in sys.modules:  # real_time(), inlined: every event reads it
            return int(_realtime() * 1000)
        return int(real_time() * 1000)

    def now(self) -> datetime:
        """Real time, timezone-aware UTC."""
        return datetime.fromtimestamp(real_time(), tz=UTC)

    def call_at(self, when_ms: int, fn: Callable[[], None]) -> TimerHandle:
        """Schedule ``fn`` on the loop at ``when_ms``."""
        handle = TimerHandle(when_ms, fn, next(self._seq))
        if self._schedule is None:
            raise RuntimeError("SystemClock is not attached to a running server")
        delay = max(0.0, (when_ms - self.now_ms()) / 1000)

        def fire() -> None:
            if not handle.cancelled:
                fn()

        handle._native = self._schedule(delay, fire)
        return handle

    def cancel(self, handle: TimerHandle) -> None:
        """Cancel a timer."""
        handle.cancelled = True
        if self._unschedule is not None and handle._native is not None:
            self._unschedule(handle._native)

    def advance(self, seconds: float | timedelta) -> int:
        """Not available: real time cannot be moved (``FakeRabbit(clock="virtual")`` can)."""
        raise RuntimeError(
            f"{SYSTEM_CLOCK_ADVANCE} (in Python: FakeRabbit(clock='virtual'), the default; in pytest: drop "
            "@pytest.mark.fakerabbit(clock='system') / fakerabbit_clock = system)"
        )

    def advance_to(self, when: datetime) -> int:
        """Not available: see :meth:`advance`."""
        return self.advance(0)

    def set(self, when: datetime) -> int:
        """Not available: see :meth:`advance`."""
        return self.advance(0)

    async def advance_async(self, seconds: float | timedelta) -> int:
        """Not available: see :meth:`advance`."""
        return self.advance(seconds)
