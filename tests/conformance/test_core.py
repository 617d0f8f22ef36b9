"""Core AMQP behaviour with pika's BlockingConnection: declare, publish, get, consume, settle, errors."""

from __future__ import annotations

import pika
import pika.exceptions
import pytest

from tests.conformance.conftest import Target, pump, settle
from tests.conformance.dlhelpers import eventually
from tests.conformance.versions import for_versions


def test_publish_get_roundtrip_keeps_properties(
    broker: Target, ch: pika.adapters.blocking_connection.BlockingChannel
) -> None:
    q = broker.name()
    ok = ch.queue_declare(q)
    assert ok.method.queue == q and ok.method.message_count == 0 and ok.method.consumer_count == 0
    props = pika.BasicProperties(
        content_type="text/plain",
        headers={"a": 1, "b": "x", "big": 2**40, "bin": b"\x00\x01", "nested": {"k": [1, "two"]}},
        message_id="m1",
        correlation_id="c1",
        delivery_mode=2,
        priority=3,
        app_id="app",
    )
    ch.basic_publish("", q, b"hello", props)
    method, got, body = ch.basic_get(q)
    assert body == b"hello"
    assert method.exchange == "" and method.routing_key == q and method.redelivered is False
    assert method.message_count == 0
    assert got.headers == {"a": 1, "b": "x", "big": 2**40, "bin": b"\x00\x01", "nested": {"k": [1, "two"]}}
    assert (got.content_type, got.message_id, got.correlation_id, got.delivery_mode, got.priority, got.app_id) == (
        "text/plain",
        "m1",
        "c1",
        2,
        3,
        "app",
    )
    ch.basic_ack(method.delivery_tag)
    assert ch.basic_get(q) == (None, None, None)


def test_message_count_in_declare_ok_and_get_ok(broker: Target, ch) -> None:
    q = broker.name()
    ch.queue_declare(q)
    # RabbitMQ enqueues asynchronously: without confirms a declare-ok right after publishing may count 0..3.
    ch.confirm_delivery()
    for i in range(3):
        ch.basic_publish("", q, str(i).encode())
    assert ch.queue_declare(q, passive=True).method.message_count == 3
    method, _, body = ch.basic_get(q, auto_ack=False)
    assert body == b"0" and method.message_count == 2
    # unacked messages are not counted
    assert ch.queue_declare(q, passive=True).method.message_count == 2


def test_server_named_queue(broker: Target, ch) -> None:
    ok = ch.queue_declare("", exclusive=True)
    name = ok.method.queue
    assert name.startswith("amq.gen-") and len(name) == len("amq.gen-") + 22


def test_reject_requeue_goes_back_to_head_and_redelivered(broker: Target, ch) -> None:
    q = broker.name()
    ch.queue_declare(q)
    for b in (b"1", b"2", b"3"):
        ch.basic_publish("", q, b)
    m1, _, _ = ch.basic_get(q)
    m2, _, _ = ch.basic_get(q)
    ch.basic_reject(m2.delivery_tag, requeue=True)
    ch.basic_nack(m1.delivery_tag, requeue=True)
    got = [ch.basic_get(q, auto_ack=True) for _ in range(3)]
    assert [b for _, _, b in got] == [b"1", b"2", b"3"]
    assert [m.redelivered for m, _, _ in got] == [True, True, False]


def test_channel_close_requeues_unacked_in_order(broker: Target, conn) -> None:
    q = broker.name()
    ch = conn.channel()
    ch.queue_declare(q)
    for b in (b"a", b"b", b"c"):
        ch.basic_publish("", q, b)
    ch2 = conn.channel()
    ch2.basic_get(q)
    ch2.basic_get(q)
    ch2.close()
    bodies = [ch.basic_get(q, auto_ack=True)[2] for _ in range(3)]
    assert bodies == [b"a", b"b", b"c"]


def test_consume_round_robin_and_ack(broker: Target, conn) -> None:
    q = broker.name()
    ch = conn.channel()
    ch.queue_declare(q)
    seen: dict[str, list[bytes]] = {"a": [], "b": []}

    def cb(name: str):
        def on(chan, method, props, body):
            seen[name].append(body)
            chan.basic_ack(method.delivery_tag)

        return on

    ch.basic_consume(q, cb("a"), consumer_tag="a")
    ch.basic_consume(q, cb("b"), consumer_tag="b")
    for i in range(4):
        ch.basic_publish("", q, str(i).encode())
    pump(conn, lambda: len(seen["a"]) + len(seen["b"]) == 4)
    assert seen == {"a": [b"0", b"2"], "b": [b"1", b"3"]}


def test_prefetch_limits_unacked(broker: Target, conn) -> None:
    q = broker.name()
    ch = conn.channel()
    ch.queue_declare(q)
    ch.basic_qos(prefetch_count=2)
    for i in range(5):
        ch.basic_publish("", q, str(i).encode())
    got: list[int] = []
    ch.basic_consume(q, lambda c, m, p, b: got.append(m.delivery_tag))
    pump(conn, lambda: len(got) >= 2)
    settle(conn)
    assert len(got) == 2
    ch.basic_ack(got[-1], multiple=True)
    pump(conn, lambda: len(got) >= 4)
    settle(conn)
    assert len(got) == 4


def test_unknown_delivery_tag_closes_channel(broker: Target, ch) -> None:
    q = broker.name()
    ch.queue_declare(q)
    ch.basic_ack(99)
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as exc:
        ch.queue_declare(q, passive=True)
    assert exc.value.reply_code == 406
    assert exc.value.reply_text == "PRECONDITION_FAILED - unknown delivery tag 99"


def test_double_ack_is_unknown_tag(broker: Target, ch) -> None:
    q = broker.name()
    ch.queue_declare(q)
    ch.basic_publish("", q, b"x")
    m, _, _ = ch.basic_get(q)
    ch.basic_ack(m.delivery_tag)
    ch.basic_ack(m.delivery_tag)
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as exc:
        ch.queue_declare(q, passive=True)
    assert exc.value.reply_text == f"PRECONDITION_FAILED - unknown delivery tag {m.delivery_tag}"


def test_passive_declare_missing_queue(broker: Target, ch) -> None:
    q = broker.name("missing")
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as exc:
        ch.queue_declare(q, passive=True)
    assert exc.value.reply_code == 404
    assert exc.value.reply_text == f"NOT_FOUND - no queue '{q}' in vhost '/'"


def test_publish_to_missing_exchange(broker: Target, ch) -> None:
    x = broker.exchange("nope")
    ch.basic_publish(x, "rk", b"x")
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as exc:
        ch.queue_declare("", exclusive=True)
    assert exc.value.reply_code == 404
    assert exc.value.reply_text == f"NOT_FOUND - no exchange '{x}' in vhost '/'"


def test_reserved_prefixes(broker: Target, conn) -> None:
    ch = conn.channel()
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as exc:
        ch.queue_declare("amq.mine")
    assert (exc.value.reply_code, exc.value.reply_text) == (
        403,
        "ACCESS_REFUSED - queue name 'amq.mine' contains reserved prefix 'amq.*'",
    )
    ch = conn.channel()
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as exc:
        ch.exchange_declare("amq.mine", "direct")
    assert (exc.value.reply_code, exc.value.reply_text) == (
        403,
        "ACCESS_REFUSED - exchange name 'amq.mine' contains reserved prefix 'amq.*'",
    )


def test_exchange_redeclare_with_other_type(broker: Target, ch) -> None:
    x = broker.exchange()
    ch.exchange_declare(x, "direct")
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as exc:
        ch.exchange_declare(x, "fanout")
    assert exc.value.reply_code == 406
    assert exc.value.reply_text == (
        f"PRECONDITION_FAILED - inequivalent arg 'type' for exchange '{x}' in vhost '/': "
        "received 'fanout' but current is 'direct'"
    )


@for_versions("3.10", "4.0", "4.3")
def test_unknown_exchange_type_error(broker: Target, conn) -> None:
    """A connection error (503) before 3.13.3, a channel error (406) since (rabbitmq-server #11214)."""
    ch = conn.channel()
    x = broker.exchange()
    if broker.at_least("3.13"):
        with pytest.raises(pika.exceptions.ChannelClosedByBroker) as cexc:
            ch.exchange_declare(x, "nosuchtype")
        assert cexc.value.reply_code == 406
        assert cexc.value.reply_text == "PRECONDITION_FAILED - unknown exchange type 'nosuchtype'"
        assert conn.is_open
        return
    with pytest.raises(pika.exceptions.ConnectionClosedByBroker) as exc:
        ch.exchange_declare(x, "nosuchtype")
    assert exc.value.reply_code == 503
    assert exc.value.reply_text == "COMMAND_INVALID - unknown exchange type 'nosuchtype'"


def test_mandatory_unroutable_is_returned(broker: Target, conn) -> None:
    ch = conn.channel()
    returned: list[tuple[int, str, str, bytes]] = []
    ch.add_on_return_callback(lambda c, m, p, b: returned.append((m.reply_code, m.reply_text, m.routing_key, b)))
    ch.basic_publish("amq.direct", "nowhere", b"body", mandatory=True)
    pump(conn, lambda: returned)
    assert returned == [(312, "NO_ROUTE", "nowhere", b"body")]


def test_confirms_ack_routed_and_unroutable(broker: Target, ch) -> None:
    q = broker.name()
    ch.queue_declare(q)
    ch.confirm_delivery()
    ch.basic_publish("", q, b"x")  # raises if nacked
    ch.basic_publish("amq.direct", "nowhere", b"y")
    with pytest.raises(pika.exceptions.UnroutableError):
        ch.basic_publish("amq.direct", "nowhere", b"z", mandatory=True)


def test_topic_fanout_headers_routing(broker: Target, ch) -> None:
    tq, fq, hq = broker.name("t"), broker.name("f"), broker.name("h")
    tx, fx, hx = broker.exchange("tx"), broker.exchange("fx"), broker.exchange("hx")
    ch.exchange_declare(tx, "topic")
    ch.exchange_declare(fx, "fanout")
    ch.exchange_declare(hx, "headers")
    for q in (tq, fq, hq):
        ch.queue_declare(q)
    ch.queue_bind(tq, tx, "a.*.c")
    ch.queue_bind(tq, tx, "x.#")
    ch.queue_bind(fq, fx, "ignored")
    ch.queue_bind(hq, hx, "", arguments={"x-match": "any", "k1": "v1", "k2": 2})
    for rk in ("a.b.c", "a.b", "x", "x.y.z", "a.b.c.d"):
        ch.basic_publish(tx, rk, rk.encode())
    ch.basic_publish(fx, "whatever", b"f")
    ch.basic_publish(hx, "", b"h1", pika.BasicProperties(headers={"k2": 2}))
    ch.basic_publish(hx, "", b"h2", pika.BasicProperties(headers={"k1": "nope"}))

    def counted() -> None:  # (RabbitMQ answers the stat call of a passive declare before queued deliveries)
        assert [ch.queue_declare(q, passive=True).method.message_count for q in (tq, fq, hq)] == [3, 1, 1]

    eventually(broker, counted)
    assert ch.basic_get(hq, auto_ack=True)[2] == b"h1"


def test_exchange_to_exchange_and_alternate(broker: Target, ch) -> None:
    src, dst, ae = broker.exchange("src"), broker.exchange("dst"), broker.exchange("ae")
    q, aq = broker.name("q"), broker.name("aq")
    ch.exchange_declare(ae, "fanout")
    ch.exchange_declare(src, "direct", arguments={"alternate-exchange": ae})
    ch.exchange_declare(dst, "direct")
    ch.exchange_bind(dst, src, "k")
    ch.queue_declare(q)
    ch.queue_declare(aq)
    ch.queue_bind(q, dst, "k")
    ch.queue_bind(aq, ae, "")
    ch.basic_publish(src, "k", b"via-e2e")
    ch.basic_publish(src, "other", b"via-ae")
    assert ch.basic_get(q, auto_ack=True)[2] == b"via-e2e"
    assert ch.basic_get(aq, auto_ack=True)[2] == b"via-ae"


def test_cc_and_bcc(broker: Target, ch) -> None:
    a, b, c = broker.name("a"), broker.name("b"), broker.name("c")
    for q in (a, b, c):
        ch.queue_declare(q)
    ch.basic_publish("", a, b"m", pika.BasicProperties(headers={"CC": [b], "BCC": [c]}))
    got = [ch.basic_get(q, auto_ack=True) for q in (a, b, c)]
    assert [g[2] for g in got] == [b"m", b"m", b"m"]
    for _, props, _ in got:
        assert props.headers == {"CC": [b]}


def test_cc_of_wrong_type(broker: Target, ch) -> None:
    q = broker.name()
    ch.queue_declare(q)
    ch.basic_publish("", q, b"m", pika.BasicProperties(headers={"CC": 5}))
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as exc:
        ch.queue_declare(q, passive=True)
    assert exc.value.reply_text == (
        'PRECONDITION_FAILED - invalid message: {unacceptable_type_in_header,"CC",signedint}'
    )


def test_exclusive_queue_locked_for_other_connections(broker: Target, conn) -> None:
    ch = conn.channel()
    q = broker.name()
    ch.queue_declare(q, exclusive=True)
    other = broker.connect()
    try:
        ch2 = other.channel()
        with pytest.raises(pika.exceptions.ChannelClosedByBroker) as exc:
            ch2.queue_declare(q, passive=True)
        assert exc.value.reply_code == 405
        assert exc.value.reply_text.startswith(
            f"RESOURCE_LOCKED - cannot obtain exclusive access to locked queue '{q}' in vhost '/'"
        )
    finally:
        other.close()
    conn.close()
    c2 = broker.connect()
    try:
        with pytest.raises(pika.exceptions.ChannelClosedByBroker):
            c2.channel().queue_declare(q, passive=True)
    finally:
        c2.close()


def test_auto_delete_queue_goes_with_last_consumer(broker: Target, conn) -> None:
    ch = conn.channel()
    q = broker.name()
    ch.queue_declare(q, auto_delete=True)
    tag = ch.basic_consume(q, lambda *a: None)
    ch.basic_cancel(tag)
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as exc:
        ch.queue_declare(q, passive=True)
    assert exc.value.reply_code == 404


def test_consumer_cancelled_when_queue_deleted(broker: Target, conn) -> None:
    ch = conn.channel()
    q = broker.name()
    ch.queue_declare(q)
    cancelled: list[str] = []
    tag = ch.basic_consume(q, lambda *a: None)
    ch.add_on_cancel_callback(lambda frame: cancelled.append(frame.method.consumer_tag))
    other = conn.channel()
    other.queue_delete(q)
    pump(conn, lambda: cancelled)
    assert cancelled == [tag]


def test_queue_delete_if_empty_and_purge(broker: Target, conn) -> None:
    ch = conn.channel()
    q = broker.name()
    ch.queue_declare(q)
    ch.basic_publish("", q, b"x")
    ch.basic_publish("", q, b"y")
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as exc:
        ch.queue_delete(q, if_empty=True)
    assert exc.value.reply_text == f"PRECONDITION_FAILED - queue '{q}' in vhost '/' not empty"
    ch = conn.channel()
    assert ch.queue_purge(q).method.message_count == 2
    assert ch.queue_delete(q).method.message_count == 0


def test_tx_publish_and_ack_held_until_commit(broker: Target, ch) -> None:
    q = broker.name()
    ch.queue_declare(q)
    ch.basic_publish("", q, b"pre")
    ch.tx_select()
    ch.basic_publish("", q, b"in-tx")

    def only_pre() -> None:  # "pre" may still be on its way into the real queue; "in-tx" must not be there
        assert ch.queue_declare(q, passive=True).method.message_count == 1

    eventually(broker, only_pre)
    m, _, _ = ch.basic_get(q)
    ch.basic_ack(m.delivery_tag)
    ch.tx_rollback()
    assert ch.queue_declare(q, passive=True).method.message_count == 0
    ch.basic_publish("", q, b"in-tx-2")
    ch.basic_ack(m.delivery_tag)
    ch.tx_commit()
    assert ch.queue_declare(q, passive=True).method.message_count == 1
    assert ch.basic_get(q, auto_ack=True)[2] == b"in-tx-2"


def test_priority_queue(broker: Target, ch) -> None:
    q = broker.name()
    ch.queue_declare(q, arguments={"x-max-priority": 5})
    for body, prio in ((b"low", 1), (b"none", None), (b"high", 9), (b"mid", 3)):
        ch.basic_publish("", q, body, pika.BasicProperties(priority=prio))
    bodies = [ch.basic_get(q, auto_ack=True)[2] for _ in range(4)]
    assert bodies == [b"high", b"mid", b"low", b"none"]


def test_direct_reply_to(broker: Target, conn) -> None:
    ch = conn.channel()
    replies: list[bytes] = []
    ch.basic_consume("amq.rabbitmq.reply-to", lambda c, m, p, b: replies.append(b), auto_ack=True)
    server_q = broker.name("rpc")
    ch.queue_declare(server_q)
    ch.basic_publish("", server_q, b"request", pika.BasicProperties(reply_to="amq.rabbitmq.reply-to"))
    _m, props, _body = ch.basic_get(server_q, auto_ack=True)
    assert props.reply_to.startswith("amq.rabbitmq.reply-to.")
    ch.basic_publish("", props.reply_to, b"response")
    pump(conn, lambda: replies)
    assert replies == [b"response"]


def test_bad_credentials(broker: Target) -> None:
    params = pika.URLParameters(broker.url.replace("guest:guest", "guest:wrong"))
    with pytest.raises(pika.exceptions.ProbableAuthenticationError) as exc:
        pika.BlockingConnection(params)
    assert "ACCESS_REFUSED - Login was refused using authentication mechanism PLAIN" in str(exc.value)


def test_unknown_vhost(broker: Target) -> None:
    url = broker.url.rsplit("/", 1)[0] + "/nosuchvhost"
    with pytest.raises(pika.exceptions.ProbableAccessDeniedError) as exc:
        pika.BlockingConnection(pika.URLParameters(url))
    assert "NOT_ALLOWED - vhost nosuchvhost not found" in str(exc.value)
