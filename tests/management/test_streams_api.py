"""Stream queues in the management API: declared with ``x-queue-type: stream``, shown as ``type: stream`` with the
statistics RabbitMQ 4.x keeps for a stream (offsets, no unacknowledged messages, no bytes; 3.10.8 shows only the
declare fields), and ``get`` / purge refused (checked against the live 3.10.8, 4.0.5 and 4.3.6)."""

from __future__ import annotations

from tests.management.conftest import Api, q

FAKE_PROFILES = ("3.10",)


def _msg(routing_key: str, payload: str) -> dict[str, object]:
    return {"properties": {}, "routing_key": routing_key, "payload": payload, "payload_encoding": "string"}


def test_stream_in_the_management_api(api: Api) -> None:
    name = api.name()
    path = f"/api/queues/%2F/{q(name)}"
    assert api.request("PUT", path, {"durable": True, "arguments": {"x-queue-type": "stream"}}).status == 201
    refused = api.request("PUT", path + "x", {"durable": False, "arguments": {"x-queue-type": "stream"}})
    assert (refused.status, refused.reason) == (400, f"invalid property 'non-durable' for queue '{name}x' in vhost '/'")
    for i in range(2):
        assert api.request("POST", "/api/exchanges/%2F/amq.default/publish", _msg(name, f"m{i}")).body == {
            "routed": True
        }
    if not api.at_least("4.0"):  # no statistics for a stream
        body = api.queue(name)
        assert body["type"] == "stream" and "messages" not in body and "message_bytes" not in body
        return
    body = api.queue(name, lambda b: b.get("messages") == 2)
    assert body["type"] == "stream"
    assert (body["messages"], body["messages_ready"], body["messages_unacknowledged"]) == (2, 2, 0)
    assert body["segments"] == 1 and body["consumers"] == 0
    assert body["members"] == body["online"] == [body["leader"]]
    assert "message_bytes" not in body and "exclusive_consumer_tag" not in body


def test_get_and_purge_refused(api: Api) -> None:
    name = api.name()
    path = f"/api/queues/%2F/{q(name)}"
    api.request("PUT", path, {"durable": True, "arguments": {"x-queue-type": "stream"}})
    api.request("POST", "/api/exchanges/%2F/amq.default/publish", _msg(name, "m"))
    got = api.request("POST", path + "/get", {"count": 1, "ackmode": "ack_requeue_true", "encoding": "auto"})
    assert (got.status, got.reason) == (
        400,
        f"540 basic.get not supported by stream queues queue '{name}' in vhost '/'",
    )
    purged = api.request("DELETE", path + "/contents")
    assert (purged.status, purged.reason) == (
        400,
        f"queue.purge not supported by stream queues queue '{name}' in vhost '/'",
    )
    assert api.request("DELETE", path + "?if-empty=true").status == 204  # the flags mean nothing to a stream
    assert api.request("GET", path).status == 404
