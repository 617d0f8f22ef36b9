"""Unit tests of :mod:`fakerabbit.broker.delayed`: the delayed-message exchange on the virtual clock (no sockets).

The rules come from the plugin's source and test suite (rabbitmq/rabbitmq-delayed-message-exchange); the live
brokers of this project do not have the plugin.
"""

from __future__ import annotations

import decimal
from datetime import UTC, datetime, timedelta

import pytest

from fakerabbit.broker import errors
from fakerabbit.broker.broker import Broker
from fakerabbit.broker.delayed import _Crash, read_delay
from fakerabbit.broker.exchange_types.delayed import validate_declare
from fakerabbit.broker.fields import Field, Table, table_from_python
from fakerabbit.broker.message import Message
from fakerabbit.broker.profile import get_profile
from fakerabbit.broker.properties import RawProperties, build_properties
from fakerabbit.broker.restart import restart_broker
from fakerabbit.broker.vhost import Vhost
from fakerabbit.clock import VirtualClock

START = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)
P310, P43 = get_profile("3.10"), get_profile("4.3")


def _setup(version: str = "4.3", delayed_type: str = "direct", **kw: object) -> tuple[VirtualClock, Vhost]:
    clock = VirtualClock(START)
    b = Broker(clock, rabbitmq_version=version, **kw)  # type: ignore[arg-type]
    v = b.vhost("/")
    _declare(v, "dx", {"x-delayed-type": ("S", delayed_type)})
    v.declare_queue(None, "q", passive=False, durable=True, exclusive=False, auto_delete=False, arguments={})
    return clock, v


def _declare(v: Vhost, name: str, args: Table, *, durable: bool = True) -> None:
    v.declare_exchange(
        None,
        name,
        "x-delayed-message",
        passive=False,
        durable=durable,
        auto_delete=False,
        internal=False,
        arguments=args,
    )


def _publish(
    v: Vhost, exchange: str, headers: dict[str, object] | Table | None, body: bytes = b"m", rk: str = "k"
) -> list[str]:
    table = headers if headers is None or all(isinstance(f, tuple) for f in headers.values()) else None
    if table is None and headers is not None:
        table = table_from_python(headers)  # type: ignore[arg-type]
    props = RawProperties(build_properties(headers=table, delivery_mode=2))
    msg = Message.from_publish(exchange, rk, props, body, ttl_ms=None, msg_id=v.broker.next_msg_id())
    queues = v.route(v.exchanges[exchange], msg)
    for q in queues:
        q.publish(msg)
    return [q.name for q in queues]


def _bodies(v: Vhost, queue: str = "q") -> list[bytes]:
    return [e.msg.body for e in v.queues[queue].ready_entries()]


# -- reading x-delay -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("field", "delay_310", "delay_mc"),
    [
        (None, None, None),
        (("I", 5000), 5000, 5000),
        (("l", 5000), 5000, 5000),
        (("s", -3), -3, -3),
        (("u", 7), 7, 7),
        (("i", 4294967295), 4294967295, 4294967295),
        (("B", 9), 9, 9),
        (("b", 9), 9, None),  # mc_amqpl maps byte to byte, which the newer integer list lacks
        (("S", "2500"), 2500, 2500),
        (("S", "+12"), 12, 12),
        (("S", "-12"), -12, -12),
        (("x", b"2500"), None, 2500),  # a byte array: 'binary', a string only for the newer plugin
        (("d", 1500.9), 1500, 1500),
        (("d", -0.5), 0, 0),
        (("f", 2.5), 2, 2),
        (("t", True), None, None),
        (("T", 1700000000), None, None),
        (("A", [("I", 5)]), None, None),
        (("F", {"a": ("I", 5)}), None, None),
        (("V", None), None, "crash"),  # null matches no clause of the newer get_delay/1
        (("D", decimal.Decimal("1.5")), "crash", "crash"),
        (("S", "5s"), "crash", "crash"),  # binary_to_integer
        (("S", " 5"), "crash", "crash"),
        (("S", ""), "crash", "crash"),
        (("S", "1.5"), "crash", "crash"),
    ],
)
def test_read_delay_by_version(field: Field | None, delay_310: object, delay_mc: object) -> None:
    for profile, want in ((P310, delay_310), (P43, delay_mc)):
        if want == "crash":
            with pytest.raises(_Crash):
                read_delay(field, profile)
        else:
            assert read_delay(field, profile) == want, profile.name


# -- declare ---------------------------------------------------------------------------------------------------------
NOT_A_TYPE = "Invalid argument, 'x-delayed-type' must be an existing exchange type"


@pytest.mark.parametrize(
    ("args", "error", "text"),
    [
        ({}, errors.PreconditionFailed, NOT_A_TYPE),
        ({"x-delayed-type": ("I", 1)}, errors.PreconditionFailed, NOT_A_TYPE),
        ({"x-delayed-type": ("A", [("S", "direct")])}, errors.PreconditionFailed, NOT_A_TYPE),
        (
            {"x-delayed-type": ("S", "x-delayed-message")},
            errors.PreconditionFailed,
            "Invalid argument, 'x-delayed-message' can't be used for 'x-delayed-type'",
        ),
        ({"x-delayed-type": ("S", "nope")}, errors.PreconditionFailed, "unknown exchange type 'nope'"),
        ({"x-delayed-type": ("S", "")}, errors.PreconditionFailed, "invalid exchange type ''"),
    ],
)
def test_declare_errors(args: Table, error: type[errors.AMQPError], text: str) -> None:
    _, v = _setup()
    with pytest.raises(error) as e:
        _declare(v, "bad", args)
    assert e.value.explanation == text
    assert "bad" not in v.exchanges


def test_declare_unknown_delayed_type_is_a_connection_error_before_3_13_3() -> None:
    with pytest.raises(errors.CommandInvalid, match="unknown exchange type 'nope'"):
        validate_declare({"x-delayed-type": ("S", "nope")}, P310.exchange_types, P310)
    # a type of a newer version is unknown to an older one
    with pytest.raises(errors.CommandInvalid, match="unknown exchange type 'x-local-random'"):
        validate_declare({"x-delayed-type": ("S", "x-local-random")}, P310.exchange_types, P310)


def test_declare_accepts_every_type_of_the_profile_and_byte_array_names() -> None:
    _, v = _setup()
    for t in P43.exchange_types:
        _declare(v, f"d-{t}", {"x-delayed-type": ("S", t)})
        assert v.exchanges[f"d-{t}"].route_type == t
    _declare(v, "bin", {"x-delayed-type": ("x", b"topic")})
    assert v.exchanges["bin"].route_type == "topic"
    # redeclaring with another x-delayed-type: only alternate-exchange is compared (the delayed type's
    # assert_args_equivalence), so it is accepted and the first one stays
    _declare(v, "dx", {"x-delayed-type": ("S", "fanout")})
    assert v.exchanges["dx"].route_type == "direct"


def test_plugin_off_refuses_the_type_as_an_unknown_one() -> None:
    clock = VirtualClock(START)
    for version, error in (("3.10", errors.CommandInvalid), ("4.3", errors.PreconditionFailed)):
        v = Broker(clock, rabbitmq_version=version, plugins=()).vhost("/")
        with pytest.raises(error) as e:
            _declare(v, "dx", {"x-delayed-type": ("S", "direct")})
        assert e.value.explanation == "unknown exchange type 'x-delayed-message'"
    with pytest.raises(ValueError, match="unknown plugin"):
        Broker(clock, plugins=["rabbitmq_shovel"])
    assert Broker(clock, plugins="rabbitmq_delayed_message_exchange").plugins == {"rabbitmq_delayed_message_exchange"}


# -- timing ----------------------------------------------------------------------------------------------------------
def test_a_delay_is_released_exactly_when_due() -> None:
    clock, v = _setup()
    v.bind(None, "queue", "q", "dx", "k", {})
    assert _publish(v, "dx", {"x-delay": 60_000}) == []
    assert v.delayed.count("dx") == 1
    clock.advance(59.999)
    assert _bodies(v) == []
    clock.advance(0.001)
    assert _bodies(v) == [b"m"]
    assert v.delayed.count("dx") == 0
    assert clock.pending() == 0


def test_several_delays_release_in_due_order_and_one_advance_releases_all_due() -> None:
    clock, v = _setup()
    v.bind(None, "queue", "q", "dx", "k", {})
    for d in (500, 100, 300, 200, 100, 400):  # the plugin suite's delay_order
        _publish(v, "dx", {"x-delay": d}, body=str(d).encode())
    assert [p.delay_ms for p in v.delayed.pending()] == [100, 100, 200, 300, 400, 500]
    clock.advance(0.25)
    assert _bodies(v) == [b"100", b"100", b"200"]
    clock.advance(10)
    assert _bodies(v) == [b"100", b"100", b"200", b"300", b"400", b"500"]


def test_release_times_interleave_with_other_timers() -> None:
    """Each message is released at its own due time, as if the broker had run on time (a queue TTL that falls
    between two releases expires the first released message before the second arrives)."""
    clock, v = _setup()
    v.declare_queue(
        None,
        "ttl",
        passive=False,
        durable=True,
        exclusive=False,
        auto_delete=False,
        arguments={"x-message-ttl": ("I", 1000)},
    )
    v.bind(None, "queue", "ttl", "dx", "k", {})
    _publish(v, "dx", {"x-delay": 1000}, body=b"a")
    _publish(v, "dx", {"x-delay": 2500}, body=b"b")
    clock.advance(2.6)  # "a" arrived at 1.0 and expired at 2.0; "b" arrived at 2.5
    assert _bodies(v, "ttl") == [b"b"]
    t0 = int(START.timestamp() * 1000)
    assert [e.time_ms for e in v.broker.events.snapshot() if e.kind == "delay-released"] == [t0 + 1000, t0 + 2500]


@pytest.mark.parametrize("header", [None, 0, -5000, 4294967296, True, "0"])
def test_no_delay_routes_at_once_and_keeps_the_header(header: object) -> None:
    _clock, v = _setup()
    v.bind(None, "queue", "q", "dx", "k", {})
    headers = None if header is None else {"x-delay": header}
    assert _publish(v, "dx", headers) == ["q"]
    assert v.delayed.count("dx") == 0
    (e,) = v.queues["q"].ready_entries()
    assert e.msg.header("x-delay") == (None if header is None else table_from_python({"x-delay": header})["x-delay"])


def test_the_longest_delay_is_an_erlang_timer() -> None:
    clock, v = _setup()
    v.bind(None, "queue", "q", "dx", "k", {})
    _publish(v, "dx", {"x-delay": ("i", 4294967295)})
    clock.advance(timedelta(milliseconds=4294967294))
    assert _bodies(v) == []
    clock.advance(timedelta(milliseconds=1))
    assert _bodies(v) == [b"m"]


def test_string_and_float_delays() -> None:
    clock, v = _setup()
    v.bind(None, "queue", "q", "dx", "k", {})
    _publish(v, "dx", {"x-delay": ("S", "1500")}, body=b"s")
    _publish(v, "dx", {"x-delay": ("d", 999.99)}, body=b"f")
    clock.advance(1)
    assert _bodies(v) == [b"f"]
    clock.advance(0.5)
    assert _bodies(v) == [b"f", b"s"]


def test_a_delay_that_crashes_the_plugin_is_541_without_text() -> None:
    _clock, v = _setup()
    with pytest.raises(errors.InternalError) as e:
        _publish(v, "dx", {"x-delay": "soon"})
    assert e.value.reply_text == "INTERNAL_ERROR"
    assert v.delayed.count("dx") == 0


# -- the released message --------------------------------------------------------------------------------------------
def test_released_header_is_minus_the_delay_as_a_long_headers_sorted() -> None:
    clock, v = _setup("4.3")
    v.bind(None, "queue", "q", "dx", "k", {})
    _publish(v, "dx", {"z": ("I", 1), "x-delay": ("S", "2000"), "a": ("S", "x")})
    clock.advance(2)
    (e,) = v.queues["q"].ready_entries()
    assert list(e.msg.headers().items()) == [("a", ("S", "x")), ("x-delay", ("l", -2000)), ("z", ("I", 1))]


def test_released_header_is_a_signedint_before_message_containers() -> None:
    clock, v = _setup("3.10")
    v.bind(None, "queue", "q", "dx", "k", {})
    _publish(v, "dx", {"z": ("I", 1), "x-delay": ("d", 2000.5)})
    _publish(v, "dx", {"x-delay": ("i", 3_000_000_000)}, body=b"big")
    clock.advance(2)
    (e,) = v.queues["q"].ready_entries()
    assert list(e.msg.headers().items()) == [("x-delay", ("I", -2000)), ("z", ("I", 1))]
    clock.advance(3_000_000)
    big = v.queues["q"].ready_entries()[1]
    # -3,000,000,000 keeps its low 32 bits on the wire (<<V:32/signed>>); it is not delayed again
    assert big.msg.header("x-delay") == ("I", -3_000_000_000 + 2**32)
    assert v.delayed.count("dx") == 0


def test_routing_by_the_delayed_type_when_due() -> None:
    clock, v = _setup(delayed_type="topic")
    for key in ("a.b.c", "a.*.c", "a.#"):  # the plugin suite's routing_topic
        v.bind(None, "queue", "q", "dx", key, {})
    for rk in ("a.b.c", "a.z.c", "a.j.k", "b.b.c"):
        _publish(v, "dx", {"x-delay": 10}, body=rk.encode(), rk=rk)
    clock.advance(1)
    assert _bodies(v) == [b"a.b.c", b"a.z.c", b"a.j.k"]


def test_headers_delayed_type_validates_bindings_as_headers() -> None:
    clock, v = _setup(delayed_type="headers")
    with pytest.raises(errors.PreconditionFailed, match="Invalid x-match field value"):
        v.bind(None, "queue", "q", "dx", "", {"x-match": ("S", "some")})
    v.bind(None, "queue", "q", "dx", "", {"x-match": ("S", "all"), "kind": ("S", "a")})
    _publish(v, "dx", {"kind": "a", "x-delay": 10}, body=b"a")
    _publish(v, "dx", {"kind": "b", "x-delay": 10}, body=b"b")
    clock.advance(1)
    assert _bodies(v) == [b"a"]


def test_delayed_exchange_reached_through_an_exchange_binding_delays_too() -> None:
    clock, v = _setup()
    v.declare_exchange(
        None, "front", "fanout", passive=False, durable=True, auto_delete=False, internal=False, arguments={}
    )
    v.bind(None, "exchange", "dx", "front", "", {})
    v.bind(None, "queue", "q", "dx", "k", {})
    assert _publish(v, "front", {"x-delay": 100}) == []
    clock.advance(0.1)
    assert _bodies(v) == [b"m"]


def test_release_follows_exchange_bindings_once() -> None:
    clock, v = _setup()
    _declare(v, "dx2", {"x-delayed-type": ("S", "fanout")})
    v.bind(None, "exchange", "dx2", "dx", "k", {})
    v.bind(None, "queue", "q", "dx2", "", {})
    _publish(v, "dx", {"x-delay": 100})
    clock.advance(0.1)  # released by dx; dx2 reads x-delay = -100: routes at once
    assert _bodies(v) == [b"m"]
    assert v.delayed.count("dx2") == 0


def test_alternate_exchange_gets_the_message_at_once_and_when_due_if_unroutable() -> None:
    clock, v = _setup()
    _declare(v, "dae", {"x-delayed-type": ("S", "direct"), "alternate-exchange": ("S", "ae")})
    v.declare_exchange(
        None, "ae", "fanout", passive=False, durable=True, auto_delete=False, internal=False, arguments={}
    )
    v.declare_queue(None, "alt", passive=False, durable=True, exclusive=False, auto_delete=False, arguments={})
    v.bind(None, "queue", "alt", "ae", "", {})
    v.bind(None, "queue", "q", "dae", "k", {})
    # route/3 returns no destination for a delayed message, so rabbit_exchange:route1 adds the alternate at once
    assert _publish(v, "dae", {"x-delay": 100}, rk="other") == ["alt"]
    clock.advance(0.1)  # when due: routed by its key (no binding), so the alternate again
    assert _bodies(v, "alt") == [b"m", b"m"]
    assert _bodies(v) == []


# -- life of pending messages ----------------------------------------------------------------------------------------
def test_deleting_the_exchange_keeps_pending_messages_that_route_by_name_when_due() -> None:
    clock, v = _setup()
    v.bind(None, "queue", "q", "dx", "k", {})
    _publish(v, "dx", {"x-delay": 1000}, body=b"1")
    _publish(v, "dx", {"x-delay": 3000}, body=b"3")
    v.delete_exchange(None, "dx", if_unused=False)
    assert v.delayed.count("dx") == 2
    clock.advance(1)  # the exchange is gone: no bindings, nowhere to go
    assert _bodies(v) == []
    _declare(v, "dx", {"x-delayed-type": ("S", "fanout")})
    assert v.delayed.info(v.exchanges["dx"]) == 1  # counted by name
    v.declare_queue(None, "q2", passive=False, durable=True, exclusive=False, auto_delete=False, arguments={})
    v.bind(None, "queue", "q2", "dx", "zzz", {})
    clock.advance(2)  # routed as the exchange it was published to (direct on "k") with the bindings of now
    assert _bodies(v, "q2") == []
    v.bind(None, "queue", "q", "dx", "k", {})
    _publish(v, "dx", {"x-delay": 10}, body=b"new")
    clock.advance(1)
    assert _bodies(v) == [b"new"]


def test_restart_keeps_pending_messages_of_durable_and_transient_exchanges() -> None:
    clock, v = _setup()
    _declare(v, "tx", {"x-delayed-type": ("S", "fanout")}, durable=False)
    v.bind(None, "queue", "q", "dx", "k", {})
    v.bind(None, "queue", "q", "tx", "", {})
    props = RawProperties(build_properties(headers=table_from_python({"x-delay": 5000})))  # transient message
    msg = Message.from_publish("dx", "k", props, b"transient", ttl_ms=None, msg_id=99)
    assert v.route(v.exchanges["dx"], msg) == []
    _publish(v, "dx", {"x-delay": 10_000}, body=b"durable")
    _publish(v, "tx", {"x-delay": 1000}, body=b"via-transient")
    restart_broker(v.broker)
    assert "tx" not in v.exchanges
    assert [(p.exchange.name, p.msg.body) for p in v.delayed.pending()] == [
        ("tx", b"via-transient"),
        ("dx", b"transient"),
        ("dx", b"durable"),
    ]
    clock.advance(10)
    assert _bodies(v) == [b"transient", b"durable"]  # the transient exchange's bindings went with it


def test_reset_forgets_pending_messages() -> None:
    clock, v = _setup()
    _publish(v, "dx", {"x-delay": 1000})
    v.broker.reset()
    assert v.delayed.pending() == []
    assert clock.pending() == 0
