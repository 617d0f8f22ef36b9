"""Clocks: where the broker's time comes from.

The broker only ever asks a :class:`Clock` for the time (integer milliseconds since the Unix epoch) and to
schedule callbacks. :class:`VirtualClock` moves only when a test tells it to; :class:`SystemClock` follows real
time on the server's event loop.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time as _time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Protocol

# Captured at import so that freezegun / time-machine patching ``time`` never stalls fakerabbit's own I/O.
_real_time = _time.time
_real_monotonic = _time.monotonic


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


class VirtualClock:
    """A clock that stands still until the test moves it.

    ``advance(30)`` fires, in deadline order, every timer due within the next 30 s — including timers those
    firings schedule — and returns once every consequence (expiry, dead-lettering, deliveries, confirms) has been
    written to the clients' sockets. It is safe to call from the test's thread while the server runs in its own.
    """

    def __init__(self, start: datetime | None = None) -> None:
        self._now = _dt_to_ms(start) if start is not None else int(_real_time() * 1000)
        self._timers: list[TimerHandle] = []
        self._seq = itertools.count()
        self._lock = threading.RLock()
        self._runner: Runner | None = None
        self._before: Callable[[], None] | None = None
        self._after: Callable[[], None] | None = None

    # -- used by the broker ---------------------------------------------------------------------------------
    def now_ms(self) -> int:
        return self._now

    def call_at(self, when_ms: int, fn: Callable[[], None]) -> TimerHandle:
        with self._lock:
            handle = TimerHandle(when_ms, fn, next(self._seq))
            heapq.heappush(self._timers, handle)
            return handle

    def cancel(self, handle: TimerHandle) -> None:
        handle.cancelled = True

    # -- used by the server -----------------------------------------------------------------------------------
    def attach(
        self, runner: Runner | None, before: Callable[[], None] | None, after: Callable[[], None] | None
    ) -> None:
        """Let the server marshal :meth:`advance` onto its loop and drain/flush sockets around it."""
        self._runner, self._before, self._after = runner, before, after

    # -- used by tests ------------------------------------------------------------------------------------------
    def now(self) -> datetime:
        """The clock's current time, timezone-aware UTC."""
        return datetime.fromtimestamp(self._now / 1000, tz=UTC)

    def advance(self, seconds: float | timedelta) -> None:
        """Move time forward by ``seconds`` (a number or a ``timedelta``), firing every timer that falls due."""
        self._run(self._now + _to_ms(seconds))

    def advance_to(self, when: datetime) -> None:
        """Move time forward to ``when`` (naive datetimes are UTC); moving backwards is an error."""
        target = _dt_to_ms(when)
        if target < self._now:
            raise ValueError("cannot move a clock backwards")
        self._run(target)

    def set(self, when: datetime) -> None:
        """Alias of :meth:`advance_to`."""
        self.advance_to(when)

    def pending(self) -> int:
        """How many timers are scheduled (cancelled ones excluded)."""
        return sum(1 for t in self._timers if not t.cancelled)

    def _run(self, target_ms: int) -> None:
        if self._runner is not None:
            self._runner(lambda: self._fire_until(target_ms))
        else:
            self._fire_until(target_ms)

    def _fire_until(self, target_ms: int) -> None:
        if self._before is not None:
            self._before()
        try:
            while True:
                with self._lock:
                    while self._timers and self._timers[0].cancelled:
                        heapq.heappop(self._timers)
                    if not self._timers or self._timers[0].when_ms > target_ms:
                        break
                    handle = heapq.heappop(self._timers)
                    self._now = max(self._now, handle.when_ms)
                handle.fn()
            self._now = max(self._now, target_ms)
        finally:
            if self._after is not None:
                self._after()

    def reset(self, start: datetime | None = None) -> None:
        """Drop every timer and set the time (used between tests)."""
        with self._lock:
            self._timers.clear()
            self._now = _dt_to_ms(start) if start is not None else int(_real_time() * 1000)


class SystemClock:
    """Real time: timers run on the server's event loop."""

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
        return int(_real_time() * 1000)

    def now(self) -> datetime:
        return datetime.fromtimestamp(_real_time(), tz=UTC)

    def call_at(self, when_ms: int, fn: Callable[[], None]) -> TimerHandle:
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
        handle.cancelled = True
        if self._unschedule is not None and handle._native is not None:
            self._unschedule(handle._native)
