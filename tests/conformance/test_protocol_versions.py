"""The wire rules that changed between releases (fakerabbit.broker.profile.AMQPRules), checked with the fake in
each profile against the live broker of that version: 3.10.8, 4.0.5, 4.3.6 (the other protocol tests run the fake
only in its default profile)."""

from __future__ import annotations

import struct

import pytest
from pika import spec

from tests.conformance.conftest import Target
from tests.rawamqp import HEADER, RawAMQP, body_frame, frame, method_frame

SASL_HEADER = b"AMQP\x03\x01\x00\x00"


def _close(c: RawAMQP) -> tuple[int, int, str | bytes, int, int]:
    close = c.expect_close()
    return (close.channel, close.reply_code, close.reply_text, close.class_id, close.method_id)


def check_wire_rules(broker: Target) -> None:
    # the header offered when a client's is refused
    c = RawAMQP.socket_to(broker.url)
    c.send(b"HTTP/1.1")
    assert c.read_raw(timeout=3) == (SASL_HEADER if broker.at_least("4.0") else HEADER)
    c.sock.close()

    # ~p or ~tp in texts
    c = RawAMQP.connect(broker.url)
    text = 'UNEXPECTED_FRAME - type 3, all octets = <<"ét"/utf8>>' if broker.at_least("3.12") else None
    c.send(body_frame(0, "ét".encode()))
    got = _close(c)
    assert got[:2] == (0, 505)
    if text is not None:
        assert got[2] == text
    else:
        assert got[2] == 'UNEXPECTED_FRAME - type 3, all octets = <<"ét">>'  # the raw octets (UTF-8 here)
    c.sock.close()

    # delivery mode 3
    q = broker.name()
    c = RawAMQP.connect(broker.url)
    c.open_channel(1)
    c.rpc(1, spec.Queue.Declare(queue=q), "Queue.DeclareOk")
    c.send(
        method_frame(1, spec.Basic.Publish(exchange="", routing_key=q))
        + frame(2, 1, struct.pack(">HHQ", 60, 0, 1) + bytes([0x10, 0, 3]))
        + body_frame(1, b"x")
    )
    if broker.at_least("4.0"):
        assert c.rpc(1, spec.Basic.Qos(0, 1, False), "Basic.QosOk").name == "Basic.QosOk"
    else:
        assert _close(c) == (1, 406, "PRECONDITION_FAILED - invalid message: {delivery_mode_unknown,3}", 60, 40)
        c.close_ok(1)
        c.open_channel(1)

    # basic.credit
    c.send(frame(1, 1, struct.pack(">HHB", 60, 200, 2) + b"zz" + struct.pack(">IB", 10, 0)))
    if broker.at_least("4.0"):
        assert _close(c) == (0, 503, "COMMAND_INVALID - unimplemented method", 60, 200)
    else:
        assert _close(c) == (1, 406, "PRECONDITION_FAILED - unknown consumer tag 'zz'", 60, 200)
    c.sock.close()

    # a client's basic.cancel-ok for a consumer it has
    c = RawAMQP.connect(broker.url)
    c.open_channel(1)
    c.send_method(1, spec.Basic.Consume(queue=q, consumer_tag="c1"))
    c.wait("Basic.ConsumeOk")
    c.send_method(1, spec.Basic.CancelOk("c1"))
    if broker.at_least("4.3"):  # the consumer goes quietly: a message published now stays in the queue
        assert c.rpc(1, spec.Basic.Qos(0, 1, False), "Basic.QosOk").name == "Basic.QosOk"
        c.publish(1, "", q, b"after")
        got_ok = c.rpc(1, spec.Basic.Get(queue=q, no_ack=True), "Basic.GetOk", "Basic.GetEmpty", "Basic.Deliver")
        assert got_ok.name == "Basic.GetOk"
        c.get_message(1)
        c.send_method(1, spec.Queue.Delete(queue=q))
        c.close()
    else:
        assert _close(c) == (0, 503, "COMMAND_INVALID - unimplemented method", 60, 31)
        c.sock.close()
        c = RawAMQP.connect(broker.url)
        c.open_channel(1)
        c.send_method(1, spec.Queue.Delete(queue=q))
        c.close()

    # frame_max 4096 in tune-ok
    c = RawAMQP.connect(broker.url, frame_max=4096, open=False)
    c.send_method(0, spec.Connection.Open("/"))
    f = c.read_frame(timeout=4.5)
    if broker.at_least("4.1"):
        assert f is None
    else:
        assert f is not None and f.name == "Connection.OpenOk"
    c.sock.close()


@pytest.mark.rabbitmq_version("3.10")
def test_wire_rules_3_10(broker: Target) -> None:
    check_wire_rules(broker)


@pytest.mark.rabbitmq_version("4.0")
def test_wire_rules_4_0(broker: Target) -> None:
    check_wire_rules(broker)


@pytest.mark.rabbitmq_version("4.3")
def test_wire_rules_4_3(broker: Target) -> None:
    check_wire_rules(broker)


def check_header_order(broker: Target) -> None:
    """4.x re-encodes the headers table of what it delivers with its keys sorted, each once (``lists:usort``
    keeps the first of a repeated key); 3.10 sends the block as it was published."""
    q = broker.name()
    c = RawAMQP.connect(broker.url)
    c.open_channel(1)
    c.rpc(1, spec.Queue.Declare(queue=q), "Queue.DeclareOk")
    entries = [(b"b", 1), (b"a", 2), (b"b", 3), (b"\xc3\xa9", 4), (b"Z", 5)]
    body = b"".join(bytes([len(k)]) + k + b"I" + struct.pack(">i", v) for k, v in entries)
    props = struct.pack(">H", 0xA000) + b"\x04text" + struct.pack(">I", len(body)) + body
    c.send(
        method_frame(1, spec.Basic.Publish(exchange="", routing_key=q))
        + frame(2, 1, struct.pack(">HHQ", 60, 0, 1) + props)
        + body_frame(1, b"x")
    )
    c.rpc(1, spec.Basic.Get(queue=q, no_ack=False), "Basic.GetOk")
    head = c.read_frame()
    assert head is not None and head.type == 2
    c.read_frame()
    if broker.at_least("4.0"):
        expect = [(b"Z", 5), (b"a", 2), (b"b", 1), (b"\xc3\xa9", 4)]
        body = b"".join(bytes([len(k)]) + k + b"I" + struct.pack(">i", v) for k, v in expect)
        props = struct.pack(">H", 0xA000) + b"\x04text" + struct.pack(">I", len(body)) + body
    assert head.payload[12:] == props
    c.send_method(1, spec.Basic.Recover(requeue=True))  # a redelivery is sent the same way
    c.wait("Basic.RecoverOk")
    c.send_method(1, spec.Basic.Consume(queue=q, consumer_tag="c"))
    c.wait("Basic.Deliver")
    head = c.read_frame()
    assert head is not None and head.payload[12:] == props
    c.send_method(1, spec.Queue.Delete(queue=q))
    c.close()


@pytest.mark.rabbitmq_version("3.10")
def test_header_order_3_10(broker: Target) -> None:
    check_header_order(broker)


@pytest.mark.rabbitmq_version("4.0")
def test_header_order_4_0(broker: Target) -> None:
    check_header_order(broker)


@pytest.mark.rabbitmq_version("4.3")
def test_header_order_4_3(broker: Target) -> None:
    check_header_order(broker)
