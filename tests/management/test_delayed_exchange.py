"""The management API's view of a delayed-message exchange: its type and arguments, and ``messages_delayed`` (the
plugin's ``info/1``, which ``rabbit_exchange:info/1`` appends for ``/api/exchanges``). The live brokers do not
have the plugin, hence ``fake_only``."""

from __future__ import annotations

import pika
import pytest

from tests.management.conftest import Api, q


@pytest.mark.fake_only
def test_exchange_shows_messages_delayed(api: Api) -> None:
    x, plain = api.name("dx", "exchanges"), api.name("plain", "exchanges")
    body = {"type": "x-delayed-message", "durable": True, "arguments": {"x-delayed-type": "direct"}}
    assert api.request("PUT", f"/api/exchanges/%2F/{q(x)}", body).status == 201
    assert api.request("PUT", f"/api/exchanges/%2F/{q(plain)}", {"type": "direct"}).status == 201
    conn = pika.BlockingConnection(pika.URLParameters(api.amqp_url))
    try:
        ch = conn.channel()
        for delay in (1000, 3000):
            ch.basic_publish(x, "k", b"m", pika.BasicProperties(headers={"x-delay": delay}))
        ch.basic_publish(x, "k", b"now", pika.BasicProperties(headers={"x-delay": 0}))
        conn.process_data_events(time_limit=0.05)
    finally:
        conn.close()
    one = api.request("GET", f"/api/exchanges/%2F/{q(x)}").body
    assert (one["type"], one["arguments"], one["durable"], one["messages_delayed"]) == (
        "x-delayed-message",
        {"x-delayed-type": "direct"},
        True,
        2,
    )
    listed = {e["name"]: e for e in api.request("GET", "/api/exchanges/%2F").body}
    assert listed[x]["messages_delayed"] == 2
    assert "messages_delayed" not in listed[plain]
    assert api.fake is not None
    api.fake.clock.advance(1)
    assert api.request("GET", f"/api/exchanges/%2F/{q(x)}").body["messages_delayed"] == 1
    api.fake.clock.advance(2)
    assert api.request("GET", f"/api/exchanges/%2F/{q(x)}").body["messages_delayed"] == 0
