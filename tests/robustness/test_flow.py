"""Publisher flow control: the memory high watermark blocks publishers with ``connection.blocked`` and unblocks
them below it, as RabbitMQ's memory alarm does; alarms raised by hand; a blocked connection is not dropped for the
heartbeats it cannot send. (TCP back-pressure towards a consumer that stops reading: test_slow_consumer.py.)"""

from __future__ import annotations

import time

import pika
import pytest
from pika import spec

from fakerabbit import FakeRabbit
from tests.rawamqp import RawAMQP

BODY = b"x" * 10_000


def ready(rabbit: FakeRabbit, q: str) -> int:
    return rabbit._call(lambda: rabbit._broker.vhost("/").queues[q].ready_count)


def test_memory_watermark_blocks_publishers_and_unblocks_them() -> None:
    with FakeRabbit(clock="system", memory_high_watermark=200_000) as rabbit:
        pub = RawAMQP.connect(rabbit.url)  # announces the connection.blocked capability
        pub.open_channel(1)
        pub.rpc(1, spec.Queue.Declare(queue="big"), "Queue.DeclareOk")
        consumer_only = RawAMQP.connect(rabbit.url)
        consumer_only.open_channel(1)
        consumer_only.rpc(1, spec.Queue.Declare(queue="big", passive=True), "Queue.DeclareOk")
        sent = 0
        blocked = None
        while blocked is None and sent < 100:  # 10 KB each: the alarm goes off after 20
            pub.publish(1, "", "big", BODY)
            sent += 1
            frames = pub.quiet(0.01)
            blocked = next((f for f in frames if f.name == "Connection.Blocked"), None)
        assert blocked is not None and (blocked.channel, blocked.method.reason) == (0, "low on memory")
        assert 20 <= sent <= 25
        time.sleep(0.2)
        held = ready(rabbit, "big")
        assert held < sent  # the broker stopped reading this connection: its last publish is not in
        pub.publish(1, "", "big", b"held back")
        time.sleep(0.1)
        assert ready(rabbit, "big") == held
        # a connection that does not publish is served, and is never told about the alarm
        f = consumer_only.rpc(1, spec.Queue.Declare(queue="big", passive=True), "Queue.DeclareOk")
        assert f.method.message_count == held
        assert consumer_only.quiet(0.1) == []
        consumer_only.rpc(1, spec.Queue.Purge(queue="big"), "Queue.PurgeOk")
        assert pub.wait("Connection.Unblocked").channel == 0
        pub.rpc(1, spec.Basic.Qos(0, 1, False), "Basic.QosOk")  # reading again: the held publishes went in first
        assert ready(rabbit, "big") == sent - held + 1
        bodies = []
        for _ in range(sent - held + 1):
            consumer_only.rpc(1, spec.Basic.Get(queue="big", no_ack=True), "Basic.GetOk")
            bodies.append(consumer_only.get_message(1).body)
        assert bodies[-1] == b"held back"
        pub.close()
        consumer_only.close()


def test_pika_sees_blocked_and_unblocked() -> None:
    with FakeRabbit(clock="system", memory_high_watermark=50_000) as rabbit:
        conn = pika.BlockingConnection(pika.URLParameters(rabbit.url))
        events: list[str] = []
        conn.add_on_connection_blocked_callback(lambda c, m: events.append(f"blocked:{m.method.reason}"))
        conn.add_on_connection_unblocked_callback(lambda c, m: events.append("unblocked"))
        ch = conn.channel()
        ch.queue_declare("q")
        for _ in range(6):
            ch.basic_publish("", "q", BODY)
        assert ch.queue_declare("q", passive=True).method.message_count == 6  # 60 KB: the alarm is on now
        ch.basic_publish("", "q", b"one more")  # this one finds the alarm on
        deadline = time.monotonic() + 5
        while not events and time.monotonic() < deadline:
            conn.process_data_events(time_limit=0.05)
        assert events == ["blocked:low on memory"]
        other = pika.BlockingConnection(pika.URLParameters(rabbit.url))
        other.channel().queue_purge("q")
        while len(events) < 2 and time.monotonic() < deadline:
            conn.process_data_events(time_limit=0.05)
        assert events == ["blocked:low on memory", "unblocked"]
        assert ch.queue_declare("q", passive=True).method.message_count == 1  # "one more" went in after
        other.close()
        conn.close()


def test_alarm_raised_by_hand_blocks_until_cleared() -> None:
    with FakeRabbit(clock="system") as rabbit:
        pub = RawAMQP.connect(rabbit.url)
        pub.open_channel(1)
        rabbit.set_alarm("disk", True)
        pub.publish(1, "amq.direct", "nowhere")
        f = pub.wait("Connection.Blocked")
        assert f.method.reason == "low on disk"
        rabbit.set_alarm("memory", True)
        assert pub.quiet(0.1) == []  # blocked once, whatever else goes off
        rabbit.set_alarm("disk", False)
        assert pub.quiet(0.1) == []  # still low on memory
        rabbit.set_alarm("memory", False)
        assert pub.wait("Connection.Unblocked").name == "Connection.Unblocked"
        with pytest.raises(ValueError):
            rabbit.set_alarm("cpu", True)
        pub.close()


def test_blocked_connection_is_not_dropped_for_missed_heartbeats() -> None:
    with FakeRabbit(clock="system") as rabbit:
        pub = RawAMQP.connect(rabbit.url, heartbeat=1)
        pub.open_channel(1)
        rabbit.set_alarm("memory", True)
        pub.publish(1, "amq.direct", "nowhere")
        assert pub.wait("Connection.Blocked").name == "Connection.Blocked"
        deadline = time.monotonic() + 4
        while time.monotonic() < deadline:
            pub.quiet(0.5)  # we send nothing; the broker does not read us anyway
            assert not pub.eof
        rabbit.set_alarm("memory", False)
        assert pub.wait("Connection.Unblocked").name == "Connection.Unblocked"
        pub.close()
