"""The consumer timeout on the virtual clock: when each version acts (fakerabbit/broker/consumer_timeout.py).

The live brokers run with RabbitMQ's default 30-minute timeout and a 60 s channel tick, so the timing rules are
checked here, on the fake; what the live brokers show within seconds is in
tests/conformance/test_consumer_timeout.py, and the measurements behind these rules in
notes/rabbitmq-consumer-timeout.md.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
from pika import spec

from fakerabbit import FakeRabbit
from fakerabbit.cli import build_parser
from tests.rawamqp import Close, RawAMQP

TEXT = (
    "PRECONDITION_FAILED - delivery acknowledgement on channel {ch} timed out. Timeout value used: {ms} ms. "
    "This timeout value can be configured, see consumers doc guide to learn more"
)


class Client:
    """A raw client of one fake broker, with helpers that read what the clock's moves produce."""

    def __init__(self, rabbit: FakeRabbit) -> None:
        self.rabbit = rabbit
        self.c = RawAMQP.connect(rabbit.url)
        self.c.open_channel(1)
        self.opened = {1}

    def declare(self, q: str, qtype: str = "classic", **args: Any) -> None:
        arguments = {"x-queue-type": qtype, **args} if qtype != "classic" else dict(args)
        self.c.rpc(1, spec.Queue.Declare(queue=q, durable=True, arguments=arguments), "Queue.DeclareOk")

    def consume(self, q: str, tag: str = "c1", channel: int = 1, no_ack: bool = False, **args: Any) -> None:
        f = self.c.rpc(
            channel, spec.Basic.Consume(queue=q, consumer_tag=tag, no_ack=no_ack, arguments=args), "Basic.ConsumeOk"
        )
        assert f.name == "Basic.ConsumeOk", f

    def deliver(self, q: str, body: bytes = b"m") -> int:
        self.c.publish(1, "", q, body)
        f = self.c.wait("Basic.Deliver")
        self.c.get_message(f.channel)
        return int(f.method.delivery_tag)

    def advance(self, seconds: float) -> list[str]:
        """Move the clock; the names of the methods that arrive."""
        self.rabbit.clock.advance(seconds)
        return [str(f.name) for f in self.c.quiet(0.05) if f.type == 1]

    def advance_to_close(self, seconds: float) -> Close:
        self.rabbit.clock.advance(seconds)
        return self.c.expect_close(timeout=2)

    def ready(self, q: str) -> int:
        """Ready messages in ``q`` (a passive declare on channel 9)."""
        if 9 not in self.opened:
            self.c.open_channel(9)
            self.opened.add(9)
        return int(self.c.rpc(9, spec.Queue.Declare(queue=q, passive=True), "Queue.DeclareOk").method.message_count)


@pytest.fixture
def make() -> Iterator[Any]:
    rabbits: list[FakeRabbit] = []
    clients: list[Client] = []

    def factory(version: str, **options: Any) -> Client:
        rabbit = FakeRabbit(rabbitmq_version=version, **options).start()
        rabbits.append(rabbit)
        client = Client(rabbit)
        clients.append(client)
        return client

    yield factory
    for client in clients:
        client.c.close()
    for rabbit in rabbits:
        rabbit.stop()


# -- up to 4.2: the channel's tick ------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["3.10", "3.12", "4.0"])
@pytest.mark.parametrize("qtype", ["classic", "quorum"])
def test_default_timeout_closes_the_channel_after_30_minutes(make: Any, version: str, qtype: str) -> None:
    cl = make(version)
    cl.declare("q", qtype)
    cl.consume("q")
    cl.deliver("q")
    # delivered as the channel's tick timer started: the 30th tick falls on the deadline and closes it
    assert cl.advance(1799.999) == []
    close = cl.advance_to_close(0.001)
    assert (close.reply_code, close.reply_text, close.class_id, close.method_id) == (
        406,
        TEXT.format(ch=1, ms=1800000),
        0,
        0,
    )
    cl.c.close_ok(1)
    assert cl.ready("q") == 1


def test_close_comes_at_the_first_tick_after_the_deadline(make: Any) -> None:
    cl = make("4.0")
    cl.declare("q")
    cl.consume("q")
    assert cl.advance(0.5) == []  # (too short for the channel to hibernate: its tick timer keeps its phase)
    cl.deliver("q")  # deadline 1800.5 s after the channel opened; ticks every 60 s from the open
    assert cl.advance(1859.4) == []
    assert cl.advance_to_close(0.1).reply_code == 406  # at 1860 s


def test_an_idle_channel_restarts_its_tick_with_the_delivery(make: Any) -> None:
    # live 4.0.5: 1 000 ms policy, channel idle for 20 s, delivery: closed 60 s after the delivery (not 40 s)
    cl = make("4.0")
    cl.declare("q")
    cl.rabbit.set_policy("ct", "^q$", {"consumer-timeout": 1000})
    cl.consume("q")
    assert cl.advance(20) == []
    cl.deliver("q")
    assert cl.advance(59.9) == []
    close = cl.advance_to_close(0.1)
    assert close.reply_text == TEXT.format(ch=1, ms=1000)


def test_basic_get_is_timed_too(make: Any) -> None:
    cl = make("3.10", consumer_timeout=30)
    cl.declare("q")
    cl.c.publish(1, "", "q", b"g")
    f = cl.c.rpc(1, spec.Basic.Get(queue="q", no_ack=False), "Basic.GetOk")
    assert f.name == "Basic.GetOk"
    cl.c.get_message(1)
    assert cl.advance(59.9) == []
    assert cl.advance_to_close(0.1).reply_text == TEXT.format(ch=1, ms=30000)


def test_no_ack_deliveries_are_not_timed(make: Any) -> None:
    cl = make("3.10")
    cl.declare("q")
    cl.consume("q", no_ack=True)
    cl.deliver("q")
    assert cl.advance(7200) == []


def test_an_ack_in_time_keeps_the_channel_open(make: Any) -> None:
    cl = make("4.0")
    cl.declare("q")
    cl.consume("q")
    tag = cl.deliver("q")
    assert cl.advance(1700) == []
    cl.c.send_method(1, spec.Basic.Ack(delivery_tag=tag))
    assert cl.advance(3600) == []
    tag = cl.deliver("q", b"second")  # a new deadline for the new delivery
    assert cl.advance(1799) == []
    assert cl.advance_to_close(60).reply_code == 406


def test_only_the_oldest_delivery_is_looked_at(make: Any) -> None:
    # rabbit_channel checks the head of its unacked queue, with the timeout of that delivery's queue
    cl = make("4.0")
    cl.declare("slow")
    cl.declare("fast")
    cl.rabbit.set_policy("ct", "^fast$", {"consumer-timeout": 1000})
    cl.consume("slow", "s")
    cl.consume("fast", "f")
    slow_tag = cl.deliver("slow")
    cl.deliver("fast")
    assert cl.advance(600) == []  # the head is slow's delivery: 30 minutes
    cl.c.send_method(1, spec.Basic.Ack(delivery_tag=slow_tag))
    close = cl.advance_to_close(60)  # now the head is fast's: the next tick closes the channel
    assert close.reply_text == TEXT.format(ch=1, ms=1000)


def test_a_policy_set_later_counts_at_the_next_tick(make: Any) -> None:
    cl = make("4.0")
    cl.declare("q")
    cl.consume("q")
    cl.deliver("q")
    assert cl.advance(30) == []
    cl.rabbit.set_policy("ct", "^q$", {"consumer-timeout": 5000})
    assert cl.advance_to_close(30).reply_text == TEXT.format(ch=1, ms=5000)


@pytest.mark.parametrize(
    ("arg", "policy", "closes_with"),
    [
        (1000, None, 1000),
        (1000, 5000, 1000),  # the smaller
        (5000, 1000, 1000),
        (-5, None, -5),  # not validated before 4.3: a negative timeout closes at the first tick
        ("x", None, None),  # not an integer: no timeout at all, not even the node's
        ("x", 1000, 1000),  # erlang:min(1000, <<"x">>): a number is smaller than a binary
        (Decimal("0.5"), None, None),  # a decimal ({decimal, ...} tuple) is no timeout...
        (Decimal("0.5"), 1000, 1000),  # ...and greater than any number
    ],
)
def test_queue_argument_and_policy_up_to_4_2(make: Any, arg: Any, policy: int | None, closes_with: int | None) -> None:
    cl = make("4.0")
    cl.declare("q", **{"x-consumer-timeout": arg})
    if policy is not None:
        cl.rabbit.set_policy("ct", "^q$", {"consumer-timeout": policy})
    cl.consume("q")
    cl.deliver("q")
    if closes_with is None:
        assert cl.advance(4 * 3600) == []
    else:
        assert cl.advance_to_close(60).reply_text == TEXT.format(ch=1, ms=closes_with)


def test_3_10_knows_only_the_node_setting(make: Any) -> None:
    cl = make("3.10")
    cl.declare("q", **{"x-consumer-timeout": 1000})  # accepted, no effect
    cl.consume("q", **{"x-consumer-timeout": 1000})  # accepted, no effect
    cl.deliver("q")
    assert cl.advance(1799) == []
    assert cl.advance_to_close(1).reply_text == TEXT.format(ch=1, ms=1800000)


def test_consumer_argument_is_ignored_up_to_4_2(make: Any) -> None:
    cl = make("4.0")
    cl.declare("q", "quorum")
    cl.consume("q", **{"x-consumer-timeout": 1000})
    cl.deliver("q")
    assert cl.advance(1799) == []
    assert cl.advance_to_close(1).reply_text == TEXT.format(ch=1, ms=1800000)


def test_a_closed_channel_gives_its_messages_to_another_consumer(make: Any) -> None:
    cl = make("3.10", consumer_timeout=10)
    cl.declare("q")
    cl.c.open_channel(2)
    cl.consume("q", "first")
    cl.deliver("q")
    cl.consume("q", "second", channel=2, no_ack=True)
    close = cl.advance_to_close(60)
    assert close.channel == 1
    f = cl.c.wait("Basic.Deliver")
    assert (f.channel, f.method.consumer_tag, f.method.redelivered) == (2, "second", True)


def test_node_timeout_none_times_nothing_out_up_to_4_2(make: Any) -> None:
    cl = make("4.0", consumer_timeout=None)
    cl.declare("q")
    cl.consume("q")
    cl.deliver("q")
    assert cl.advance(10 * 86400) == []


# -- 4.3: quorum queues, at the deadline ------------------------------------------------------------------


def test_4_3_quorum_consumer_is_cancelled_after_exactly_30_minutes(make: Any) -> None:
    cl = make("4.3")
    cl.declare("q", "quorum")
    cl.consume("q")
    cl.deliver("q")
    assert cl.advance(1799.999) == []
    assert cl.advance(0.001) == ["Basic.Cancel"]
    assert cl.ready("q") == 1
    ev = cl.rabbit.events.of_kind("consumer-timeout").last()
    assert ev is not None
    assert ev.details == {"queue": "q", "consumer_tag": "c1", "delivery_tag": 1, "timeout_ms": 1800000}


def test_4_3_classic_queue_never_times_out(make: Any) -> None:
    cl = make("4.3")
    cl.declare("q")
    cl.consume("q")
    cl.deliver("q")
    assert cl.advance(30 * 86400) == []


def test_4_3_node_timeout_none_is_24_hours(make: Any) -> None:
    cl = make("4.3", consumer_timeout=None)
    cl.declare("q", "quorum")
    cl.consume("q")
    cl.deliver("q")
    assert cl.advance(86399) == []
    assert cl.advance(1) == ["Basic.Cancel"]


def test_4_3_consumer_timeout_is_fixed_when_the_consumer_starts(make: Any) -> None:
    # rabbit_fifo keeps the timeout in the consumer's record: a policy set later is for later consumers
    cl = make("4.3")
    cl.declare("q", "quorum")
    cl.consume("q")
    cl.rabbit.set_policy("ct", "^q$", {"consumer-timeout": 1000})
    cl.deliver("q")
    assert cl.advance(1000) == []
    cl.consume("q", "c2")
    assert cl.advance(800) == ["Basic.Deliver", "Basic.Cancel"]  # c1 at its 30 minutes; the message goes to c2
    assert cl.advance(0.999) == []
    assert cl.advance(0.001) == ["Basic.Cancel"]  # c2 got the policy's 1 s


def test_4_3_custom_node_timeout(make: Any) -> None:
    cl = make("4.3", consumer_timeout=90)
    cl.declare("q", "quorum")
    cl.consume("q")
    cl.deliver("q")
    assert cl.advance(89.9) == []
    assert cl.advance(0.1) == ["Basic.Cancel"]


# -- the option -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [0, -1, True, "60", float("nan"), float("inf")])
def test_consumer_timeout_option_is_checked(bad: Any) -> None:
    with pytest.raises(ValueError, match="consumer_timeout must be positive seconds or None"):
        FakeRabbit(consumer_timeout=bad)


def test_consumer_timeout_option_in_milliseconds() -> None:
    assert FakeRabbit()._broker.consumer_timeout_ms == 1_800_000
    assert FakeRabbit(consumer_timeout=2.5)._broker.consumer_timeout_ms == 2500
    assert FakeRabbit(consumer_timeout=None)._broker.consumer_timeout_ms is None


def test_serve_option() -> None:
    parser = build_parser()
    assert parser.parse_args(["serve"]).consumer_timeout == 1800.0
    assert parser.parse_args(["serve", "--consumer-timeout", "60"]).consumer_timeout == 60.0
    assert parser.parse_args(["serve", "--consumer-timeout", "none"]).consumer_timeout is None
    for bad in ("0", "-3", "soon"):
        with pytest.raises(SystemExit):
            parser.parse_args(["serve", "--consumer-timeout", bad])
    assert isinstance(parser, argparse.ArgumentParser)
