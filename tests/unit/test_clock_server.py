"""The clocks wired into a running FakeRabbit: advance() from the test's thread and from a coroutine on the
server's own loop (with drain_inbound reading what the client already sent), the following clock under
freezegun and time-machine, and fakerabbit's own I/O (event loop, heartbeats) while those libraries patch time."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta

import aio_pika
import pika
import pytest
import time_machine
from freezegun import freeze_time

from fakerabbit import FakeRabbit
from fakerabbit.clock import FollowingClock, SystemClock, VirtualClock, real_monotonic

START = datetime(2030, 1, 1, tzinfo=UTC)


def connect(rabbit: FakeRabbit, **params: object) -> pika.BlockingConnection:
    p = pika.URLParameters(rabbit.url)
    for k, v in params.items():
        setattr(p, k, v)
    return pika.BlockingConnection(p)


def poll(conn: pika.BlockingConnection, until: object, seconds: float = 2.0) -> None:
    """Process pika events until ``until()`` (real-time deadline: pika's own timers stall under freezegun)."""
    deadline = real_monotonic() + seconds
    while not until() and real_monotonic() < deadline:  # type: ignore[operator]
        conn.process_data_events(time_limit=0)
        time.sleep(0.005)


def ttl_queues(ch: pika.adapters.blocking_connection.BlockingChannel, ttl_ms: int) -> None:
    ch.queue_declare("dlq")
    ch.queue_declare(
        "q", arguments={"x-message-ttl": ttl_ms, "x-dead-letter-exchange": "", "x-dead-letter-routing-key": "dlq"}
    )


# -- construction ------------------------------------------------------------------------------------------------


def test_clock_choices() -> None:
    assert isinstance(FakeRabbit().clock, VirtualClock)
    assert FakeRabbit(start_time=START).clock.now() == START
    assert isinstance(FakeRabbit(clock="frozen").clock, FollowingClock)
    assert isinstance(FakeRabbit(clock="following").clock, FollowingClock)
    assert isinstance(FakeRabbit(clock="system").clock, SystemClock)
    mine = FollowingClock(poll_interval=None)
    assert FakeRabbit(clock=mine).clock is mine
    with pytest.raises(ValueError, match="start_time"):
        FakeRabbit(clock="frozen", start_time=START)
    with pytest.raises(ValueError, match="'virtual', 'frozen'"):
        FakeRabbit(clock="sundial")


# -- virtual clock, server in a thread ---------------------------------------------------------------------------


def test_advance_from_test_thread_returns_after_frames_are_written() -> None:
    with FakeRabbit(start_time=START) as rabbit:
        conn = connect(rabbit)
        ch = conn.channel()
        ttl_queues(ch, 30_000)
        got: list[bytes] = []
        ch.basic_consume("dlq", lambda c, m, p, b: got.append(b), auto_ack=True)
        ch.basic_publish("", "q", b"m")  # not yet read by the server: advance() reads it first
        assert rabbit.clock.advance(timedelta(seconds=30)) == 1
        conn.process_data_events(time_limit=0)  # the delivery is already in the socket
        assert got == [b"m"]
        assert rabbit.clock.now() == START + timedelta(seconds=30)
        conn.close()


def test_publish_before_advance_is_stamped_before_time_moves() -> None:
    """Many publishes written just before advance(): every one is enqueued at the old time."""
    with FakeRabbit() as rabbit:
        conn = connect(rabbit)
        ch = conn.channel()
        ch.queue_declare("q", arguments={"x-message-ttl": 1000})
        for i in range(200):
            ch.basic_publish("", "q", str(i).encode())
        rabbit.clock.advance(1)
        assert ch.queue_declare("q", passive=True).method.message_count == 0
        conn.close()


def test_advance_to_and_x_death_time() -> None:
    with FakeRabbit(start_time=START) as rabbit:
        conn = connect(rabbit)
        ch = conn.channel()
        ttl_queues(ch, 90_000)
        ch.basic_publish("", "q", b"m")
        rabbit.clock.advance_to(START + timedelta(hours=1))
        _, props, _ = ch.basic_get("dlq", auto_ack=True)
        assert props.headers["x-death"][0]["time"].replace(tzinfo=UTC) == START + timedelta(seconds=90)
        conn.close()


def test_reset_clears_timers_and_time() -> None:
    with FakeRabbit(start_time=START) as rabbit:
        conn = connect(rabbit)
        conn.channel().queue_declare("q", arguments={"x-expires": 1000})
        rabbit.clock.advance(0.5)
        assert isinstance(rabbit.clock, VirtualClock) and rabbit.clock.pending() == 1
        rabbit.reset()
        assert rabbit.clock.pending() == 0


# -- virtual clock, server on the test's loop ------------------------------------------------------------------------


async def test_advance_from_a_coroutine_on_the_servers_loop_drains_unread_publishes() -> None:
    async with FakeRabbit(start_time=START) as rabbit:
        connection = await aio_pika.connect(rabbit.url)
        channel = await connection.channel(publisher_confirms=False)
        dlq = await channel.declare_queue("dlq")
        await channel.declare_queue(
            "q", arguments={"x-message-ttl": 5000, "x-dead-letter-exchange": "", "x-dead-letter-routing-key": "dlq"}
        )
        for i in range(3):
            await channel.default_exchange.publish(aio_pika.Message(str(i).encode()), routing_key="q")
        q = rabbit._broker.vhost("/").queues["q"]
        # aio-pika has written the publishes, but the server on this loop has not read (at least) the last ...
        assert q.ready_count < 3
        # ... advance() reads them at the old time, then moves time and expires them.
        assert rabbit.clock.advance(5) == 1
        assert q.ready_count == 0
        bodies = []
        for _ in range(3):
            message = await dlq.get(timeout=5)
            bodies.append(message.body)
            await message.ack()
        assert bodies == [b"0", b"1", b"2"]
        await connection.close()


async def test_drain_inbound_alone() -> None:
    async with FakeRabbit() as rabbit:
        connection = await aio_pika.connect(rabbit.url)
        channel = await connection.channel(publisher_confirms=False)
        await channel.declare_queue("q")
        await channel.default_exchange.publish(aio_pika.Message(b"m"), routing_key="q")
        q = rabbit._broker.vhost("/").queues["q"]
        assert q.ready_count == 0
        rabbit._call(rabbit._listener.drain_inbound)
        assert q.ready_count == 1
        await connection.close()


# -- following clock ---------------------------------------------------------------------------------------------------


def test_following_freezegun_catches_up_before_each_command() -> None:
    with freeze_time("2030-01-01") as frozen, FakeRabbit(clock=FollowingClock(poll_interval=None)) as rabbit:
        conn = connect(rabbit)
        ch = conn.channel()
        ch.confirm_delivery()
        ttl_queues(ch, 10_000)
        ch.basic_publish("", "q", b"m")
        frozen.tick(timedelta(seconds=9.999))
        assert ch.queue_declare("q", passive=True).method.message_count == 1
        frozen.tick(timedelta(milliseconds=1))
        assert ch.queue_declare("q", passive=True).method.message_count == 0  # no tick(), no poll
        _, props, _ = ch.basic_get("dlq", auto_ack=True)
        assert props.headers["x-death"][0]["time"].replace(tzinfo=UTC) == START + timedelta(seconds=10)
        conn.close()


def test_following_poll_pushes_without_tick() -> None:
    with freeze_time("2030-01-01") as frozen, FakeRabbit(clock="frozen") as rabbit:
        conn = connect(rabbit)
        ch = conn.channel()
        ch.confirm_delivery()
        ttl_queues(ch, 1000)
        got: list[bytes] = []
        ch.basic_consume("dlq", lambda c, m, p, b: got.append(b), auto_ack=True)
        ch.basic_publish("", "q", b"m")
        frozen.tick(1)
        poll(conn, lambda: got)
        assert got == [b"m"]
        conn.close()


def test_following_tick_chains_and_each_timer_sees_its_deadline() -> None:
    with freeze_time("2030-01-01") as frozen, FakeRabbit(clock=FollowingClock(poll_interval=None)) as rabbit:
        assert isinstance(rabbit.clock, FollowingClock)
        conn = connect(rabbit)
        ch = conn.channel()
        ch.queue_declare("done")
        for name, nxt in (("d1", "d2"), ("d2", "done")):
            ch.queue_declare(
                name, arguments={"x-message-ttl": 1000, "x-dead-letter-exchange": "", "x-dead-letter-routing-key": nxt}
            )
        ch.confirm_delivery()
        ch.basic_publish("", "d1", b"m")
        frozen.tick(5)
        assert rabbit.clock.tick() == 2
        _, props, _ = ch.basic_get("done", auto_ack=True)
        times = sorted(d["time"].replace(tzinfo=UTC) - START for d in props.headers["x-death"])
        assert times == [timedelta(seconds=1), timedelta(seconds=2)]
        with pytest.raises(RuntimeError, match="time library"):
            rabbit.clock.advance(1)
        conn.close()


def test_following_time_machine_ticking() -> None:
    """time-machine's default tick=True: time runs on from the destination, and the poll fires timers."""
    with time_machine.travel(START), FakeRabbit(clock="frozen") as rabbit:
        conn = connect(rabbit)
        ch = conn.channel()
        ch.confirm_delivery()
        ttl_queues(ch, 50)
        got: list[bytes] = []
        ch.basic_consume("dlq", lambda c, m, p, b: got.append(b), auto_ack=True)
        ch.basic_publish("", "q", b"m")
        assert abs(rabbit.clock.now() - START) < timedelta(seconds=5)
        poll(conn, lambda: got)
        assert got == [b"m"]
        conn.close()


# -- fakerabbit's own I/O while time is patched ---------------------------------------------------------------------


def test_server_loop_keeps_real_time_under_freezegun() -> None:
    """The system clock's timers run on the server's loop: they fall due in real time although
    time.monotonic is frozen."""
    with freeze_time("2030-01-01"), FakeRabbit(clock="system") as rabbit:
        conn = connect(rabbit)
        ch = conn.channel()
        ch.queue_declare("q", arguments={"x-message-ttl": 50})
        ch.basic_publish("", "q", b"m")
        time.sleep(0.2)  # freezegun does not patch sleep
        assert ch.queue_declare("q", passive=True).method.message_count == 0
        conn.close()


@pytest.mark.parametrize("library", ["freezegun", "time_machine"])
def test_moving_patched_time_does_not_break_heartbeats(library: str) -> None:
    """An hour of patched time passes in an instant, then the client stays silent for 1.6 s (under freezegun
    pika's own heartbeat timer is frozen too): the server neither closes the connection for missed heartbeats
    (it allows 2 s at heartbeat 1) nor stops sending its own (one frame every 0.5 s of silence)."""
    with FakeRabbit(clock="frozen") as rabbit:
        ctx = freeze_time("2030-01-01") if library == "freezegun" else time_machine.travel(START, tick=False)
        with ctx as mover:
            conn = connect(rabbit, heartbeat=1)
            ch = conn.channel()
            ch.queue_declare("q")
            received = conn._impl.bytes_received
            if library == "freezegun":
                mover.tick(3600)
            else:
                mover.shift(3600)
            deadline = real_monotonic() + 1.6
            while real_monotonic() < deadline:
                conn.process_data_events(time_limit=0)
                time.sleep(0.05)
            assert conn.is_open
            assert conn._impl.bytes_received - received >= 16  # at least two 8-byte heartbeat frames
            assert ch.queue_declare("q", passive=True).method.queue == "q"
            conn.close()


@pytest.mark.parametrize("module", ["heartbeat", "output"])
def test_connection_timing_does_not_hold_a_patchable_monotonic(module: str) -> None:
    """The heartbeat monitor and the writer (which records the last send) read real time, frozen or not."""
    import importlib

    timing = importlib.import_module(f"fakerabbit.protocol.{module}")
    with freeze_time("2030-01-01"):
        before = timing.real_monotonic()
        time.sleep(0.02)
        assert timing.real_monotonic() - before >= 0.015


async def test_async_server_with_freezegun_real_asyncio() -> None:
    with freeze_time("2030-01-01", real_asyncio=True) as frozen:
        async with FakeRabbit(clock="frozen") as rabbit:
            connection = await aio_pika.connect(rabbit.url)
            channel = await connection.channel()
            queue = await channel.declare_queue("q", arguments={"x-message-ttl": 10_000})
            await channel.default_exchange.publish(aio_pika.Message(b"m"), routing_key="q")
            assert rabbit.clock.now() == START
            frozen.tick(9)
            assert (await queue.declare()).message_count == 1
            frozen.tick(1)
            assert await queue.get(fail=False) is None
            await asyncio.sleep(0.02)  # the loop keeps real time
            await connection.close()
