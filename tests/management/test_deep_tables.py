"""Tables nested far deeper than Python's recursion limit (RabbitMQ accepts thousands of levels over AMQP) come
back through the management API as JSON: a connection's client properties and a message's headers, never a 500."""

from __future__ import annotations

import json
import struct
import sys
from collections.abc import Iterator

import pytest
from pika import spec

from tests.conformance.rawamqp import HEADER, RawAMQP, frame
from tests.conformance.test_protocol_deep_tables import (
    HANDSHAKE_DEPTH,
    _publish_raw,
    nested,
    start_ok_payload,
    table,
)
from tests.management.conftest import Api, q

DEPTH = 3000


@pytest.fixture(autouse=True)
def deep_json() -> Iterator[None]:
    """The test's own JSON parser (the stdlib's) recurses per level."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 4 * DEPTH))
    yield
    sys.setrecursionlimit(limit)


def _depth(value: object, key: str) -> int:
    n = 0
    while isinstance(value, dict) and key in value:
        value, n = value[key], n + 1
    return n


def test_deep_client_properties_are_listed(api: Api) -> None:
    c = RawAMQP.socket_to(api.amqp_url)
    c.send(HEADER)
    assert c.read_frame() is not None
    name = api.prefix + "deep"
    props = table(connection_name=b"S" + struct.pack(">I", len(name)) + name.encode(), deep=nested(HANDSHAKE_DEPTH))
    c.send(frame(1, 0, start_ok_payload(props)))
    tune = c.read_frame()
    assert tune is not None and tune.name == "Connection.Tune"
    c.send(frame(1, 0, struct.pack(">HHHIH", 10, 31, 2047, 131072, 0)))
    c.send(frame(1, 0, struct.pack(">HH", 10, 40) + b"\x01/" + b"\x00\x00"))
    assert c.wait("Connection.OpenOk").name == "Connection.OpenOk"
    try:
        answer = api.poll(
            lambda: api.request("GET", "/api/connections"),
            lambda a: (
                a.status == 200 and any(x.get("client_properties", {}).get("connection_name") == name for x in a.body)
            ),
        )
        assert answer.status == 200, answer.text[:300]
        mine = [x for x in answer.body if x.get("client_properties", {}).get("connection_name") == name]
        assert len(mine) == 1
        # a table holding a table ... under the key "t": HANDSHAKE_DEPTH levels below "deep"
        assert _depth(mine[0]["client_properties"]["deep"], "t") == HANDSHAKE_DEPTH - 1
    finally:
        c.sock.close()


def test_deep_headers_are_shown_by_get(api: Api) -> None:
    name = api.name()
    c = RawAMQP.connect(api.amqp_url)
    c.open_channel(1)
    c.rpc(1, spec.Queue.Declare(queue=name), "Queue.DeclareOk")
    c.send(_publish_raw(1, name, table(deep=nested(DEPTH)), b"body"))
    c.rpc(1, spec.Basic.Qos(prefetch_count=0), "Basic.QosOk")  # the publish has been handled
    try:
        api.queue(name, until=lambda x: x.get("messages") == 1)
        a = api.request(
            "POST", f"/api/queues/%2F/{q(name)}/get", {"count": 1, "ackmode": "ack_requeue_false", "encoding": "auto"}
        )
        assert a.status == 200, a.text[:300]
        msgs = json.loads(a.text)
        assert [m["payload"] for m in msgs] == ["body"]
        assert _depth(msgs[0]["properties"]["headers"]["deep"], "t") == DEPTH - 1
    finally:
        c.close()
