"""Decoding what a client sends, without a socket: method arguments (``codec.decode_args``, exactly as
RabbitMQ's generated decoder; tables typed, read once), field tables as RabbitMQ's parser reads them, and
content-header property blocks (``RawProperties.validate``)."""

from __future__ import annotations

import struct
from decimal import Decimal

import pytest
from pamqp import commands
from pamqp import frame as pamqp_frame

from fakerabbit.broker import properties
from fakerabbit.broker.fields import FieldError, decode_table, encode_table
from fakerabbit.broker.properties import PropertiesError, RawProperties, build_properties
from fakerabbit.protocol.codec import MethodDecodeError, arguments_of, decode_args


def args_of(method: commands.Frame) -> bytes:
    """A method's argument octets as pamqp marshals them (a client's view)."""
    payload = pamqp_frame.marshal(method, 1)[7:-1]
    return payload[4:]


def table(body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + body


# -- method arguments --------------------------------------------------------------------------------------


def test_decode_args_is_exact() -> None:
    qos = decode_args(commands.Basic.Qos, struct.pack(">IHB", 0, 5, 1))
    assert (qos.prefetch_size, qos.prefetch_count, qos.global_) == (0, 5, True)
    for bad in (struct.pack(">IHB", 0, 5, 1) + b"x", struct.pack(">IH", 0, 5), b""):
        with pytest.raises(MethodDecodeError) as exc:
            decode_args(commands.Basic.Qos, bad)
        assert exc.value.kind == "undecodable"


def test_decode_args_refuses_a_shortstr_that_is_not_utf8() -> None:
    with pytest.raises(MethodDecodeError) as exc:
        decode_args(commands.Queue.Declare, b"\x00\x00\x02\xff\xfe\x00" + table(b""))
    assert exc.value.kind == "utf8"


def test_basic_publish_takes_any_octets() -> None:
    """RabbitMQ decodes basic.publish with a clause of its own that does not check UTF-8."""
    m = decode_args(commands.Basic.Publish, b"\x00\x00\x01\xff\x02q\xe9\x03")
    assert (m.exchange, m.routing_key, m.mandatory, m.immediate) == ("\udcff", "q\udce9", True, True)


def test_bits_share_octets_in_order() -> None:
    m = decode_args(commands.Queue.Declare, args_of(commands.Queue.Declare(queue="q", durable=True, nowait=True)))
    assert (m.queue, m.passive, m.durable, m.exclusive, m.auto_delete, m.nowait) == (
        "q",
        False,
        True,
        False,
        False,
        True,
    )


def test_arguments_keep_their_wire_types() -> None:
    """Tables are decoded once, typed: RabbitMQ's checks and texts depend on signedint vs long vs longstr."""
    raw = encode_table({"x-max-length": ("l", 5), "x-queue-type": ("S", "quorum"), "x-d": ("D", Decimal("1.5"))})
    payload = b"\x00\x00\x01q\x02" + raw
    m = decode_args(commands.Queue.Declare, payload)
    assert arguments_of(m) == {"x-max-length": ("l", 5), "x-queue-type": ("S", "quorum"), "x-d": ("D", Decimal("1.5"))}
    consume = decode_args(commands.Basic.Consume, args_of(commands.Basic.Consume(queue="q", arguments={"a": 1})))
    assert arguments_of(consume) == {"a": ("b", 1)}  # pamqp writes a small int as a byte
    assert arguments_of(decode_args(commands.Basic.Qos, struct.pack(">IHB", 0, 5, 1))) == {}  # no table


def test_client_properties_are_a_typed_table_too() -> None:
    start_ok = commands.Connection.StartOk(
        client_properties={"product": "x", "capabilities": {"publisher_confirms": True}},
        mechanism="PLAIN",
        response="\x00u\x00p",
    )
    m = decode_args(commands.Connection.StartOk, args_of(start_ok))
    props = arguments_of(m, "client_properties")
    assert props["capabilities"] == ("F", {"publisher_confirms": ("t", True)})
    assert props["product"][1] == "x"


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (b"\x01aZ", "unknown type"),
        (b"\x05ab", "key runs past the end"),
        (b"\x01aI\x00\x00", "signedint cut short"),
        (b"\x01ad" + struct.pack(">d", float("nan")), "NaN: Erlang's float matching refuses it"),
        (b"\x01af" + struct.pack(">f", float("inf")), "infinity likewise"),
        (b"\x01aA" + struct.pack(">I", 3) + b"Ixx", "an array element cut short"),
    ],
)
def test_a_malformed_argument_table_is_a_crash(body: bytes, why: str) -> None:
    """RabbitMQ's reader crashes on a table its parser does not take (the socket just closes)."""
    with pytest.raises(MethodDecodeError) as exc:
        decode_args(commands.Queue.Declare, b"\x00\x00\x01q\x00" + table(body))
    assert exc.value.kind == "table", why


def test_the_table_parser_takes_what_rabbitmq_takes() -> None:
    good = b"\x01aS" + struct.pack(">I", 2) + b"hi" + b"\x01bA" + struct.pack(">I", 2) + b"b\x05" + b"\x01cV"
    assert decode_table(table(good), finite=True)[0] == {"a": ("S", "hi"), "b": ("A", [("b", 5)]), "c": ("V", None)}
    # RabbitMQ takes L (64 bits), as py-amqp writes it; it is a long
    assert decode_table(table(b"\x01aL" + struct.pack(">q", -2)), finite=True)[0] == {"a": ("l", -2)}
    # a NaN is a number to fakerabbit's own tables (built from JSON, say), not to the client-facing parser
    nan = table(b"\x01ad" + struct.pack(">d", float("nan")))
    assert decode_table(nan)[0]["a"][0] == "d"
    with pytest.raises(FieldError):
        decode_table(nan, finite=True)
    with pytest.raises(FieldError):
        decode_table(table(b"\x01aS" + struct.pack(">I", 2) + b"hi"), end=8)  # nothing read beyond end


# -- content-header property blocks --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("props", "ok"),
    [
        (b"\x00\x00", True),
        (b"", False),
        (b"\x80\x00\x0atext/plain", True),
        (b"\x80\x00\x0atext/plai", False),
        (b"\x80\x00\x0atext/plainX", False),  # nothing may follow the last property
        (b"\x00\x40" + struct.pack(">Q", 1), True),  # timestamp
        (b"\x20\x00" + table(b"\x01aI\x00\x00"), False),  # int cut short
        (b"\x20\x00" + table(b"\x01aI\x00\x00\x00\x05"), True),
        (b"\x20\x00" + table(b"\x01ad" + struct.pack(">d", float("nan"))), False),
        (b"\x18\x00\x02\x05", True),  # delivery mode and priority
    ],
)
def test_property_blocks_validate_as_rabbitmq_decodes_them(props: bytes, ok: bool) -> None:
    if ok:
        RawProperties(props).validate()
    else:
        with pytest.raises(PropertiesError):
            RawProperties(props).validate()


def test_a_headers_table_rabbitmq_refuses_is_never_cached_as_valid() -> None:
    """A block fakerabbit built (the management API's JSON may hold a NaN) reads; the same octets from a client
    are refused, whichever came first."""
    raw = build_properties(headers={"n": ("d", float("nan"))})
    assert RawProperties(raw).headers is not None
    with pytest.raises(PropertiesError):
        RawProperties(raw).validate()
    assert raw not in properties._tables
    good = build_properties(headers={"n": ("d", 1.5)})
    RawProperties(good).validate()
    assert properties._tables[good] == {"n": ("d", 1.5)}


def test_validate_decodes_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The validated headers are the ones the broker reads afterwards (one walk per publish)."""
    calls = []

    def counting(*args: object, **kwargs: object) -> object:
        calls.append(args)
        return decode_table(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(properties, "decode_table", counting)
    big = build_properties(headers={"k": ("S", "v" * 1000)}, expiration="5")  # too big for the module caches
    props = RawProperties(big)
    props.validate()
    assert (props.headers, props.expiration) == ({"k": ("S", "v" * 1000)}, "5")
    assert len(calls) == 1
