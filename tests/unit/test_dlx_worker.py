"""Unit tests of :mod:`fakerabbit.broker.deadletter.at_least_once`: at-least-once dead-lettering of quorum queues
(no sockets).

What both brokers show over AMQP is in tests/conformance/test_dead_lettering_at_least_once.py; these tests pin
the details only the virtual clock and the broker model can show: the worker's prefetch, the retry timer, what
is resent to which queue.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from fakerabbit import FakeRabbit
from fakerabbit.broker.broker import Broker
from fakerabbit.broker.deadletter.at_least_once import PREFETCH
from fakerabbit.broker.fields import table_from_python
from fakerabbit.broker.message import Message
from fakerabbit.broker.properties import RawProperties, build_properties
from fakerabbit.broker.queue import Queue
from fakerabbit.broker.vhost import Vhost
from fakerabbit.clock import VirtualClock

START = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)
T0 = int(START.timestamp())
ALO = {"x-queue-type": "quorum", "x-dead-letter-strategy": "at-least-once", "x-overflow": "reject-publish"}


def setup(version: str = "4.0", **arguments: Any) -> tuple[Broker, VirtualClock, Vhost, Queue]:
    clock = VirtualClock(START)
    b = Broker(clock, rabbitmq_version=version)
    v = b.vhost("/")
    q = declare(v, "src", **ALO, **arguments)
    return b, clock, v, q


def declare(v: Vhost, name: str, **arguments: Any) -> Queue:
    return v.declare_queue(
        None,
        name,
        passive=False,
        durable=True,
        exclusive=False,
        auto_delete=False,
        arguments=table_from_python(arguments),
    )


def exchange(v: Vhost, name: str, type_: str) -> None:
    v.declare_exchange(None, name, type_, passive=False, durable=True, auto_delete=False, internal=False, arguments={})


def msg(body: bytes = b"body", rk: str = "src", msg_id: int = 1) -> Message:
    return Message.from_publish("", rk, RawProperties(build_properties()), body, ttl_ms=None, msg_id=msg_id)


def death_time(m: Message) -> int:
    return m.deaths[0].time_s


def test_the_worker_takes_at_most_prefetch_and_dead_letters_the_rest_when_it_takes_them() -> None:
    """Only PREFETCH (32) messages are taken (x-death recorded) at once; the rest wait in the discards and get
    their death time when the worker takes them, after the first ones are delivered."""
    b, clock, v, q = setup(**{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "dlq"})
    v.dead_letters.dead_letter(q, [msg(msg_id=i) for i in range(40)], "rejected")
    w = q.dlx_worker
    assert w is not None
    assert (len(w.pending), len(w.discards), w.count, w.bytes) == (PREFETCH, 40 - PREFETCH, 40, 40 * 4)
    assert all(death_time(p.msg) == T0 for p in w.pending.values())
    clock.advance(60)
    dlq = declare(v, "dlq")
    b.set_policy("p", "^src$", {"max-length": 1000})  # a policy change makes the worker retry at once
    assert w.count == 0 and dlq.ready_count == 40
    times = [death_time(e.msg) for e in dlq.ready_entries()]
    assert times == [T0] * PREFETCH + [T0 + 60] * (40 - PREFETCH)
    assert [e.msg.id for e in dlq.ready_entries()] == list(range(40))


def test_the_retry_timer_runs_every_interval_while_something_is_held() -> None:
    b, clock, v, q = setup(**{"x-dead-letter-exchange": "dlx", "x-dead-letter-routing-key": "k"})
    b.dead_letter_confirm_timeout_ms = 10_000
    v.dead_letters.dead_letter(q, [msg()], "expired")
    w = q.dlx_worker
    assert w is not None and w.count == 1
    exchange(v, "dlx", "direct")
    dlq = declare(v, "dlq")
    v.bind(None, "queue", "dlq", "dlx", "k", {})
    clock.advance(9.999)
    assert dlq.ready_count == 0
    clock.advance(0.001)
    assert dlq.ready_count == 1 and w.count == 0
    assert clock.pending() == 0  # nothing held: no timer left behind


def test_a_target_that_accepted_is_not_sent_the_message_again() -> None:
    """Two targets, one refuses (reject-publish): the retry goes to the refusing one only."""
    _b, clock, v, q = setup(**{"x-dead-letter-exchange": "fan"})
    exchange(v, "fan", "fanout")
    ok = declare(v, "ok")
    full = declare(v, "full", **{"x-max-length": 1, "x-overflow": "reject-publish"})
    assert full.publish(msg(b"filler"))
    v.bind(None, "queue", "ok", "fan", "", {})
    v.bind(None, "queue", "full", "fan", "", {})
    v.dead_letters.dead_letter(q, [msg()], "rejected")
    assert (ok.ready_count, full.ready_count, q.dlx_worker and q.dlx_worker.count) == (1, 1, 1)
    assert full.fetch() is not None  # room for one
    clock.advance(180)
    assert (ok.ready_count, full.ready_count, q.dlx_worker and q.dlx_worker.count) == (1, 1, 0)
    assert [e.msg.body for e in full.ready_entries()] == [b"body"]


def test_a_refused_message_is_retried_only_once_its_last_attempt_is_an_interval_old() -> None:
    """``last_published_at + timeout =< now``: the timer started by an earlier held message does not resend one
    refused 100 s later; the following timer does."""
    _b, clock, v, q = setup(**{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "t"})
    v.dead_letters.dead_letter(q, [msg(b"early", msg_id=1)], "rejected")  # no queue "t" yet: never published
    clock.advance(100)
    t = declare(v, "t", **{"x-max-length": 1, "x-overflow": "reject-publish"})
    assert t.publish(msg(b"filler"))
    v.dead_letters.dead_letter(q, [msg(b"late", msg_id=2)], "rejected")  # published at 100 s and refused
    assert t.fetch() is not None  # room for one
    clock.advance(80)  # 180 s: the timer resends "early" (never published), not "late" (80 s old)
    assert [e.msg.body for e in t.ready_entries()] == [b"early"]
    assert t.fetch() is not None
    clock.advance(180)  # 360 s
    assert [e.msg.body for e in t.ready_entries()] == [b"late"]


def test_purge_keeps_and_delete_drops_what_is_held() -> None:
    b, _, v, q = setup(**{"x-dead-letter-exchange": "missing"})
    v.dead_letters.dead_letter(q, [msg(), msg()], "rejected")
    assert q.purge() == 0 and q.dlx_worker is not None and q.dlx_worker.count == 2
    v.delete_queue(q)
    dropped = [e.details["why"] for e in b.events if e.kind == "dropped"]
    assert dropped == ["queue deleted", "queue deleted"]
    assert q.dlx_worker.count == 0


def test_dead_lettering_off_drops_instead_of_holding() -> None:
    clock = VirtualClock(START)
    b = Broker(clock, dead_lettering=False)
    q = declare(b.vhost("/"), "src", **ALO, **{"x-dead-letter-exchange": ""})
    b.dead_letters.dead_letter(q, [msg()], "rejected")
    assert q.dlx_worker is not None and q.dlx_worker.count == 0
    assert [e.details["why"] for e in b.events if e.kind == "dropped"] == ["dead-lettering turned off"]


def test_held_dead_letters_are_in_the_snapshot() -> None:
    with FakeRabbit() as rabbit:
        rabbit._call(lambda: declare(rabbit._broker.vhost("/"), "src", **ALO, **{"x-dead-letter-exchange": "none"}))
        v = rabbit._broker.vhost("/")
        rabbit._call(lambda: v.dead_letters.dead_letter(v.queues["src"], [msg()], "expired"))
        snap = rabbit.queue("src")
        assert (snap.message_count, snap.dead_letters_held) == (0, 1)
        (held,) = snap.held_dead_letters
        assert held.body == b"body" and held.exchange == "none"
        assert held.x_death[0].reason == "expired"


def test_retry_interval_option() -> None:
    assert FakeRabbit(dead_letter_retry_interval=5)._broker.dead_letter_confirm_timeout_ms == 5000
    assert FakeRabbit()._broker.dead_letter_confirm_timeout_ms == 180_000
    with pytest.raises(ValueError, match="positive"):
        FakeRabbit(dead_letter_retry_interval=0)


def test_a_restart_gives_a_new_worker_that_dead_letters_again_at_once() -> None:
    """The discards survive a restart; what the old worker had taken is taken again by the new one at start:
    dead-lettered anew (death time = restart time) through the topology as it is then."""
    from fakerabbit.broker.restart import restart_broker

    b, clock, v, q = setup(**{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "later"})
    v.dead_letters.dead_letter(q, [msg(b"a", msg_id=1), msg(b"b", msg_id=2)], "rejected")
    clock.advance(30)
    later = declare(v, "later")
    restart_broker(b)
    assert [e.msg.body for e in later.ready_entries()] == [b"a", b"b"]
    assert [death_time(e.msg) for e in later.ready_entries()] == [T0 + 30, T0 + 30]
    assert q.dlx_worker is not None and q.dlx_worker.count == 0


def test_a_route_that_is_only_a_cycle_keeps_a_partly_delivered_message_held() -> None:
    """redeliver0/5 settles a message one queue accepted only when nothing routes any more; a route that is a
    cycle (back into the queue it expired in) is a route, so the message stays held."""
    _b, clock, v, q = setup(**{"x-dead-letter-exchange": "fan"})
    exchange(v, "fan", "fanout")
    declare(v, "ok")
    full = declare(v, "full", **{"x-max-length": 1, "x-overflow": "reject-publish"})
    assert full.publish(msg(b"filler"))
    v.bind(None, "queue", "ok", "fan", "", {})
    v.bind(None, "queue", "full", "fan", "", {})
    v.dead_letters.dead_letter(q, [msg()], "expired")
    assert q.dlx_worker is not None and q.dlx_worker.count == 1
    v.bind(None, "queue", "ok", "fan", "", {}, unbind=True)
    v.bind(None, "queue", "full", "fan", "", {}, unbind=True)
    v.bind(None, "queue", "src", "fan", "", {})
    clock.advance(180)
    assert q.dlx_worker.count == 1 and q.ready_count == 0
    v.bind(None, "queue", "src", "fan", "", {}, unbind=True)
    clock.advance(180)  # nothing routes now: the message is settled (one queue accepted it)
    assert q.dlx_worker.count == 0
