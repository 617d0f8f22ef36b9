"""Rules the differential fuzzer found (tests/differential/FOUND.md), each checked on every live version.

- Headers are delivered sorted by key, duplicates removed, from 3.13 (``mc_amqpl:protocol_state/2``).
- Quorum queues count each unsettled ``basic.get`` as a consumer (rabbit_fifo), and with single active consumer
  only the active consumer.
- An exclusive consume on a classic single-active-consumer queue is refused, even on an unused queue; quorum
  queues ignore ``exclusive`` on a consume altogether.
- ``basic.get`` on a quorum queue with single active consumer is refused (405).
- Quorum queue message priorities (4.0+) and what they do to TTL: only the next message out expires.
- 3.x quorum queues: a consumer's first delivery has no ``x-delivery-count``; a get's has 0.
"""

from __future__ import annotations

import struct
import time
from typing import Any

import pika
import pytest
from pika.adapters.blocking_connection import BlockingChannel

from fakerabbit.broker.fields import Field, decode_field, encode_table
from tests.conformance.conftest import Target, pump
from tests.conformance.ttlhelpers import channel_error, eventually
from tests.conformance.versions import for_versions
from tests.rawamqp import RawAMQP, RawMessage

# -- helpers --------------------------------------------------------------------------------------------


def headers_block(entries: list[tuple[str, Field]]) -> bytes:
    """A property block with only a headers table holding ``entries`` in this order (duplicates allowed)."""
    body = b"".join(encode_table({k: f})[4:] for k, f in entries)
    return struct.pack(">HI", 0x2000, len(body)) + body


def wire_headers(msg: RawMessage) -> list[tuple[str, Field]] | None:
    """The headers table of a block with only headers, as (key, field) pairs in wire order, duplicates kept."""
    raw = msg.props.raw
    if not struct.unpack_from(">H", raw)[0] & 0x2000:
        return None
    (size,) = struct.unpack_from(">I", raw, 2)
    pos, end = 6, 6 + size
    out: list[tuple[str, Field]] = []
    while pos < end:
        n = raw[pos]
        key = raw[pos + 1 : pos + 1 + n].decode()
        field, pos = decode_field(raw, pos + 1 + n)
        out.append((key, field))
    return out


def quorum(broker: Target, ch: BlockingChannel, base: str = "qq", **args: Any) -> str:
    q = broker.name(base)
    ch.queue_declare(q, durable=True, arguments={"x-queue-type": "quorum", **args})
    return q


def raw_get(broker: Target, raw: RawAMQP, q: str) -> RawMessage:
    msg = eventually(broker, lambda: raw.basic_get(q, no_ack=False), lambda m: m is not None)
    assert msg is not None
    return msg


# -- 3.13+: headers sorted by key, duplicates removed -----------------------------------------------------

UNSORTED: list[tuple[str, Field]] = [
    ("h", ("S", "a")),
    ("g", ("S", "b")),
    ("h", ("S", "c")),
    ("n", ("F", {"z": ("l", 1), "a": ("l", 2)})),
    ("B", ("l", 1)),
    ("a", ("l", 3)),
]
SORTED_UNIQUE: list[tuple[str, Field]] = [
    ("B", ("l", 1)),  # byte order: upper case first
    ("a", ("l", 3)),
    ("g", ("S", "b")),
    ("h", ("S", "a")),  # the first of the duplicates
    ("n", ("F", {"z": ("l", 1), "a": ("l", 2)})),  # nested tables untouched
]


@for_versions()
def test_headers_sorted_and_unique_from_313(broker: Target, ch: BlockingChannel) -> None:
    q = broker.name()
    ch.queue_declare(q)
    with RawAMQP.with_channel(broker.url) as raw:
        raw.publish(1, "", q, b"x", headers_block(UNSORTED))
        raw.publish(1, "", q, b"empty", headers_block([]))
        raw.publish(1, "", q, b"sorted", headers_block(SORTED_UNIQUE))
        raw.sync()
        got = [wire_headers(raw_get(broker, raw, q)) for _ in range(3)]
    if broker.at_least("3.13"):
        assert got == [SORTED_UNIQUE, [], SORTED_UNIQUE]
    else:
        assert got == [UNSORTED, [], SORTED_UNIQUE]


@for_versions()
def test_headers_sorted_on_consume_and_return(broker: Target, conn: pika.BlockingConnection) -> None:
    ch = conn.channel()
    q = broker.name()
    ch.queue_declare(q)
    returned: list[list[str]] = []
    ch.add_on_return_callback(lambda _c, _m, p, _b: returned.append(list(p.headers or {})))
    props = pika.BasicProperties(headers={"zz": 1, "b": "x", "a": 2})
    ch.basic_publish("", broker.name("nowhere"), b"r", props, mandatory=True)
    ch.basic_publish("", q, b"c", props)
    delivered: list[list[str]] = []
    ch.basic_consume(q, lambda _c, _m, p, _b: delivered.append(list(p.headers or {})), auto_ack=True)
    pump(conn, lambda: returned and delivered)
    expected = ["a", "b", "zz"] if broker.at_least("3.13") else ["zz", "b", "a"]
    assert (returned, delivered) == ([expected], [expected])


@for_versions()
def test_quorum_redelivery_headers_sorted(broker: Target, ch: BlockingChannel) -> None:
    q = quorum(broker, ch)
    with RawAMQP.with_channel(broker.url) as raw:
        raw.publish(1, "", q, b"x", headers_block([("zz", ("S", "z")), ("a", ("S", "a"))]))
        raw.sync()
        first = raw_get(broker, raw, q)
        raw.reject(first.delivery_tag, requeue=True)
        again = raw_get(broker, raw, q)
    keys = [k for k, _ in wire_headers(again) or []]
    # 3.10 sorts too when it adds the header (rabbit_basic:add_header -> rabbit_misc:set_table_value).
    if broker.at_least("4.3"):
        assert keys == ["a", "x-acquired-count", "x-delivery-count", "zz"]
    else:
        assert keys == ["a", "x-delivery-count", "zz"]


@for_versions()
def test_dead_lettered_copy_headers_sorted(broker: Target, ch: BlockingChannel) -> None:
    dlq = broker.name("dlq")
    ch.queue_declare(dlq)
    q = broker.name()
    ch.queue_declare(q, arguments={"x-dead-letter-exchange": "", "x-dead-letter-routing-key": dlq})
    ch.basic_publish("", q, b"x", pika.BasicProperties(headers={"zz": 1, "a": 2}))
    method, _, _ = eventually(broker, lambda: ch.basic_get(q), lambda r: r[0] is not None)
    ch.basic_reject(method.delivery_tag, requeue=False)
    _, props, _ = eventually(broker, lambda: ch.basic_get(dlq, auto_ack=True), lambda r: r[0] is not None)
    assert list(props.headers)[:2] == ["a", "x-death"]
    assert list(props.headers)[-1] == "zz"
    assert list(props.headers) == sorted(props.headers)


# -- quorum consumer_count: rabbit_fifo's consumers map ---------------------------------------------------


def consumer_count(broker: Target, ch: BlockingChannel, q: str, expected: int) -> int:
    """The passive declare's consumer_count (retried briefly on a real broker until it is ``expected``)."""
    return eventually(broker, lambda: ch.queue_declare(q, passive=True).method.consumer_count, lambda n: n == expected)


@for_versions()
def test_quorum_unsettled_get_counts_as_a_consumer(broker: Target, conn: pika.BlockingConnection) -> None:
    ch, other = conn.channel(), conn.channel()
    q = quorum(broker, ch)
    ch.confirm_delivery()
    for i in range(6):
        ch.basic_publish("", q, b"m%d" % i)
    m1 = eventually(broker, lambda: ch.basic_get(q)[0], lambda m: m is not None)
    m2 = ch.basic_get(q)[0]
    assert m1 is not None and m2 is not None
    assert consumer_count(broker, other, q, 2) == 2  # one per unsettled get, on the same channel
    ch.basic_ack(m1.delivery_tag)
    assert consumer_count(broker, other, q, 1) == 1
    ch.basic_nack(m2.delivery_tag, requeue=True)
    assert consumer_count(broker, other, q, 0) == 0
    assert ch.basic_get(q, auto_ack=True)[0] is not None  # no_ack: settled at once, no consumer
    assert consumer_count(broker, other, q, 0) == 0
    third = conn.channel()
    assert third.basic_get(q)[0] is not None and third.basic_get(q)[0] is not None
    assert consumer_count(broker, other, q, 2) == 2
    third.basic_ack(0, multiple=True)
    assert consumer_count(broker, other, q, 0) == 0
    assert third.basic_get(q)[0] is not None
    assert consumer_count(broker, other, q, 1) == 1
    third.close()  # released: the message goes back, the consumer away
    assert consumer_count(broker, other, q, 0) == 0


def test_quorum_get_acked_in_a_transaction_counts_until_commit(broker: Target, conn: pika.BlockingConnection) -> None:
    ch, other = conn.channel(), conn.channel()
    q = quorum(broker, ch)
    ch.confirm_delivery()
    ch.basic_publish("", q, b"m")
    tx = conn.channel()
    tx.tx_select()
    m = eventually(broker, lambda: tx.basic_get(q)[0], lambda m: m is not None)
    assert m is not None
    tx.basic_ack(m.delivery_tag)
    assert consumer_count(broker, other, q, 1) == 1  # the ack waits for the commit
    tx.tx_commit()
    assert consumer_count(broker, other, q, 0) == 0


def test_quorum_cancelled_consumer_counts_until_its_deliveries_are_settled(
    broker: Target, conn: pika.BlockingConnection
) -> None:
    """rabbit_fifo keeps a cancelled consumer's record while it has checked-out messages (differential fuzzer,
    FOUND.md 1): it stays in consumer_count until they are acked, or released with its channel."""
    ch, other = conn.channel(), conn.channel()
    q = quorum(broker, ch)
    ch.confirm_delivery()
    for body in (b"m1", b"m2"):
        ch.basic_publish("", q, body)
    got: list[int] = []
    ch.basic_qos(prefetch_count=1)
    tag = ch.basic_consume(q, lambda _c, m, _p, _b: got.append(m.delivery_tag))
    eventually(broker, lambda: conn.process_data_events(time_limit=0.05) or len(got), lambda n: n == 1)
    ch.basic_cancel(tag)
    assert consumer_count(broker, other, q, 1) == 1  # cancelled, one message unacked
    ch.basic_ack(got[0])
    assert consumer_count(broker, other, q, 0) == 0
    closing = conn.channel()
    got.clear()
    tag = closing.basic_consume(q, lambda _c, m, _p, _b: got.append(m.delivery_tag))
    eventually(broker, lambda: conn.process_data_events(time_limit=0.05) or len(got), lambda n: n == 1)
    closing.basic_cancel(tag)
    assert consumer_count(broker, other, q, 1) == 1
    closing.close()  # the unacked message goes back, and the record with it
    assert consumer_count(broker, other, q, 0) == 0


def test_classic_unsettled_get_is_not_a_consumer(broker: Target, ch: BlockingChannel) -> None:
    q = broker.name()
    ch.queue_declare(q)
    ch.basic_publish("", q, b"m")
    assert ch.basic_get(q)[0] is not None
    assert ch.queue_declare(q, passive=True).method.consumer_count == 0


# -- exclusive consume and single active consumer ---------------------------------------------------------


def test_exclusive_consume_on_classic_single_active_consumer_queue_refused(broker: Target, ch: BlockingChannel) -> None:
    q = broker.name()
    ch.queue_declare(q, arguments={"x-single-active-consumer": True})
    code, text = channel_error(lambda: ch.basic_consume(q, lambda *_: None, exclusive=True))
    assert (code, text) == (403, f"ACCESS_REFUSED - queue '{q}' in vhost '/' in exclusive use")


@pytest.mark.parametrize("sac", [False, True])
def test_quorum_queues_ignore_exclusive_consume(broker: Target, conn: pika.BlockingConnection, sac: bool) -> None:
    ch = conn.channel()
    q = quorum(broker, ch, **{"x-single-active-consumer": sac})
    ch.basic_consume(q, lambda *_: None, exclusive=True)
    conn.channel().basic_consume(q, lambda *_: None)  # no 403: the exclusive consumer does not hold the queue
    conn.channel().basic_consume(q, lambda *_: None, exclusive=True)  # nor does an exclusive one need it unused


# -- quorum queues with single active consumer -----------------------------------------------------------


@for_versions()
def test_get_on_quorum_single_active_consumer_queue_refused(broker: Target, ch: BlockingChannel) -> None:
    q = quorum(broker, ch, **{"x-single-active-consumer": True})
    ch.basic_publish("", q, b"m")
    code, text = channel_error(lambda: ch.basic_get(q))
    kind = '<<"quorum">>' if broker.at_least("4.2") else "quorum"
    assert (code, text) == (
        405,
        f"RESOURCE_LOCKED - cannot obtain access to locked queue '{q}' in vhost '/'. "
        f"basic.get operations are not supported by {kind} queues with single active consumer",
    )


def test_quorum_single_active_consumer_counts_only_the_active_consumer(
    broker: Target, conn: pika.BlockingConnection
) -> None:
    ch = conn.channel()
    q = quorum(broker, ch, **{"x-single-active-consumer": True})
    ch.basic_consume(q, lambda *_: None)
    conn.channel().basic_consume(q, lambda *_: None)
    other = conn.channel()
    assert consumer_count(broker, other, q, 1) == 1
    classic = broker.name("classic")
    ch.queue_declare(classic, arguments={"x-single-active-consumer": True})
    ch.basic_consume(classic, lambda *_: None)
    conn.channel().basic_consume(classic, lambda *_: None)
    assert other.queue_declare(classic, passive=True).method.consumer_count == 2  # classic: every consumer


# -- quorum queue message priorities (4.0+) ---------------------------------------------------------------


def publish_all(ch: BlockingChannel, q: str, messages: list[tuple[str, int | None, str | None]]) -> None:
    ch.confirm_delivery()
    for body, priority, expiration in messages:
        ch.basic_publish("", q, body.encode(), pika.BasicProperties(priority=priority, expiration=expiration))


def ready(broker: Target, ch: BlockingChannel, q: str, expected: int) -> int:
    return eventually(broker, lambda: ch.queue_declare(q, passive=True).method.message_count, lambda n: n == expected)


@for_versions()
def test_quorum_expired_high_priority_message_at_its_head_is_dropped(broker: Target, ch: BlockingChannel) -> None:
    q = quorum(broker, ch)
    publish_all(ch, q, [("normal", None, None), ("high", 5, "0")])
    # 4.0+: the priority-5 message is the next out (high before normal), so it expires at once
    expected = 1 if broker.at_least("4.0") else 2
    assert ready(broker, ch, q, expected) == expected
    q2 = quorum(broker, ch, "qq2")
    publish_all(ch, q2, [("normal", None, None), ("four", 4, "0")])  # same priority as a message without one
    assert ready(broker, ch, q2, 2) == 2
    q3 = quorum(broker, ch, "qq3")
    publish_all(ch, q3, [("h0", 9, None), ("h1", 9, "0"), ("n0", None, None)])  # behind another: stays
    assert ready(broker, ch, q3, 3) == 3


@for_versions()
def test_quorum_expired_message_at_the_head_of_a_lower_priority_is_dropped_on_43(
    broker: Target, ch: BlockingChannel
) -> None:
    # 4.3 (rabbit_fifo timer_effect / expire_batch): the head of every priority level expires on time, not only
    # the next message out; 4.0 - 4.2 and 3.x: only the next message out.
    q = quorum(broker, ch)
    publish_all(ch, q, [("normal", None, None), ("low", 1, "0")])
    expected = 1 if broker.at_least("4.3") else 2
    assert ready(broker, ch, q, expected) == expected
    q2 = quorum(broker, ch, "qq2")
    publish_all(ch, q2, [("normal", None, None), ("low", 1, "30")])
    broker.advance(0.08)
    assert ready(broker, ch, q2, expected) == expected


@for_versions()
def test_quorum_priority_delivery_order(broker: Target, ch: BlockingChannel) -> None:
    q = quorum(broker, ch)
    publish_all(ch, q, [("n0", None, None), ("n1", None, None), ("n2", None, None), ("p3", 3, None)])
    publish_all(ch, q, [(f"h{i}", 9, None) for i in range(4)])
    publish_all(ch, q, [("p4", 4, None), ("p7", 7, None)])
    ready(broker, ch, q, 10)
    got = []
    for _ in range(10):
        _, _, body = ch.basic_get(q, auto_ack=True)
        got.append(body.decode())
    if broker.at_least("4.3"):  # rabbit_fifo_pq: 0 - 31 strictly, no priority = 4
        assert got == ["h0", "h1", "h2", "h3", "p7", "n0", "n1", "n2", "p4", "p3"]
    elif broker.at_least("4.0"):  # rabbit_fifo_q: high (> 4) twice, then normal if its head is older
        assert got == ["h0", "h1", "n0", "h2", "h3", "n1", "p7", "n2", "p3", "p4"]
    else:
        assert got == ["n0", "n1", "n2", "p3", "h0", "h1", "h2", "h3", "p4", "p7"]


# -- x-delivery-count on the first delivery ---------------------------------------------------------------


@for_versions()
def test_quorum_first_delivery_count_header(broker: Target, conn: pika.BlockingConnection) -> None:
    ch = conn.channel()
    q = quorum(broker, ch)
    publish_all(ch, q, [("plain", None, None)])
    ch.basic_publish("", q, b"empty", pika.BasicProperties(headers={}))
    ch.basic_publish("", q, b"own", pika.BasicProperties(headers={"zz": 1, "a": 2}))
    ch.basic_publish("", q, b"got", pika.BasicProperties(headers={"zz": 1}))
    ready(broker, ch, q, 4)
    seen: list[tuple[bytes, Any]] = []
    ch.basic_qos(prefetch_count=3)
    ch.basic_consume(q, lambda _c, _m, p, b: seen.append((b, p.headers)))
    pump(conn, lambda: len(seen) == 3)
    _, props, _ = ch.basic_get(q)
    if broker.at_least("3.13"):  # mc: the annotation is only added once the message was returned
        assert seen == [(b"plain", None), (b"empty", {}), (b"own", {"a": 2, "zz": 1})]
        assert props.headers == {"zz": 1}
    else:  # 3.10: consumers get the publisher's headers untouched, a get x-delivery-count 0
        assert seen == [(b"plain", None), (b"empty", {}), (b"own", {"zz": 1, "a": 2})]
        assert list(props.headers.items()) == [("x-delivery-count", 0), ("zz", 1)]


# -- 4.3: a quorum TTL-0 message returned by a closed channel is dead-lettered as a failed delivery --------


@for_versions()
def test_quorum_ttl0_message_returned_by_a_closed_channel_dead_letters_redelivered_on_43(
    broker: Target, conn: pika.BlockingConnection
) -> None:
    """FOUND.md 12. A quorum queue with TTL 0 delivers to a waiting consumer; when that consumer's channel closes,
    the returned message has expired and is dead-lettered carrying the failed delivery (rabbit_fifo:annotate_msg),
    which 4.3's classic queue turns into redelivered=true (rabbit_variable_queue:update_delivery_count)."""
    ch = conn.channel()
    dlq = broker.name("dlq")
    ch.queue_declare(dlq)
    q = quorum(broker, ch, **{"x-message-ttl": 0, "x-dead-letter-exchange": "", "x-dead-letter-routing-key": dlq})
    consumer = conn.channel()
    seen: list[bool] = []
    consumer.basic_consume(q, lambda _c, m, _p, _b: seen.append(m.redelivered))
    ch.basic_publish("", q, b"m")
    pump(conn, lambda: len(seen) == 1)
    assert seen == [False]
    consumer.close()
    ready(broker, ch, dlq, 1)
    method, _, body = ch.basic_get(dlq, auto_ack=True)
    assert body == b"m"
    assert method.redelivered is broker.at_least("4.3")
    assert ch.queue_declare(q, passive=True).method.message_count == 0


# -- quorum reject-publish does not refuse dead letters ----------------------------------------------------


@for_versions()
@pytest.mark.parametrize("source", ["classic", "quorum"])
def test_quorum_reject_publish_target_takes_every_dead_letter(
    broker: Target, conn: pika.BlockingConnection, source: str
) -> None:
    """Found by the fuzzer after FOUND.md 12. A quorum queue's ``reject-publish`` blocks enqueuers
    (rabbit_fifo_client), and dead-lettering enqueues untracked (rabbit_dead_letter): the target takes every dead
    letter past its limit, while a confirmed publish from a channel is nacked."""
    ch = conn.channel()
    target = quorum(broker, ch, "target", **{"x-overflow": "reject-publish", "x-max-length": 1})
    args: dict[str, Any] = {"x-dead-letter-exchange": "", "x-dead-letter-routing-key": target}
    src = quorum(broker, ch, "src", **args) if source == "quorum" else broker.name("src")
    if source == "classic":
        ch.queue_declare(src, arguments=args)
    for i in range(3):
        ch.basic_publish("", src, f"m{i}".encode(), pika.BasicProperties(expiration="0"))
    assert ready(broker, ch, target, 3) == 3
    confirming = conn.channel()
    confirming.confirm_delivery()
    with pytest.raises(pika.exceptions.NackError):
        confirming.basic_publish("", target, b"direct")
    assert ch.queue_declare(target, passive=True).method.message_count == 3


# -- quorum basic.get: an expired message the dequeue exposes --------------------------------------------------


@for_versions()
@pytest.mark.parametrize("no_ack", [False, True])
def test_quorum_get_counts_the_expired_message_it_exposes_unless_settled(
    broker: Target, ch: BlockingChannel, no_ack: bool
) -> None:
    """FOUND.md 14. rabbit_fifo expires only at the head, at the start of a command: an unsettled dequeue's get-ok
    still counts a TTL-0 message it exposed (the queue's timer drops it right after), while a no-ack dequeue
    settles at once and that settle's checkout expires it first.

    rabbit_fifo gives a TTL-0 message an expiry 1 ms after its enqueue (``update_expiry_header``: "we discard the
    message if it cannot be consumed within the same millisecond"), so a get in the enqueue's millisecond still
    counts it (7-20 % of runs on a quiet node, and once in CI). The fake's clock does not split a millisecond:
    every later command is a later millisecond, which the live side waits for."""
    q = quorum(broker, ch)
    publish_all(ch, q, [("head", None, None), ("ttl0", None, "0")])
    assert ready(broker, ch, q, 2) == 2
    if not broker.is_fake:
        time.sleep(0.005)  # leave the enqueue's millisecond (0 of 80 runs per pause of 1-20 ms still counted it)
    method, _, body = ch.basic_get(q, auto_ack=no_ack)
    assert body == b"head"
    assert method.message_count == (0 if no_ack else 1)
    assert ready(broker, ch, q, 0) == 0
    assert ch.basic_get(q, auto_ack=True) == (None, None, None)


# -- a channel's first publish to a quorum queue registers an enqueuer first -----------------------------------


def _first_publish_race(broker: Target, ch: BlockingChannel, registered: bool, run: int) -> int:
    """One run of FOUND.md 15's scenario with fresh names; returns the quorum queue's count after the publish."""
    fanout, dlx = broker.exchange(f"fan{run}"), broker.exchange(f"dlx{run}")
    ch.exchange_declare(fanout, "fanout")
    ch.exchange_declare(dlx, "fanout", arguments={"alternate-exchange": fanout})
    classic = broker.name(f"classic{run}")
    ch.queue_declare(classic, arguments={"x-dead-letter-exchange": dlx})
    ch.queue_bind(classic, fanout, "")
    q = quorum(broker, ch, f"qq{run}")
    ch.queue_bind(q, fanout, "")
    if registered:
        ch.basic_publish("", q, b"first")
        assert ready(broker, ch, q, 1) == 1
        assert ch.basic_get(q, auto_ack=True)[2] == b"first"
    ch.basic_publish(fanout, "", b"m", pika.BasicProperties(expiration="0"))
    expected = 1 if registered else 2
    count = ready(broker, ch, q, expected)
    _, props, body = ch.basic_get(q, auto_ack=True)
    assert body == b"m" and props.expiration is None  # the dead-lettered copy; the original expired on the way
    assert [d["queue"] for d in props.headers["x-death"]] == [classic]
    assert ch.basic_get(q, auto_ack=True) == (None, None, None)
    return count


@for_versions()
@pytest.mark.parametrize("registered", [False, True])
def test_first_publish_to_a_quorum_queue_lands_after_what_other_queues_dead_letter_into_it(
    broker: Target, ch: BlockingChannel, registered: bool
) -> None:
    """FOUND.md 15. A fanout routes a TTL-0 message to a classic queue, which dead-letters it at once (through an
    exchange whose alternate is the fanout) into a quorum queue that got the message too. A channel's first publish
    to a quorum queue waits for rabbit_fifo_client's enqueuer registration, so the dead-lettered copy lands first
    and the expired original stays counted behind it (2); once registered, the original lands first and expires at
    the head (1). In RabbitMQ this is a race between two processes that the registration decides on a quiet node;
    under load it can go the other way, so the live side must show the rule in one of up to five runs and nothing
    but the two outcomes in any; the fake shows it every time."""
    expected = 1 if registered else 2
    counts = []
    for run in range(1 if broker.is_fake else 5):
        counts.append(_first_publish_race(broker, ch, registered, run))
        if counts[-1] == expected:
            break
    assert counts[-1] == expected and set(counts) <= {1, 2}, counts


# -- quorum reject-publish blocks enqueuers one by one ---------------------------------------------------------


def _confirmed(ch: BlockingChannel, q: str, body: bytes) -> bool:
    """Publish with confirms; True if acked, False if nacked."""
    try:
        ch.basic_publish("", q, body)
    except pika.exceptions.NackError:
        return False
    return True


@for_versions()
def test_quorum_reject_publish_blocks_each_enqueuer_and_judges_a_new_one_by_the_queue_then(
    broker: Target, conn: pika.BlockingConnection
) -> None:
    """FOUND.md 16. RabbitMQ blocks enqueuers, not the queue: when a publish puts a quorum ``reject-publish`` queue
    over its limit, every channel registered with it is told ``reject_publish`` until the queue falls to 80 % of
    the limit (``rabbit_fifo:evaluate_limit``), but a channel whose first publish comes later is refused only if
    the queue is over the limit at that moment (``register_enqueuer``)."""
    first = conn.channel()
    first.confirm_delivery()
    q = quorum(broker, first, **{"x-overflow": "reject-publish", "x-max-length": 1})
    assert _confirmed(first, q, b"m1")
    assert _confirmed(first, q, b"m2")  # accepted; now over the limit: the channel is blocked
    assert ready(broker, first, q, 2) == 2
    assert not _confirmed(first, q, b"m3")
    late = conn.channel()
    late.confirm_delivery()
    assert not _confirmed(late, q, b"late")  # registers while over the limit: refused
    assert first.basic_get(q, auto_ack=True)[2] == b"m1"
    assert ready(broker, first, q, 1) == 1  # at the limit, not over it, nor below 80 % of it
    assert not _confirmed(first, q, b"m4")
    assert not _confirmed(late, q, b"late2")
    newcomer = conn.channel()
    newcomer.confirm_delivery()
    assert _confirmed(newcomer, q, b"new")  # registers at the limit, not over it: let in
    assert ready(broker, first, q, 2) == 2
    assert not _confirmed(newcomer, q, b"new2")  # ... and blocked with the others by its own publish
    assert not _confirmed(first, q, b"m5")
    assert [first.basic_get(q, auto_ack=True)[2] for _ in range(2)] == [b"m2", b"new"]
    assert ready(broker, first, q, 0) == 0
    assert _confirmed(first, q, b"m6")  # below the soft limit: every enqueuer was told go
    assert _confirmed(late, q, b"late3")
    assert [first.basic_get(q, auto_ack=True)[2] for _ in range(2)] == [b"m6", b"late3"]


@for_versions()
def test_quorum_reject_publish_unblocks_when_the_queue_falls_below_80_percent_even_if_it_climbs_back(
    broker: Target, conn: pika.BlockingConnection
) -> None:
    """FOUND.md 16. rabbit_fifo tells every enqueuer ``go`` in the command that takes the queue below 80 % of its
    limit (``evaluate_limit`` compares the state before and after it): a publish later is accepted even if returns
    have taken the queue back above 80 % (but not over the limit) meanwhile."""
    ch = conn.channel()
    ch.confirm_delivery()
    q = quorum(broker, ch, **{"x-overflow": "reject-publish", "x-max-length": 5})
    for i in range(6):
        assert _confirmed(ch, q, f"m{i}".encode())  # the sixth takes it over the limit: blocked
    assert not _confirmed(ch, q, b"refused")
    reader = conn.channel()
    first, _, _ = reader.basic_get(q, auto_ack=False)
    second, _, _ = reader.basic_get(q, auto_ack=False)
    assert second.message_count == 4  # 4 ready: 80 % of 5, the soft limit: every enqueuer is told go
    reader.basic_nack(second.delivery_tag, requeue=True)
    assert ready(broker, ch, q, 5) == 5  # at the limit again, above 80 % of it
    assert _confirmed(ch, q, b"accepted")  # unblocked all the same; the queue is over the limit again
    assert not _confirmed(ch, q, b"refused again")
    reader.basic_nack(first.delivery_tag, requeue=True)
    assert ready(broker, ch, q, 7) == 7


@for_versions()
def test_purge_of_a_quorum_queue_lets_blocked_channels_in_on_43(broker: Target, conn: pika.BlockingConnection) -> None:
    """FOUND.md 17. From 4.3 a purge purges an at-least-once quorum queue's held dead letters too (``rabbit_fifo``
    ``dlx_purge``): they stop counting against its limit, so the purge takes the queue below 80 % of it and the
    channels ``reject-publish`` blocked are let in again. Up to 4.2 the held dead letters stay counted."""
    ch = conn.channel()
    ch.confirm_delivery()
    q = quorum(
        broker,
        ch,
        **{
            "x-overflow": "reject-publish",
            "x-max-length": 3,
            "x-dead-letter-strategy": "at-least-once",
            "x-dead-letter-exchange": broker.exchange("missing"),
        },
    )
    for i in range(3):  # each expires at once and is held: the DLX does not exist
        ch.basic_publish("", q, f"dead{i}".encode(), pika.BasicProperties(expiration="0"))
    assert _confirmed(ch, q, b"ready")  # 1 ready + 3 held dead letters: over the limit of 3, blocked
    assert not _confirmed(ch, q, b"refused")
    on_43 = broker.at_least("4.3")
    assert ch.queue_purge(q).method.message_count == (4 if on_43 else 1)
    assert _confirmed(ch, q, b"after purge") == on_43
