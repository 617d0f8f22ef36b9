"""Management API conformance: status codes, error bodies and the fields fakerabbit serves, checked against
fakerabbit and (when available) RabbitMQ's management plugin."""

from __future__ import annotations

from typing import Any

import pika
import pytest

from tests.management.conftest import Api, q


# -- auth, routing, methods ------------------------------------------------------------------------------------------
def test_missing_credentials_get_401_with_a_basic_challenge(api: Api) -> None:
    a = api.request("GET", "/api/overview", auth=None)
    assert a.status == 401
    assert a.headers["www-authenticate"] == 'Basic realm="RabbitMQ Management"'


def test_wrong_password_gets_login_failed(api: Api) -> None:
    a = api.request("GET", "/api/queues", auth=("guest", "not-the-password"))
    reason = "Not_Authorized" if api.at_least("4.0") else "Login failed"  # live 4.0.5/4.3.6 vs 3.10.8
    assert (a.status, a.body) == (401, {"error": "not_authorized", "reason": reason})
    # the challenge comes with a failed login on 3.10.8 only; 4.x sends it when credentials are missing
    assert ("www-authenticate" in a.headers) == (not api.at_least("4.0"))
    assert "www-authenticate" in api.request("GET", "/api/queues", auth=None).headers


def test_unknown_path_is_404_object_not_found(api: Api) -> None:
    a = api.request("GET", "/api/no-such-thing")
    assert (a.status, a.body) == (404, {"error": "Object Not Found", "reason": "Not Found"})


def test_wrong_method_is_405_with_allow(api: Api) -> None:
    name = api.name()
    assert api.request("PUT", f"/api/queues/%2F/{q(name)}", {}).status == 201
    a = api.request("POST", f"/api/queues/%2F/{q(name)}", {})
    assert a.status == 405
    assert {m.strip() for m in a.headers["allow"].split(",")} >= {"GET", "PUT", "DELETE"}
    assert api.request("GET", f"/api/queues/%2F/{q(name)}/contents").status == 405


def test_overview_names_the_product_and_counts_objects(api: Api) -> None:
    a = api.request("GET", "/api/overview")
    assert a.status == 200
    assert a.body["product_name"] == "RabbitMQ"
    assert a.body["rabbitmq_version"] == a.body["management_version"]
    assert {"queues", "exchanges", "connections", "channels", "consumers"} <= set(a.body["object_totals"])
    assert any(listener["protocol"] == "amqp" for listener in a.body["listeners"])


def test_whoami_users_and_permissions(api: Api) -> None:
    assert api.request("GET", "/api/whoami").body["name"] == "guest"
    users = {u["name"]: u for u in api.request("GET", "/api/users").body}
    assert "administrator" in users["guest"]["tags"]
    assert users["guest"]["hashing_algorithm"] == "rabbit_password_hashing_sha256"
    perm = api.request("GET", "/api/permissions/%2F/guest")
    assert perm.body == {"user": "guest", "vhost": "/", "configure": ".*", "write": ".*", "read": ".*"}


def test_health_checks_answer_ok(api: Api) -> None:
    assert api.request("GET", "/api/aliveness-test/%2F").body == {"status": "ok"}
    assert api.request("GET", "/api/health/checks/alarms").body == {"status": "ok"}
    assert api.request("GET", "/api/health/checks/virtual-hosts").status == 200


# -- queues ----------------------------------------------------------------------------------------------------------
def test_queue_declare_is_201_then_204_and_inequivalent_is_400(api: Api) -> None:
    name = api.name()
    path = f"/api/queues/%2F/{q(name)}"
    assert api.request("PUT", path, {"durable": False, "arguments": {"x-message-ttl": 1000}}).status == 201
    assert api.request("PUT", path, {"durable": False, "arguments": {"x-message-ttl": 1000}}).status == 204
    a = api.request("PUT", path, {"durable": True})
    assert a.status == 400
    assert a.body == {
        "error": "bad_request",
        "reason": f"inequivalent arg 'durable' for queue '{name}' in vhost '/': received 'true' but current is 'false'",
    }


def test_queue_fields(api: Api) -> None:
    name = api.name()
    api.request("PUT", f"/api/queues/%2F/{q(name)}", {"durable": True, "arguments": {"x-max-length": 5}})
    # RabbitMQ fills in the stats fields (messages, consumers) only after its next stats emission.
    body = api.queue(name, lambda b: "messages" in b and "consumers" in b)
    assert body["name"] == name and body["vhost"] == "/"
    assert (body["durable"], body["auto_delete"], body["exclusive"], body["type"]) == (True, False, False, "classic")
    assert body["arguments"]["x-max-length"] == 5
    assert (body["messages"], body["messages_ready"], body["messages_unacknowledged"], body["consumers"]) == (
        0,
        0,
        0,
        0,
    )
    assert body["policy"] is None and body["effective_policy_definition"] == {}
    assert body["consumer_details"] == []


def test_invalid_queue_argument_is_400_with_rabbitmq_reason(api: Api) -> None:
    name = api.name()
    a = api.request("PUT", f"/api/queues/%2F/{q(name)}", {"arguments": {"x-message-ttl": "abc"}})
    assert a.status == 400
    assert a.reason == f"invalid arg 'x-message-ttl' for queue '{name}' in vhost '/': \"expected integer, got longstr\""


def test_queue_in_missing_vhost(api: Api) -> None:
    a = api.request("PUT", f"/api/queues/{api.prefix}nosuchvhost/q", {})
    assert (a.status, a.body) == (404, {"error": "not_found", "reason": "vhost_not_found"})
    assert api.request("GET", f"/api/queues/{api.prefix}nosuchvhost").status == 404


def test_queue_body_that_is_not_json_is_400(api: Api) -> None:
    a = api.request("PUT", f"/api/queues/%2F/{q(api.name())}", raw=b"{not json")
    assert (a.status, a.body) == (400, {"error": "bad_request", "reason": "not_json"})


def test_delete_queue_and_missing_queue(api: Api) -> None:
    name = api.name()
    path = f"/api/queues/%2F/{q(name)}"
    api.request("PUT", path, {})
    assert api.request("DELETE", path).status == 204
    assert api.request("GET", path).status == 404
    assert api.request("DELETE", path).body == {"error": "Object Not Found", "reason": "Not Found"}


def test_delete_queue_if_empty(api: Api) -> None:
    name = api.name()
    path = f"/api/queues/%2F/{q(name)}"
    api.request("PUT", path, {})
    api.request("POST", "/api/exchanges/%2F/amq.default/publish", _msg(name, "x"))
    api.queue(name, lambda b: b.get("messages") == 1)
    a = api.request("DELETE", path + "?if-empty=true")
    assert (a.status, a.reason) == (400, f"queue '{name}' in vhost '/' not empty")
    assert api.request("DELETE", path + "?if-unused=true").status == 204


def test_quorum_queue_counts_held_dead_letters_in_messages(api: Api) -> None:
    """At-least-once dead letters the queue could not deliver (DLX "" back to itself: a cycle) are in
    ``messages`` and ``messages_dlx``, not in ``messages_ready``; purging leaves them up to 4.2 and purges them from
    4.3 (``rabbit_fifo`` ``dlx_purge``: the counts drop to 0, though the worker still holds them)."""
    name = api.name()
    args = {
        "x-queue-type": "quorum",
        "x-dead-letter-exchange": "",
        "x-dead-letter-strategy": "at-least-once",
        "x-overflow": "reject-publish",
    }
    api.request("PUT", f"/api/queues/%2F/{q(name)}", {"durable": True, "arguments": args})
    for i in range(2):
        api.request("POST", "/api/exchanges/%2F/amq.default/publish", _msg(name, f"m{i}", expiration="0"))
    # (the real API's statistics catch up field by field: wait for both counts)
    body = api.queue(name, lambda b: b.get("messages_dlx") == 2 and b.get("messages") == 2)
    assert (body["messages"], body["messages_ready"], body["messages_unacknowledged"]) == (2, 0, 0)
    assert body["messages_dlx"] == 2
    # 4.3 quorum queues count the property block too (2 flag octets + expiration "0": 4 more per message)
    size = 12 if api.at_least("4.3") else 4
    assert (body["message_bytes_dlx"], body["message_bytes"]) == (size, size)
    assert api.request("DELETE", f"/api/queues/%2F/{q(name)}/contents").status == 204
    left = 0 if api.at_least("4.3") else 2
    # (on 4.3 this waits for the broker's next statistics: the figures before the purge say 2)
    assert api.queue(name, lambda b: b.get("messages_dlx") == left and b.get("messages") == left)["messages"] == left


def test_purge_contents(api: Api) -> None:
    name = api.name()
    api.request("PUT", f"/api/queues/%2F/{q(name)}", {})
    for i in range(3):
        api.request("POST", "/api/exchanges/%2F/amq.default/publish", _msg(name, f"m{i}"))
    assert api.queue(name, lambda b: b.get("messages") == 3)["messages_ready"] == 3
    assert api.request("DELETE", f"/api/queues/%2F/{q(name)}/contents").status == 204
    assert api.queue(name, lambda b: b.get("messages") == 0)["messages"] == 0
    assert api.request("DELETE", f"/api/queues/%2F/{q(api.prefix)}none/contents").status == 404


# -- publish and get ---------------------------------------------------------------------------------------------------
def _msg(routing_key: str, payload: str, **properties: object) -> dict[str, object]:
    return {"properties": properties, "routing_key": routing_key, "payload": payload, "payload_encoding": "string"}


def test_publish_routed_and_unroutable(api: Api) -> None:
    name = api.name()
    api.request("PUT", f"/api/queues/%2F/{q(name)}", {})
    a = api.request("POST", "/api/exchanges/%2F/amq.default/publish", _msg(name, "hello"))
    assert (a.status, a.body) == (200, {"routed": True})
    a = api.request("POST", "/api/exchanges/%2F/amq.default/publish", _msg(api.prefix + "nobody", "hello"))
    assert (a.status, a.body) == (200, {"routed": False})


def test_publish_errors(api: Api) -> None:
    a = api.request("POST", "/api/exchanges/%2F/amq.default/publish", {"routing_key": "k", "payload": "x"})
    assert a.status == 400
    assert a.reason == "[{key_missing,properties},{key_missing,payload_encoding}]"
    a = api.request("POST", "/api/exchanges/%2F/amq.default/publish", {**_msg("k", "x"), "payload_encoding": "bogus"})
    assert (a.status, a.reason) == (400, ["unsupported_encoding", "bogus"])
    a = api.request("POST", "/api/exchanges/%2F/amq.default/publish", _msg("k", "x", delivery_mode="x"))
    assert (a.status, a.reason) == (400, ["not_int", "delivery_mode"])
    missing = api.prefix + "nox"
    a = api.request("POST", f"/api/exchanges/%2F/{q(missing)}/publish", _msg("k", "x"))
    if api.at_least("4.0"):  # live 4.0.5 and 4.3.6
        assert (a.status, a.body) == (404, {"error": "not_found", "reason": "exchange_not_found"})
    else:
        assert (a.status, a.reason) == (400, f"404 NOT_FOUND - no exchange '{missing}' in vhost '/'")


def test_get_requeue_keeps_messages_and_marks_them_redelivered(api: Api) -> None:
    name = api.name()
    api.request("PUT", f"/api/queues/%2F/{q(name)}", {})
    props = {"headers": {"a": 1, "s": "v"}, "content_type": "text/plain", "delivery_mode": 2, "message_id": "m1"}
    api.request("POST", "/api/exchanges/%2F/amq.default/publish", _msg(name, "first", **props))
    api.request("POST", "/api/exchanges/%2F/amq.default/publish", _msg(name, "second"))
    get = {"count": 5, "ackmode": "ack_requeue_true", "encoding": "auto"}
    a = api.request("POST", f"/api/queues/%2F/{q(name)}/get", get)
    assert a.status == 200
    first, second = a.body
    assert first == {
        "payload_bytes": 5,
        "redelivered": False,
        "exchange": "",
        "routing_key": name,
        "message_count": 1,
        "properties": props,
        "payload": "first",
        "payload_encoding": "string",
    }
    assert (second["message_count"], second["properties"]) == (0, [])  # no properties: RabbitMQ renders []
    again = api.request("POST", f"/api/queues/%2F/{q(name)}/get", {**get, "count": 1}).body
    assert (again[0]["payload"], again[0]["redelivered"]) == ("first", True)


def test_get_ack_removes_and_base64_encodes(api: Api) -> None:
    name = api.name()
    api.request("PUT", f"/api/queues/%2F/{q(name)}", {})
    api.request("POST", "/api/exchanges/%2F/amq.default/publish", {**_msg(name, "/w=="), "payload_encoding": "base64"})
    a = api.request(
        "POST", f"/api/queues/%2F/{q(name)}/get", {"count": 1, "ackmode": "ack_requeue_false", "encoding": "auto"}
    )
    assert (a.body[0]["payload"], a.body[0]["payload_encoding"], a.body[0]["payload_bytes"]) == ("/w==", "base64", 1)
    assert api.queue(name, lambda b: b.get("messages") == 0)["messages"] == 0


def test_get_reject_requeue_false_dead_letters(api: Api) -> None:
    name, dlq = api.name(), api.name("dlq")
    api.request("PUT", f"/api/queues/%2F/{q(dlq)}", {})
    args = {"x-dead-letter-exchange": "", "x-dead-letter-routing-key": dlq}
    api.request("PUT", f"/api/queues/%2F/{q(name)}", {"arguments": args})
    api.request("POST", "/api/exchanges/%2F/amq.default/publish", _msg(name, "doomed"))
    get = {"count": 1, "ackmode": "reject_requeue_false", "encoding": "auto"}
    api.request("POST", f"/api/queues/%2F/{q(name)}/get", get)
    api.queue(dlq, lambda b: b.get("messages") == 1)
    got = api.request("POST", f"/api/queues/%2F/{q(dlq)}/get", {**get, "ackmode": "ack_requeue_false"}).body
    death = got[0]["properties"]["headers"]["x-death"][0]
    assert (got[0]["payload"], death["reason"], death["queue"], death["count"]) == ("doomed", "rejected", name, 1)


def test_get_errors(api: Api) -> None:
    name = api.name()
    api.request("PUT", f"/api/queues/%2F/{q(name)}", {})
    a = api.request("POST", f"/api/queues/%2F/{q(name)}/get", {"count": 1})
    assert (a.status, a.reason) == (400, "[{key_missing,ackmode},{key_missing,encoding}]")
    missing = api.prefix + "none"
    a = api.request(
        "POST", f"/api/queues/%2F/{q(missing)}/get", {"count": 1, "ackmode": "ack_requeue_false", "encoding": "auto"}
    )
    if api.at_least("4.0"):  # live 4.0.5 and 4.3.6
        assert (a.status, a.body) == (404, {"error": "not_found", "reason": "queue_not_found"})
    else:
        assert (a.status, a.body) == (
            404,
            {"error": "not_found", "reason": f"NOT_FOUND - no queue '{missing}' in vhost '/'"},
        )


# -- exchanges ---------------------------------------------------------------------------------------------------------
def test_exchange_lifecycle(api: Api) -> None:
    name = api.name("x", "exchanges")
    path = f"/api/exchanges/%2F/{q(name)}"
    body = {"type": "topic", "durable": False, "arguments": {"alternate-exchange": "ae"}}
    assert api.request("PUT", path, body).status == 201
    assert api.request("PUT", path, body).status == 204
    a = api.request("PUT", path, {"type": "fanout"})
    assert (a.status, a.reason) == (
        400,
        f"inequivalent arg 'type' for exchange '{name}' in vhost '/': received 'fanout' but current is 'topic'",
    )
    got = api.request("GET", path).body
    assert {k: got[k] for k in ("name", "vhost", "type", "durable", "auto_delete", "internal", "arguments")} == {
        "name": name,
        "vhost": "/",
        "type": "topic",
        "durable": False,
        "auto_delete": False,
        "internal": False,
        "arguments": {"alternate-exchange": "ae"},
    }
    assert api.request("DELETE", path).status == 204
    assert api.request("DELETE", path).status == 404


def test_exchange_errors_and_reserved_names(api: Api) -> None:
    a = api.request("PUT", f"/api/exchanges/%2F/{q(api.name('x', 'exchanges'))}", {"type": "qwzzkx987"})
    assert (a.status, a.reason) == (400, "unknown exchange type 'qwzzkx987'")
    refused = {"error": "not_authorised", "reason": "Access refused."}
    assert api.request("PUT", "/api/exchanges/%2F/amq.foo", {"type": "direct"}).body == refused
    assert api.request("DELETE", "/api/exchanges/%2F/amq.direct").status == 401
    assert api.request("DELETE", "/api/exchanges/%2F/amq.default").status == 401
    default = api.request("GET", "/api/exchanges/%2F/amq.default").body
    assert (default["name"], default["type"], default["durable"]) == ("", "direct", True)
    names = {x["name"] for x in api.request("GET", "/api/exchanges/%2F").body}
    assert {"", "amq.direct", "amq.fanout", "amq.topic", "amq.headers", "amq.match"} <= names


# -- bindings ----------------------------------------------------------------------------------------------------------
def test_bindings(api: Api) -> None:
    x, queue = api.name("x", "exchanges"), api.name()
    api.request("PUT", f"/api/exchanges/%2F/{q(x)}", {"type": "topic"})
    api.request("PUT", f"/api/queues/%2F/{q(queue)}", {})
    pair = f"/api/bindings/%2F/e/{q(x)}/q/{q(queue)}"
    a = api.request("POST", pair, {"routing_key": "a.#"})
    assert (a.status, a.headers["location"]) == (201, f"{queue}/a.%2523")
    assert api.request("POST", pair, {}).headers["location"] == f"{queue}/~"
    listed = api.request("GET", pair).body
    assert {(b["routing_key"], b["properties_key"]) for b in listed} == {("a.#", "a.%23"), ("", "~")}
    assert listed[0].keys() == {
        "source",
        "vhost",
        "destination",
        "destination_type",
        "routing_key",
        "arguments",
        "properties_key",
    }
    one = api.request("GET", pair + "/a.%2523").body
    assert (one["source"], one["destination"], one["destination_type"]) == (x, queue, "queue")
    qb = api.request("GET", f"/api/queues/%2F/{q(queue)}/bindings").body
    assert (qb[0]["source"], qb[0]["routing_key"]) == ("", queue)  # the default exchange's binding comes first
    assert len(api.request("GET", f"/api/exchanges/%2F/{q(x)}/bindings/source").body) == 2
    assert api.request("DELETE", pair + "/~").status == 204
    assert api.request("DELETE", pair + "/~").status == 404
    assert api.request("POST", "/api/exchanges/%2F/" + q(x) + "/publish", _msg("a.b", "hi")).body == {"routed": True}


def test_binding_errors(api: Api) -> None:
    queue = api.name()
    api.request("PUT", f"/api/queues/%2F/{q(queue)}", {})
    nox = api.prefix + "nox"
    a = api.request("POST", f"/api/bindings/%2F/e/{q(nox)}/q/{q(queue)}", {"routing_key": "b"})
    assert (a.status, a.body) == (404, {"error": "not_found", "reason": f"no exchange '{nox}' in vhost '/'"})
    a = api.request("POST", f"/api/bindings/%2F/e/amq.direct/q/{q(api.prefix)}noq", {})
    assert (a.status, a.reason) == (404, f"no queue '{api.prefix}noq' in vhost '/'")
    assert api.request("POST", f"/api/bindings/%2F/e/amq.default/q/{q(queue)}", {}).status == 401


def test_exchange_to_exchange_binding(api: Api) -> None:
    x = api.name("x", "exchanges")
    api.request("PUT", f"/api/exchanges/%2F/{q(x)}", {})
    a = api.request("POST", f"/api/bindings/%2F/e/amq.direct/e/{q(x)}", {"routing_key": "r"})
    assert (a.status, a.headers["location"]) == (201, f"{x}/r")
    dest = api.request("GET", f"/api/exchanges/%2F/{q(x)}/bindings/destination").body
    assert [(b["source"], b["destination_type"], b["routing_key"]) for b in dest] == [("amq.direct", "exchange", "r")]
    assert api.request("DELETE", f"/api/bindings/%2F/e/amq.direct/e/{q(x)}/r").status == 204


# -- policies ----------------------------------------------------------------------------------------------------------
def test_policy_lifecycle_and_effect_on_queues(api: Api) -> None:
    pol, op = api.name("p", "policies"), api.name("op", "operator-policies")
    queue = api.name()
    body = {"pattern": "^" + api.prefix, "definition": {"message-ttl": 5000}, "priority": 1, "apply-to": "queues"}
    assert api.request("PUT", f"/api/policies/%2F/{q(pol)}", body).status == 201
    assert api.request("PUT", f"/api/policies/%2F/{q(pol)}", body).status == 204
    opbody = {"pattern": "^" + api.prefix, "definition": {"max-length": 10}, "apply-to": "queues"}
    assert api.request("PUT", f"/api/operator-policies/%2F/{q(op)}", opbody).status == 201
    assert api.request("GET", f"/api/policies/%2F/{q(pol)}").body == {
        "vhost": "/",
        "name": pol,
        "pattern": "^" + api.prefix,
        "apply-to": "queues",
        "definition": {"message-ttl": 5000},
        "priority": 1,
    }
    assert api.request("GET", f"/api/operator-policies/%2F/{q(op)}").body["priority"] == 0
    assert pol in {p["name"] for p in api.request("GET", "/api/policies/%2F").body}
    api.request("PUT", f"/api/queues/%2F/{q(queue)}", {})
    got = api.queue(queue, lambda b: b.get("policy") == pol and b.get("operator_policy") == op)
    assert (got["policy"], got["operator_policy"]) == (pol, op)
    assert got["effective_policy_definition"] == {"max-length": 10, "message-ttl": 5000}
    assert api.request("DELETE", f"/api/policies/%2F/{q(pol)}").status == 204
    assert api.request("DELETE", f"/api/policies/%2F/{q(pol)}").status == 404
    assert api.request("GET", f"/api/policies/%2F/{q(pol)}").status == 404


@pytest.mark.parametrize(
    ("body", "reason_part"),
    [
        ({"pattern": "^x", "definition": {"message-ttl": "x"}}, "is not a valid message TTL"),
        ({"pattern": "^x", "definition": {"bogus-key": 1}}, "are not recognised policy settings"),
        ({"pattern": "^x", "definition": {"message-ttl": 1}, "apply-to": "bogus"}, "apply-to 'bogus' unrecognised"),
        ({"pattern": "^x", "definition": {"message-ttl": 1}, "priority": "x"}, "priority should be a number"),
        ({"pattern": "^x", "definition": {}}, "no policy provided"),
        ({"definition": {"message-ttl": 1}}, "[{key_missing,pattern}]"),
        ({"pattern": "^x"}, "[{key_missing,definition}]"),
    ],
)
def test_policy_validation_errors(api: Api, body: dict[str, object], reason_part: str) -> None:
    a = api.request("PUT", f"/api/policies/%2F/{q(api.name('bad', 'policies'))}", body)
    assert a.status == 400 and a.body["error"] == "bad_request"
    assert reason_part in a.reason


def test_operator_policy_refuses_user_policy_keys(api: Api) -> None:
    body = {"pattern": "^" + api.prefix, "definition": {"dead-letter-exchange": "x"}}
    a = api.request("PUT", f"/api/operator-policies/%2F/{q(api.name('op', 'operator-policies'))}", body)
    assert a.status == 400 and "are not recognised policy settings" in a.reason
    a = api.request("PUT", f"/api/policies/{api.prefix}novhost/p", {"pattern": "x", "definition": {"message-ttl": 1}})
    assert (a.status, a.body) == (404, {"error": "not_found", "reason": "vhost_not_found"})


# -- connections, channels, consumers ----------------------------------------------------------------------------------
def test_connections_channels_consumers_and_forced_close(api: Api) -> None:
    queue = api.name()
    conn_name = api.prefix + "conn"
    params = pika.URLParameters(api.amqp_url)
    params.client_properties = {"connection_name": conn_name}
    conn = pika.BlockingConnection(params)
    try:
        ch = conn.channel()
        ch.queue_declare(queue)
        ch.basic_qos(prefetch_count=7)
        ch.basic_consume(queue, lambda *a: None, consumer_tag=api.prefix + "ctag")
        conn.process_data_events(time_limit=0.1)
        local_port = conn._impl._transport._sock.getsockname()[1]

        def ours(a: object) -> bool:
            return any(c.get("user_provided_name") == conn_name for c in getattr(a, "body", None) or [])

        listed = api.poll(lambda: api.request("GET", "/api/connections"), ours).body
        c = next(c for c in listed if c.get("user_provided_name") == conn_name)
        assert (c["user"], c["vhost"], c["protocol"], c["peer_port"]) == ("guest", "/", "AMQP 0-9-1", local_port)
        assert c["client_properties"]["connection_name"] == conn_name
        assert c["name"] == f"{c['peer_host']}:{c['peer_port']} -> {c['host']}:{c['port']}"
        assert api.request("GET", f"/api/connections/{q(c['name'])}").body["name"] == c["name"]

        chans = api.poll(
            lambda: api.request("GET", f"/api/connections/{q(c['name'])}/channels"),
            # RabbitMQ lists a channel before its stats (prefetch_count, consumer_count) are emitted, and emits
            # them before they count the qos and the consume: wait for them on the real API.
            lambda a: bool(a.body) and a.body[0].get("prefetch_count") == 7 and a.body[0].get("consumer_count") == 1,
        ).body
        assert (chans[0]["number"], chans[0]["prefetch_count"], chans[0]["consumer_count"]) == (1, 7, 1)
        assert chans[0]["connection_details"]["name"] == c["name"]
        assert chans[0]["name"] == f"{c['name']} (1)"

        listed_consumers = api.poll(
            lambda: api.request("GET", "/api/consumers/%2F"),
            lambda a: any(x["queue"]["name"] == queue for x in a.body or []),
        ).body
        cons = [x for x in listed_consumers if x["queue"]["name"] == queue]
        assert [(x["consumer_tag"], x["prefetch_count"], x["ack_required"]) for x in cons] == [
            (api.prefix + "ctag", 7, True)
        ]
        assert cons[0]["channel_details"]["connection_name"] == c["name"]
        assert api.queue(queue, lambda b: b.get("consumers") == 1)["consumer_details"][0]["consumer_tag"] == (
            api.prefix + "ctag"
        )

        assert api.request("DELETE", f"/api/connections/{q(c['name'])}", headers={"X-Reason": "bye"}).status == 204
        with pytest.raises(pika.exceptions.ConnectionClosedByBroker) as info:
            for _ in range(50):
                conn.process_data_events(time_limit=0.1)
        assert (info.value.reply_code, info.value.reply_text) == (320, "CONNECTION_FORCED - bye")
    finally:
        if conn.is_open:
            conn.close()
    assert api.request("DELETE", f"/api/connections/{api.prefix}nope").status == 404
    assert api.request("GET", f"/api/channels/{api.prefix}nope").status == 404


# -- vhosts, listing queries, definitions ------------------------------------------------------------------------------
def test_vhost_lifecycle(api: Api) -> None:
    name = api.name("vh", "vhosts")
    assert api.request("PUT", f"/api/vhosts/{q(name)}", {}).status == 201
    assert api.request("PUT", f"/api/vhosts/{q(name)}", {}).status == 204
    got = api.request("GET", f"/api/vhosts/{q(name)}").body
    assert (got["name"], got["tracing"]) == (name, False)
    assert name in {v["name"] for v in api.request("GET", "/api/vhosts").body}
    assert api.request("DELETE", f"/api/vhosts/{q(name)}").status == 204
    assert api.request("DELETE", f"/api/vhosts/{q(name)}").status == 404


def test_columns_and_pagination(api: Api) -> None:
    names = [api.name(f"q{i}") for i in range(3)]
    for n in names:
        api.request("PUT", f"/api/queues/%2F/{q(n)}", {})
    rows = api.request("GET", "/api/queues/%2F?columns=name,durable").body
    assert all(set(r) <= {"name", "durable"} and "name" in r for r in rows)
    page = api.request("GET", f"/api/queues/%2F?page=1&page_size=2&name={api.prefix}").body
    assert set(page) == {"filtered_count", "item_count", "items", "page", "page_count", "page_size", "total_count"}
    assert (page["filtered_count"], page["item_count"], page["page_count"]) == (3, 2, 2)
    assert [i["name"] for i in page["items"]] == names[:2]


def _plain(queue: dict[str, Any]) -> dict[str, Any]:
    """A queue definition without the ``x-queue-type`` RabbitMQ 4.x adds to every declared queue."""
    args = {k: v for k, v in queue["arguments"].items() if k != "x-queue-type"}
    return {**queue, "arguments": args}


def test_definitions_import_and_export(api: Api) -> None:
    qn, xn, pn = api.name(), api.name("x", "exchanges"), api.name("p", "policies")
    defs = {
        "queues": [{"name": qn, "vhost": "/", "durable": True, "auto_delete": False, "arguments": {"x-max-length": 3}}],
        "exchanges": [
            {
                "name": xn,
                "vhost": "/",
                "type": "fanout",
                "durable": True,
                "auto_delete": False,
                "internal": False,
                "arguments": {},
            }
        ],
        "bindings": [
            {
                "source": xn,
                "vhost": "/",
                "destination": qn,
                "destination_type": "queue",
                "routing_key": "k",
                "arguments": {},
            }
        ],
        "policies": [
            {
                "vhost": "/",
                "name": pn,
                "pattern": "^" + api.prefix,
                "apply-to": "queues",
                "definition": {"message-ttl": 1000},
                "priority": 0,
            }
        ],
    }
    assert api.request("POST", "/api/definitions", defs).status == 204
    exported = api.request("GET", "/api/definitions").body
    assert {
        "rabbit_version",
        "users",
        "vhosts",
        "permissions",
        "policies",
        "queues",
        "exchanges",
        "bindings",
        "parameters",
        "global_parameters",
        "topic_permissions",
    } <= set(exported)
    typed = [{**defs["queues"][0], "type": "classic"}] if api.at_least("4.3") else defs["queues"]  # live 4.3.6
    assert [_plain(x) for x in exported["queues"] if x["name"] == qn] == typed
    xdefs = defs["exchanges"]
    if api.at_least("4.3"):  # live 4.3.6 leaves out "internal": false
        xdefs = [{k: v for k, v in xdefs[0].items() if k != "internal"}]
    assert [x for x in exported["exchanges"] if x["name"] == xn] == xdefs
    assert [x for x in exported["bindings"] if x["source"] == xn] == defs["bindings"]
    assert [x for x in exported["policies"] if x["name"] == pn] == defs["policies"]
    vhost_only = api.request("GET", "/api/definitions/%2F").body
    assert [_plain(x) for x in vhost_only["queues"] if x["name"] == qn] == [
        {k: v for k, v in typed[0].items() if k != "vhost"}
    ]


def test_definitions_errors(api: Api) -> None:
    a = api.request("POST", "/api/definitions", raw=b"{bad")
    assert (a.status, a.body) == (400, {"error": "bad_request", "reason": "failed_to_parse_json"})
    bad = {
        "queues": [
            {
                "name": api.name(),
                "vhost": "/",
                "durable": True,
                "auto_delete": False,
                "arguments": {"x-message-ttl": "bad"},
            }
        ]
    }
    assert api.request("POST", "/api/definitions", bad).status == 400
