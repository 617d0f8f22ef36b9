"""Unit tests of :mod:`fakerabbit.broker.deadletter`: the publisher and the x-death history (no sockets)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from fakerabbit.broker.broker import Broker
from fakerabbit.broker.deadletter.publisher import REPEATS_PER_TURN
from fakerabbit.broker.deadletter.xdeath import adopt_client_deaths, deaths_from_header
from fakerabbit.broker.fields import Table, table_from_python
from fakerabbit.broker.message import Message
from fakerabbit.broker.properties import RawProperties, build_properties
from fakerabbit.clock import VirtualClock

START = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)
T0 = int(START.timestamp())


def _broker(version: str, **kw: object) -> Broker:
    return Broker(VirtualClock(START), rabbitmq_version=version, **kw)  # type: ignore[arg-type]


def _msg(headers: dict[str, object] | None = None, expiration: str | None = None, rk: str = "q") -> Message:
    props = RawProperties(
        build_properties(headers=table_from_python(headers) if headers is not None else None, expiration=expiration)
    )
    ttl = int(expiration) if expiration is not None else None
    return Message.from_publish("", rk, props, b"body", ttl_ms=ttl, msg_id=1)


def _xdeath(msg: Message) -> list[Table]:
    field = msg.header("x-death")
    assert field is not None and field[0] == "A"
    return [t for _tag, t in field[1]]


def test_legacy_first_death_layout_and_sorted_headers() -> None:
    b = _broker("3.12")
    new = b.dead_letters.make_copy(_msg({"z": 1, "CC": ["c"], "a": "x"}, "100"), "q", "rejected", "dlx", "dl")
    assert list(new.headers()) == [
        "a",
        "x-death",
        "x-first-death-exchange",
        "x-first-death-queue",
        "x-first-death-reason",
        "z",
    ]
    (entry,) = _xdeath(new)
    assert list(entry.items()) == [
        ("count", ("l", 1)),
        ("reason", ("S", "rejected")),
        ("queue", ("S", "q")),
        ("time", ("T", T0)),
        ("exchange", ("S", "")),
        ("routing-keys", ("A", [("S", "q"), ("S", "c")])),
        ("original-expiration", ("S", "100")),
    ]
    assert new.props.expiration is None
    assert (new.exchange, new.routing_keys) == ("dlx", ("dl",))


def test_legacy_second_death_sorted_entry_and_reversal() -> None:
    b = _broker("3.12")
    m = _msg()
    for q in ("a", "b", "c"):
        m = b.dead_letters.make_copy(m, q, "rejected", "", None)
    assert [t["queue"][1] for t in _xdeath(m)] == ["c", "a", "b"]
    assert list(_xdeath(m)[0]) == sorted(_xdeath(m)[0])
    assert list(_xdeath(m)[1])[0:2] == ["count", "reason"]  # the very first entry keeps its original order


def test_legacy_grouping_collapses_duplicates_and_fills_count() -> None:
    b = _broker("3.12")
    dup = {"queue": "x", "reason": "expired"}
    m = _msg({"x-death": [dup, dup, {"queue": "y", "reason": "expired", "count": 4}]})
    new = b.dead_letters.make_copy(m, "q", "rejected", "", None)
    assert [(t["queue"][1], t["count"]) for t in _xdeath(new)] == [("q", ("l", 1)), ("y", ("I", 4)), ("x", ("l", 2))]
    assert "x-first-death-reason" not in new.headers()


def test_legacy_non_array_x_death_is_reset() -> None:
    b = _broker("3.10")
    new = b.dead_letters.make_copy(_msg({"x-death": "oops"}), "q", "maxlen", "", None)
    assert [t["reason"] for t in _xdeath(new)] == [("S", "maxlen")]


@pytest.mark.parametrize(("version", "cc"), [("3.13", True), ("4.0", True), ("3.12", False)])
def test_cc_with_dlrk_by_version(version: str, cc: bool) -> None:
    b = _broker(version)
    new = b.dead_letters.make_copy(_msg({"CC": ["c"]}), "q", "rejected", "dlx", "dl")
    assert ("CC" in new.headers()) is cc


def test_mc_layout_last_death_and_normalised_expiration() -> None:
    b = _broker("3.13")
    new = b.dead_letters.make_copy(_msg({"BCC": ["b"]}, "007"), "q", "expired", "", "d")
    (entry,) = _xdeath(new)
    assert list(entry) == ["original-expiration", "count", "reason", "queue", "time", "exchange", "routing-keys"]
    assert entry["original-expiration"] == ("S", "7")
    assert entry["routing-keys"] == ("A", [("S", "q")])
    assert new.headers()["x-last-death-queue"] == ("S", "q")
    assert list(new.headers()) == sorted(new.headers())


def test_mc_repeat_moves_first_and_keeps_first_values() -> None:
    b = _broker("4.0")
    m = b.dead_letters.make_copy(_msg(), "a", "rejected", "", None)
    b.clock.advance(10)  # type: ignore[attr-defined]
    m = b.dead_letters.make_copy(m, "b", "rejected", "", None)
    m = b.dead_letters.make_copy(m, "a", "rejected", "", None)
    assert [(d.queue, d.count, d.time_s) for d in m.deaths] == [("a", 2, T0), ("b", 1, T0 + 10)]


def test_4x_ignores_client_x_death_but_313_parses_it() -> None:
    table = table_from_python(
        {
            "x-death": [
                {"queue": "q", "reason": "rejected", "count": 5, "time": START, "exchange": "", "routing-keys": ["q"]}
            ]
        }
    )
    assert [d.count for d in deaths_from_header(table["x-death"])] == [5]
    for version, count in (("3.13", 6), ("4.0", 1)):
        b = _broker(version)
        m = _msg()
        m.props = RawProperties(build_properties(headers=table))
        if b.profile.client_x_death != "ignore":
            adopt_client_deaths(m)
        new = b.dead_letters.make_copy(m, "q", "rejected", "", None)
        assert _xdeath(new)[0]["count"] == ("l", count)


@pytest.mark.parametrize("version", ["3.12", "4.0"])
def test_is_cycle(version: str) -> None:
    b = _broker(version)
    dl = b.dead_letters
    m = dl.make_copy(_msg(), "q", "expired", "", None)
    assert dl.is_cycle(m, "q", "expired")
    assert not dl.is_cycle(m, "other", "expired")
    r = dl.make_copy(_msg(), "q", "rejected", "", None)
    assert not dl.is_cycle(r, "q", "rejected")
    two = dl.make_copy(r, "p", "expired", "", None)  # [p expired, q rejected]
    assert not dl.is_cycle(two, "q", "expired")


def test_dispatch_switch_off_and_at_least_once_holds() -> None:
    b = _broker("4.0", dead_lettering=False)
    v = b.vhost("/")
    q = v.declare_queue(
        None,
        "q",
        passive=False,
        durable=True,
        exclusive=False,
        auto_delete=False,
        arguments=table_from_python({"x-dead-letter-exchange": ""}),
    )
    v.dead_letters.dead_letter(q, [_msg()], "rejected")
    assert [e.details["why"] for e in b.events if e.kind == "dropped"] == ["dead-lettering turned off"]
    b2 = _broker("4.0")
    v2 = b2.vhost("/")
    args = table_from_python(
        {
            "x-queue-type": "quorum",
            "x-dead-letter-exchange": "",
            "x-dead-letter-strategy": "at-least-once",
            "x-overflow": "reject-publish",
        }
    )
    q2 = v2.declare_queue(None, "qq", passive=False, durable=True, exclusive=False, auto_delete=False, arguments=args)
    v2.dead_letters.dead_letter(q2, [_msg()], "rejected")
    v2.dead_letters.dead_letter(q2, [_msg()], "rejected")
    # at-least-once: the copies cycle straight back to "qq" (DLX "", no DLRK): held in its discards, not dropped
    assert q2.dlx_worker is not None and q2.dlx_worker.count == 2 and q2.ready_count == 0
    assert b2.problems == []


def _declare(b: Broker, name: str, **args: object) -> object:
    return b.vhost("/").declare_queue(
        None,
        name,
        passive=False,
        durable=True,
        exclusive=False,
        auto_delete=False,
        arguments=table_from_python({k: v for k, v in args.items()}),
    )


def test_a_long_chain_of_ttl0_queues_is_published_iteratively() -> None:
    """Each copy that dies again is queued and published by the outermost call: 300 hops (each was several nested
    frames before), no RecursionError, and the dead letters reach the end of the chain."""
    b = _broker("4.3")
    n = 300
    for i in range(n):
        _declare(
            b, f"c{i}", **{"x-message-ttl": 0, "x-dead-letter-exchange": "", "x-dead-letter-routing-key": f"c{i + 1}"}
        )
    end = _declare(b, f"c{n}")
    q0 = b.vhost("/").queues["c0"]
    b.dead_letters.dead_letter(q0, [_msg(rk="c0"), _msg(rk="c0")], "rejected")  # type: ignore[arg-type]
    assert end.ready_count == 2  # type: ignore[attr-defined]
    (first, _second) = end.ready_entries()  # type: ignore[attr-defined]
    assert len(_xdeath(first.msg)) == n


def test_an_endless_loop_goes_on_between_commands_in_turns() -> None:
    """3.10's x-death order hides the cycle of a ring of TTL-0 queues entered by a reject: the copy goes round for
    ever. The call that starts it publishes the first lap and REPEATS_PER_TURN deaths of the next; the rest waits
    for :meth:`Broker.run_soon`'s turns (here :meth:`Broker.run_pending`), one more copy in the sink each lap."""
    b = _broker("3.10")
    n = 10
    for i in range(n):
        dlx, dlrk = ("fan", None) if i == n - 1 else ("", f"r{i + 1}")
        if i == n - 1:
            b.vhost("/").declare_exchange(
                None, "fan", "fanout", passive=False, durable=True, auto_delete=False, internal=False, arguments={}
            )
        args = {"x-message-ttl": 0, "x-dead-letter-exchange": dlx, "x-dead-letter-routing-key": dlrk}
        _declare(b, f"r{i}", **{k: a for k, a in args.items() if a is not None})
    sink = _declare(b, "sink")
    v = b.vhost("/")
    v.bind(None, "queue", "sink", "fan", "", {})
    v.bind(None, "queue", "r0", "fan", "", {})
    b.dead_letters.dead_letter(v.queues["r0"], [_msg(rk="r0")], "rejected")  # died in r0 (a reject), now in r1

    # The first lap's deaths (r0 rejected, r1 .. r9, r0 expired) are firsts; from r1 on they repeat: r1 .. r9, r0,
    # r1 .. so the k-th repeat is in r9 (a copy to the sink) when k % n == n - 1. A turn ends at REPEATS_PER_TURN.
    def sink_after(repeats: int) -> int:
        return 1 + (repeats + 1) // n

    assert sink.ready_count == sink_after(REPEATS_PER_TURN)  # type: ignore[attr-defined]
    assert b.dead_letters.pending == 1
    for _turn in range(5):
        assert b.run_pending() == 1  # each turn schedules the next
    assert sink.ready_count == sink_after(6 * REPEATS_PER_TURN)  # type: ignore[attr-defined]
    b.reset()
    assert b.dead_letters.pending == 0 and b.run_pending() == 0


def test_counts_travel_only_in_43() -> None:
    for version, want in (("4.0", 0), ("4.3", 2)):
        b = _broker(version)
        src = _declare(b, "src", **{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "dst"})
        dst = _declare(b, "dst")
        counts = [2] if b.profile.dead_letter_delivery_count else None
        b.dead_letters.dead_letter(src, [_msg(rk="src")], "rejected", counts)  # type: ignore[arg-type]
        (e,) = dst.ready_entries()  # type: ignore[attr-defined]
        assert (e.msg.delivery_count, e.delivery_count, e.redelivered) == (want, want, bool(want))
