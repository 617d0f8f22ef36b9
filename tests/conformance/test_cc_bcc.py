"""Sender-selected distribution (CC/BCC) and how it meets dead-lettering (``rabbit_basic:header_routes/1``,
``mc_amqpl``; the CC/BCC cases of ``dead_lettering_SUITE``; Java ``CcRoutes``,
``DeadLetterExchange.deadLetterNewRK``)."""

from __future__ import annotations

import pika
import pytest

from tests.conformance.conftest import Target
from tests.conformance.dlhelpers import declare, drain, get, pub, quiet, raw_get, ready, wait_ready

# ---------------------------------------------------------------------------------------------------------
# routing (RabbitMQ: rabbit_basic:header_routes/1, rabbit_exchange:route/3)


def test_ss1_cc_and_bcc_add_routing_keys(broker: Target, ch) -> None:
    """CC and BCC keys route like extra routing keys; consumers see CC, never BCC (RabbitMQ:
    ``rabbit_basic:header_routes/1``; ``mc_amqpl:init``)."""
    q, c1, b1 = broker.name("q"), broker.name("c1"), broker.name("b1")
    for n in (q, c1, b1):
        declare(ch, n)
    pub(ch, q, "m", headers={"CC": [c1], "BCC": [b1], "k": "v"})
    for n in (q, c1, b1):
        wait_ready(broker, ch, n, 1)
        _, props, body = get(ch, n)
        assert body == b"m"
        assert props.headers == {"CC": [c1], "k": "v"}


def test_ss1_non_longstr_elements_are_ignored(broker: Target, ch) -> None:
    """Only ``longstr`` elements count: a ``binary`` (pika bytes) or int element routes nowhere (RabbitMQ:
    ``rabbit_basic:header_routes/1``)."""
    q, other, num = broker.name("q"), broker.name("other"), broker.name("7")
    for n in (q, other):
        declare(ch, n)
    pub(ch, q, "m", headers={"CC": [other.encode(), 7]})
    quiet(broker)
    assert ready(ch, q) == 1 and ready(ch, other) == 0
    assert num  # a queue named like the int is not involved


@pytest.mark.parametrize(("value", "type_name"), [(5, "signedint"), ("k", "longstr")])
def test_ss2_cc_of_the_wrong_type_is_a_channel_error(broker: Target, ch, value: object, type_name: str) -> None:
    """CC that is not an array: 406 ``invalid message: {unacceptable_type_in_header,"CC",<type>}`` (RabbitMQ:
    ``mc_amqpl:message/4``)."""
    q = broker.name("q")
    declare(ch, q)
    ch.basic_publish("", q, b"m", pika.BasicProperties(headers={"CC": value}))
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as e:
        ch.queue_declare(q, passive=True)
    assert e.value.reply_code == 406
    assert e.value.reply_text == (
        f'PRECONDITION_FAILED - invalid message: {{unacceptable_type_in_header,"CC",{type_name}}}'
    )


def test_ss3_each_queue_gets_one_copy(broker: Target, ch) -> None:
    """Java ``CcRoutes.noDuplicates``: several keys matching one queue still give one copy."""
    x = broker.exchange("x")
    q = broker.name("q")
    ch.exchange_declare(x, "direct")
    declare(ch, q)
    for k in ("a", "b"):
        ch.queue_bind(q, x, routing_key=k)
    ch.basic_publish(x, "a", b"m", pika.BasicProperties(headers={"CC": ["b", "a"], "BCC": ["b"]}))
    quiet(broker)
    assert drain(ch, q) == [b"m"]


def test_mi4_default_exchange_routes_every_key_to_its_queue_once(broker: Target, ch) -> None:
    """The default exchange routes the routing key and every CC/BCC key to the queue of that name, deduplicated; a key
    naming no queue routes nowhere (and does not make the publish unroutable) (RabbitMQ:
    ``rabbit_exchange:route/3``)."""
    q1, q2, nobody = broker.name("q1"), broker.name("q2"), broker.name("nobody")
    for n in (q1, q2):
        declare(ch, n)
    ch.confirm_delivery()
    ch.basic_publish("", q1, b"m", pika.BasicProperties(headers={"CC": [q2, nobody, q1], "BCC": [q2]}), mandatory=True)
    quiet(broker)
    assert drain(ch, q1) == [b"m"]
    assert drain(ch, q2) == [b"m"]


@pytest.mark.parametrize("xtype", ["fanout", "headers"])
def test_ss5_fanout_and_headers_ignore_cc(broker: Target, ch, xtype: str) -> None:
    """Fanout and headers exchanges route as usual; CC keys add nothing (RabbitMQ: ``rabbit_basic:header_routes/1``)."""
    x = broker.exchange("x")
    q, cc = broker.name("q"), broker.name("cc")
    ch.exchange_declare(x, xtype)
    declare(ch, q)
    declare(ch, cc)
    ch.queue_bind(q, x, arguments={"x-match": "any", "k": "v"} if xtype == "headers" else None)
    ch.basic_publish(x, "rk", b"m", pika.BasicProperties(headers={"k": "v", "CC": [cc]}))
    wait_ready(broker, ch, q, 1)
    assert ready(ch, cc) == 0


def test_ss5_topic_and_exchange_to_exchange_use_cc(broker: Target, ch) -> None:
    """Topic exchanges and exchange-to-exchange bindings route CC keys (RabbitMQ: ``rabbit_basic:header_routes/1``)."""
    top, inner = broker.exchange("top"), broker.exchange("inner")
    q1, q2 = broker.name("q1"), broker.name("q2")
    ch.exchange_declare(top, "topic")
    ch.exchange_declare(inner, "direct")
    ch.exchange_bind(inner, top, routing_key="e2e.#")
    declare(ch, q1)
    declare(ch, q2)
    ch.queue_bind(q1, top, routing_key="a.*")
    ch.queue_bind(q2, inner, routing_key="e2e.x")
    ch.basic_publish(top, "nothing", b"m", pika.BasicProperties(headers={"CC": ["a.b"], "BCC": ["e2e.x"]}))
    wait_ready(broker, ch, q1, 1)
    wait_ready(broker, ch, q2, 1)


# ---------------------------------------------------------------------------------------------------------
# CC/BCC and dead-lettering


def _dlx_no_dlrk(broker: Target, ch, dlrk: bool = False) -> tuple[str, str, str]:
    dlx = broker.exchange("dlx")
    q, dlq = broker.name("q"), broker.name("dlq")
    ch.exchange_declare(dlx, "direct")
    declare(ch, q, x_dead_letter_exchange=dlx, x_dead_letter_routing_key=dlq if dlrk else None)
    declare(ch, dlq)
    ch.queue_bind(dlq, dlx, routing_key=dlq)
    return q, dlq, dlx


@pytest.mark.parametrize("header", ["CC", "BCC"])
def test_q18_q19_dead_letter_routing_key_header_cc_bcc(broker: Target, ch, header: str) -> None:
    """Without a DLRK the CC/BCC keys are dead-letter routing keys too (RabbitMQ:
    ``dead_lettering_SUITE:dead_letter_routing_key_header_CC``;
    ``dead_lettering_SUITE:dead_letter_routing_key_header_BCC``; ``rabbit_dead_letter:publish/5``)."""
    q, dlq, _ = _dlx_no_dlrk(broker, ch)
    pub(ch, q, "m1")
    pub(ch, q, "m2", headers={header: [dlq]})
    wait_ready(broker, ch, dlq, 1)
    assert ready(ch, q) == 2
    get(ch, q)
    m2, _, _ = get(ch, q)
    _, copy_props, _ = get(ch, dlq)  # the publish-time copy, left unacked
    assert "BCC" not in (copy_props.headers or {})
    ch.basic_nack(m2.delivery_tag, multiple=True, requeue=False)
    wait_ready(broker, ch, dlq, 1)
    _, props, body = get(ch, dlq)
    assert body == b"m2" and "BCC" not in props.headers
    assert props.headers["x-death"][0]["routing-keys"] == ([q, dlq] if header == "CC" else [q])
    assert ch.basic_get(dlq)[0] is None


def test_q29_dead_letter_headers_bcc(broker: Target, ch) -> None:
    """BCC never shows, and x-death ``routing-keys`` holds the key and CC keys but no BCC (RabbitMQ:
    ``dead_lettering_SUITE:dead_letter_headers_BCC``; ``mc_amqpl:init`` (strips BCC); ``mc_amqpl:death_table/7``)."""
    q, dlq, _ = _dlx_no_dlrk(broker, ch)
    pub(ch, q, "m1", headers={"CC": ["cc 1", "cc 2"], "BCC": [dlq, "bcc 2"]})
    wait_ready(broker, ch, dlq, 1)
    m, props_q, _ = get(ch, q)
    _, props_d, _ = get(ch, dlq)
    for props in (props_q, props_d):
        assert "x-death" not in props.headers and "BCC" not in props.headers
    ch.basic_nack(m.delivery_tag, requeue=False)
    wait_ready(broker, ch, dlq, 1)
    _, props, _ = get(ch, dlq)
    assert "BCC" not in props.headers
    assert sorted(props.headers["x-death"][0]["routing-keys"]) == sorted([q, "cc 1", "cc 2"])


def test_q30_dead_letter_headers_cc(broker: Target, ch) -> None:
    """Without a DLRK the dead-lettered copy keeps ``CC`` (RabbitMQ:
    ``dead_lettering_SUITE:dead_letter_headers_CC``)."""
    q, dlq, _ = _dlx_no_dlrk(broker, ch)
    pub(ch, q, "m1", headers={"CC": [dlq]})
    wait_ready(broker, ch, dlq, 1)
    m, _, _ = get(ch, q)
    ch.basic_nack(m.delivery_tag, requeue=False)
    get(ch, dlq)  # the CC copy
    _, props, _ = get(ch, dlq)
    assert props.headers["CC"] == [dlq]
    assert isinstance(props.headers["x-death"], list) and props.headers["x-death"][0]["queue"] == q


@pytest.mark.rabbitmq_version("3.12")
def test_q31_cc_deleted_with_dlrk_before_313(broker: Target, ch) -> None:
    """≤3.12: a DLRK deletes the ``CC`` header from the dead-lettered copy (RabbitMQ:
    ``dead_lettering_SUITE:dead_letter_headers_CC_with_routing_key``)."""
    q, dlq, _ = _dlx_no_dlrk(broker, ch, dlrk=True)
    pub(ch, q, "m1", headers={"CC": [dlq]})
    wait_ready(broker, ch, dlq, 1)
    m, _, _ = get(ch, q)
    ch.basic_nack(m.delivery_tag, requeue=False)
    get(ch, dlq)
    _, props, _ = get(ch, dlq)
    assert "CC" not in props.headers and props.headers["x-death"][0]["routing-keys"] == [q, dlq]


@pytest.mark.fake_only
@pytest.mark.rabbitmq_version("3.13")
def test_q31_cc_kept_with_dlrk_from_313(broker: Target, ch) -> None:
    """MC: the ``CC`` header is kept even though the DLRK replaced the routing keys (RabbitMQ:
    ``dead_lettering_SUITE:dead_letter_headers_CC_with_routing_key``)."""
    q, dlq, _ = _dlx_no_dlrk(broker, ch, dlrk=True)
    pub(ch, q, "m1", headers={"CC": [dlq]})
    m, _, _ = get(ch, q)
    ch.basic_nack(m.delivery_tag, requeue=False)
    get(ch, dlq)
    _, props, _ = get(ch, dlq)
    assert props.headers["CC"] == [dlq] and props.headers["x-death"][0]["routing-keys"] == [q, dlq]


def _new_rk(broker: Target, ch) -> tuple[str, str, str, str]:
    """Java deadLetterNewRK: Q bound to amq.direct, DLRK "test-other"; DLQ on "test", DLQ2 on "test-other"."""
    dlx = broker.exchange("dlx")
    q, dlq, dlq2 = broker.name("q"), broker.name("dlq"), broker.name("dlq2")
    test, other = broker.name("test"), broker.name("test-other")
    ch.exchange_declare(dlx, "direct")
    declare(ch, q, x_dead_letter_exchange=dlx, x_dead_letter_routing_key=other, x_message_ttl=10)
    declare(ch, dlq)
    declare(ch, dlq2)
    ch.queue_bind(q, "amq.direct", routing_key=test)
    ch.queue_bind(dlq, dlx, routing_key=test)
    ch.queue_bind(dlq2, dlx, routing_key=other)
    ch.basic_publish("amq.direct", test, b"m", pika.BasicProperties(headers={"CC": ["foo"], "BCC": ["bar"]}))
    broker.advance(0.1)
    wait_ready(broker, ch, dlq2, 1)
    assert ready(ch, dlq) == 0
    _, props, _ = get(ch, dlq2)
    (death,) = props.headers["x-death"]
    assert death["exchange"] == "amq.direct"
    assert sorted(death["routing-keys"]) == sorted(["foo", test])
    assert "BCC" not in props.headers
    return q, dlq, dlq2, props.headers.get("CC")


@pytest.mark.rabbitmq_version("3.12")
def test_java_dead_letter_new_rk_legacy(broker: Target, ch) -> None:
    """Java deadLetterNewRK (≤3.12): only the DLRK binding gets it; x-death has the original exchange and keys;
    no BCC, and CC removed."""
    assert _new_rk(broker, ch)[3] is None


@pytest.mark.fake_only
@pytest.mark.rabbitmq_version("4.0")
def test_java_dead_letter_new_rk_mc(broker: Target, ch) -> None:
    """Java deadLetterNewRK (MC): the same, with CC kept."""
    assert _new_rk(broker, ch)[3] == ["foo"]


def test_bcc_key_equal_to_dlrk_edge(broker: Target, ch) -> None:
    """After a DLRK dead-lettering, a later death records ``[DLRK]`` (CC keys are no longer keys) (RabbitMQ:
    ``mc:record_death``)."""
    q1, q2, q3 = broker.name("q1"), broker.name("q2"), broker.name("q3")
    declare(ch, q1, x_dead_letter_exchange="", x_dead_letter_routing_key=q2)
    declare(ch, q2, x_dead_letter_exchange="", x_dead_letter_routing_key=q3)
    declare(ch, q3)
    pub(ch, q1, "m", headers={"CC": ["cc"]})
    m, _, _ = get(ch, q1)
    ch.basic_reject(m.delivery_tag, requeue=False)
    m, _, _ = get(ch, q2)
    ch.basic_reject(m.delivery_tag, requeue=False)
    msg = raw_get(broker, q3)
    keys = [t["routing-keys"][1] for t in (v for _tag, v in msg.headers["x-death"][1])]
    assert keys == [[("S", q2)], [("S", q1), ("S", "cc")]]
