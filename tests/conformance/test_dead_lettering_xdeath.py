"""What dead-lettering does to the message: ``x-death``, ``x-first/last-death-*``, properties (``mc:record_death``,
``mc_amqpl:deaths_to_headers``; ``rabbit_dead_letter`` before 3.13).

Wire types and key order are read with :mod:`tests.rawamqp` (pika hides them). The local RabbitMQ
is 3.10, so the LEGACY layout is compared on both brokers with the fake on the "3.12" profile; the MC layout
(3.13+) and the 4.x rules are asserted on the fake only, under their version marker.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pika
import pytest

from fakerabbit.broker.fields import table_from_python
from fakerabbit.broker.properties import build_properties
from tests.conformance.conftest import Target
from tests.conformance.dlhelpers import (
    as_utc,
    declare,
    drain,
    get,
    now_s,
    pub,
    quiet,
    raw_get,
    ready,
    setup,
    untimed,
    wait_ready,
    x_death_tables,
)
from tests.rawamqp import RawAMQP, field_types

S = "S"

# ---------------------------------------------------------------------------------------------------------
# shape, fields and wire types (RabbitMQ: mc_amqpl:deaths_to_headers; mc_amqpl:death_table/7)


def test_q26_dead_letter_headers(broker: Target, ch) -> None:
    """One x-death entry with exact values and types, plus the x-first-death headers (RabbitMQ:
    ``dead_lettering_SUITE:dead_letter_headers``; ``mc_amqpl:death_table/7``)."""
    q, dlq, _ = setup(broker, ch)
    before = now_s(broker)
    pub(ch, q, "m1")
    method, _, _ = get(ch, q)
    ch.basic_nack(method.delivery_tag, requeue=False)
    msg = raw_get(broker, dlq)
    after = now_s(broker)
    (death,) = x_death_tables(msg)
    assert death["count"] == ("l", 1)
    assert death["reason"] == (S, "rejected")
    assert death["queue"] == (S, q)
    assert death["exchange"] == (S, "")
    assert death["routing-keys"] == ("A", [(S, q)])
    assert death["time"][0] == "T" and before <= death["time"][1] <= after
    assert "original-expiration" not in death
    h = msg.headers
    assert (h["x-first-death-reason"], h["x-first-death-queue"], h["x-first-death-exchange"]) == (
        (S, "rejected"),
        (S, q),
        (S, ""),
    )


def test_q26_dead_letter_headers_as_pika_sees_them(broker: Target, ch) -> None:
    """The same through pika: a list of one dict, ``time`` a datetime, ``count`` an int (RabbitMQ:
    ``dead_lettering_SUITE:dead_letter_headers``)."""
    q, dlq, _ = setup(broker, ch)
    pub(ch, q, "m1")
    method, _, _ = get(ch, q)
    ch.basic_nack(method.delivery_tag, requeue=False)
    wait_ready(broker, ch, dlq, 1)
    _, props, _ = get(ch, dlq)
    (death,) = props.headers["x-death"]
    assert isinstance(death["time"], datetime)
    assert abs(as_utc(death["time"]).timestamp() - now_s(broker)) <= 2
    assert {k: v for k, v in death.items() if k != "time"} == {
        "count": 1,
        "reason": "rejected",
        "queue": q,
        "exchange": "",
        "routing-keys": [q],
    }


@pytest.mark.rabbitmq_version("3.12")
def test_legacy_wire_layout_first_and_second_death(broker: Target, ch) -> None:
    """≤3.12, checked on 3.10.8: exact header and x-death layout over two deaths.

    First death: headers sorted by key, ``CC`` deleted by the DLRK, the entry in publish-time order ``count, reason,
    queue, time, exchange, routing-keys, original-expiration``. Second death (another queue): the new entry comes first
    with its keys **sorted**; the old entry is untouched. (RabbitMQ: ``mc_amqpl:deaths_to_headers``;
    ``mc_amqpl:death_table/7``; ``dead_lettering_SUITE:dead_letter_headers_CC_with_routing_key``;
    ``mc_amqpl:protocol_state``)"""
    q, d1, d2 = broker.name("q"), broker.name("d1"), broker.name("d2")
    declare(ch, q, x_dead_letter_exchange="", x_dead_letter_routing_key=d1)
    declare(ch, d1, x_dead_letter_exchange="", x_dead_letter_routing_key=d2)
    declare(ch, d2)
    headers = {"zz": 1, "CC": ["cc1"], "aa": "x", "BCC": ["bcc1"]}
    pub(ch, q, "m", expiration="60000", headers=headers, content_type="text/plain")
    method, _, _ = get(ch, q)
    ch.basic_nack(method.delivery_tag, requeue=False)
    first = raw_get(broker, d1)
    assert field_types(first.headers) == [
        ("aa", S),
        ("x-death", "A"),
        ("x-first-death-exchange", S),
        ("x-first-death-queue", S),
        ("x-first-death-reason", S),
        ("zz", "I"),
    ]
    entry_q = [
        ("count", ("l", 1)),
        ("reason", (S, "rejected")),
        ("queue", (S, q)),
        ("time", ("T", None)),
        ("exchange", (S, "")),
        ("routing-keys", ("A", [(S, q), (S, "cc1")])),
        ("original-expiration", (S, "60000")),
    ]
    assert [untimed(t) for t in x_death_tables(first)] == [entry_q]
    assert first.props.expiration is None and first.props.content_type == "text/plain"
    with RawAMQP.with_channel(broker.url) as raw:
        raw.publish(1, "", d1, first.body, first.props)  # back into d1 unchanged, then reject it there
        raw.sync()
    method, _, _ = get(ch, d1)
    ch.basic_nack(method.delivery_tag, requeue=False)
    second = raw_get(broker, d2)
    entry_d1 = [
        ("count", ("l", 1)),
        ("exchange", (S, "")),
        ("queue", (S, d1)),
        ("reason", (S, "rejected")),
        ("routing-keys", ("A", [(S, d1)])),
        ("time", ("T", None)),
    ]
    assert [untimed(t) for t in x_death_tables(second)] == [entry_d1, entry_q]
    assert field_types(second.headers) == field_types(first.headers)
    assert second.headers["x-first-death-queue"] == (S, q)


@pytest.mark.rabbitmq_version("3.12")
def test_legacy_repeat_death_sorts_and_counts(broker: Target, ch) -> None:
    """≤3.12: a second death for the same (queue, reason) bumps ``count`` and re-sorts the entry (RabbitMQ:
    ``mc:record_death``)."""
    q = broker.name("q")
    declare(ch, q, x_dead_letter_exchange="")
    pub(ch, q, "m", expiration="60000")
    for _ in range(2):
        method, _, _ = get(ch, q)
        ch.basic_nack(method.delivery_tag, requeue=False)
        quiet(broker)
    msg = raw_get(broker, q)
    assert [untimed(t) for t in x_death_tables(msg)] == [
        [
            ("count", ("l", 2)),
            ("exchange", (S, "")),
            ("original-expiration", (S, "60000")),
            ("queue", (S, q)),
            ("reason", (S, "rejected")),
            ("routing-keys", ("A", [(S, q)])),
            ("time", ("T", None)),
        ]
    ]


@pytest.mark.fake_only
@pytest.mark.rabbitmq_version("3.13")
def test_mc_wire_layout(broker: Target, ch) -> None:
    """MC, ≥3.13: ``original-expiration`` first, headers sorted, CC kept with a DLRK, ``x-last-death-*`` present:
    x-death, the six death headers and the original headers except BCC (RabbitMQ: ``mc_amqpl:death_table/7``;
    ``dead_lettering_SUITE:dead_letter_headers_CC_with_routing_key``; ``mc_amqpl:protocol_state``; ``mc:record_death``;
    ``mc_amqpl:deaths_to_headers``)."""
    q, d1, d2 = broker.name("q"), broker.name("d1"), broker.name("d2")
    declare(ch, q, x_dead_letter_exchange="", x_dead_letter_routing_key=d1)
    declare(ch, d1, x_dead_letter_exchange="", x_dead_letter_routing_key=d2)
    declare(ch, d2)
    pub(ch, q, "m", expiration="60000", headers={"zz": 1, "CC": ["cc1"], "aa": "x", "BCC": ["bcc1"]})
    method, _, _ = get(ch, q)
    ch.basic_nack(method.delivery_tag, requeue=False)
    t1 = now_s(broker)
    broker.advance(3)
    method, _, _ = get(ch, d1)
    ch.basic_nack(method.delivery_tag, requeue=False)
    msg = raw_get(broker, d2)
    assert field_types(msg.headers) == [
        ("CC", "A"),
        ("aa", S),
        ("x-death", "A"),
        ("x-first-death-exchange", S),
        ("x-first-death-queue", S),
        ("x-first-death-reason", S),
        ("x-last-death-exchange", S),
        ("x-last-death-queue", S),
        ("x-last-death-reason", S),
        ("zz", "I"),
    ]
    assert msg.headers["CC"] == ("A", [(S, "cc1")])
    assert [list(t.items()) for t in x_death_tables(msg)] == [
        [
            ("count", ("l", 1)),
            ("reason", (S, "rejected")),
            ("queue", (S, d1)),
            ("time", ("T", t1 + 3)),
            ("exchange", (S, "")),
            ("routing-keys", ("A", [(S, d1)])),
        ],
        [
            ("original-expiration", (S, "60000")),
            ("count", ("l", 1)),
            ("reason", (S, "rejected")),
            ("queue", (S, q)),
            ("time", ("T", t1)),
            ("exchange", (S, "")),
            ("routing-keys", ("A", [(S, q), (S, "cc1")])),
        ],
    ]
    h = msg.headers
    assert [h[f"x-first-death-{k}"][1] for k in ("reason", "queue", "exchange")] == ["rejected", q, ""]
    assert [h[f"x-last-death-{k}"][1] for k in ("reason", "queue", "exchange")] == ["rejected", d1, ""]


@pytest.mark.rabbitmq_version("3.12")
def test_xf2_no_last_death_headers_before_313(broker: Target, ch) -> None:
    """``x-last-death-*`` does not exist before 3.13 (RabbitMQ: ``mc:record_death``)."""
    q, dlq, _ = setup(broker, ch)
    pub(ch, q, "m")
    method, _, _ = get(ch, q)
    ch.basic_reject(method.delivery_tag, requeue=False)
    wait_ready(broker, ch, dlq, 1)
    _, props, _ = get(ch, dlq)
    assert not any(k.startswith("x-last-death") for k in props.headers)
    assert props.headers["x-first-death-reason"] == "rejected"


def test_xd2_routing_keys_keep_duplicates_and_cc_but_not_bcc(broker: Target, ch) -> None:
    """``routing-keys`` is the publish key plus CC keys, duplicates kept, BCC keys left out (RabbitMQ:
    ``mc_amqpl:death_table/7``)."""
    q, dlq, dlx = setup(broker, ch)
    ch.queue_unbind(dlq, dlx, routing_key=dlq)
    declare(ch, q + "-other")
    pub(ch, q, "m", headers={"CC": [q, "nowhere"], "BCC": [q + "-other"]})
    wait_ready(broker, ch, q + "-other", 1)
    assert ready(ch, q) == 1  # one copy per queue (RabbitMQ: Java CcRoutes.noDuplicates)
    ch.queue_bind(dlq, dlx, routing_key=dlq)
    method, _, _ = get(ch, q)
    ch.basic_reject(method.delivery_tag, requeue=False)
    (death,) = x_death_tables(raw_get(broker, dlq))
    assert death["routing-keys"] == ("A", [(S, q), (S, q), (S, "nowhere")])
    ch.queue_delete(q + "-other")


def test_q16_headers_appended_for_each_event(broker: Target, ch) -> None:
    """Each dead-lettering from a new queue adds an entry, the most recent first (RabbitMQ:
    ``dead_lettering_SUITE:dead_letter_headers_should_be_appended_for_each_event``; ``mc_amqpl:deaths_to_headers``)."""
    q, d1, d2 = broker.name("q"), broker.name("d1"), broker.name("d2")
    declare(ch, q, x_dead_letter_exchange="", x_dead_letter_routing_key=d1)
    declare(ch, d1, x_dead_letter_exchange="", x_dead_letter_routing_key=d2)
    declare(ch, d2)
    pub(ch, q, "m")
    method, _, _ = get(ch, q)
    ch.basic_nack(method.delivery_tag, requeue=False)
    method, props, _ = get(ch, d1)
    assert [d["queue"] for d in props.headers["x-death"]] == [q]
    ch.basic_nack(method.delivery_tag, requeue=False)
    _, props, _ = get(ch, d2)
    deaths = props.headers["x-death"]
    assert [(d["queue"], d["reason"], d["count"], d["routing-keys"]) for d in deaths] == [
        (d1, "rejected", 1, [d1]),
        (q, "rejected", 1, [q]),
    ]


def _reject_round(broker: Target, ch, queues: list[str], steps: int) -> list[list[tuple[str, int]]]:
    """Three queues dead-letter into each other on reject (0 -> 1 -> 2 -> 0); x-death seen at each step."""
    for i, q in enumerate(queues):
        declare(ch, q, x_dead_letter_exchange="", x_dead_letter_routing_key=queues[(i + 1) % 3])
    pub(ch, queues[0], "m")
    seen = []
    for step in range(steps):
        method, props, _ = get(ch, queues[step % 3])
        seen.append([(d["queue"], d["count"]) for d in (props.headers or {}).get("x-death", [])])
        ch.basic_reject(method.delivery_tag, requeue=False)
    return seen


@pytest.mark.rabbitmq_version("3.12")
def test_xd1_legacy_older_entries_flip_order(broker: Target, ch) -> None:
    """≤3.12 (live 3.10.8, ``rabbit_dead_letter:update_x_death_header``): the newest entry is first, but the older
    entries are reversed at every
    death once there are two or more of them (``group_by_queue_and_reason``)."""
    a, b, c = broker.name("a"), broker.name("b"), broker.name("c")
    seen = _reject_round(broker, ch, [a, b, c], 6)
    assert seen == [
        [],
        [(a, 1)],
        [(b, 1), (a, 1)],
        [(c, 1), (a, 1), (b, 1)],
        [(a, 2), (b, 1), (c, 1)],
        [(b, 2), (c, 1), (a, 2)],
    ]


@pytest.mark.fake_only
@pytest.mark.rabbitmq_version("4.0")
def test_xd1_mc_entries_ordered_by_recency(broker: Target, ch) -> None:
    """MC: entries are strictly most-recent-first (RabbitMQ: ``mc_amqpl:deaths_to_headers``)."""
    a, b, c = broker.name("a"), broker.name("b"), broker.name("c")
    seen = _reject_round(broker, ch, [a, b, c], 6)
    assert seen == [
        [],
        [(a, 1)],
        [(b, 1), (a, 1)],
        [(c, 1), (b, 1), (a, 1)],
        [(a, 2), (c, 1), (b, 1)],
        [(b, 2), (a, 2), (c, 1)],
    ]


def test_q28_headers_cycle_count_grows(broker: Target, ch) -> None:
    """Dying again in the same queue for the same reason bumps ``count``; still one entry (RabbitMQ:
    ``dead_lettering_SUITE:dead_letter_headers_cycle``; ``mc:record_death``)."""
    q = broker.name("q")
    declare(ch, q, x_dead_letter_exchange="")
    pub(ch, q, "m")
    method, _, _ = get(ch, q)
    ch.basic_nack(method.delivery_tag, requeue=False)
    method, props, _ = get(ch, q)
    assert [(d["queue"], d["count"]) for d in props.headers["x-death"]] == [(q, 1)]
    first_time = props.headers["x-death"][0]["time"]
    ch.basic_nack(method.delivery_tag, requeue=False)
    _, props, _ = get(ch, q)
    assert [(d["queue"], d["count"], d["reason"]) for d in props.headers["x-death"]] == [(q, 2, "rejected")]
    assert props.headers["x-death"][0]["time"] == first_time


@pytest.mark.fake_only
@pytest.mark.parametrize("version", ["3.12", "4.0"])
def test_xd3_time_exchange_keys_keep_first_death_values(version: str) -> None:
    """A repeat death bumps ``count``; ``time``, ``exchange`` and ``routing-keys`` keep first-death values
    (even though the copy now travels with exchange "" and the DLRK) (RabbitMQ: ``mc:record_death``)."""
    from fakerabbit import FakeRabbit

    with FakeRabbit(rabbitmq_version=version) as rabbit:
        c = pika.BlockingConnection(pika.URLParameters(rabbit.url))
        ch = c.channel()
        ch.exchange_declare("src", "direct")
        ch.queue_declare("q", arguments={"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "q"})
        ch.queue_bind("q", "src", routing_key="k")
        ch.basic_publish("src", "k", b"m")
        t0 = rabbit.clock.now_ms() // 1000
        method, _, _ = ch.basic_get("q")
        ch.basic_reject(method.delivery_tag, requeue=False)
        rabbit.clock.advance(5)
        method, _, _ = ch.basic_get("q")
        assert (method.exchange, method.routing_key) == ("", "q")
        ch.basic_reject(method.delivery_tag, requeue=False)
        _, props, _ = ch.basic_get("q")
        (death,) = props.headers["x-death"]
        assert (death["count"], death["exchange"], death["routing-keys"]) == (2, "src", ["k"])
        assert int(as_utc(death["time"]).timestamp()) == t0
        c.close()


def test_q32_first_death_headers_never_change(broker: Target, ch) -> None:
    """``x-first-death-*`` stay as set by the first death (RabbitMQ:
    ``dead_lettering_SUITE:dead_letter_headers_first_death``)."""
    dlx = broker.exchange("dlx")
    q, dlq = broker.name("q"), broker.name("dlq")
    ch.exchange_declare(dlx, "direct")
    declare(ch, q, x_dead_letter_exchange=dlx, x_dead_letter_routing_key=dlq)
    declare(ch, dlq, x_dead_letter_exchange="", x_dead_letter_routing_key=q)
    ch.queue_bind(dlq, dlx, routing_key=dlq)
    pub(ch, q, "m")
    method, _, _ = get(ch, q)
    ch.basic_nack(method.delivery_tag, requeue=False)
    method, props, _ = get(ch, dlq)
    first = {k: v for k, v in props.headers.items() if k.startswith("x-first-death")}
    assert first == {"x-first-death-reason": "rejected", "x-first-death-queue": q, "x-first-death-exchange": ""}
    ch.basic_nack(method.delivery_tag, requeue=False)
    _, props, _ = get(ch, q)
    assert {k: v for k, v in props.headers.items() if k.startswith("x-first-death")} == first
    assert [d["queue"] for d in props.headers["x-death"]] == [dlq, q]


@pytest.mark.fake_only
@pytest.mark.rabbitmq_version("3.13")
def test_q32_last_death_headers_follow_the_latest_death(broker: Target, ch) -> None:
    """MC: ``x-last-death-*`` are overwritten by every death (RabbitMQ:
    ``dead_lettering_SUITE:dead_letter_headers_first_death``; ``mc:record_death``)."""
    dlx = broker.exchange("dlx")
    q, dlq = broker.name("q"), broker.name("dlq")
    ch.exchange_declare(dlx, "direct")
    declare(ch, q, x_dead_letter_exchange=dlx, x_dead_letter_routing_key=dlq)
    declare(ch, dlq, x_dead_letter_exchange="", x_dead_letter_routing_key=q)
    ch.queue_bind(dlq, dlx, routing_key=dlq)
    pub(ch, q, "m")
    method, _, _ = get(ch, q)
    ch.basic_nack(method.delivery_tag, requeue=False)
    method, props, _ = get(ch, dlq)
    assert [props.headers[f"x-last-death-{k}"] for k in ("reason", "queue", "exchange")] == ["rejected", q, ""]
    ch.basic_nack(method.delivery_tag, requeue=False)
    _, props, _ = get(ch, q)
    assert [props.headers[f"x-last-death-{k}"] for k in ("reason", "queue", "exchange")] == ["rejected", dlq, dlx]
    assert [props.headers[f"x-first-death-{k}"] for k in ("reason", "queue", "exchange")] == ["rejected", q, ""]


def test_q33_headers_exchange_dlx_routes_on_death_headers(broker: Target, ch) -> None:
    """A headers-exchange DLX matches ``x-first-death-*`` with ``all-with-x`` / ``any-with-x`` (RabbitMQ:
    ``dead_lettering_SUITE:dead_letter_headers_first_death_route``)."""
    dlx = broker.exchange("dlx")
    q1, q2 = broker.name("q1"), broker.name("q2")
    exp, rej = broker.name("dlq-expired"), broker.name("dlq-rejected")
    ch.exchange_declare(dlx, "headers")
    declare(ch, q1, x_dead_letter_exchange=dlx)
    declare(ch, q2, x_dead_letter_exchange=dlx)
    declare(ch, exp)
    declare(ch, rej)
    ch.queue_bind(
        exp, dlx, arguments={"x-match": "all-with-x", "x-first-death-reason": "expired", "x-first-death-queue": q1}
    )
    ch.queue_bind(rej, dlx, arguments={"x-match": "any-with-x", "x-first-death-reason": "rejected"})
    pub(ch, q1, "m1", expiration="0")
    wait_ready(broker, ch, exp, 1)
    assert ready(ch, q1) == 0
    pub(ch, q2, "m2", expiration="0")
    quiet(broker)
    assert ready(ch, q2) == 0 and ready(ch, exp) == 1 and ready(ch, rej) == 0
    pub(ch, q2, "m3")
    method, _, _ = get(ch, q2)
    ch.basic_reject(method.delivery_tag, requeue=False)
    wait_ready(broker, ch, rej, 1)
    assert drain(ch, rej) == [b"m3"]
    assert drain(ch, exp) == [b"m1"]


def test_dr4_plain_all_ignores_x_headers(broker: Target, ch) -> None:
    """A plain ``x-match: all`` binding ignores ``x-`` keys, so it matches on the other keys only (RabbitMQ:
    ``dead_lettering_SUITE:dead_letter_headers_first_death_route``)."""
    dlx = broker.exchange("dlx")
    q, dlq = broker.name("q"), broker.name("dlq")
    ch.exchange_declare(dlx, "headers")
    declare(ch, q, x_dead_letter_exchange=dlx)
    declare(ch, dlq)
    ch.queue_bind(dlq, dlx, arguments={"x-match": "all", "x-first-death-reason": "no-such-reason", "k": "v"})
    pub(ch, q, "m", headers={"k": "v"})
    method, _, _ = get(ch, q)
    ch.basic_reject(method.delivery_tag, requeue=False)
    wait_ready(broker, ch, dlq, 1)
    assert drain(ch, dlq) == [b"m"]


# ---------------------------------------------------------------------------------------------------------
# C. Properties of the dead-lettered copy


def test_q35_queue_ttl_has_no_original_expiration(broker: Target, ch) -> None:
    """A queue TTL never produces ``original-expiration`` (RabbitMQ:
    ``dead_lettering_SUITE:dead_letter_headers_reason_expired``; ``rabbit_dead_letter:publish/5``;
    ``mc:set_ttl(undefined)``)."""
    q, dlq, _ = setup(broker, ch, extra={"x-message-ttl": 1})
    pub(ch, q, "m1")
    broker.advance(0.05)
    (death,) = x_death_tables(raw_get(broker, dlq))
    assert death["reason"] == (S, "expired") and "original-expiration" not in death


def test_q36_per_message_expiry_records_original_expiration(broker: Target, ch) -> None:
    """per-message TTL: reason expired, ``original-expiration`` "1", no ``expiration`` any more (RabbitMQ:
    ``dead_lettering_SUITE:dead_letter_headers_reason_expired_per_message``; ``rabbit_dead_letter:publish/5``;
    ``mc:set_ttl(undefined)``)."""
    q, dlq, _ = setup(broker, ch)
    pub(ch, q, "m1", expiration="1")
    pub(ch, q, "m2")
    broker.advance(0.05)
    wait_ready(broker, ch, dlq, 1)
    _, props, body = get(ch, dlq)
    assert body == b"m1" and props.expiration is None
    (death,) = props.headers["x-death"]
    assert death["reason"] == "expired" and death["original-expiration"] == "1"
    assert drain(ch, q) == [b"m2"]


def test_dm1_expiration_removed_for_every_reason(broker: Target, ch) -> None:
    """A rejected message with an ``expiration`` loses it and records ``original-expiration``; the copy does not expire
    again because of its old TTL (RabbitMQ: ``rabbit_dead_letter:publish/5``; ``mc:set_ttl(undefined)``)."""
    q, dlq, _ = setup(broker, ch)
    pub(ch, q, "m", expiration="300")
    method, _, _ = get(ch, q)
    ch.basic_reject(method.delivery_tag, requeue=False)
    wait_ready(broker, ch, dlq, 1)
    broker.advance(0.4)
    assert ready(ch, dlq) == 1
    _, props, _ = get(ch, dlq)
    assert props.expiration is None
    assert props.headers["x-death"][0]["original-expiration"] == "300"
    assert props.headers["x-death"][0]["reason"] == "rejected"


def test_dm1_dead_letter_is_subject_to_the_target_queue_ttl(broker: Target, ch) -> None:
    """The copy still expires by the target queue's own ``x-message-ttl`` (and dies there again) (RabbitMQ:
    ``rabbit_dead_letter:publish/5``; ``mc:set_ttl(undefined)``)."""
    q, d1, d2 = broker.name("q"), broker.name("d1"), broker.name("d2")
    declare(ch, q, x_dead_letter_exchange="", x_dead_letter_routing_key=d1)
    declare(ch, d1, x_message_ttl=50, x_dead_letter_exchange="", x_dead_letter_routing_key=d2)
    declare(ch, d2)
    pub(ch, q, "m", expiration="100000")
    method, _, _ = get(ch, q)
    ch.basic_reject(method.delivery_tag, requeue=False)
    broker.advance(0.2)
    wait_ready(broker, ch, d2, 1)
    _, props, _ = get(ch, d2)
    assert [(d["queue"], d["reason"], d.get("original-expiration")) for d in props.headers["x-death"]] == [
        (d1, "expired", None),
        (q, "rejected", "100000"),
    ]


@pytest.mark.rabbitmq_version("3.12")
def test_dm1_legacy_original_expiration_is_the_raw_string(broker: Target, ch) -> None:
    """≤3.12: ``original-expiration`` copies the property as published ("007") (RabbitMQ:
    ``rabbit_dead_letter:publish/5``; ``mc:set_ttl(undefined)``)."""
    q, dlq, _ = setup(broker, ch)
    pub(ch, q, "m", expiration="007")
    method, props, _ = get(ch, q)
    assert props.expiration == "007"
    ch.basic_reject(method.delivery_tag, requeue=False)
    (death,) = x_death_tables(raw_get(broker, dlq))
    assert death["original-expiration"] == (S, "007")


@pytest.mark.fake_only
@pytest.mark.rabbitmq_version("3.13")
def test_dm1_mc_normalises_expiration(broker: Target, ch) -> None:
    """MC: "007" is delivered as "7" and recorded as ``original-expiration`` "7"; "+10" as "10" (RabbitMQ:
    ``rabbit_dead_letter:publish/5``; ``mc:set_ttl(undefined)``)."""
    q, dlq, _ = setup(broker, ch)
    pub(ch, q, "a", expiration="007")
    pub(ch, q, "b", expiration="+10000")
    method, props, _ = get(ch, q)
    assert props.expiration == "7"
    ch.basic_reject(method.delivery_tag, requeue=False)
    method, props, _ = get(ch, q)
    assert props.expiration == "10000"
    ch.basic_reject(method.delivery_tag, requeue=False)
    exps = [x_death_tables(raw_get(broker, dlq))[0]["original-expiration"] for _ in range(2)]
    assert exps == [(S, "7"), (S, "10000")]


def test_dm4_other_properties_unchanged(broker: Target, ch) -> None:
    """Body and every other property survive dead-lettering (RabbitMQ: ``rabbit_dead_letter:publish/5``)."""
    q, dlq, _ = setup(broker, ch)
    props = pika.BasicProperties(
        content_type="application/json",
        content_encoding="gzip",
        delivery_mode=2,
        priority=7,
        correlation_id="c-1",
        reply_to="replies",
        message_id="m-1",
        timestamp=1_700_000_000,
        type="order.created",
        user_id="guest",
        app_id="shop",
        headers={"k": "v"},
    )
    ch.basic_publish("", q, b"\x00payload\xff", props)
    method, _, _ = get(ch, q)
    ch.basic_reject(method.delivery_tag, requeue=False)
    wait_ready(broker, ch, dlq, 1)
    _, got, body = get(ch, dlq)
    assert body == b"\x00payload\xff"
    for name in (
        "content_type",
        "content_encoding",
        "delivery_mode",
        "priority",
        "correlation_id",
        "reply_to",
        "message_id",
        "timestamp",
        "type",
        "user_id",
        "app_id",
    ):
        assert getattr(got, name) == getattr(props, name), name
    assert got.headers["k"] == "v"


@pytest.mark.rabbitmq_version("3.12")
def test_dm5_legacy_dead_letter_headers_are_sorted(broker: Target, ch) -> None:
    """≤3.12 too, seen on 3.10.8: dead-lettering re-sorts the headers table by key (RabbitMQ:
    ``mc_amqpl:protocol_state``)."""
    q, dlq, _ = setup(broker, ch)
    pub(ch, q, "m", headers={"zeta": 1, "Alpha": 2, "mid": "x"})
    method, _, _ = get(ch, q)
    ch.basic_reject(method.delivery_tag, requeue=False)
    msg = raw_get(broker, dlq)
    assert (
        list(msg.headers)
        == sorted(msg.headers)
        == [
            "Alpha",
            "mid",
            "x-death",
            "x-first-death-exchange",
            "x-first-death-queue",
            "x-first-death-reason",
            "zeta",
        ]
    )


def test_client_headers_untouched_without_dead_lettering(broker: Target, ch) -> None:
    """A message that is not dead-lettered keeps its header types exactly, and its key order before 3.13 (3.13+
    sorts the keys: mc_amqpl:protocol_state/2; tests/conformance/test_found_by_fuzzer.py)."""
    q = broker.name("q")
    declare(ch, q)
    table = table_from_python({"zeta": 1, "Alpha": "x"})
    table["big"] = ("l", 5)
    with RawAMQP.with_channel(broker.url) as raw:
        raw.publish(1, "", q, b"m", build_properties(headers=table))
        raw.sync()
    msg = raw_get(broker, q)
    if broker.at_least("3.13"):
        assert field_types(msg.headers) == [("Alpha", S), ("big", "l"), ("zeta", "I")]
    else:
        assert field_types(msg.headers) == [("zeta", "I"), ("Alpha", S), ("big", "l")]


# ---------------------------------------------------------------------------------------------------------
# G. x-death published by clients


def _republish_setup(broker: Target, ch) -> tuple[str, str]:
    q, d = broker.name("q"), broker.name("d")
    declare(ch, q, x_dead_letter_exchange="", x_dead_letter_routing_key=d)
    declare(ch, d)
    pub(ch, q, "m")
    method, _, _ = get(ch, q)
    ch.basic_nack(method.delivery_tag, requeue=False)
    return q, d


@pytest.mark.rabbitmq_version("3.12")
def test_xr3_legacy_client_x_death_is_edited_in_place(broker: Target, ch) -> None:
    """≤3.12: a republished ``x-death`` is extended: new entry first, old entries and first-death kept (RabbitMQ:
    ``rabbit_dead_letter:update_x_death_header`` (3.12))."""
    q, d = _republish_setup(broker, ch)
    dead = raw_get(broker, d)
    ch.queue_delete(q)
    declare(ch, q, x_dead_letter_exchange="", x_dead_letter_routing_key=d, x_message_ttl=1)
    with RawAMQP.with_channel(broker.url) as raw:
        raw.publish(1, "", q, dead.body, dead.props)
        raw.sync()
    broker.advance(0.05)
    msg = raw_get(broker, d)
    assert [(t["queue"][1], t["reason"][1], t["count"][1]) for t in x_death_tables(msg)] == [
        (q, "expired", 1),
        (q, "rejected", 1),
    ]
    assert msg.headers["x-first-death-reason"] == (S, "rejected")
    assert untimed(x_death_tables(msg)[1]) == untimed(x_death_tables(dead)[0])


@pytest.mark.rabbitmq_version("3.12")
def test_xr3_legacy_non_array_x_death_is_reset(broker: Target, ch) -> None:
    """≤3.12: an ``x-death`` that is not an array is replaced by a fresh one-entry array; no ``x-first-death-*`` headers
    are added in that case (RabbitMQ: ``rabbit_dead_letter:update_x_death_header`` (3.12))."""
    q, d = broker.name("q"), broker.name("d")
    declare(ch, q, x_dead_letter_exchange="", x_dead_letter_routing_key=d)
    declare(ch, d)
    pub(ch, q, "m", headers={"x-death": "not an array"})
    method, _, _ = get(ch, q)
    ch.basic_nack(method.delivery_tag, requeue=False)
    msg = raw_get(broker, d)
    assert [untimed(t) for t in x_death_tables(msg)] == [
        [
            ("count", ("l", 1)),
            ("reason", (S, "rejected")),
            ("queue", (S, q)),
            ("time", ("T", None)),
            ("exchange", (S, "")),
            ("routing-keys", ("A", [(S, q)])),
        ]
    ]
    assert not any(k.startswith("x-first-death") for k in msg.headers)


@pytest.mark.rabbitmq_version("3.12")
def test_xr3_legacy_republished_repeat_increments(broker: Target, ch) -> None:
    """≤3.12: republishing a dead letter into the queue it died in and rejecting it again counts 2 (RabbitMQ:
    ``rabbit_dead_letter:update_x_death_header`` (3.12))."""
    q, d = _republish_setup(broker, ch)
    dead = raw_get(broker, d)
    with RawAMQP.with_channel(broker.url) as raw:
        raw.publish(1, "", q, dead.body, dead.props)
        raw.sync()
    method, _, _ = get(ch, q)
    ch.basic_nack(method.delivery_tag, requeue=False)
    msg = raw_get(broker, d)
    assert [(t["queue"][1], t["reason"][1], t["count"]) for t in x_death_tables(msg)] == [(q, "rejected", ("l", 2))]


@pytest.mark.fake_only
@pytest.mark.rabbitmq_version("3.13")
def test_xr2_313_client_x_death_is_parsed(broker: Target, ch) -> None:
    """3.13: a valid client ``x-death`` becomes the history: a repeat death increments its count and the
    client's ``x-first-death-*`` are kept (RabbitMQ: ``mc_amqpl:headers_to_deaths`` (3.13))."""
    q, d = _republish_setup(broker, ch)
    dead = raw_get(broker, d)
    with RawAMQP.with_channel(broker.url) as raw:
        raw.publish(1, "", q, dead.body, dead.props)
        raw.sync()
    method, _, _ = get(ch, q)
    ch.basic_nack(method.delivery_tag, requeue=False)
    msg = raw_get(broker, d)
    assert [(t["queue"][1], t["reason"][1], t["count"]) for t in x_death_tables(msg)] == [(q, "rejected", ("l", 2))]
    assert msg.headers["x-first-death-queue"] == (S, q)


@pytest.mark.fake_only
@pytest.mark.rabbitmq_version("3.13")
def test_xr2_313_invalid_entries_are_dropped(broker: Target, ch) -> None:
    """3.13: client entries without all required fields are not part of the history (RabbitMQ:
    ``mc_amqpl:headers_to_deaths`` (3.13))."""
    q, d = broker.name("q"), broker.name("d")
    declare(ch, q, x_dead_letter_exchange="", x_dead_letter_routing_key=d)
    declare(ch, d)
    bogus = {"queue": "elsewhere", "reason": "expired"}  # no count/time/exchange/routing-keys
    pub(ch, q, "m", headers={"x-death": [bogus]})
    method, _, _ = get(ch, q)
    ch.basic_nack(method.delivery_tag, requeue=False)
    _, props, _ = get(ch, d)
    assert [(e["queue"], e["count"]) for e in props.headers["x-death"]] == [(q, 1)]


@pytest.mark.fake_only
@pytest.mark.rabbitmq_version("4.0")
def test_q17_headers_not_appended_for_republish(broker: Target, ch) -> None:
    """4.x: a republished ``x-death`` is an ordinary header; the next death starts a fresh history (RabbitMQ:
    ``dead_lettering_SUITE:dead_letter_headers_should_not_be_appended_for_republish``; ``mc_amqpl:init`` (4.x); 4.0.1
    release notes)."""
    q, d = _republish_setup(broker, ch)
    method, props, body = get(ch, d)
    assert props.headers["x-death"][0]["reason"] == "rejected"
    ch.basic_ack(method.delivery_tag)
    ch.queue_delete(q)
    declare(ch, q, x_dead_letter_exchange="", x_dead_letter_routing_key=d, x_message_ttl=1)
    ch.basic_publish("", q, body, pika.BasicProperties(headers=props.headers))
    broker.advance(0.05)
    _, props, _ = get(ch, d)
    (death,) = props.headers["x-death"]
    assert (death["reason"], death["queue"], death["count"]) == ("expired", q, 1)
    assert props.headers["x-first-death-reason"] == "expired"


@pytest.mark.fake_only
@pytest.mark.rabbitmq_version("4.0")
def test_xr1_client_x_death_delivered_unchanged_if_not_dead_lettered(broker: Target, ch) -> None:
    """4.x: a client ``x-death`` on a message that never dies again is delivered as sent (RabbitMQ: ``mc_amqpl:init``
    (4.x); 4.0.1 release notes)."""
    q = broker.name("q")
    declare(ch, q)
    table = table_from_python({"x-death": [{"queue": "old", "count": 9}], "x-first-death-queue": "old"})
    with RawAMQP.with_channel(broker.url) as raw:
        raw.publish(1, "", q, b"m", build_properties(headers=table))
        raw.sync()
    assert raw_get(broker, q).headers == table


def _client_history_cycle(broker: Target, ch) -> tuple[str, str]:
    """q1 (TTL, DLX "" -> q2) gets a message whose client ``x-death`` claims it already expired in q2."""
    q1, q2 = broker.name("q1"), broker.name("q2")
    declare(ch, q1, x_dead_letter_exchange="", x_dead_letter_routing_key=q2, x_message_ttl=10)
    declare(ch, q2)
    fake = [
        {
            "queue": q2,
            "reason": "expired",
            "count": 1,
            "time": datetime(2020, 1, 1, tzinfo=UTC),
            "exchange": "",
            "routing-keys": [q2],
        }
    ]
    pub(ch, q1, "m", headers={"x-death": fake})
    broker.advance(0.05)
    quiet(broker)
    return q1, q2


@pytest.mark.rabbitmq_version("3.12")
def test_xr3_legacy_client_history_counts_for_cycles(broker: Target, ch) -> None:
    """≤3.12: a client entry for the target queue makes an automatic loop, so the copy is dropped (RabbitMQ:
    ``rabbit_dead_letter:update_x_death_header`` (3.12); ``rabbit_dead_letter:detect_cycles/3``)."""
    q1, q2 = _client_history_cycle(broker, ch)
    assert ready(ch, q1) == 0 and ready(ch, q2) == 0


@pytest.mark.fake_only
@pytest.mark.rabbitmq_version("3.13")
def test_xr2_313_client_history_counts_for_cycles(broker: Target, ch) -> None:
    """3.13: the parsed client history takes part in cycle detection: dropped (RabbitMQ: ``mc_amqpl:headers_to_deaths``
    (3.13); ``rabbit_dead_letter:detect_cycles/3``)."""
    q1, q2 = _client_history_cycle(broker, ch)
    assert ready(ch, q1) == 0 and ready(ch, q2) == 0


@pytest.mark.fake_only
@pytest.mark.rabbitmq_version("4.0")
def test_xr1_cycle_detection_ignores_client_history(broker: Target, ch) -> None:
    """4.x: old client entries are ignored by cycle detection: the copy reaches q2 with a fresh history (RabbitMQ:
    ``mc_amqpl:init`` (4.x); 4.0.1 release notes)."""
    q1, q2 = _client_history_cycle(broker, ch)
    _, props, _ = get(ch, q2)
    assert [(d["queue"], d["reason"], d["count"]) for d in props.headers["x-death"]] == [(q1, "expired", 1)]


def test_stream_scenario_q38_with_classic_stand_in(broker: Target, ch) -> None:
    """Two expiries with CC/BCC; the second death records the DLRK only; BCC never shows (RabbitMQ:
    ``dead_lettering_SUITE:stream``; ``mc:record_death``; ``mc_amqpl:init`` (strips BCC))."""
    q1, q2, q3 = broker.name("q1"), broker.name("q2"), broker.name("q3")
    ttl_ms = 2500 if broker.is_fake else 60
    declare(ch, q1, x_dead_letter_exchange="", x_dead_letter_routing_key=q2)
    declare(ch, q2, x_message_ttl=ttl_ms, x_dead_letter_exchange="", x_dead_letter_routing_key=q3)
    declare(ch, q3)
    t1 = now_s(broker)
    # the second death happens when q2's TTL runs out, ttl_ms after the (instant) first one
    t2 = (broker.fake.clock.now_ms() + ttl_ms) // 1000 if broker.fake is not None else 0
    pub(ch, q1, "m", expiration="0", headers={"CC": ["cc 1", "cc 2"], "BCC": ["bcc 1", "bcc 2"]})
    broker.advance(ttl_ms / 1000 + 0.05)
    wait_ready(broker, ch, q3, 1)
    _, props, _ = get(ch, q3)
    h = props.headers
    assert "BCC" not in h
    d2, d1 = h["x-death"]
    assert {k: v for k, v in d2.items() if k != "time"} == {
        "queue": q2,
        "reason": "expired",
        "exchange": "",
        "count": 1,
        "routing-keys": [q2],
    }
    assert {k: v for k, v in d1.items() if k != "time"} == {
        "queue": q1,
        "reason": "expired",
        "exchange": "",
        "count": 1,
        "routing-keys": [q1, "cc 1", "cc 2"],
        "original-expiration": "0",
    }
    assert [h[f"x-first-death-{k}"] for k in ("reason", "queue", "exchange")] == ["expired", q1, ""]
    if broker.is_fake:
        assert int(as_utc(d1["time"]).timestamp()) == t1
        assert int(as_utc(d2["time"]).timestamp()) == t2 > t1


@pytest.mark.fake_only
@pytest.mark.rabbitmq_version("4.0")
def test_q38_mc_keeps_cc_and_last_death(broker: Target, ch) -> None:
    """MC: the final copy keeps ``CC`` and shows ``x-last-death-*`` for the second queue (RabbitMQ:
    ``dead_lettering_SUITE:stream``)."""
    q1, q2, q3 = broker.name("q1"), broker.name("q2"), broker.name("q3")
    declare(ch, q1, x_dead_letter_exchange="", x_dead_letter_routing_key=q2)
    declare(ch, q2, x_message_ttl=2500, x_dead_letter_exchange="", x_dead_letter_routing_key=q3)
    declare(ch, q3)
    pub(ch, q1, "m", expiration="0", headers={"CC": ["cc 1", "cc 2"], "BCC": ["bcc 1", "bcc 2"]})
    broker.advance(2.6)
    _, props, _ = get(ch, q3)
    h = props.headers
    assert h["CC"] == ["cc 1", "cc 2"] and "BCC" not in h
    assert [h[f"x-last-death-{k}"] for k in ("reason", "queue", "exchange")] == ["expired", q2, ""]
    assert [d["queue"] for d in h["x-death"]] == [q2, q1]


def test_x_death_time_is_the_death_time_on_the_virtual_clock(broker: Target, ch) -> None:
    """``time`` is when the message died (whole seconds), which the virtual clock makes exact (RabbitMQ:
    ``mc_amqpl:death_table/7``)."""
    if broker.fake is None:
        pytest.skip("virtual clock")
    q, dlq, _ = setup(broker, ch, extra={"x-message-ttl": 90_000})
    start = now_s(broker)
    pub(ch, q, "m")
    broker.advance(89.9)
    assert ready(ch, dlq) == 0
    broker.advance(0.2)
    (death,) = x_death_tables(raw_get(broker, dlq))
    assert death["time"] == ("T", (broker.fake.clock.now_ms() - 100) // 1000)
    assert death["time"][1] in (start + 89, start + 90)
