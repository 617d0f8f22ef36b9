"""Exchanges: declare/delete rules (default exchange, amq.*, types, equivalence), bindings (queue and
exchange-to-exchange), and routing by direct, fanout, topic and headers (all/any/all-with-x/any-with-x)."""

from __future__ import annotations

from typing import Any

import pika
import pika.exceptions
import pytest
from pika import spec

from fakerabbit.broker.erlhash import phash2_binaries
from tests.conformance.conftest import Target
from tests.conformance.versions import for_versions
from tests.rawamqp import RawAMQP


def closed(conn: Any, fn: Any) -> tuple[int, str]:
    ch = conn.channel()
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as exc:
        fn(ch)
    return exc.value.reply_code, exc.value.reply_text


# -- declare ---------------------------------------------------------------------------------------------------


def test_default_exchange_cannot_be_declared_or_deleted(broker: Target, conn: Any) -> None:
    text = "ACCESS_REFUSED - operation not permitted on the default exchange"
    assert closed(conn, lambda ch: ch.exchange_declare("", "direct")) == (403, text)
    assert closed(conn, lambda ch: ch.exchange_declare("", "direct", passive=True)) == (403, text)
    assert closed(conn, lambda ch: ch.exchange_delete("")) == (403, text)


def test_amq_prefix(broker: Target, conn: Any) -> None:
    assert closed(conn, lambda ch: ch.exchange_declare("amq.mine", "direct")) == (
        403,
        "ACCESS_REFUSED - exchange name 'amq.mine' contains reserved prefix 'amq.*'",
    )
    assert closed(conn, lambda ch: ch.exchange_declare("amq.mine", "direct", passive=True)) == (
        404,
        "NOT_FOUND - no exchange 'amq.mine' in vhost '/'",
    )
    # predeclared ones can be redeclared as they are, not otherwise
    ch = conn.channel()
    ch.exchange_declare("amq.direct", "direct", durable=True)
    ch.exchange_declare("amq.rabbitmq.trace", "topic", durable=True, internal=True)
    assert closed(conn, lambda ch: ch.exchange_declare("amq.direct", "direct")) == (
        406,
        "PRECONDITION_FAILED - inequivalent arg 'durable' for exchange 'amq.direct' in vhost '/': "
        "received 'false' but current is 'true'",
    )
    for name in ("amq.direct", "amq.fanout", "amq.no-such"):
        assert closed(conn, lambda ch, name=name: ch.exchange_delete(name)) == (
            403,
            f"ACCESS_REFUSED - deletion of system exchange '{name}' in vhost '/' not allowed",
        )


def test_predeclared_exchanges(broker: Target, ch: Any) -> None:
    for name, type_ in (
        ("amq.direct", "direct"),
        ("amq.fanout", "fanout"),
        ("amq.topic", "topic"),
        ("amq.headers", "headers"),
        ("amq.match", "headers"),
    ):
        ch.exchange_declare(name, type_, passive=True)
        ch.exchange_declare(name, type_, durable=True)


@for_versions("3.10", "3.13", "4.0", "4.3")
@pytest.mark.fake_plugins(())  # the live brokers have no plugins: x-delayed-message is unknown there
@pytest.mark.parametrize(
    ("type_", "text"),
    [
        ("nosuchtype", "unknown exchange type 'nosuchtype'"),
        ("x-delayed-message", "unknown exchange type 'x-delayed-message'"),
        ("DIRECT", "unknown exchange type 'DIRECT'"),
        ("", "invalid exchange type ''"),
    ],
)
def test_unknown_exchange_type(broker: Target, type_: str, text: str) -> None:
    """An unknown exchange type: 503 COMMAND_INVALID closing the connection before 3.13.3, 406
    PRECONDITION_FAILED closing the channel since (rabbitmq-server #11214; live 3.10.8, 4.0.5, 4.3.6).

    RabbitMQ says "invalid" instead of "unknown" for a type whose name happens to be an atom in its VM (always
    so for ''; 4.3.6 also for e.g. 'x-random'); fakerabbit says "unknown" for every other name."""
    c = RawAMQP.connect(broker.url)
    c.open_channel(1)
    c.send_method(1, spec.Exchange.Declare(exchange=broker.exchange(), type=type_))
    close = c.expect_close()
    if broker.at_least("3.13"):
        expected = (1, 406, f"PRECONDITION_FAILED - {text}", 40, 10)
    else:
        expected = (0, 503, f"COMMAND_INVALID - {text}", 40, 10)
    assert (close.channel, close.reply_code, close.reply_text, close.class_id, close.method_id) == expected
    c.sock.close()


@for_versions("3.10", "3.13", "4.0", "4.3")
@pytest.mark.parametrize(
    ("type_", "since"),
    [("x-local-random", "4.0"), ("x-modulus-hash", "4.3"), ("x-consistent-hash", None), ("x-random", None)],
)
def test_rabbitmq_builtin_exchange_types(broker: Target, conn: Any, type_: str, since: str | None) -> None:
    """RabbitMQ's own exchange types: x-local-random since 4.0, x-modulus-hash since 4.3; the plugin types
    (x-consistent-hash, x-random) are unknown without their plugins."""
    x = broker.exchange()
    if since is not None and broker.at_least(since):
        ch = conn.channel()
        ch.exchange_declare(x, type_)
        ch.exchange_declare(x, type_, passive=True)
        # the stored type is an atom that needs quotes: ~p prints it quoted inside the quotes
        assert closed(conn, lambda ch: ch.exchange_declare(x, "direct")) == (
            406,
            f"PRECONDITION_FAILED - inequivalent arg 'type' for exchange '{x}' in vhost '/': "
            f"received 'direct' but current is ''{type_}''",
        )
        return
    if broker.at_least("3.13"):
        code, text = closed(conn, lambda ch: ch.exchange_declare(x, type_))
        assert code == 406 and text.endswith(f"exchange type '{type_}'")
    else:
        with pytest.raises(pika.exceptions.ConnectionClosedByBroker) as exc:
            conn.channel().exchange_declare(x, type_)
        assert (exc.value.reply_code, exc.value.reply_text) == (
            503,
            f"COMMAND_INVALID - unknown exchange type '{type_}'",
        )


def test_passive_declare_ignores_type_and_flags(broker: Target, ch: Any) -> None:
    x = broker.exchange()
    ch.exchange_declare(x, "direct")
    ch.exchange_declare(x, "fanout", passive=True, durable=True, auto_delete=True)


@pytest.mark.parametrize(
    ("kwargs", "field", "received", "current"),
    [
        ({"exchange_type": "fanout"}, "type", "fanout", "direct"),
        ({"durable": True}, "durable", "true", "false"),
        ({"auto_delete": True}, "auto_delete", "true", "false"),
        ({"internal": True}, "internal", "true", "false"),
    ],
)
def test_inequivalent_redeclare(
    broker: Target, conn: Any, kwargs: dict[str, Any], field: str, received: str, current: str
) -> None:
    x = broker.exchange()
    conn.channel().exchange_declare(x, "direct")
    args: dict[str, Any] = {"exchange_type": "direct", **kwargs}
    assert closed(conn, lambda ch: ch.exchange_declare(x, **args)) == (
        406,
        f"PRECONDITION_FAILED - inequivalent arg '{field}' for exchange '{x}' in vhost '/': "
        f"received '{received}' but current is '{current}'",
    )


def test_inequivalent_alternate_exchange(broker: Target, conn: Any) -> None:
    x = broker.exchange()
    conn.channel().exchange_declare(x, "direct", arguments={"alternate-exchange": "ae"})
    assert closed(conn, lambda ch: ch.exchange_declare(x, "direct")) == (
        406,
        f"PRECONDITION_FAILED - inequivalent arg 'alternate-exchange' for exchange '{x}' in vhost '/': "
        "received none but current is the value 'ae' of type 'longstr'",
    )
    assert closed(conn, lambda ch: ch.exchange_declare(x, "direct", arguments={"alternate-exchange": "other"})) == (
        406,
        f"PRECONDITION_FAILED - inequivalent arg 'alternate-exchange' for exchange '{x}' in vhost '/': "
        "received 'other' but current is 'ae'",
    )
    conn.channel().exchange_declare(x, "direct", arguments={"alternate-exchange": "ae", "x-other": 1})


def test_cr_and_lf_are_stripped_from_names(broker: Target, ch: Any) -> None:
    x = broker.exchange()
    ch.exchange_declare(x + "\r\n", "fanout")
    ch.exchange_declare(x, "fanout", passive=True)
    ch.exchange_delete(x + "\n")
    ch2 = ch.connection.channel()
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as exc:
        ch2.exchange_declare(x, "fanout", passive=True)
    assert exc.value.reply_code == 404


# -- delete ------------------------------------------------------------------------------------------------------


def test_delete_missing_exchange_is_fine(broker: Target, ch: Any) -> None:
    ch.exchange_delete(broker.exchange("missing"))
    ch.exchange_delete(broker.exchange("missing"), if_unused=True)


def test_delete_if_unused(broker: Target, conn: Any) -> None:
    x, q = broker.exchange(), broker.name()
    ch = conn.channel()
    ch.exchange_declare(x, "fanout")
    ch.queue_declare(q)
    ch.queue_bind(q, x)
    assert closed(conn, lambda ch: ch.exchange_delete(x, if_unused=True)) == (
        406,
        f"PRECONDITION_FAILED - exchange '{x}' in vhost '/' in use",
    )
    ch = conn.channel()
    ch.queue_unbind(q, x)
    ch.exchange_delete(x, if_unused=True)
    assert closed(conn, lambda ch: ch.exchange_declare(x, "fanout", passive=True))[0] == 404


def test_delete_if_unused_as_a_destination_only(broker: Target, conn: Any) -> None:
    src, dst = broker.exchange("src"), broker.exchange("dst")
    ch = conn.channel()
    ch.exchange_declare(src, "fanout")
    ch.exchange_declare(dst, "fanout")
    ch.exchange_bind(dst, src)
    ch.exchange_delete(dst, if_unused=True)  # only bindings *from* an exchange make it used


def test_delete_removes_bindings(broker: Target, ch: Any) -> None:
    x, q = broker.exchange(), broker.name()
    ch.exchange_declare(x, "fanout")
    ch.queue_declare(q)
    ch.queue_bind(q, x)
    ch.exchange_delete(x)
    ch.exchange_declare(x, "fanout")
    ch.confirm_delivery()
    ch.basic_publish(x, "", b"after")
    assert ch.queue_declare(q, passive=True).method.message_count == 0


def test_auto_delete_exchange_goes_with_its_last_binding(broker: Target, conn: Any) -> None:
    x, q = broker.exchange(), broker.name()
    ch = conn.channel()
    ch.exchange_declare(x, "fanout", auto_delete=True)
    ch.queue_declare(q)
    ch.queue_bind(q, x)
    ch.queue_unbind(q, x)
    assert closed(conn, lambda ch: ch.exchange_declare(x, "fanout", passive=True))[0] == 404


# -- bindings ----------------------------------------------------------------------------------------------------


def test_bind_errors(broker: Target, conn: Any) -> None:
    q, nox, noq = broker.name(), broker.exchange("nox"), broker.name("noq")
    conn.channel().queue_declare(q)
    assert closed(conn, lambda ch: ch.queue_bind(q, nox)) == (404, f"NOT_FOUND - no exchange '{nox}' in vhost '/'")
    assert closed(conn, lambda ch: ch.queue_bind(noq, "amq.direct")) == (
        404,
        f"NOT_FOUND - no queue '{noq}' in vhost '/'",
    )
    # the source is checked first
    assert closed(conn, lambda ch: ch.queue_bind(noq, nox)) == (404, f"NOT_FOUND - no exchange '{nox}' in vhost '/'")
    default = (403, "ACCESS_REFUSED - operation not permitted on the default exchange")
    assert closed(conn, lambda ch: ch.queue_bind(q, "")) == default
    assert closed(conn, lambda ch: ch.queue_unbind(q, "")) == default
    assert closed(conn, lambda ch: ch.exchange_bind("", "amq.direct")) == default
    assert closed(conn, lambda ch: ch.exchange_bind("amq.fanout", "")) == default
    assert closed(conn, lambda ch: ch.exchange_bind(nox, "amq.direct")) == (
        404,
        f"NOT_FOUND - no exchange '{nox}' in vhost '/'",
    )
    assert closed(conn, lambda ch: ch.exchange_bind("amq.fanout", nox)) == (
        404,
        f"NOT_FOUND - no exchange '{nox}' in vhost '/'",
    )


def test_unbinding_what_does_not_exist_is_fine(broker: Target, ch: Any) -> None:
    q = broker.name()
    ch.queue_declare(q)
    ch.queue_unbind(q, "amq.direct", "never-bound")
    ch.queue_unbind(q, broker.exchange("nox"))
    ch.queue_unbind(broker.name("noq"), "amq.direct")
    ch.exchange_unbind("amq.fanout", broker.exchange("nox"))
    ch.exchange_unbind(broker.exchange("nox"), "amq.direct")


def test_binding_twice_is_one_binding(broker: Target, ch: Any) -> None:
    x, q = broker.exchange(), broker.name()
    ch.exchange_declare(x, "direct")
    ch.queue_declare(q)
    ch.queue_bind(q, x, "k")
    ch.queue_bind(q, x, "k")
    ch.confirm_delivery()
    ch.basic_publish(x, "k", b"once")
    assert ch.queue_declare(q, passive=True).method.message_count == 1
    ch.queue_unbind(q, x, "k")
    ch.basic_publish(x, "k", b"gone")
    assert ch.queue_declare(q, passive=True).method.message_count == 1


def test_exchange_to_exchange_cycles_deliver_once(broker: Target, ch: Any) -> None:
    a, b, q = broker.exchange("a"), broker.exchange("b"), broker.name()
    ch.exchange_declare(a, "fanout")
    ch.exchange_declare(b, "fanout")
    ch.exchange_bind(b, a)
    ch.exchange_bind(a, b)
    ch.queue_declare(q)
    ch.queue_bind(q, a)
    ch.queue_bind(q, b)
    ch.confirm_delivery()
    ch.basic_publish(a, "", b"m")
    assert ch.queue_declare(q, passive=True).method.message_count == 1


# -- routing -----------------------------------------------------------------------------------------------------


def route(
    ch: Any,
    x: str,
    bindings: list[tuple[str, str, dict[str, Any] | None]],
    publishes: list[tuple[str, dict[str, Any] | None]],
) -> dict[str, list[bytes]]:
    """Bind queues (named by their key in ``bindings``), publish, return what each queue got."""
    queues: dict[str, str] = {}
    for label, key, args in bindings:
        q = queues.setdefault(label, f"{x}-{label}")
        ch.queue_declare(q, auto_delete=False)
        ch.queue_bind(q, x, key, arguments=args)
    ch.confirm_delivery()
    for i, (key, headers) in enumerate(publishes):
        ch.basic_publish(x, key, str(i).encode(), pika.BasicProperties(headers=headers))
    out: dict[str, list[bytes]] = {}
    for label, q in queues.items():
        got = []
        while True:
            _, _, body = ch.basic_get(q, auto_ack=True)
            if body is None:
                break
            got.append(body)
        out[label] = got
        ch.queue_delete(q)
    return out


def test_topic_matching(broker: Target, ch: Any) -> None:
    x = broker.exchange()
    ch.exchange_declare(x, "topic")
    got = route(
        ch,
        x,
        [
            ("star", "a.*.c", None),
            ("hash", "a.#", None),
            ("all", "#", None),
            ("exact", "a.b", None),
            ("mid", "*.b.#", None),
            ("empty", "", None),
        ],
        [("a.b.c", None), ("a.b", None), ("a", None), ("x.b.y.z", None), ("", None), ("a..c", None)],
    )
    assert got == {
        "star": [b"0", b"5"],
        "hash": [b"0", b"1", b"2", b"5"],
        "all": [b"0", b"1", b"2", b"3", b"4", b"5"],
        "exact": [b"1"],
        "mid": [b"0", b"1", b"3"],
        "empty": [b"4"],
    }


def test_headers_matching_modes(broker: Target, ch: Any) -> None:
    x2 = broker.exchange("h2")
    ch.exchange_declare(x2, "headers")
    got = route(
        ch,
        x2,
        [
            ("all", "", {"x-match": "all", "a": 1, "b": "two"}),
            ("any", "", {"x-match": "any", "a": 1, "b": "two"}),
            ("default", "", {"a": 1}),
            ("allx", "", {"x-match": "all-with-x", "x-k": "v"}),
            ("anyx", "", {"x-match": "any-with-x", "x-k": "v", "z": 0}),
            ("plainx", "", {"x-match": "all", "x-k": "v"}),
        ],
        [
            ("", {"a": 1, "b": "two"}),
            ("", {"a": 1}),
            ("", {"b": "two", "c": 3}),
            ("", {"x-k": "v"}),
            ("", {}),
            ("", None),
        ],
    )
    assert got == {
        "all": [b"0"],
        "any": [b"0", b"1", b"2"],
        "default": [b"0", b"1"],
        "allx": [b"3"],
        "anyx": [b"3"],
        "plainx": [b"0", b"1", b"2", b"3", b"4", b"5"],  # x- arguments are ignored: an empty "all" matches all
    }


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (
            "foo",
            'PRECONDITION_FAILED - Invalid x-match field value <<"foo">>; expected all, any, all-with-x, or any-with-x',
        ),
        (
            "ALL",
            'PRECONDITION_FAILED - Invalid x-match field value <<"ALL">>; expected all, any, all-with-x, or any-with-x',
        ),
        # an empty binary prints as <<>> (live 3.10.8, 4.0.5, 4.3.6), not <<"">>
        ("", "PRECONDITION_FAILED - Invalid x-match field value <<>>; expected all, any, all-with-x, or any-with-x"),
        (5, "PRECONDITION_FAILED - Invalid x-match field type signedint (value 5); expected longstr"),
    ],
)
def test_invalid_x_match(broker: Target, conn: Any, value: Any, text: str) -> None:
    q = broker.name()
    conn.channel().queue_declare(q)
    assert closed(conn, lambda ch: ch.queue_bind(q, "amq.headers", arguments={"x-match": value})) == (406, text)


@for_versions("3.10", "4.0", "4.3")
@pytest.mark.parametrize("value", ["é", b"\xe9"])
def test_invalid_x_match_octets_by_version(broker: Target, value: str | bytes) -> None:
    """The value is printed with ``~p`` up to 3.11 (a printable binary's octets go out raw) and with ``~tp`` from
    3.12 (valid UTF-8 marked ``/utf8``, other octets as Latin-1 characters), as the frame-error texts are (live
    3.10.8, 4.0.5, 4.3.6)."""
    c = RawAMQP.connect(broker.url)
    c.open_channel(1)
    q = broker.name()
    c.rpc(1, spec.Queue.Declare(queue=q, exclusive=True), "Queue.DeclareOk")
    c.send_method(1, spec.Queue.Bind(queue=q, exchange="amq.headers", arguments={"x-match": value}))
    close = c.expect_close()
    text = close.reply_text if isinstance(close.reply_text, bytes) else close.reply_text.encode("utf-8")
    if isinstance(value, str):
        shown = '<<"\xc3\xa9"/utf8>>' if broker.at_least("4.0") else '<<"\xc3\xa9">>'
        expected = (
            f"PRECONDITION_FAILED - Invalid x-match field value {shown}; expected all, any, all-with-x, or any-with-x"
        )
    else:
        shown = '<<"\xc3\xa9">>' if broker.at_least("4.0") else '<<"\xe9">>'
        expected = f"PRECONDITION_FAILED - Invalid x-match field type binary (value {shown}); expected longstr"
    assert (close.reply_code, text) == (406, expected.encode("latin-1"))
    c.sock.close()


def test_direct_and_fanout(broker: Target, ch: Any) -> None:
    d = broker.exchange("d")
    ch.exchange_declare(d, "direct")
    got = route(
        ch,
        d,
        [("one", "k1", None), ("two", "k2", None), ("both", "k1", None)],
        [("k1", None), ("k2", None), ("k3", None)],
    )
    # "both" is bound only with k1 (bindings of one queue under two keys route once per key match)
    assert got == {"one": [b"0"], "two": [b"1"], "both": [b"0"]}
    f = broker.exchange("f")
    ch.exchange_declare(f, "fanout")
    got = route(ch, f, [("a", "ignored", None), ("b", "", None)], [("any", None), ("", None)])
    assert got == {"a": [b"0", b"1"], "b": [b"0", b"1"]}


def test_alternate_exchange_chain(broker: Target, ch: Any) -> None:
    main, ae, ae2 = broker.exchange("main"), broker.exchange("ae"), broker.exchange("ae2")
    q = broker.name()
    ch.exchange_declare(ae2, "fanout")
    ch.exchange_declare(ae, "direct", arguments={"alternate-exchange": ae2})
    ch.exchange_declare(main, "direct", arguments={"alternate-exchange": ae})
    ch.queue_declare(q)
    ch.queue_bind(q, ae2)
    ch.confirm_delivery()
    ch.basic_publish(main, "nothing-matches", b"falls through twice", mandatory=True)
    assert ch.basic_get(q, auto_ack=True)[2] == b"falls through twice"


def test_publish_to_internal_exchange(broker: Target, conn: Any) -> None:
    x = broker.exchange()
    conn.channel().exchange_declare(x, "fanout", internal=True)
    code, text = closed(conn, lambda ch: (ch.basic_publish(x, "", b"x"), ch.basic_qos(prefetch_count=1)))
    assert (code, text) == (403, f"ACCESS_REFUSED - cannot publish to internal exchange '{x}' in vhost '/'")


# -- RabbitMQ's own exchange types (4.0+: x-local-random, 4.3+: x-modulus-hash) ----------------------------------


def _drain(ch: Any, q: str) -> list[bytes]:
    bodies = []
    while True:
        method, _props, body = ch.basic_get(q, auto_ack=True)
        if method is None:
            return bodies
        bodies.append(body)


@for_versions("4.0", "4.3")
def test_local_random_binding_rules(broker: Target, conn: Any) -> None:
    """Only classic queues, only with the empty binding key (texts from live 4.0.5 and 4.3.6)."""
    x, cq, qq, other = broker.exchange(), broker.name("c"), broker.name("q"), broker.exchange("o")
    ch = conn.channel()
    ch.exchange_declare(x, "x-local-random")
    ch.exchange_declare(other, "direct")
    ch.queue_declare(cq)
    ch.queue_declare(qq, durable=True, arguments={"x-queue-type": "quorum"})
    assert closed(conn, lambda ch: ch.queue_bind(cq, x, "k")) == (
        406,
        "PRECONDITION_FAILED - Non empty binding 'k' key not permitted",
    )
    assert closed(conn, lambda ch: ch.queue_bind(qq, x, "")) == (
        406,
        "PRECONDITION_FAILED - Queue type rabbit_quorum_queue not valid for this exchange type",
    )
    assert closed(conn, lambda ch: ch.exchange_bind(other, x, "")) == (
        406,
        "PRECONDITION_FAILED - Destination not found",
    )
    assert closed(conn, lambda ch: ch.queue_bind(broker.name("none"), x, "")) == (
        404,
        f"NOT_FOUND - no queue '{broker.name('none')}' in vhost '/'",
    )
    ch = conn.channel()
    ch.queue_bind(cq, x, "")
    ch.queue_bind(cq, x, "", arguments={"a": 1})
    ch.queue_unbind(cq, x, "k")  # unbinding what is not there is fine


@for_versions("4.0", "4.3")
def test_local_random_routes_each_message_to_one_bound_queue(broker: Target, conn: Any) -> None:
    x, q1, q2 = broker.exchange(), broker.name("a"), broker.name("b")
    ch = conn.channel()
    ch.exchange_declare(x, "x-local-random")
    ch.confirm_delivery()
    with pytest.raises(pika.exceptions.UnroutableError):  # no binding: unroutable
        ch.basic_publish(x, "", b"none", mandatory=True)
    ch.queue_declare(q1)
    ch.queue_bind(q1, x, "")
    for i in range(5):
        ch.basic_publish(x, f"rk{i}", b"only", mandatory=True)
    assert _drain(ch, q1) == [b"only"] * 5
    ch.queue_declare(q2)
    ch.queue_bind(q2, x, "")
    n = 40
    for i in range(n):
        ch.basic_publish(x, f"rk{i}", str(i).encode(), mandatory=True)
    got1, got2 = _drain(ch, q1), _drain(ch, q2)
    # each message exactly once, spread at random (all 40 in one queue has probability 2^-39)
    assert sorted(got1 + got2, key=int) == [str(i).encode() for i in range(n)]
    assert got1 and got2


def _modulus_target(destinations: list[tuple[str, str]], keys: list[str]) -> tuple[str, str]:
    """rabbit_exchange_type_modulus_hash:route/3: sorted destinations, ``phash2(Keys, 2^27) rem N``."""
    ordered = sorted(destinations, key=lambda d: (d[0] != "exchange", d[1].encode()))
    return ordered[phash2_binaries([k.encode() for k in keys], 1 << 27) % len(ordered)]


@pytest.mark.rabbitmq_version("4.3")
def test_modulus_hash_routes_by_the_hash_of_the_routing_keys(broker: Target, conn: Any) -> None:
    """Every binding counts once whatever its key (a queue bound twice is twice as likely), exchange destinations
    sort before queues, and the CC and BCC keys are part of the hashed list (after the routing key)."""
    x, e2e = broker.exchange("mh"), broker.exchange("e2e")
    qs = [broker.name("q-b"), broker.name("q-a"), broker.name("q-c"), broker.name("via")]
    ch = conn.channel()
    ch.exchange_declare(x, "x-modulus-hash")
    ch.exchange_declare(e2e, "fanout")
    for q in qs:
        ch.queue_declare(q)
    ch.queue_bind(qs[0], x, "ignored")
    ch.queue_bind(qs[0], x, "twice")
    ch.queue_bind(qs[1], x, "")
    ch.queue_bind(qs[2], x, "", arguments={"any": "thing"})
    ch.exchange_bind(e2e, x, "")
    ch.queue_bind(qs[3], e2e, "")
    destinations = [("queue", qs[0]), ("queue", qs[0]), ("queue", qs[1]), ("queue", qs[2]), ("exchange", e2e)]
    ch.confirm_delivery()
    expected: dict[str, list[bytes]] = {q: [] for q in qs}
    cases: list[tuple[str, list[str], list[str]]] = [(f"key-{i}", [], []) for i in range(30)]
    cases += [
        ("", [], []),
        ("k", ["cc1"], []),
        ("k", ["cc1", "cc2"], []),
        ("ünïcode.ключ", [], []),
        ("x" * 100, [], []),
    ]
    cases += [("k", [], ["bcc1"]), ("k", ["cc1"], ["bcc1"]), ("k", ["cc2"], ["bcc2", "bcc3"])]
    for i, (rk, cc, bcc) in enumerate(cases):
        body = str(i).encode()
        headers = {**({"CC": cc} if cc else {}), **({"BCC": bcc} if bcc else {})} or None
        ch.basic_publish(x, rk, body, pika.BasicProperties(headers=headers), mandatory=True)
        kind, name = _modulus_target(destinations, [rk, *cc, *bcc])
        expected[qs[3] if kind == "exchange" else name].append(body)
    assert {q: _drain(ch, q) for q in qs} == expected
    assert all(expected.values())  # every destination was picked at least once


@pytest.mark.rabbitmq_version("4.3")
def test_modulus_hash_without_bindings_is_unroutable(broker: Target, conn: Any) -> None:
    x, ae, q = broker.exchange("mh"), broker.exchange("ae"), broker.name()
    ch = conn.channel()
    ch.exchange_declare(ae, "fanout")
    ch.queue_declare(q)
    ch.queue_bind(q, ae, "")
    ch.exchange_declare(x, "x-modulus-hash", arguments={"alternate-exchange": ae})
    ch.confirm_delivery()
    ch.basic_publish(x, "k", b"to the alternate", mandatory=True)
    assert _drain(ch, q) == [b"to the alternate"]
