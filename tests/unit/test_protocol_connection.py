"""A whole ``AMQPConnection`` (reader, channel 0, dispatcher, error handling, throttle, writer) driven through a
fake transport: bytes in by ``data_received``, frames out of what it wrote. No socket, no server thread."""

from __future__ import annotations

import asyncio

import pytest
from pika import spec

from tests.unit.protocol_harness import HEADER, Client, content, frame, method, publish

pytestmark = pytest.mark.asyncio  # the connection sets timers on the running loop (handshake, closing)


async def test_the_handshake() -> None:
    c = Client("4.3")
    c.send(HEADER)
    ((ch, start),) = c.methods()
    assert (ch, start.NAME, start.version_major, start.version_minor) == (0, "Connection.Start", 0, 9)
    props = start.server_properties
    assert (props["version"], props["platform"]) == ("4.3.0", "Erlang/OTP 27.3")
    assert c.conn.state == "starting"
    c.send(
        method(
            0,
            spec.Connection.StartOk(
                client_properties={"capabilities": {"connection.blocked": True}, "product": "t"},
                mechanism="PLAIN",
                response="\0guest\0guest",
            ),
        )
    )
    ((_, tune),) = c.methods()
    assert (tune.channel_max, tune.frame_max, tune.heartbeat) == (2047, 131072, 60)
    assert (c.conn.state, c.conn.user, c.conn.client_properties["product"]) == ("tuning", "guest", "t")
    assert c.conn.blocked_capable
    c.send(method(0, spec.Connection.TuneOk(channel_max=10, frame_max=8192, heartbeat=0)))
    assert (c.conn.state, c.conn.channel_max, c.conn.frame_max, c.conn.reader.frame_max) == ("opening", 10, 8192, 8192)
    c.send(method(0, spec.Connection.Open(virtual_host="/")))
    assert c.names() == ["Connection.OpenOk"]
    assert c.conn.state == "running" and c.conn.info is not None
    assert c.broker.connections[c.conn.info.id] is c.conn.info


async def test_server_properties_by_version() -> None:
    c = Client("3.10")
    c.send(HEADER)
    ((_, start),) = c.methods()
    assert start.server_properties["version"] == "3.10.8"
    assert start.server_properties["copyright"].startswith("Copyright (c) 2007-2022 VMware")


async def test_a_refused_header_is_answered_and_closed() -> None:
    c = Client("4.3")
    c.send(b"AMQP\x01\x01\x00\x0a")
    assert bytes(c.transport.out) == b"AMQP\x03\x01\x00\x00"  # 4.x offers AMQP 1.0 with SASL
    assert c.transport.closed and c.conn.closed


async def test_a_chunk_is_answered_in_one_write() -> None:
    c = Client().open()
    writes = c.transport.writes
    c.send(
        method(1, spec.Channel.Open())
        + method(1, spec.Queue.Declare(queue="q"))
        + method(1, spec.Basic.Qos(prefetch_count=5))
    )
    assert c.transport.writes == writes + 1
    assert c.names() == ["Channel.OpenOk", "Queue.DeclareOk", "Basic.QosOk"]


async def test_confirms_of_a_chunk_are_coalesced() -> None:
    c = Client().open()
    c.channel()
    c.send(method(1, spec.Confirm.Select()), method(1, spec.Queue.Declare(queue="q")))
    c.methods()
    c.send(*(publish(1, "q", b"m") for _ in range(3)))
    assert [(m.NAME, m.delivery_tag, m.multiple) for _, m in c.methods()] == [("Basic.Ack", 3, True)]


async def test_channel_max_counts_channels_from_their_first_frame() -> None:
    c = Client().open(channel_max=1)
    c.channel(1)
    c.send(method(2, spec.Channel.Open()))
    assert c.close_text() == (
        530,
        "NOT_ALLOWED - number of channels opened (1) has reached the negotiated channel_max (1)",
        0,
        0,
    )
    assert c.conn.state == "closed" and c.conn.channels == {}


async def test_a_channel_close_ok_goes_out_after_the_chunk_and_frees_the_number() -> None:
    c = Client().open()
    c.channel(1)
    c.send(method(1, spec.Channel.Close(reply_code=200, reply_text="", class_id=0, method_id=0)))
    assert c.names() == ["Channel.CloseOk"]
    assert 1 not in c.conn.channels and c.conn.info is not None and 1 not in c.conn.info.sessions
    c.channel(1)  # the number is free again


async def test_a_frame_error_found_by_the_reader_wins_over_a_channel_error() -> None:
    """The reader's error for a later frame of the chunk beats a hard error a channel raised for an earlier one
    (RabbitMQ's channels run after its reader); the channel's soft replies still go first."""
    c = Client("3.10").open()
    c.channel()
    bad_end = frame(1, 1, b"\x00\x14\x00\x0a\x00", end=b"\x00")
    c.send(method(1, spec.Channel.Flow(active=False)) + bad_end)
    code, text, class_id, method_id = c.close_text()
    assert (code, class_id, method_id) == (501, 0, 0)
    assert text == "FRAME_ERROR - type 1, all octets = <<0,20,0,10,0>>: {invalid_frame_end_marker,0}"
    assert c.conn.stopped and not c.transport.reading  # the socket goes after the silent-close delay


async def test_a_channel_hard_error() -> None:
    c = Client().open()
    c.channel()
    c.send(method(1, spec.Channel.Flow(active=False)))
    assert c.close_text() == (540, "NOT_IMPLEMENTED - active=false", 20, 20)
    assert c.conn.state == "closed" and not c.conn.stopped  # waiting for close-ok
    c.send(method(1, spec.Channel.Open()))  # ignored in the closing state
    c.send(method(0, spec.Connection.CloseOk()))
    assert c.transport.closed and c.conn.closed
    await asyncio.sleep(0)
    assert c.listener.connections == set()  # connection_lost came


async def test_an_unknown_method_drops_the_connection_without_a_close() -> None:
    c = Client().open()
    c.channel()
    c.send(frame(1, 1, b"\x00\x3c\x00\x63"))
    assert c.frames() == [] and c.transport.closed
    assert c.broker.problems and "unknown method class 60 method 99" in c.broker.problems[-1]


async def test_frames_before_open_are_unexpected() -> None:
    c = Client()
    c.send(HEADER)
    c.methods()
    c.send(method(1, spec.Channel.Open()))
    assert c.frames() == []  # during the handshake: no close frame, a silent close
    assert c.conn.stopped


async def test_content_on_channel_0_is_unexpected() -> None:
    c = Client("3.10").open()
    c.send(content(0, b"x"))
    code, text, _, _ = c.close_text()
    assert (code, text) == (505, "UNEXPECTED_FRAME - type 2, all octets = <<0,60,0,0,0,0,0,0,0,0,0,1,0,0>>")


async def test_client_close() -> None:
    c = Client().open()
    c.channel()
    c.send(method(1, spec.Queue.Declare(queue="x", exclusive=True)))
    c.methods()
    c.send(method(0, spec.Connection.Close(reply_code=200, reply_text="bye", class_id=0, method_id=0)))
    assert c.names() == ["Connection.CloseOk"]
    assert c.conn.state == "closed" and "x" not in c.broker.vhost("/").queues  # the broker side is gone


async def test_close_by_server_and_force_close() -> None:
    c = Client().open()
    c.channel()
    assert c.conn.info is not None and c.conn.info.close is not None
    c.conn.info.close(320, "bye")
    assert c.close_text() == (320, "CONNECTION_FORCED - bye", 0, 0)
    d = Client().open()
    d.channel()
    d.conn.force_close("broker forced connection closure with reason 'shutdown'")
    d.conn.flush()
    assert d.close_text()[:2] == (320, "CONNECTION_FORCED - broker forced connection closure with reason 'shutdown'")
    assert d.conn.channels == {} and d.conn.info is None


async def test_a_publisher_is_blocked_by_an_alarm_and_resumes_where_it_stopped() -> None:
    c = Client().open()
    c.channel()
    c.send(method(1, spec.Queue.Declare(queue="q")))
    c.methods()
    c.listener.alarms.set_alarm("memory", True)
    c.send(publish(1, "q", b"one") + publish(1, "q", b"two"))
    assert c.names() == ["Connection.Blocked"]
    assert not c.transport.reading and c.conn.throttle.blocked
    queue = c.broker.vhost("/").queues["q"]
    assert queue.ready_count == 0  # the reader stopped at the first content frame under the alarm
    c.listener.alarms.set_alarm("memory", False)
    c.conn.flush()
    assert c.names() == ["Connection.Unblocked"]
    assert c.transport.reading and queue.ready_count == 2  # what was buffered is handled now


async def test_back_pressure_holds_deliveries() -> None:
    c = Client().open()
    c.channel()
    c.send(method(1, spec.Queue.Declare(queue="q")), publish(1, "q", b"m"))
    c.methods()
    c.conn.pause_writing()
    c.send(method(1, spec.Basic.Consume(queue="q", consumer_tag="t", no_ack=True)))
    assert c.names() == ["Basic.ConsumeOk"]
    c.conn.resume_writing()
    assert c.names() == ["Basic.Deliver"]


async def test_connection_lost_releases_everything() -> None:
    c = Client().open()
    c.channel()
    c.send(method(1, spec.Queue.Declare(queue="q", exclusive=True)))
    c.send(method(1, spec.Basic.Publish(routing_key="q")) + frame(2, 1, bytes(12))[:-3])  # a frame cut short
    assert c.conn.reader.pending() > 0
    c.conn.connection_lost(None)
    assert c.conn.closed and c.conn.channels == {} and c.conn.reader.pending() == 0
    assert c.broker.connections == {} and "q" not in c.broker.vhost("/").queues
    assert c.listener.connections == set()
