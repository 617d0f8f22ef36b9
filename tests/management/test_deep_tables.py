"""Tables nested far deeper than Python's recursion limit (RabbitMQ accepts thousands of levels over AMQP) come
back through the management API as JSON: a connection's client properties and a message's headers, never a 500."""

from __future__ import annotations

import struct

from pika import spec

from tests.conformance.test_protocol_deep_tables import (
    HANDSHAKE_DEPTH,
    _publish_raw,
    nested,
    start_ok_payload,
    table,
)
from tests.management.conftest import Api, q
from tests.rawamqp import HEADER, RawAMQP, frame

DEPTH = 3000

#: The server runs in this process: the test must not raise the recursion limit, so it reads the JSON as text.


def _depth(text: str, key: str) -> int:
    """How deep a chain of one-key objects ``{"key":{"key":…{}…}}`` at the start of ``text`` goes."""
    n, opener = 0, '{"' + key + '":'
    while text.startswith(opener, n * len(opener)):
        n += 1
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
        answer = api.poll(lambda: api.request("GET", "/api/connections"), lambda a: a.status == 200 and name in a.text)
        assert answer.status == 200, answer.text[:300]
        assert answer.text.count(f'"connection_name":"{name}"') == 1
        # a table holding a table ... under the key "t": HANDSHAKE_DEPTH levels from "deep" on
        text = answer.text.replace(" ", "")
        assert _depth(text[text.index('"deep":') + len('"deep":') :], "t") == HANDSHAKE_DEPTH - 1
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
        text = a.text.replace(" ", "")
        assert text.count('"payload":"body"') == 1
        assert _depth(text[text.index('"deep":') + len('"deep":') :], "t") == DEPTH - 1
    finally:
        c.close()
