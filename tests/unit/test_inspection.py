"""Inspection snapshots, the event log view, restart and problems, driven through the broker without sockets.

A :class:`FakeRabbit` that is never started runs ``rabbit._call(fn)`` inline, so the test-facing API can be
exercised on a broker fed directly through a :class:`Session` with a recording sink.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest

from fakerabbit import FakeRabbit
from fakerabbit.broker.fields import table_from_python
from fakerabbit.broker.properties import build_properties
from fakerabbit.broker.session import ConnectionInfo, Session
from fakerabbit.testing import (
    ExchangeSnapshot,
    MessageSnapshot,
    QueueSnapshot,
    x_death,
)

START = datetime(2024, 1, 1, tzinfo=UTC)


@dataclass
class Sink:
    """Records what the broker tells a channel's client."""

    delivered: list[tuple[Any, ...]] = field(default_factory=list)
    returned: list[tuple[Any, ...]] = field(default_factory=list)
    confirms: list[tuple[bool, int, bool]] = field(default_factory=list)
    cancels: list[str] = field(default_factory=list)

    def send_deliver(self, *args: Any) -> None:
        self.delivered.append(args)

    def send_return(self, *args: Any) -> None:
        self.returned.append(args)

    def send_confirm(self, ack: bool, delivery_tag: int, multiple: bool) -> None:
        self.confirms.append((ack, delivery_tag, multiple))

    def send_cancel(self, consumer_tag: str) -> None:
        self.cancels.append(consumer_tag)


class Client:
    """One connection with one channel, talking to the broker directly."""

    def __init__(self, rabbit: FakeRabbit, *, name: str = "unit") -> None:
        self.rabbit = rabbit
        self.conn: ConnectionInfo = rabbit._broker.open_connection(
            "guest", "/", peer="127.0.0.1:1", client_properties={"connection_name": name}
        )
        self.sink = Sink()
        self.session = Session(self.conn, 1, rabbit._broker.vhost("/"), self.sink)
        self.conn.sessions[1] = self.session
        self.vhost = rabbit._broker.vhost("/")

    def declare(self, name: str, *, durable: bool = False, exclusive: bool = False, **args: Any) -> None:
        self.vhost.declare_queue(
            self.conn,
            name,
            passive=False,
            durable=durable,
            exclusive=exclusive,
            auto_delete=False,
            arguments=table_from_python({k.replace("_", "-"): v for k, v in args.items()}),
        )

    def exchange(self, name: str, type_: str = "direct", *, durable: bool = False) -> None:
        self.vhost.declare_exchange(
            self.conn, name, type_, passive=False, durable=durable, auto_delete=False, internal=False, arguments={}
        )

    def bind(self, queue: str, exchange: str, key: str = "") -> None:
        self.vhost.bind(self.conn, "queue", queue, exchange, key, {})

    def publish(self, rk: str, body: bytes, *, exchange: str = "", mandatory: bool = False, **props: Any) -> None:
        if "headers" in props:
            props["headers"] = table_from_python(props["headers"])
        self.session.publish(exchange, rk, mandatory, False, build_properties(**props), body)

    def get(self, queue: str, *, no_ack: bool = False) -> int:
        result = self.session.get(queue, no_ack)
        assert result is not None
        return result.delivery_tag


@pytest.fixture
def rabbit() -> FakeRabbit:
    return FakeRabbit(start_time=START)


@pytest.fixture
def client(rabbit: FakeRabbit) -> Client:
    return Client(rabbit)


# -- queue snapshots ---------------------------------------------------------------------------------------


def test_queue_snapshot_shows_messages_without_consuming(rabbit: FakeRabbit, client: Client) -> None:
    client.declare("work", durable=True, x_message_ttl=60_000, x_max_priority=5)
    client.publish("work", b"one", headers={"k": 1, "s": "v"}, content_type="text/plain", delivery_mode=2)
    client.publish("work", b'{"n": 2}', priority=3)

    q = rabbit.queue("work")
    again = rabbit.queue("work")

    assert isinstance(q, QueueSnapshot)
    assert (q.name, q.vhost, q.type, q.durable, q.exclusive) == ("work", "/", "classic", True, False)
    assert q.message_count == 2 and q.unacked_count == 0 and q.consumer_count == 0
    assert q.arguments["x-message-ttl"] == 60_000 and q.arguments["x-max-priority"] == 5
    # priority 3 goes ahead of priority 0
    assert [m.body for m in q.messages] == [b'{"n": 2}', b"one"]
    second, first = q.messages
    assert isinstance(first, MessageSnapshot)
    assert first.headers == {"k": 1, "s": "v"}
    assert first.properties["content_type"] == "text/plain"
    assert first.persistent and not second.persistent
    assert first.routing_key == "work" and first.exchange == ""
    assert first.redelivered is False
    assert first.expires_at == datetime(2024, 1, 1, 0, 1, tzinfo=UTC)
    assert second.json() == {"n": 2} and first.text == "one"
    assert again.bodies == q.bodies  # looking twice changed nothing
    assert rabbit._broker.vhost("/").queues["work"].ready_count == 2


def test_snapshot_does_not_follow_later_changes(rabbit: FakeRabbit, client: Client) -> None:
    client.declare("q")
    client.publish("q", b"a")
    before = rabbit.queue("q")
    client.publish("q", b"b")
    assert before.message_count == 1 and before.bodies == [b"a"]
    assert rabbit.queue("q").bodies == [b"a", b"b"]


def test_unacked_consumers_and_redelivered(rabbit: FakeRabbit, client: Client) -> None:
    client.declare("q")
    client.publish("q", b"a")
    client.publish("q", b"b")
    tag = client.get("q")
    assert rabbit.queue("q").unacked_count == 1
    client.session.nack(tag, False, True)
    q = rabbit.queue("q")
    assert q.unacked_count == 0
    assert [(m.body, m.redelivered) for m in q.messages] == [(b"a", True), (b"b", False)]

    c = client.session.consume("q", "ctag", False, False, table_from_python({"x-priority": 4}))
    client.session.start(c)
    q = rabbit.queue("q")
    assert q.consumer_count == 1
    assert (q.consumers[0].tag, q.consumers[0].priority, q.consumers[0].ack_required) == ("ctag", 4, True)
    assert q.unacked_count == 2 and q.message_count == 0


def test_missing_queue_names_the_existing_ones(rabbit: FakeRabbit, client: Client) -> None:
    client.declare("orders")
    with pytest.raises(LookupError, match=r"no queue 'order' in vhost '/' \(queues: 'orders'\)"):
        rabbit.queue("order")
    with pytest.raises(LookupError, match="no vhost 'nope'"):
        rabbit.queue("orders", vhost="nope")


def test_effective_policy(rabbit: FakeRabbit, client: Client) -> None:
    client.declare("jobs")
    rabbit.set_policy("ttl", "^jobs$", {"message-ttl": 5000})
    rabbit.set_operator_policy("cap", ".*", {"max-length": 10})
    q = rabbit.queue("jobs")
    assert (q.policy, q.operator_policy) == ("ttl", "cap")
    assert dict(q.effective_policy) == {"max-length": 10, "message-ttl": 5000}


def test_queues_exchanges_bindings(rabbit: FakeRabbit, client: Client) -> None:
    client.declare("b")
    client.declare("a")
    client.exchange("events", "topic", durable=True)
    client.bind("a", "events", "order.*")
    assert [q.name for q in rabbit.queues()] == ["a", "b"]
    names = [x.name for x in rabbit.exchanges()]
    assert "" in names and "amq.topic" in names and "events" in names
    assert rabbit.exchanges(predeclared=False) == [
        ExchangeSnapshot("events", "/", "topic", True, False, False, rabbit.exchanges(predeclared=False)[0].arguments)
    ]
    (b,) = rabbit.bindings()
    assert (b.source, b.destination, b.destination_type, b.routing_key) == ("events", "a", "queue", "order.*")
    assert rabbit.bindings(source="amq.direct") == []
    default = rabbit.bindings(include_default=True, source="")
    assert [(x.destination, x.routing_key) for x in default] == [("a", "a"), ("b", "b")]


def test_connections(rabbit: FakeRabbit, client: Client) -> None:
    (c,) = rabbit.connections()
    assert (c.user, c.vhost, c.peer, c.channels, c.connection_name) == ("guest", "/", "127.0.0.1:1", 1, "unit")


# -- events ----------------------------------------------------------------------------------------------------


def test_events_tell_where_a_message_went(rabbit: FakeRabbit, client: Client) -> None:
    client.declare("dlq")
    client.declare("work", x_message_ttl=1000, x_dead_letter_exchange="", x_dead_letter_routing_key="dlq")
    client.publish("work", b"m")
    rabbit.clock.advance(1)

    events = rabbit.events
    (mid,) = events.published(routing_key="work")
    assert events.for_message(mid).kinds() == ["published", "routed", "expired", "dead-lettered"]
    dl = events.of_kind("dead-lettered")[0]
    assert dl.details == {"queue": "work", "reason": "expired", "exchange": "", "queues": ["dlq"]}
    assert dl.time_ms - events.for_message(mid)[0].time_ms == 1000
    assert rabbit.queue("dlq").messages[0].id == mid
    assert "dead-lettered queue='work' reason='expired'" in events.story(mid)
    assert [e.kind for e in events.for_queue("dlq")] == ["queue-declared", "dead-lettered"]


def test_events_returned_unroutable_acked_rejected(rabbit: FakeRabbit, client: Client) -> None:
    client.declare("q")
    client.publish("nowhere", b"x", mandatory=True)
    client.publish("nowhere", b"y")
    client.publish("q", b"z")
    tag = client.get("q")
    client.session.nack(tag, False, True)
    client.session.ack(client.get("q"), False)
    client.publish("q", b"w")
    client.session.nack(client.get("q"), False, False)

    kinds = rabbit.events.of_kind("returned", "unroutable", "acked", "rejected")
    assert [(e.kind, e.details.get("requeue")) for e in kinds] == [
        ("returned", None),
        ("unroutable", None),
        ("rejected", True),
        ("acked", None),
        ("rejected", False),
    ]
    assert len(client.sink.returned) == 1
    assert rabbit.events.of_kind("dropped")[0].details["why"] == "no dead-letter exchange"


def test_events_cycle_and_missing_dlx(rabbit: FakeRabbit, client: Client) -> None:
    client.declare("loop", x_message_ttl=10, x_dead_letter_exchange="")
    client.declare("lost", x_message_ttl=10, x_dead_letter_exchange="missing")
    client.publish("loop", b"a")
    client.publish("lost", b"b")
    rabbit.clock.advance(1)
    whys = [e.details["why"] for e in rabbit.events.of_kind("dropped")]
    assert whys == ["dead-letter cycle", "dead-letter exchange 'missing' missing"]


def test_events_view_is_a_snapshot(rabbit: FakeRabbit, client: Client) -> None:
    client.declare("q")
    before = rabbit.events
    client.publish("q", b"a")
    assert len(rabbit.events) == len(before) + 2
    assert before[-1:].kinds() == ["queue-declared"]
    assert rabbit.events.where(exchange="", routing_key="q").kinds() == ["published"]


# -- x-death ---------------------------------------------------------------------------------------------------


def test_x_death_view_on_snapshot_and_dicts(rabbit: FakeRabbit, client: Client) -> None:
    client.declare("dlq")
    client.declare("work", x_dead_letter_exchange="", x_dead_letter_routing_key="dlq")
    client.publish("work", b"m", expiration="5000")
    client.session.nack(client.get("work"), False, False)
    m = rabbit.queue("dlq").messages[0]
    xd = x_death(m)
    assert xd is m.x_death and len(xd) == 1 and xd.total == 1
    entry = xd.find("work", "rejected")
    assert entry is not None
    assert (entry.count, entry.exchange, entry.routing_keys, entry.original_expiration) == (1, "", ("work",), "5000")
    assert entry.time == START
    assert xd.first_death_reason == "rejected" and xd.first_death_queue == "work"
    assert xd.find("work", "expired") is None and xd.count_for(reason="expired") == 0

    # the same view from a client's decoded headers (bytes and epoch ints, as some clients give them)
    raw = {
        "x-death": [
            {"queue": b"q", "reason": b"expired", "count": 2, "time": 0, "exchange": b"", "routing-keys": [b"q"]}
        ]
    }
    assert x_death(raw)[0].queue == "q" and x_death(raw).count_for("q") == 2
    assert not x_death({}) and x_death(None).total == 0


# -- restart ---------------------------------------------------------------------------------------------------


def test_restart_keeps_durable_state_and_persistent_messages(rabbit: FakeRabbit, client: Client) -> None:
    client.exchange("dx", durable=True)
    client.exchange("tx", durable=False)
    client.declare("durable", durable=True)
    client.declare("transient")
    client.declare("excl", durable=True, exclusive=True)
    client.declare("quorum", durable=True, x_queue_type="quorum")
    client.bind("durable", "dx", "k")
    client.bind("durable", "tx", "k")
    client.publish("durable", b"persistent", delivery_mode=2)
    client.publish("durable", b"transient")
    client.publish("durable", b"unacked", delivery_mode=2)
    client.publish("quorum", b"q-transient")
    client.publish("transient", b"gone", delivery_mode=2)
    assert client.get("durable") and client.get("durable")  # 2 unacked: persistent, transient
    rabbit.set_policy("p", "^durable$", {"message-ttl": 60_000})

    rabbit.restart()

    assert [q.name for q in rabbit.queues()] == ["durable", "quorum"]
    assert [x.name for x in rabbit.exchanges(predeclared=False)] == ["dx"]
    assert [(b.source, b.destination) for b in rabbit.bindings()] == [("dx", "durable")]
    q = rabbit.queue("durable")
    assert [(m.body, m.redelivered) for m in q.messages] == [(b"persistent", True), (b"unacked", False)]
    assert q.unacked_count == 0 and q.consumer_count == 0 and q.policy == "p"
    assert rabbit.queue("quorum").bodies == [b"q-transient"]
    assert rabbit.connections() == []
    assert rabbit.events.last() is not None and rabbit.events.kinds()[-1] == "restarted"
    lost = {e.details["queue"] for e in rabbit.events.of_kind("dropped") if e.details["reason"] == "restart"}
    assert lost == {"durable", "transient"}


# -- problems and reset --------------------------------------------------------------------------------------


def test_problems_and_reset(rabbit: FakeRabbit, client: Client) -> None:
    rabbit._broker.report_problem("something unsupported")
    assert rabbit.problems == ["something unsupported"]
    assert rabbit.clear_problems() == ["something unsupported"] and rabbit.problems == []
    client.declare("q")
    client.publish("q", b"a")
    rabbit._broker.report_problem("again")
    rabbit.reset()
    assert rabbit.queues() == [] and len(rabbit.events) == 0 and rabbit.problems == []


def test_problems_are_bounded(rabbit: FakeRabbit) -> None:
    from fakerabbit.broker.broker import MAX_PROBLEMS

    for i in range(MAX_PROBLEMS + 5):
        rabbit._broker.report_problem(f"p{i}")
    problems = rabbit.problems
    assert len(problems) == MAX_PROBLEMS
    assert problems[0] == "... 6 earlier problem(s) not kept"
    assert problems[1] == "p6" and problems[-1] == f"p{MAX_PROBLEMS + 4}"
    rabbit.clear_problems()
    for i in range(MAX_PROBLEMS + 1):
        rabbit._broker.report_problem(f"again {i}")
    assert rabbit.problems[:2] == ["... 2 earlier problem(s) not kept", "again 2"]
