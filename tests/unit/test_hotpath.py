"""The hot-path changes of docs/performance.md keep the model's behaviour: property-block caches, shared empty
containers on messages, compact event records, permission checks, per-connection exclusive-queue index, and
``fakerabbit serve``'s GC tuning."""

from __future__ import annotations

import gc
import subprocess
import sys

import pytest

from fakerabbit.broker import properties
from fakerabbit.broker.auth import Auth, Permission
from fakerabbit.broker.broker import Broker
from fakerabbit.broker.events import ROUTED, EventKind, EventLog
from fakerabbit.broker.message import Message
from fakerabbit.broker.properties import EMPTY_PROPERTIES, PropertiesError, RawProperties, build_properties
from fakerabbit.broker.session import Session
from fakerabbit.clock import VirtualClock


class NullSink:
    def send_deliver(self, *a: object) -> None:
        pass

    def send_return(self, *a: object) -> None:
        pass

    def send_confirm(self, *a: object) -> None:
        pass

    def send_cancel(self, *a: object) -> None:
        pass

    def writable(self) -> bool:
        return True


# -- properties -----------------------------------------------------------------------------------------------
def test_blocks_of_the_same_shape_share_one_layout() -> None:
    a = RawProperties(build_properties(content_type="a/b", message_id="0001"))
    b = RawProperties(build_properties(content_type="c/d", message_id="0002"))
    assert a.content_type == "a/b" and b.message_id == "0002"
    assert a._starts is b._starts
    assert isinstance(a._starts, tuple)
    assert RawProperties(EMPTY_PROPERTIES).expiration is None
    assert RawProperties(b"\x00\x00")._layout() is RawProperties(bytes(2))._layout()


def test_malformed_blocks_are_never_cached() -> None:
    raw = b"\x80\x00\x05abc"
    for _ in range(2):
        with pytest.raises(PropertiesError):
            _ = RawProperties(raw).content_type
    assert raw not in properties._layouts


def test_headers_decoded_once_per_block_and_shared() -> None:
    raw = build_properties(headers={"k": ("S", "v")})
    first, second = RawProperties(raw), RawProperties(raw)
    assert first.headers == {"k": ("S", "v")}
    assert second.headers is first.headers


def test_large_blocks_are_not_cached() -> None:
    raw = build_properties(headers={"big": ("S", "x" * 2000)})
    p = RawProperties(raw)
    assert p.headers is not None and p.headers["big"] == ("S", "x" * 2000)
    assert raw not in properties._layouts and raw not in properties._tables


def test_caches_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(properties, "_CACHE_ENTRIES", 8)
    for i in range(50):
        assert RawProperties(build_properties(message_id=f"id-{i}")).message_id == f"id-{i}"
    assert len(properties._layouts) <= 8
    assert properties._layouts[EMPTY_PROPERTIES] == (-1,) * 14


# -- messages -------------------------------------------------------------------------------------------------
def test_plain_messages_share_empty_bcc_and_deaths() -> None:
    a = Message.from_publish("", "q", RawProperties(), b"1", ttl_ms=None, msg_id=1)
    b = Message.from_publish("", "q", RawProperties(), b"2", ttl_ms=None, msg_id=2)
    assert a.bcc == () and a.deaths == () and a.bcc is b.bcc and a.deaths is b.deaths
    assert a.routing_keys == ("q",) and a.routing_key == "q"
    gc.collect()
    assert not gc.is_tracked(a.routing_keys)  # a tuple of str: the collector stops tracking it


def test_cc_and_bcc_still_read_and_stripped() -> None:
    raw = build_properties(headers={"CC": ("A", [("S", "c1")]), "BCC": ("A", [("S", "b1")]), "x": ("S", "y")})
    m = Message.from_publish("amq.direct", "rk", RawProperties(raw), b"", ttl_ms=None, msg_id=3)
    assert m.routing_keys == ("rk", "c1", "b1")
    assert list(m.bcc) == ["b1"]
    assert m.props.headers == {"CC": ("A", [("S", "c1")]), "x": ("S", "y")}


# -- events ---------------------------------------------------------------------------------------------------
def test_record_reads_back_like_emit() -> None:
    clock = VirtualClock()
    log = EventLog(clock.now_ms)
    log.emit("routed", None, queues=["a", "b"])
    log.record(ROUTED, None, ("a", "b"))
    kind = EventKind("delivered", "queue", "consumer_tag", "delivery_tag")
    log.record(kind, 7, "q", "ctag", 1)
    e1, e2, e3 = log.snapshot()
    assert e1 == e2
    assert e2.details == {"queues": ["a", "b"]} and isinstance(e2.details["queues"], list)
    assert (e3.kind, e3.message_id, list(e3.details.items())) == (
        "delivered",
        7,
        [("queue", "q"), ("consumer_tag", "ctag"), ("delivery_tag", 1)],
    )
    assert e3.time_ms == clock.now_ms()
    log.enabled = False
    log.record(ROUTED, None, ())
    assert len(log) == 3 and len(list(log)) == 3


def test_publish_events_through_a_session() -> None:
    broker = Broker(VirtualClock())
    conn = broker.open_connection("guest", "/", client_properties={})
    s = Session(conn, 1, broker.vhost("/"), NullSink())
    broker.vhost("/").declare_queue(
        conn, "q", passive=False, durable=False, exclusive=False, auto_delete=False, arguments={}
    )
    s.publish("", "q", False, False, EMPTY_PROPERTIES, b"x")
    s.publish("", "nowhere", False, False, EMPTY_PROPERTIES, b"x")
    got = s.get("q", True)
    assert got is not None
    events = [(e.kind, e.message_id, e.details) for e in broker.events.snapshot() if e.message_id is not None]
    assert events == [
        ("published", 1, {"exchange": "", "routing_key": "q"}),
        ("routed", 1, {"queues": ["q"]}),
        ("published", 2, {"exchange": "", "routing_key": "nowhere"}),
        ("routed", 2, {"queues": []}),
        ("unroutable", 2, {}),
        ("delivered", 1, {"queue": "q", "delivery_tag": 1}),
    ]


# -- permissions ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("pattern", "name", "allowed"),
    [
        (".*", "", True),
        (".*", "anything", True),
        ("", "", False),
        ("", "x", False),
        ("^pub$", "pub", True),
        ("^pub$", "pub2", False),
        ("pub", "my-pub-x", True),  # not anchored
        ("^(a|b)\\.", "b.c", True),
    ],
)
def test_permission_patterns(pattern: str, name: str, allowed: bool) -> None:
    p = Permission(configure=pattern, write=pattern, read=pattern)
    assert p.allows("configure", name) is allowed
    assert p.allows("write", name) is allowed
    assert p.allows("read", name) is allowed


def test_permission_kinds_are_separate() -> None:
    auth = Auth({"u": "p"})
    auth.set_permissions("u", "/", configure="", write="^w$", read=".*")
    auth.check("u", "/", "write", "exchange", "w")
    auth.check("u", "/", "read", "queue", "any")
    with pytest.raises(Exception, match="access to exchange 'x'"):
        auth.check("u", "/", "write", "exchange", "x")
    with pytest.raises(Exception, match="access to queue 'q'"):
        auth.check("u", "/", "configure", "queue", "q")
    with pytest.raises(KeyError):
        Permission().allows("delete", "q")


# -- exclusive queues per connection --------------------------------------------------------------------------
def test_close_connection_deletes_its_exclusive_queues_only() -> None:
    broker = Broker(VirtualClock())
    v = broker.vhost("/")
    a = broker.open_connection("guest", "/", client_properties={})
    b = broker.open_connection("guest", "/", client_properties={})

    def declare(conn: object, name: str, exclusive: bool) -> None:
        v.declare_queue(
            conn,  # type: ignore[arg-type]
            name,
            passive=False,
            durable=False,
            exclusive=exclusive,
            auto_delete=False,
            arguments={},
        )

    declare(a, "a1", True)
    declare(a, "shared", False)
    declare(b, "b1", True)
    declare(a, "a2", True)
    declare(a, "a3", True)
    assert list(a.exclusive_queues) == ["a1", "a2", "a3"]
    v.delete_queue(v.queues["a2"])
    assert list(a.exclusive_queues) == ["a1", "a3"]
    broker.events.clear()
    broker.close_connection(a)
    assert sorted(v.queues) == ["b1", "shared"]
    deleted = [e.details["queue"] for e in broker.events.snapshot() if e.kind == "queue-deleted"]
    assert deleted == ["a1", "a3"]  # in declaration order, as the scan over every queue gave them
    assert a.exclusive_queues == {}


# -- fakerabbit serve ---------------------------------------------------------------------------------------
def test_serve_gc_tuning_in_a_subprocess() -> None:
    code = (
        "import gc; from fakerabbit.cli import tune_gc, GC_GEN0_THRESHOLD; before = gc.get_threshold(); tune_gc(); "
        "after = gc.get_threshold(); "
        "assert after == (GC_GEN0_THRESHOLD, before[1], before[2]), after; assert gc.get_freeze_count() > 0"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_importing_the_cli_leaves_this_process_gc_alone() -> None:
    before = gc.get_threshold()
    import fakerabbit.cli  # noqa: F401

    assert gc.get_threshold() == before
