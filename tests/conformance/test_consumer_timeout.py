"""The consumer delivery-acknowledgement timeout (``consumer_timeout``): what RabbitMQ does to a delivery left
unacknowledged, per version (``fakerabbit/broker/consumer_timeout.py``, ``docs/consumer-timeout.md``).

4.3 quorum queues act at the deadline itself: those rules run against live 4.3.6 with one-second timeouts. Up to
4.2 the channel acts on its 60-second tick: the live brokers would need a minute per test, so here only what they
show at once (which arguments a consume accepts) runs against them; the tick itself runs against live 4.0.5 in the
opt-in :func:`test_channel_tick_closes_the_channel_live` (``FAKERABBIT_SLOW_REAL=1``) and on the virtual clock in
``tests/unit/test_consumer_timeout.py``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

import pytest
from pika import spec

from tests.conformance.conftest import Target
from tests.conformance.ttlhelpers import anchored
from tests.conformance.versions import for_versions
from tests.rawamqp import DEFAULT_CLIENT_PROPERTIES, Frame, RawAMQP

TIMED_OUT = (
    "PRECONDITION_FAILED - delivery acknowledgement on channel {ch} timed out. Timeout value used: {ms} ms. "
    "This timeout value can be configured, see consumers doc guide to learn more"
)


def connect(broker: Target, *, notify: bool = True) -> RawAMQP:
    """A raw connection; ``notify=False`` leaves out the ``consumer_cancel_notify`` capability."""
    caps = dict(DEFAULT_CLIENT_PROPERTIES["capabilities"], consumer_cancel_notify=notify)
    c = RawAMQP.connect(broker.url, client_properties={"product": "consumer-timeout-test", "capabilities": caps})
    c.open_channel(1)
    return c


def declare(c: RawAMQP, broker: Target, qtype: str = "quorum", **args: Any) -> str:
    q = broker.name(qtype[0] + "q")
    arguments = {"x-queue-type": qtype, **args} if qtype != "classic" else dict(args)
    f = c.rpc(1, spec.Queue.Declare(queue=q, durable=True, arguments=arguments), "Queue.DeclareOk")
    assert f.name == "Queue.DeclareOk", f
    return q


def consume(c: RawAMQP, q: str, tag: str = "c1", channel: int = 1, **args: Any) -> Frame:
    return c.rpc(channel, spec.Basic.Consume(queue=q, consumer_tag=tag, arguments=args), "Basic.ConsumeOk")


def deliver(c: RawAMQP, q: str, body: bytes = b"m", channel: int = 1) -> Frame:
    """Publish ``body`` to ``q`` and read its delivery (to this channel's consumer)."""
    c.publish(channel, "", q, body)
    f = c.wait("Basic.Deliver")
    assert f.name == "Basic.Deliver", f
    assert c.get_message(channel).body == body
    return f


def frames_until(broker: Target, c: RawAMQP, names: list[str], seconds: float) -> list[Frame]:
    """Method frames until ``names`` (in any order) have all arrived: the fake after ``seconds`` of its clock, the
    real broker within ``seconds`` plus slack."""
    if broker.is_fake:
        broker.advance(seconds)
        return [f for f in c.quiet(0.05) if f.type == 1]
    got: list[Frame] = []
    missing = list(names)
    deadline = time.monotonic() + seconds + 3
    while missing and time.monotonic() < deadline:
        f = c.read_frame(max(deadline - time.monotonic(), 0.001))
        if f is None:
            break
        if f.type == 1:
            got.append(f)
            if f.name in missing:
                missing.remove(str(f.name))
    return got


def frames_during(broker: Target, c: RawAMQP, seconds: float) -> list[Frame]:
    """The method frames that arrive while ``seconds`` pass (the virtual clock on the fake)."""
    if broker.is_fake:
        broker.advance(seconds)
        return [f for f in c.quiet(0.05) if f.type == 1]
    return [f for f in c.quiet(seconds) if f.type == 1]


def expect(broker: Target, c: RawAMQP, name: str, seconds: float) -> Frame:
    """The next ``name`` (or a close) within ``seconds`` (plus slack for the real broker)."""
    if broker.is_fake:
        broker.advance(seconds)
        return c.wait(name, timeout=2)
    return c.wait(name, timeout=seconds + 3)


def counts(broker: Target, c: RawAMQP, q: str, want: Callable[[int, int], bool] | None = None) -> tuple[int, int]:
    """(ready messages, consumers) of ``q``, from a passive declare on channel 9 (a quorum queue applies returns
    asynchronously: the real broker is asked again until ``want`` holds, for up to 2 s)."""
    if 9 not in {f.channel for f in c.seen if f.name == "Channel.OpenOk"}:
        c.open_channel(9)
    deadline = time.monotonic() + 2
    while True:
        m = c.rpc(9, spec.Queue.Declare(queue=q, passive=True), "Queue.DeclareOk").method
        got = (m.message_count, m.consumer_count)
        if broker.is_fake or want is None or want(*got) or time.monotonic() > deadline:
            return got
        time.sleep(0.05)


def get_redelivery(broker: Target, c: RawAMQP, q: str) -> tuple[Any, spec.BasicProperties]:
    """basic.get (auto-ack) on channel 9 of a message that has come back; (get-ok method, properties)."""
    counts(broker, c, q, lambda ready, _: ready > 0)
    f = c.rpc(9, spec.Basic.Get(queue=q, no_ack=True), "Basic.GetOk", "Basic.GetEmpty")
    assert f.name == "Basic.GetOk", f
    return f.method, c.get_message(9).properties


# -- 4.3: quorum queues time their deliveries --------------------------------------------------------------


@pytest.mark.rabbitmq_version("4.3")
def test_quorum_consumer_is_cancelled_at_its_deadline(broker: Target) -> None:
    c = connect(broker)
    q = declare(c, broker)
    consume(c, q, "c1", **{"x-consumer-timeout": 1000})
    assert deliver(c, q).method.redelivered is False
    assert frames_during(broker, c, 0.6) == []  # not before the deadline
    f = expect(broker, c, "Basic.Cancel", 0.4)
    assert (f.name, f.channel, f.method.consumer_tag, f.method.nowait) == ("Basic.Cancel", 1, "c1", True)
    # the channel stays open; the consumer stays registered; the message is back, redelivered, not a failure
    assert counts(broker, c, q, lambda ready, _: ready == 1) == (1, 1)
    method, props = get_redelivery(broker, c, q)
    assert method.redelivered is True
    assert props.headers == {"x-acquired-count": 1}
    c.close()


@pytest.mark.rabbitmq_version("4.3")
def test_quorum_timeout_closes_the_channel_of_a_client_without_cancel_notify(broker: Target) -> None:
    c = connect(broker, notify=False)
    q = declare(c, broker, **{"x-consumer-timeout": 1000})
    consume(c, q)
    deliver(c, q)
    close = c.expect_close(timeout=2) if not broker.is_fake else None
    if broker.is_fake:
        assert frames_during(broker, c, 0.9) == []
        broker.advance(0.1)
        close = c.expect_close()
    assert close is not None
    # rabbit_channel's fallback: the timeout it has not got is printed as -1
    assert (close.channel, close.reply_code, close.reply_text) == (1, 406, TIMED_OUT.format(ch=1, ms=-1))
    assert (close.class_id, close.method_id) == (0, 0)
    c.close_ok(1)
    assert counts(broker, c, q, lambda ready, _: ready == 1)[0] == 1
    c.close()


@pytest.mark.rabbitmq_version("4.3")
def test_quorum_basic_get_timeout_closes_the_channel(broker: Target) -> None:
    # a basic.get has no consumer to cancel: the channel is closed even for a client with cancel notify
    c = connect(broker)
    q = declare(c, broker, **{"x-consumer-timeout": 1000})
    c.rpc(1, spec.Confirm.Select(), "Confirm.SelectOk")
    c.publish(1, "", q, b"g")
    c.wait("Basic.Ack")
    f = c.rpc(1, spec.Basic.Get(queue=q, no_ack=False), "Basic.GetOk")
    assert f.name == "Basic.GetOk"
    c.get_message(1)
    close = c.expect_close(timeout=3) if not broker.is_fake else None
    if broker.is_fake:
        assert frames_during(broker, c, 0.9) == []
        broker.advance(0.1)
        close = c.expect_close()
    assert close is not None
    assert (close.reply_code, close.reply_text, close.class_id, close.method_id) == (
        406,
        TIMED_OUT.format(ch=1, ms=-1),
        0,
        0,
    )
    c.close_ok(1)
    assert counts(broker, c, q, lambda ready, _: ready == 1)[0] == 1
    c.close()


@pytest.mark.rabbitmq_version("4.3")
@pytest.mark.parametrize(
    ("queue_arg", "policy", "consumer_arg", "timeout"),
    [
        (1000, None, 3000, 3.0),  # the consumer's argument wins, even when it is longer
        (3000, None, 1000, 1.0),
        (3000, 1000, None, 1.0),  # argument and policy: the smaller
        (1000, 3000, None, 1.0),
        (None, 1000, None, 1.0),
    ],
)
def test_which_timeout_a_quorum_consumer_gets(
    broker: Target, queue_arg: int | None, policy: int | None, consumer_arg: int | None, timeout: float
) -> None:
    c = connect(broker)
    q = declare(c, broker, **({"x-consumer-timeout": queue_arg} if queue_arg is not None else {}))
    if policy is not None:
        broker.set_policy(q + "-ct", anchored(q), {"consumer-timeout": policy})
        time.sleep(0 if broker.is_fake else 0.2)  # (a policy reaches a real queue asynchronously)
    consume(c, q, **({"x-consumer-timeout": consumer_arg} if consumer_arg is not None else {}))
    deliver(c, q)
    assert frames_during(broker, c, timeout - 0.5) == []
    assert expect(broker, c, "Basic.Cancel", 0.5).name == "Basic.Cancel"
    c.close()


@pytest.mark.rabbitmq_version("4.3")
def test_deleting_the_queue_cancels_a_timed_out_consumer_again(broker: Target) -> None:
    c = connect(broker)
    c.open_channel(2)
    q = declare(c, broker)
    consume(c, q, **{"x-consumer-timeout": 1000})
    deliver(c, q)
    assert expect(broker, c, "Basic.Cancel", 1.0).name == "Basic.Cancel"
    c.send_method(2, spec.Queue.Delete(queue=q))
    frames = [c.wait("Basic.Cancel", "Queue.DeleteOk") for _ in range(2)]
    assert sorted((f.channel, str(f.name)) for f in frames) == [(1, "Basic.Cancel"), (2, "Queue.DeleteOk")]
    c.close()


@pytest.mark.rabbitmq_version("4.3")
def test_timed_out_consumer_gets_nothing_more_and_each_evaluation_cancels_again(broker: Target) -> None:
    c = connect(broker)
    q = declare(c, broker)
    consume(c, q, **{"x-consumer-timeout": 2000})
    deliver(c, q, b"m0")
    assert frames_during(broker, c, 1.0) == []
    deliver(c, q, b"m1")
    # (the real broker gets slack to send each cancel: under CI load 4.3.6 once sent m1's more than 1.5 s late)
    got = frames_until(broker, c, ["Basic.Cancel"], 1.5)  # m0's deadline passes (m1's is 0.5 s later)
    assert [f.name for f in got] == ["Basic.Cancel"]
    c.publish(1, "", q, b"m2")  # not delivered: the consumer is timed out (m0 came back, it is not given it)
    got = frames_until(broker, c, ["Basic.Cancel"], 1.5)  # m1's deadline passes: another cancel for the same consumer
    assert [f.name for f in got] == ["Basic.Cancel"]
    assert counts(broker, c, q, lambda ready, _: ready == 3) == (3, 1)
    c.close()


@pytest.mark.rabbitmq_version("4.3")
@pytest.mark.parametrize(
    ("settle", "resumes"),
    [("ack", True), ("nack", True), ("reject-requeue", False), ("nack-requeue", False), ("recover", False)],
)
def test_settling_a_timed_out_delivery(broker: Target, settle: str, resumes: bool) -> None:
    """The channel still knows a timed-out delivery tag: settling it is no error and does nothing to the message
    (already back in the queue). With the consumer's last timed-out delivery settled by an ack or a discard the
    consumer is served again; after a requeue it is not (rabbit_fifo does not put it back in its service queue)."""
    c = connect(broker)
    q = declare(c, broker)
    consume(c, q, **{"x-consumer-timeout": 1000})
    deliver(c, q)
    assert expect(broker, c, "Basic.Cancel", 1.0).name == "Basic.Cancel"
    method: Any = {
        "ack": spec.Basic.Ack(delivery_tag=1),
        "nack": spec.Basic.Nack(delivery_tag=1, requeue=False),
        "reject-requeue": spec.Basic.Reject(delivery_tag=1, requeue=True),
        "nack-requeue": spec.Basic.Nack(delivery_tag=1, requeue=True),
        "recover": spec.Basic.Recover(requeue=True),
    }[settle]
    c.send_method(1, method)
    if settle == "recover":
        assert c.wait("Basic.RecoverOk").name == "Basic.RecoverOk"
    if resumes:
        got = frames_until(broker, c, ["Basic.Deliver"], 0.5)
        assert [(f.name, f.method.consumer_tag, f.method.delivery_tag, f.method.redelivered) for f in got] == [
            ("Basic.Deliver", "c1", 2, True)
        ]
        assert counts(broker, c, q) == (0, 1)
    else:
        assert frames_during(broker, c, 0.5) == []
        assert counts(broker, c, q) == (1, 1)
    c.close()


@pytest.mark.rabbitmq_version("4.3")
def test_a_timeout_return_is_not_a_failed_delivery(broker: Target) -> None:
    # x-delivery-limit 0 dead-letters the first failed delivery; a timeout returns the message all the same
    c = connect(broker)
    dlq = declare(c, broker, "classic")
    q = declare(c, broker, **{"x-delivery-limit": 0, "x-dead-letter-exchange": "", "x-dead-letter-routing-key": dlq})
    consume(c, q, **{"x-consumer-timeout": 1000})
    deliver(c, q)
    assert expect(broker, c, "Basic.Cancel", 1.0).name == "Basic.Cancel"
    assert counts(broker, c, q, lambda ready, _: ready == 1)[0] == 1
    assert counts(broker, c, dlq)[0] == 0
    c.close()


@pytest.mark.rabbitmq_version("4.3")
def test_cancelled_consumer_still_holding_a_delivery_closes_the_channel(broker: Target) -> None:
    # the queue still times the delivery; the channel has no consumer to cancel any more
    c = connect(broker)
    q = declare(c, broker)
    consume(c, q, **{"x-consumer-timeout": 1000})
    deliver(c, q)
    assert c.rpc(1, spec.Basic.Cancel(consumer_tag="c1"), "Basic.CancelOk").name == "Basic.CancelOk"
    close = c.expect_close(timeout=3) if not broker.is_fake else None
    if broker.is_fake:
        broker.advance(1)
        close = c.expect_close()
    assert close is not None
    assert (close.reply_code, close.reply_text) == (406, TIMED_OUT.format(ch=1, ms=-1))
    c.close_ok(1)
    assert counts(broker, c, q, lambda ready, _: ready == 1) == (1, 0)
    c.close()


@pytest.mark.rabbitmq_version("4.3")
def test_single_active_consumer_timeout_hands_over(broker: Target) -> None:
    c = connect(broker)
    q = declare(c, broker, **{"x-single-active-consumer": True})
    consume(c, q, "a", **{"x-consumer-timeout": 1000})
    consume(c, q, "b")
    deliver(c, q)
    got = frames_until(broker, c, ["Basic.Deliver", "Basic.Cancel"], 1.2)
    assert [(f.name, f.method.consumer_tag) for f in got] == [("Basic.Deliver", "b"), ("Basic.Cancel", "a")] or [
        (f.name, f.method.consumer_tag) for f in got
    ] == [("Basic.Cancel", "a"), ("Basic.Deliver", "b")]
    deliveries = [f for f in got if f.name == "Basic.Deliver"]
    assert deliveries[0].method.redelivered is True
    c.close()


@pytest.mark.rabbitmq_version("4.3")
def test_classic_queues_time_nothing_out(broker: Target) -> None:
    c = connect(broker)
    q = declare(c, broker, "classic")
    broker.set_policy(q + "-ct", anchored(q), {"consumer-timeout": 1000})
    consume(c, q)
    deliver(c, q)
    c.publish(1, "", q, b"g")
    # the fake moves a whole day; the real broker is given 2 s (it would have acted after 1 s)
    if broker.is_fake:
        broker.advance(86400)
        assert [f for f in c.quiet(0.05) if f.type == 1 and f.name != "Basic.Deliver"] == []
    else:
        assert [f for f in c.quiet(2.0) if f.type == 1 and f.name != "Basic.Deliver"] == []
    c.close()


@pytest.mark.rabbitmq_version("4.3")
def test_zero_timeout_cancels_at_once(broker: Target) -> None:
    c = connect(broker)
    q = declare(c, broker)
    consume(c, q, **{"x-consumer-timeout": 0})
    deliver(c, q)
    # due at the moment of the delivery: the fake fires it when the clock next moves (advance(0))
    assert expect(broker, c, "Basic.Cancel", 0).name == "Basic.Cancel"
    c.close()


# -- x-consumer-timeout as a consumer argument ---------------------------------------------------------------


@for_versions("3.10", "4.0", "4.3")
@pytest.mark.parametrize(
    ("qtype", "value", "error"),
    [
        ("quorum", 1000, None),
        ("quorum", 0, None),
        ("quorum", -1, "invalid arg 'x-consumer-timeout' for {rs}: {{value_negative,-1}}"),
        ("quorum", "a", "invalid arg 'x-consumer-timeout' for {rs}: \"expected integer, got longstr\""),
        ("classic", 1000, "invalid arg 'x-consumer-timeout' for {rs} of queue type rabbit_classic_queue"),
        ("classic", "a", "invalid arg 'x-consumer-timeout' for {rs} of queue type rabbit_classic_queue"),
    ],
)
def test_consumer_argument(broker: Target, qtype: str, value: Any, error: str | None) -> None:
    """4.3 knows ``x-consumer-timeout`` as a quorum consumer argument; before, no queue type does (accepted and
    ignored: 3.10.8 and 4.0.5 live)."""
    c = connect(broker)
    q = declare(c, broker, qtype)
    f = c.rpc(1, spec.Basic.Consume(queue=q, arguments={"x-consumer-timeout": value}), "Basic.ConsumeOk")
    if error is None or not broker.at_least("4.3"):
        assert f.name == "Basic.ConsumeOk", f
    else:
        assert f.name == "Channel.Close", f
        rs = f"queue '{q}' in vhost '/'"
        assert (f.method.reply_code, f.method.reply_text) == (406, "PRECONDITION_FAILED - " + error.format(rs=rs))
        assert (f.method.class_id, f.method.method_id) == (60, 20)
    c.close()


# -- up to 4.2: the channel's tick (live: opt-in, it takes a minute) ------------------------------------------

SLOW = os.environ.get("FAKERABBIT_SLOW_REAL") == "1"


@pytest.mark.rabbitmq_version("4.0")
@pytest.mark.timeout(200)
@pytest.mark.parametrize("how", ["consume", "get"])
def test_channel_tick_closes_the_channel_live(broker: Target, how: str) -> None:
    """4.0 - 4.2: a 1 000 ms ``consumer-timeout`` policy closes the channel at its first tick, 60 s after the
    channel opened (not 1 s after the delivery), for a consumer's delivery and a ``basic.get`` alike, with the
    policy's value in the text; the message comes back. Live only with FAKERABBIT_SLOW_REAL=1 (about 60 s)."""
    if not broker.is_fake and not SLOW:
        pytest.skip("waits for the channel tick (60 s): set FAKERABBIT_SLOW_REAL=1")
    c = connect(broker)
    q = declare(c, broker, "classic")
    broker.set_policy(q + "-ct", anchored(q), {"consumer-timeout": 1000})
    start = time.monotonic()
    if how == "consume":
        consume(c, q)
        deliver(c, q)
    else:
        c.publish(1, "", q, b"g")
        f = c.rpc(1, spec.Basic.Get(queue=q, no_ack=False), "Basic.GetOk")
        assert f.name == "Basic.GetOk", f
        c.get_message(1)
    if broker.is_fake:
        assert frames_during(broker, c, 59.9) == []
        broker.advance(0.1)
        close = c.expect_close()
    else:
        close = c.expect_close(timeout=80)
        assert 55 < time.monotonic() - start < 70
    assert (close.reply_code, close.reply_text, close.class_id, close.method_id) == (
        406,
        TIMED_OUT.format(ch=1, ms=1000),
        0,
        0,
    )
    c.close_ok(1)
    assert counts(broker, c, q)[0] == 1
    c.close()
