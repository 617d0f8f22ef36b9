"""When messages are dead-lettered and where they go (``rabbit_dead_letter``, ``rabbit_amqqueue_process``).

Each test runs against fakerabbit and, with ``FAKERABBIT_REAL_URL``, a real RabbitMQ. ``test_qNN_<case>`` ports
case NN of RabbitMQ's ``deps/rabbit/test/dead_lettering_SUITE.erl`` (named in its docstring). Classic and quorum
(at-most-once) queues are covered where the suite runs both.
"""

from __future__ import annotations

import pika
import pytest

from tests.conformance.conftest import Target, pump, settle
from tests.conformance.dlhelpers import (
    QUEUE_TYPES,
    anchored,
    declare,
    drain,
    empty,
    eventually,
    get,
    pub,
    quiet,
    ready,
    setup,
    wait_ready,
)

# ---------------------------------------------------------------------------------------------------------
# A. When a message is dead-lettered


@pytest.mark.parametrize("qtype", QUEUE_TYPES)
def test_q01_dead_letter_nack(broker: Target, ch, qtype: str) -> None:
    """Nack without requeue dead-letters exactly the nacked message (RabbitMQ:
    ``dead_lettering_SUITE:dead_letter_nack``)."""
    q, dlq, _ = setup(broker, ch, qtype)
    for b in ("m1", "m2", "m3"):
        pub(ch, q, b)
    tags = [get(ch, q)[0].delivery_tag for _ in range(3)]
    ch.basic_nack(tags[2], requeue=False)
    wait_ready(broker, ch, dlq, 1)
    assert ready(ch, q) == 0
    assert drain(ch, dlq) == [b"m3"]
    ch.basic_nack(tags[0], requeue=False)
    ch.basic_nack(tags[1], requeue=False)
    wait_ready(broker, ch, dlq, 2)
    assert empty(ch, q)
    assert drain(ch, dlq) == [b"m1", b"m2"]


@pytest.mark.parametrize("qtype", QUEUE_TYPES)
def test_q02_dead_letter_multiple_nack(broker: Target, ch, qtype: str) -> None:
    """nack(multiple) dead-letters every outstanding tag up to the given one, in tag order (RabbitMQ:
    ``dead_lettering_SUITE:dead_letter_multiple_nack``)."""
    q, dlq, _ = setup(broker, ch, qtype)
    for b in ("m1", "m2", "m3"):
        pub(ch, q, b)
    tags = [get(ch, q)[0].delivery_tag for _ in range(3)]
    ch.basic_nack(tags[2], multiple=True, requeue=False)
    wait_ready(broker, ch, dlq, 3)
    assert drain(ch, dlq) == [b"m1", b"m2", b"m3"]
    assert empty(ch, q)


@pytest.mark.parametrize("qtype", QUEUE_TYPES)
def test_q03_dead_letter_nack_requeue(broker: Target, ch, qtype: str) -> None:
    """Nack with requeue does not dead-letter; the message is ready again (RabbitMQ:
    ``dead_lettering_SUITE:dead_letter_nack_requeue``)."""
    q, dlq, _ = setup(broker, ch, qtype)
    for b in ("m1", "m2", "m3"):
        pub(ch, q, b)
    tags = [get(ch, q)[0].delivery_tag for _ in range(3)]
    ch.basic_nack(tags[2], requeue=True)
    wait_ready(broker, ch, q, 1)
    method, _, body = get(ch, q)
    assert body == b"m3" and method.redelivered is True
    assert empty(ch, q)
    quiet(broker)
    assert ready(ch, dlq) == 0


@pytest.mark.parametrize("qtype", QUEUE_TYPES)
def test_q04_dead_letter_nack_requeue_multiple(broker: Target, ch, qtype: str) -> None:
    """nack(multiple, requeue) puts all back, in order; nothing is dead-lettered (RabbitMQ:
    ``dead_lettering_SUITE:dead_letter_nack_requeue_multiple``)."""
    q, dlq, _ = setup(broker, ch, qtype)
    for b in ("m1", "m2", "m3"):
        pub(ch, q, b)
    tags = [get(ch, q)[0].delivery_tag for _ in range(3)]
    ch.basic_nack(tags[2], multiple=True, requeue=True)
    wait_ready(broker, ch, q, 3)
    assert drain(ch, q) == [b"m1", b"m2", b"m3"]
    quiet(broker)
    assert ready(ch, dlq) == 0


@pytest.mark.parametrize("qtype", QUEUE_TYPES)
def test_q05_dead_letter_reject(broker: Target, ch, qtype: str) -> None:
    """basic.reject without requeue dead-letters; the rest of the queue is untouched (RabbitMQ:
    ``dead_lettering_SUITE:dead_letter_reject``)."""
    q, dlq, _ = setup(broker, ch, qtype)
    for b in ("m1", "m2", "m3"):
        pub(ch, q, b)
    method, _, _ = get(ch, q)
    ch.basic_reject(method.delivery_tag, requeue=False)
    wait_ready(broker, ch, dlq, 1)
    assert drain(ch, dlq) == [b"m1"]
    assert drain(ch, q) == [b"m2", b"m3"]


@pytest.mark.parametrize("qtype", QUEUE_TYPES)
def test_q07_dead_letter_reject_many(broker: Target, conn, qtype: str) -> None:
    """100 consumed and rejected messages reach the DLQ in publish order (RabbitMQ:
    ``dead_lettering_SUITE:dead_letter_reject_many``)."""
    ch = conn.channel()
    q, dlq, _ = setup(broker, ch, qtype)
    for i in range(1, 101):
        pub(ch, q, str(i))
    seen: list[int] = []

    def on(chan, method, props, body) -> None:
        seen.append(1)
        chan.basic_reject(method.delivery_tag, requeue=False)

    ch.basic_consume(q, on)
    pump(conn, lambda: len(seen) == 100)
    assert len(seen) == 100
    ch2 = conn.channel()
    wait_ready(broker, ch2, dlq, 100)
    assert drain(ch2, dlq) == [str(i).encode() for i in range(1, 101)]


@pytest.mark.parametrize("qtype", QUEUE_TYPES)
def test_q08_dead_letter_reject_requeue(broker: Target, ch, qtype: str) -> None:
    """Reject with requeue puts m1 back at the head (delivery-limit policy: harmless on classic) (RabbitMQ:
    ``dead_lettering_SUITE:dead_letter_reject_requeue``; ``rabbit_queue_type:is_policy_applicable/2``)."""
    q, dlq, _ = setup(broker, ch, qtype)
    broker.set_policy(broker.name("pol"), anchored(q), {"delivery-limit": 50})
    for b in ("m1", "m2", "m3"):
        pub(ch, q, b)
    method, _, _ = get(ch, q)
    ch.basic_reject(method.delivery_tag, requeue=True)
    wait_ready(broker, ch, q, 3)
    assert drain(ch, q) == [b"m1", b"m2", b"m3"]
    quiet(broker)
    assert ready(ch, dlq) == 0


@pytest.mark.parametrize("qtype", QUEUE_TYPES)
def test_q09_dead_letter_max_length_drop_head(broker: Target, ch, qtype: str) -> None:
    """drop-head overflow dead-letters the oldest messages with reason maxlen (RabbitMQ:
    ``dead_lettering_SUITE:dead_letter_max_length_drop_head``)."""
    q, dlq, _ = setup(broker, ch, qtype, {"x-max-length": 1})
    for b in ("m1", "m2", "m3"):
        pub(ch, q, b)
    wait_ready(broker, ch, dlq, 2)
    _, props, body = get(ch, dlq)
    assert body == b"m1" and props.headers["x-death"][0]["reason"] == "maxlen"
    _, props, body = get(ch, dlq)
    assert body == b"m2" and props.headers["x-death"][0]["reason"] == "maxlen"
    assert drain(ch, q) == [b"m3"]


def test_q10_dead_letter_max_length_reject_publish_dlx(broker: Target, ch) -> None:
    """reject-publish-dlx keeps the queue and dead-letters each new message that does not fit (RabbitMQ:
    ``dead_lettering_SUITE:dead_letter_max_length_reject_publish_dlx``)."""
    q, dlq, _ = setup(broker, ch, "classic", {"x-max-length": 1, "x-overflow": "reject-publish-dlx"})
    for b in ("m1", "m2", "m3"):
        pub(ch, q, b)
    wait_ready(broker, ch, dlq, 2)
    got = []
    for _ in range(2):
        _, props, body = get(ch, dlq)
        got.append((body, props.headers["x-death"][0]["reason"], props.headers["x-death"][0]["queue"]))
    assert got == [(b"m2", "maxlen", q), (b"m3", "maxlen", q)]
    assert drain(ch, q) == [b"m1"]


def test_reject_publish_dlx_nacks_the_publisher(broker: Target, ch) -> None:
    """With confirms on, a publish that reject-publish-dlx dead-letters is nacked (and still dead-lettered) (RabbitMQ:
    ``dead_lettering_SUITE:dead_letter_max_length_reject_publish_dlx``)."""
    q, dlq, _ = setup(broker, ch, "classic", {"x-max-length": 1, "x-overflow": "reject-publish-dlx"})
    ch.confirm_delivery()
    pub(ch, q, "m1")
    with pytest.raises(pika.exceptions.NackError):
        pub(ch, q, "m2")
    wait_ready(broker, ch, dlq, 1)
    assert drain(ch, dlq) == [b"m2"]
    assert drain(ch, q) == [b"m1"]


@pytest.mark.parametrize("qtype", QUEUE_TYPES)
def test_q11_dead_letter_reject_requeue_reject_norequeue(broker: Target, ch, qtype: str) -> None:
    """A requeued then rejected message is dead-lettered once (RabbitMQ:
    ``dead_lettering_SUITE:dead_letter_reject_requeue_reject_norequeue``)."""
    q, dlq, _ = setup(broker, ch, qtype)
    pub(ch, q, "m")
    method, _, _ = get(ch, q)
    ch.basic_reject(method.delivery_tag, requeue=True)
    wait_ready(broker, ch, q, 1)
    method, _, _ = get(ch, q)
    ch.basic_reject(method.delivery_tag, requeue=False)
    wait_ready(broker, ch, dlq, 1)
    assert drain(ch, dlq) == [b"m"]
    assert empty(ch, q)


@pytest.mark.parametrize("qtype", QUEUE_TYPES)
def test_q12_nack_requeue_nack_norequeue_basic_get(broker: Target, ch, qtype: str) -> None:
    """multi-nack dead-letters in delivery-tag order (m3, m1, m2), not queue order (RabbitMQ:
    ``dead_lettering_SUITE:dead_letter_nack_requeue_nack_norequeue_basic_get``)."""
    q, dlq, _ = setup(broker, ch, qtype)
    broker.set_policy(broker.name("pol"), anchored(q), {"delivery-limit": 50})
    for b in ("m1", "m2", "m3"):
        pub(ch, q, b)
    tags = [get(ch, q)[0].delivery_tag for _ in range(3)]
    ch.basic_nack(tags[1], multiple=True, requeue=True)
    wait_ready(broker, ch, q, 2)
    _, _, b4 = get(ch, q)
    m5, _, b5 = get(ch, q)
    assert (b4, b5) == (b"m1", b"m2")
    ch.basic_nack(m5.delivery_tag, multiple=True, requeue=False)
    wait_ready(broker, ch, dlq, 3)
    assert drain(ch, dlq) == [b"m3", b"m1", b"m2"]
    assert empty(ch, q)


@pytest.mark.parametrize("qtype", QUEUE_TYPES)
def test_q13_nack_requeue_nack_norequeue_basic_consume(broker: Target, conn, qtype: str) -> None:
    """The same with consumers: the DLQ consumer receives m3, m1, m2 (RabbitMQ:
    ``dead_lettering_SUITE:dead_letter_nack_requeue_nack_norequeue_basic_consume``)."""
    ch = conn.channel()
    q, dlq, _ = setup(broker, ch, qtype)
    broker.set_policy(broker.name("pol"), anchored(q), {"delivery-limit": 50})
    for b in ("m1", "m2", "m3"):
        pub(ch, q, b)
    got: list[tuple[int, bytes, bool]] = []
    ch.basic_consume(q, lambda c, m, p, b: got.append((m.delivery_tag, b, m.redelivered)))
    pump(conn, lambda: len(got) == 3)
    assert [b for _, b, _ in got] == [b"m1", b"m2", b"m3"]
    ch.basic_nack(got[1][0], multiple=True, requeue=True)
    pump(conn, lambda: len(got) == 5)
    assert [(b, r) for _, b, r in got[3:]] == [(b"m1", True), (b"m2", True)]
    dl: list[tuple[int, bytes]] = []
    ch.basic_consume(dlq, lambda c, m, p, b: dl.append((m.delivery_tag, b)))
    ch.basic_nack(got[4][0], multiple=True, requeue=False)
    pump(conn, lambda: len(dl) == 3)
    assert [b for _, b in dl] == [b"m3", b"m1", b"m2"]
    ch.basic_ack(dl[-1][0], multiple=True)
    settle(conn, 0.1)
    ch2 = conn.channel()
    assert ready(ch2, q) == 0 and ready(ch2, dlq) == 0


@pytest.mark.parametrize("qtype", QUEUE_TYPES)
def test_q34_dead_letter_ttl(broker: Target, ch, qtype: str) -> None:
    """A message whose queue TTL ran out is dead-lettered with reason expired (RabbitMQ:
    ``dead_lettering_SUITE:dead_letter_ttl``)."""
    q, dlq, _ = setup(broker, ch, qtype, {"x-message-ttl": 1})
    pub(ch, q, "m1")
    broker.advance(0.05)
    wait_ready(broker, ch, dlq, 1)
    _, props, body = get(ch, dlq)
    assert body == b"m1" and props.headers["x-death"][0]["reason"] == "expired"
    assert empty(ch, q)


def test_per_message_ttl_dead_letters_expired(broker: Target, ch) -> None:
    """A per-message ``expiration`` dead-letters with reason expired; messages without it stay (RabbitMQ:
    ``dead_lettering_SUITE:dead_letter_ttl``)."""
    q, dlq, _ = setup(broker, ch)
    pub(ch, q, "m1", expiration="20")
    pub(ch, q, "m2")
    broker.advance(0.1)
    wait_ready(broker, ch, q, 1)
    wait_ready(broker, ch, dlq, 1)
    _, props, body = get(ch, dlq)
    assert body == b"m1" and props.headers["x-death"][0]["reason"] == "expired"
    assert drain(ch, q) == [b"m2"]


def test_dl7_queue_delete_and_purge_do_not_dead_letter(broker: Target, ch) -> None:
    """Deleting or purging a queue discards its messages; nothing is dead-lettered (RabbitMQ:
    ``rabbit_amqqueue_process:handle_info/2`` (maybe_expire))."""
    q, dlq, _ = setup(broker, ch)
    pub(ch, q, "purged")
    ch.queue_purge(q)
    pub(ch, q, "deleted")
    ch.queue_delete(q)
    quiet(broker)
    assert ready(ch, dlq) == 0


def test_dl7_queue_expiry_does_not_dead_letter(broker: Target, ch) -> None:
    """An expiring queue (x-expires) takes its messages with it (RabbitMQ: ``rabbit_amqqueue_process:handle_info/2``
    (maybe_expire))."""
    q, dlq, _ = setup(broker, ch, extra={"x-expires": 100})
    pub(ch, q, "m")
    broker.advance(0.5)

    def gone() -> None:
        with pytest.raises(pika.exceptions.ChannelClosedByBroker) as e:
            broker.connect().channel().queue_declare(q, passive=True)
        assert e.value.reply_code == 404

    eventually(broker, gone)
    quiet(broker)
    assert ready(ch, dlq) == 0


@pytest.mark.parametrize("qtype", QUEUE_TYPES)
def test_dl9_no_dlx_means_discarded(broker: Target, ch, qtype: str) -> None:
    """Without a DLX a rejected, expired or dropped message is discarded and does not come back (RabbitMQ:
    ``rabbit_amqqueue_process:with_dlx/3``)."""
    q = broker.name("q")
    ch.confirm_delivery()  # a quorum queue applies the drop-head with the enqueue: confirmed, it is done
    declare(ch, q, qtype, x_max_length=2)
    for b in ("m1", "m2", "m3"):
        pub(ch, q, b)  # m1 dropped by max-length
    method, _, body = get(ch, q)
    assert body == b"m2"
    ch.basic_nack(method.delivery_tag, requeue=False)
    quiet(broker)
    assert drain(ch, q) == [b"m3"]
    if broker.fake is not None:
        dropped = [e.details["why"] for e in broker.fake._broker.events if e.kind == "dropped"]
        assert dropped == ["no dead-letter exchange", "no dead-letter exchange"]


def test_dl8_reason_strings(broker: Target, ch) -> None:
    """The reasons are written exactly ``rejected``, ``expired``, ``maxlen`` (RabbitMQ:
    ``rabbit_dead_letter:reason()``)."""
    q, dlq, _ = setup(broker, ch, extra={"x-max-length": 1})
    pub(ch, q, "r")
    method, _, _ = get(ch, q)
    ch.basic_reject(method.delivery_tag, requeue=False)
    pub(ch, q, "e", expiration="10")
    broker.advance(0.05)
    pub(ch, q, "m1")
    pub(ch, q, "m2")
    wait_ready(broker, ch, dlq, 3)
    reasons = []
    for _ in range(3):
        _, props, body = get(ch, dlq)
        reasons.append((body, props.headers["x-death"][0]["reason"]))
    assert reasons == [(b"r", "rejected"), (b"e", "expired"), (b"m1", "maxlen")]


# ---------------------------------------------------------------------------------------------------------
# B. DLX resolution and routing


@pytest.mark.parametrize("qtype", QUEUE_TYPES)
def test_q14_dead_letter_missing_exchange(broker: Target, ch, qtype: str) -> None:
    """A missing DLX is no declare error; messages are silently dropped until it exists (RabbitMQ:
    ``dead_lettering_SUITE:dead_letter_missing_exchange``)."""
    dlx = broker.exchange("dlx-exchange-2")
    q, dlq = broker.name("q"), broker.name("dlq")
    ch.exchange_delete(dlx)
    declare(ch, q, qtype, x_max_length=1, x_dead_letter_exchange=dlx, x_dead_letter_routing_key=dlq)
    declare(ch, dlq)
    pub(ch, q, "m1")
    method, _, _ = get(ch, q)
    ch.basic_reject(method.delivery_tag, requeue=False)
    quiet(broker)
    assert ready(ch, q) == 0 and ready(ch, dlq) == 0
    ch.exchange_declare(dlx, "direct")
    ch.queue_bind(dlq, dlx, routing_key=dlq)
    pub(ch, q, "m2")
    method, _, _ = get(ch, q)
    ch.basic_reject(method.delivery_tag, requeue=False)
    wait_ready(broker, ch, dlq, 1)
    assert drain(ch, dlq) == [b"m2"]


def test_dr1_dlx_deleted_later(broker: Target, ch) -> None:
    """Java deadLetterDeletedDLX: deleting the DLX drops later dead letters; redeclaring restores them (RabbitMQ:
    ``dead_lettering_SUITE:dead_letter_missing_exchange``)."""
    q, dlq, dlx = setup(broker, ch)
    ch.exchange_delete(dlx)
    pub(ch, q, "lost")
    method, _, _ = get(ch, q)
    ch.basic_nack(method.delivery_tag, requeue=False)
    quiet(broker)
    assert ready(ch, dlq) == 0
    ch.exchange_declare(dlx, "direct")
    ch.queue_bind(dlq, dlx, routing_key=dlq)
    pub(ch, q, "found")
    method, _, _ = get(ch, q)
    ch.basic_nack(method.delivery_tag, requeue=False)
    wait_ready(broker, ch, dlq, 1)
    assert drain(ch, dlq) == [b"found"]


@pytest.mark.parametrize("qtype", QUEUE_TYPES)
def test_q15_dead_letter_routing_key(broker: Target, ch, qtype: str) -> None:
    """Without a DLRK the message is dead-lettered with its original routing key (RabbitMQ:
    ``rabbit_dead_letter:publish/5``; ``dead_lettering_SUITE:dead_letter_routing_key``)."""
    dlx = broker.exchange("dlx")
    q, dlq = broker.name("q"), broker.name("dlq")
    ch.exchange_declare(dlx, "direct")
    declare(ch, q, qtype, x_dead_letter_exchange=dlx)
    declare(ch, dlq)
    pub(ch, q, "m1")
    method, _, _ = get(ch, q)
    ch.basic_nack(method.delivery_tag, requeue=False)
    quiet(broker)
    assert ready(ch, q) == 0 and ready(ch, dlq) == 0  # routed with key Q: unbound, dropped
    ch.queue_bind(dlq, dlx, routing_key=q)
    pub(ch, q, "m2")
    method, _, _ = get(ch, q)
    ch.basic_nack(method.delivery_tag, requeue=False)
    wait_ready(broker, ch, dlq, 1)
    method, _, body = get(ch, dlq)
    assert body == b"m2" and method.routing_key == q and method.exchange == dlx


@pytest.mark.parametrize("xtype", ["fanout", "topic"])
def test_dr3_dlx_of_any_type(broker: Target, ch, xtype: str) -> None:
    """The DLX routes through its normal exchange logic (fanout ignores the key; topic matches it) (RabbitMQ:
    ``rabbit_exchange:route/3``)."""
    dlx = broker.exchange("dlx")
    q, dlq = broker.name("q"), broker.name("dlq")
    ch.exchange_declare(dlx, xtype)
    declare(ch, q, x_dead_letter_exchange=dlx, x_dead_letter_routing_key="a.b.c")
    declare(ch, dlq)
    ch.queue_bind(dlq, dlx, routing_key="a.#" if xtype == "topic" else "ignored")
    pub(ch, q, "m")
    method, _, _ = get(ch, q)
    ch.basic_reject(method.delivery_tag, requeue=False)
    wait_ready(broker, ch, dlq, 1)
    method, _, body = get(ch, dlq)
    assert (body, method.exchange, method.routing_key) == (b"m", dlx, "a.b.c")


def test_dr3_dlx_alternate_exchange_is_honoured(broker: Target, ch) -> None:
    """A dead letter the DLX cannot route goes to the DLX's alternate exchange (RabbitMQ:
    ``rabbit_exchange:route/3``)."""
    dlx, ae = broker.exchange("dlx"), broker.exchange("ae")
    q, caught = broker.name("q"), broker.name("caught")
    ch.exchange_declare(ae, "fanout")
    ch.exchange_declare(dlx, "direct", arguments={"alternate-exchange": ae})
    declare(ch, q, x_dead_letter_exchange=dlx)
    declare(ch, caught)
    ch.queue_bind(caught, ae)
    pub(ch, q, "m")
    method, _, _ = get(ch, q)
    ch.basic_reject(method.delivery_tag, requeue=False)
    wait_ready(broker, ch, caught, 1)
    method, props, body = get(ch, caught)
    assert (body, method.exchange, method.routing_key) == (b"m", dlx, q)
    assert props.headers["x-death"][0]["queue"] == q


def test_dr3_dlx_exchange_to_exchange_binding(broker: Target, ch) -> None:
    """exchange-to-exchange bindings of the DLX are followed (RabbitMQ: ``rabbit_exchange:route/3``)."""
    dlx, inner = broker.exchange("dlx"), broker.exchange("inner")
    q, dlq = broker.name("q"), broker.name("dlq")
    ch.exchange_declare(dlx, "direct")
    ch.exchange_declare(inner, "direct")
    ch.exchange_bind(inner, dlx, routing_key="k")
    declare(ch, q, x_dead_letter_exchange=dlx, x_dead_letter_routing_key="k")
    declare(ch, dlq)
    ch.queue_bind(dlq, inner, routing_key="k")
    pub(ch, q, "m")
    method, _, _ = get(ch, q)
    ch.basic_reject(method.delivery_tag, requeue=False)
    wait_ready(broker, ch, dlq, 1)
    method, _, body = get(ch, dlq)
    assert (body, method.exchange, method.routing_key) == (b"m", dlx, "k")


def test_dr3_default_exchange_as_dlx(broker: Target, ch) -> None:
    """The default exchange "" can be the DLX; the delivery shows exchange "" and the DLRK (RabbitMQ:
    ``rabbit_exchange:route/3``; ``rabbit_channel:handle_deliver0``)."""
    q, dlq = broker.name("q"), broker.name("dlq")
    declare(ch, q, x_dead_letter_exchange="", x_dead_letter_routing_key=dlq)
    declare(ch, dlq)
    pub(ch, q, "m")
    method, _, _ = get(ch, q)
    ch.basic_reject(method.delivery_tag, requeue=False)
    wait_ready(broker, ch, dlq, 1)
    method, _, body = get(ch, dlq)
    # 4.3: basic.reject is a failed delivery; the copy carries the count and is delivered as redelivered
    redelivered = broker.at_least("4.3")
    assert (body, method.exchange, method.routing_key, method.redelivered) == (b"m", "", dlq, redelivered)


def test_dr3_dr5_unroutable_dead_letter_is_dropped_without_return(broker: Target, conn) -> None:
    """A dead letter that routes nowhere is dropped; no basic.return, no extra confirm (RabbitMQ:
    ``rabbit_exchange:route/3``; RabbitMQ's dlx.md (Safety))."""
    ch = conn.channel()
    returned: list[bytes] = []
    ch.add_on_return_callback(lambda c, m, p, b: returned.append(b))
    ch.confirm_delivery()
    dlx = broker.exchange("dlx")
    q = broker.name("q")
    ch.exchange_declare(dlx, "direct")
    declare(ch, q, x_dead_letter_exchange=dlx, x_dead_letter_routing_key="nowhere")
    ch.basic_publish("", q, b"m", mandatory=True)  # confirmed (acked) synchronously
    method, _, _ = get(ch, q)
    ch.basic_nack(method.delivery_tag, requeue=False)
    settle(conn, 0.2)
    assert returned == []
    assert ready(ch, q) == 0
    ch.basic_publish("", q, b"after", mandatory=True)  # the channel is fine and confirms still line up
    assert ready(ch, q) == 1


def test_dr6_delivery_fields_of_a_dead_lettered_message(broker: Target, ch) -> None:
    """Exchange is the DLX, routing_key the DLRK, and redelivered is false even after a requeue (RabbitMQ:
    ``rabbit_channel:handle_deliver0``)."""
    q, dlq, dlx = setup(broker, ch)
    pub(ch, q, "m")
    method, _, _ = get(ch, q)
    ch.basic_reject(method.delivery_tag, requeue=True)
    wait_ready(broker, ch, q, 1)
    method, _, _ = get(ch, q)
    assert method.redelivered is True
    ch.basic_reject(method.delivery_tag, requeue=False)
    wait_ready(broker, ch, dlq, 1)
    method, _, _ = get(ch, dlq)
    # ...up to 4.2; 4.3 carries the failed deliveries (two rejects) over and shows it redelivered
    assert (method.exchange, method.routing_key, method.redelivered) == (dlx, dlq, broker.at_least("4.3"))


def test_dr6_routing_key_without_dlrk_is_the_publish_key(broker: Target, ch) -> None:
    """Without a DLRK the delivery's routing key is the original publish key (RabbitMQ:
    ``rabbit_dead_letter:publish/5``; ``rabbit_channel:handle_deliver0``)."""
    src, dlx = broker.exchange("src"), broker.exchange("dlx")
    q, dlq = broker.name("q"), broker.name("dlq")
    ch.exchange_declare(src, "topic")
    ch.exchange_declare(dlx, "topic")
    declare(ch, q, x_dead_letter_exchange=dlx)
    declare(ch, dlq)
    ch.queue_bind(q, src, routing_key="orders.*")
    ch.queue_bind(dlq, dlx, routing_key="#")
    ch.basic_publish(src, "orders.new", b"m")
    method, _, _ = get(ch, q)
    assert method.exchange == src
    ch.basic_reject(method.delivery_tag, requeue=False)
    wait_ready(broker, ch, dlq, 1)
    method, props, _ = get(ch, dlq)
    assert (method.exchange, method.routing_key) == (dlx, "orders.new")
    death = props.headers["x-death"][0]
    assert (death["exchange"], death["routing-keys"]) == (src, ["orders.new"])


def test_dr9_dlrk_from_policy_without_dlx_does_nothing(broker: Target, ch) -> None:
    """A DLRK without any DLX leaves dead-lettering off (the message is discarded) (RabbitMQ:
    ``rabbit_amqqueue_process:with_dlx/3``)."""
    q, other = broker.name("q"), broker.name("other")
    declare(ch, q)
    declare(ch, other)
    broker.set_policy(broker.name("pol"), anchored(q), {"dead-letter-routing-key": other})
    pub(ch, q, "m")
    method, _, _ = get(ch, q)
    ch.basic_reject(method.delivery_tag, requeue=False)
    quiet(broker)
    assert ready(ch, q) == 0 and ready(ch, other) == 0


def test_dead_letter_to_several_queues(broker: Target, ch) -> None:
    """One dead-lettering is routed like a publish, so every bound queue gets a copy (RabbitMQ:
    ``rabbit_exchange:route/3``)."""
    dlx = broker.exchange("dlx")
    q, d1, d2 = broker.name("q"), broker.name("d1"), broker.name("d2")
    ch.exchange_declare(dlx, "fanout")
    declare(ch, q, x_dead_letter_exchange=dlx)
    for d in (d1, d2):
        declare(ch, d)
        ch.queue_bind(d, dlx)
    pub(ch, q, "m")
    method, _, _ = get(ch, q)
    ch.basic_reject(method.delivery_tag, requeue=False)
    wait_ready(broker, ch, d1, 1)
    wait_ready(broker, ch, d2, 1)
    assert drain(ch, d1) == drain(ch, d2) == [b"m"]


def test_dead_letter_consumer_on_dlq_gets_it_pushed(broker: Target, conn) -> None:
    """A consumer on the DLQ receives dead letters as they happen (expiry on the virtual clock)."""
    ch = conn.channel()
    q, dlq, dlx = setup(broker, ch, extra={"x-message-ttl": 300})
    got: list[tuple[bytes, str, str]] = []
    ch.basic_consume(dlq, lambda c, m, p, b: got.append((b, m.exchange, p.headers["x-death"][0]["reason"])), True)
    pub(ch, q, "m")
    settle(conn, 0.05)
    assert got == []
    broker.advance(0.4)
    pump(conn, lambda: len(got) == 1)
    assert got == [(b"m", dlx, "expired")]


def test_dead_lettering_switch_off(broker: Target) -> None:
    """``FakeRabbit(dead_lettering=False)``: rejected/expired/dropped messages are discarded, never re-routed."""
    if broker.fake is None:
        pytest.skip("fakerabbit switch")
    from fakerabbit import FakeRabbit

    with FakeRabbit(dead_lettering=False) as rabbit:
        conn = pika.BlockingConnection(pika.URLParameters(rabbit.url))
        ch = conn.channel()
        ch.queue_declare("dlq")
        ch.queue_declare(
            "q",
            arguments={
                "x-dead-letter-exchange": "",
                "x-dead-letter-routing-key": "dlq",
                "x-message-ttl": 1000,
                "x-max-length": 2,
            },
        )
        for b in (b"1", b"2", b"3"):
            ch.basic_publish("", "q", b)  # 1 dropped by max-length
        method, _, _ = ch.basic_get("q")
        ch.basic_reject(method.delivery_tag, requeue=False)  # 2 rejected
        rabbit.clock.advance(2)  # 3 expires
        assert ch.queue_declare("dlq", passive=True).method.message_count == 0
        assert ch.queue_declare("q", passive=True).method.message_count == 0
        reasons = [e.details["reason"] for e in rabbit._broker.events if e.kind == "dropped"]
        assert reasons == ["maxlen", "rejected", "expired"]
        conn.close()


# ---------------------------------------------------------------------------------------------------------
# dead_lettering_SUITE's metric_* cases. The fake has no Prometheus counters (rabbit_global_counters'
# messages_dead_lettered_*_total); its event log is the equivalent: one ``dropped`` event per message, with the reason
# the counter would be labelled with.


def _dropped(broker: Target, reason: str) -> int:
    assert broker.fake is not None
    return sum(1 for e in broker.fake._broker.events if e.kind == "dropped" and e.details["reason"] == reason)


def test_q39_metric_maxlen(broker: Target, ch) -> None:
    """max-length 1, drop-head, no DLX: 1000 publishes leave the last one; 999 dropped (maxlen) (RabbitMQ:
    ``dead_lettering_SUITE:metric_maxlen``)."""
    q = broker.name("q")
    declare(ch, q, x_max_length=1, x_overflow="drop-head")
    for i in range(1000):
        pub(ch, q, str(i))
    quiet(broker)
    assert drain(ch, q) == [b"999"]
    if broker.fake is not None:
        assert _dropped(broker, "maxlen") == 999


def test_q40_metric_rejected(broker: Target, conn) -> None:
    """1000 consumed and rejected messages without a DLX are all discarded (rejected) (RabbitMQ:
    ``dead_lettering_SUITE:metric_rejected``)."""
    ch = conn.channel()
    q = broker.name("q")
    declare(ch, q)
    for i in range(1000):
        pub(ch, q, str(i))
    n: list[int] = []

    def on(chan, method, props, body) -> None:
        n.append(1)
        chan.basic_reject(method.delivery_tag, requeue=False)

    ch.basic_consume(q, on)
    pump(conn, lambda: len(n) == 1000, timeout=10)
    settle(conn, 0.1)
    assert len(n) == 1000
    assert ready(conn.channel(), q) == 0
    if broker.fake is not None:
        assert _dropped(broker, "rejected") == 1000


@pytest.mark.parametrize("how", ["queue-ttl", "per-message-ttl"])
def test_q41_q42_metric_expired(broker: Target, ch, how: str) -> None:
    """TTL 0 (queue or per message), no consumer, no DLX: 1000 publishes all expire at once (RabbitMQ:
    ``dead_lettering_SUITE:metric_expired_queue_msg_ttl``; ``dead_lettering_SUITE:metric_expired_per_msg_msg_ttl``)."""
    q = broker.name("q")
    declare(ch, q, x_message_ttl=0 if how == "queue-ttl" else None)
    for i in range(1000):
        if how == "queue-ttl":
            pub(ch, q, str(i))
        else:
            pub(ch, q, str(i), expiration="0")
    quiet(broker)
    assert ready(ch, q) == 0
    if broker.fake is not None:
        assert _dropped(broker, "expired") == 1000
