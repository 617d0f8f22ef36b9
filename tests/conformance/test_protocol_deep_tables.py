"""Field tables nested thousands deep (issue 11): RabbitMQ accepts any depth tried (5,000 levels) in start-ok client
properties, method arguments and message headers, and gives the octets back unchanged. fakerabbit decodes and
re-encodes them without the Python stack (fakerabbit/broker/fields.py, fakerabbit/protocol/codec.py)."""

from __future__ import annotations

import struct

import pytest
from pika import spec

from tests.conformance.conftest import Target
from tests.rawamqp import HEADER, RawAMQP, body_frame, frame, method_frame

DEPTH = 5000
#: start-ok must fit the frame_max before tune (4096): RabbitMQ's Python-stack limit was at about 490 levels
HANDSHAKE_DEPTH = 550


def nested(depth: int, *, arrays: bool = False) -> bytes:
    """A field value: a table (or array) holding a table (array) ... ``depth`` levels in all."""
    inner = struct.pack(">I", 0)
    for _ in range(depth - 1):
        inner = struct.pack(">I", len(inner) + (1 if arrays else 3)) + (b"A" if arrays else b"\x01tF") + inner
    return (b"A" if arrays else b"F") + inner


def table(**fields: bytes) -> bytes:
    body = b"".join(bytes([len(k)]) + k.encode() + v for k, v in fields.items())
    return struct.pack(">I", len(body)) + body


def start_ok_payload(client_properties: bytes) -> bytes:
    response = b"\x00guest\x00guest"
    return (
        struct.pack(">HH", 10, 11)
        + client_properties
        + b"\x05PLAIN"
        + struct.pack(">I", len(response))
        + response
        + b"\x05en_US"
    )


@pytest.mark.parametrize("arrays", [False, True], ids=["tables", "arrays"])
def test_deep_client_properties_log_in(broker: Target, arrays: bool) -> None:
    c = RawAMQP.socket_to(broker.url)
    c.send(HEADER)
    assert c.read_frame() is not None
    props = table(product=b"S" + struct.pack(">I", 4) + b"deep", deep=nested(HANDSHAKE_DEPTH, arrays=arrays))
    c.send(frame(1, 0, start_ok_payload(props)))
    tune = c.read_frame()
    assert tune is not None and tune.name == "Connection.Tune"
    c.sock.close()


def _publish_raw(channel: int, queue: str, headers: bytes, body: bytes) -> bytes:
    props = struct.pack(">H", 0x2000) + headers  # headers only
    return (
        method_frame(channel, spec.Basic.Publish(exchange="", routing_key=queue))
        + frame(2, channel, struct.pack(">HHQ", 60, 0, len(body)) + props)
        + body_frame(channel, body)
    )


def test_deep_headers_come_back_unchanged(broker: Target) -> None:
    q = broker.name()
    c = RawAMQP.connect(broker.url)
    c.open_channel(1)
    c.rpc(1, spec.Queue.Declare(queue=q), "Queue.DeclareOk")
    deep, arr = nested(DEPTH), nested(DEPTH, arrays=True)
    headers = table(deep=deep, arr=arr)
    c.send(_publish_raw(1, q, headers, b"body"))
    c.rpc(1, spec.Basic.Get(queue=q, no_ack=True), "Basic.GetOk")
    head = c.read_frame()
    assert head is not None and head.type == 2
    props = head.payload[12:]
    # (4.x re-encodes the headers table with its keys sorted; each value comes back octet for octet)
    assert len(props) == 2 + len(headers) and b"\x04deep" + deep in props and b"\x03arr" + arr in props
    body = c.read_frame()
    assert body is not None and body.payload == b"body"
    c.send_method(1, spec.Queue.Delete(queue=q))
    c.close()


def test_deep_headers_are_dead_lettered_unchanged(broker: Target) -> None:
    """Dead-lettering decodes and re-encodes the headers (x-death is added)."""
    q, dlq = broker.name(), broker.name("dlq")
    c = RawAMQP.connect(broker.url)
    c.open_channel(1)
    c.rpc(1, spec.Queue.Declare(queue=dlq), "Queue.DeclareOk")
    args = {"x-dead-letter-exchange": "", "x-dead-letter-routing-key": dlq}
    c.rpc(1, spec.Queue.Declare(queue=q, arguments=args), "Queue.DeclareOk")
    deep = nested(DEPTH)
    c.send(_publish_raw(1, q, table(deep=deep), b"body"))
    get = c.rpc(1, spec.Basic.Get(queue=q, no_ack=False), "Basic.GetOk")
    c.read_frame()  # header and body (read raw: pika's own table decoder recurses)
    c.read_frame()
    c.send_method(1, spec.Basic.Reject(get.method.delivery_tag, requeue=False))
    for _ in range(50):
        got = c.rpc(1, spec.Basic.Get(queue=dlq, no_ack=True), "Basic.GetOk", "Basic.GetEmpty")
        if got.name == "Basic.GetOk":
            break
    assert got.name == "Basic.GetOk"
    head = c.read_frame()
    assert head is not None and head.type == 2
    assert b"\x04deep" + deep in head.payload  # the deep value is still there, octet for octet
    assert b"x-death" in head.payload
    c.read_frame()
    c.send_method(1, spec.Queue.Delete(queue=q))
    c.send_method(1, spec.Queue.Delete(queue=dlq))
    c.close()


def test_deep_queue_arguments_are_accepted(broker: Target) -> None:
    q = broker.name()
    c = RawAMQP.connect(broker.url)
    c.open_channel(1)
    args = table(**{"x-app-deep": nested(DEPTH)})
    declare = struct.pack(">HHH", 50, 10, 0) + bytes([len(q)]) + q.encode() + b"\x00" + args
    c.send(frame(1, 1, declare))
    assert c.wait("Queue.DeclareOk").name == "Queue.DeclareOk"
    c.send(frame(1, 1, declare))  # an equivalent redeclare
    assert c.wait("Queue.DeclareOk").name == "Queue.DeclareOk"
    c.send_method(1, spec.Queue.Delete(queue=q))
    c.close()
