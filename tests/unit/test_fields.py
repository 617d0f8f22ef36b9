"""Unit tests for fakerabbit.broker.fields, the tag-preserving field-table codec."""

from __future__ import annotations

import math
import struct
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import pika.data
import pika.exceptions
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fakerabbit.broker.fields import (
    INTEGER_TAGS,
    TYPE_NAMES,
    Field,
    FieldError,
    Table,
    decode_array,
    decode_field,
    decode_table,
    decode_table_pairs,
    encode_field,
    encode_table,
    from_python,
    table_from_python,
    table_to_python,
    to_python,
    type_name,
)


def wrap(body: bytes) -> bytes:
    """A table with the given entries, prefixed with their length."""
    return struct.pack(">I", len(body)) + body


def entry(key: bytes, value: bytes) -> bytes:
    return bytes([len(key)]) + key + value


def pika_table(values: dict[str, Any]) -> bytes:
    pieces: list[bytes] = []
    pika.data.encode_table(pieces, values)
    return b"".join(pieces)


# -- every tag, byte for byte -------------------------------------------------------------------------------

TAG_VECTORS: list[tuple[bytes, Field]] = [
    (b"t\x01", ("t", True)),
    (b"t\x00", ("t", False)),
    (b"b\x80", ("b", -128)),
    (b"b\x7f", ("b", 127)),
    (b"B\xff", ("B", 255)),
    (b"s\x80\x00", ("s", -32768)),
    (b"u\xff\xff", ("u", 65535)),
    (b"I\x80\x00\x00\x00", ("I", -(2**31))),
    (b"I\x00\x00\x00\x05", ("I", 5)),
    (b"i\xff\xff\xff\xff", ("i", 2**32 - 1)),
    (b"l\x80" + b"\x00" * 7, ("l", -(2**63))),
    (b"l" + b"\x00" * 7 + b"\x05", ("l", 5)),
    (b"f" + struct.pack(">f", 1.5), ("f", 1.5)),
    (b"d" + struct.pack(">d", 1.1), ("d", 1.1)),
    (b"D\x02\x00\x00\x00\x96", ("D", Decimal("1.50"))),
    (b"D\x00\xff\xff\xff\xfb", ("D", Decimal(-5))),
    (b"D\x03\x00\x00\x00\x00", ("D", Decimal("0.000"))),
    (b"S\x00\x00\x00\x05hello", ("S", "hello")),
    (b"S\x00\x00\x00\x00", ("S", "")),
    (b"S\x00\x00\x00\x02\xc3\xa9", ("S", "é")),
    (b"S\x00\x00\x00\x03a\xff\xfe", ("S", "a\udcff\udcfe")),  # not UTF-8: surrogateescape
    (b"x\x00\x00\x00\x03\x00\xff\x01", ("x", b"\x00\xff\x01")),
    (b"T\x00\x00\x00\x00\x65\x00\x00\x00", ("T", 0x65000000)),
    (b"T\xff\xff\xff\xff\xff\xff\xff\xff", ("T", 2**64 - 1)),
    (b"V", ("V", None)),
    (b"A\x00\x00\x00\x00", ("A", [])),
    (b"A\x00\x00\x00\x07I\x00\x00\x00\x01VV", ("A", [("I", 1), ("V", None), ("V", None)])),
    (b"F\x00\x00\x00\x00", ("F", {})),
    (
        b"F" + wrap(entry(b"k", b"S\x00\x00\x00\x01v") + entry(b"k2", b"V") + entry(b"", b"t\x01")),
        ("F", {"k": ("S", "v"), "k2": ("V", None), "": ("t", True)}),
    ),
]


@pytest.mark.parametrize(("wire", "field"), TAG_VECTORS, ids=[repr(w[:1]) for w, _ in TAG_VECTORS])
def test_every_tag_decodes_and_encodes_byte_exact(wire: bytes, field: Field) -> None:
    table_bytes = wrap(entry(b"key", wire))
    table, end = decode_table(table_bytes)
    assert end == len(table_bytes)
    assert list(table) == ["key"]
    tag, value = table["key"]
    assert tag == field[0]
    assert value == field[1]
    assert type(value) is type(field[1])
    if isinstance(value, Decimal):
        assert value.as_tuple() == field[1].as_tuple()
    assert encode_table(table) == table_bytes
    assert encode_field(field) == wire
    assert decode_field(wire) == (field, len(wire))


def test_every_tag_in_an_array() -> None:
    items = [field for _, field in TAG_VECTORS]
    wire = b"".join(w for w, _ in TAG_VECTORS)
    array_bytes = wrap(wire)
    decoded, end = decode_array(array_bytes)
    assert end == len(array_bytes)
    assert decoded == items
    assert encode_field(("A", items)) == b"A" + array_bytes


def test_all_tags_are_covered() -> None:
    assert {field[0] for _, field in TAG_VECTORS} == set(TYPE_NAMES)


def test_key_order_and_offsets() -> None:
    body = entry(b"z", b"V") + entry(b"a", b"V") + entry(b"m", b"V")
    data = b"junk" + wrap(body) + b"trailer"
    table, end = decode_table(data, 4)
    assert list(table) == ["z", "a", "m"]
    assert data[end:] == b"trailer"
    assert encode_table(table) == wrap(body)


def test_memoryview_and_bytearray_input() -> None:
    data = wrap(entry(b"k", b"S\x00\x00\x00\x02ab") + entry(b"b", b"x\x00\x00\x00\x01\x00"))
    expected = ({"k": ("S", "ab"), "b": ("x", b"\x00")}, len(data))
    assert decode_table(memoryview(data)) == expected
    assert decode_table(bytearray(data)) == expected
    assert decode_table(memoryview(b"??" + data)[2:]) == expected
    (table, _) = decode_table(memoryview(data))
    assert type(table["b"][1]) is bytes


def test_non_utf8_key_round_trips() -> None:
    data = wrap(entry(b"\xffk\xc3", b"V"))
    table, _ = decode_table(data)
    assert list(table) == ["\udcffk\udcc3"]
    assert encode_table(table) == data


def test_duplicate_keys_last_wins() -> None:
    data = wrap(entry(b"a", b"b\x01") + entry(b"b", b"V") + entry(b"a", b"b\x02"))
    table, _ = decode_table(data)
    assert table == {"a": ("b", 2), "b": ("V", None)}


def test_nonstandard_bool_octet_is_true() -> None:
    table, _ = decode_table(wrap(entry(b"k", b"t\x02")))
    assert table == {"k": ("t", True)}
    assert encode_table(table) == wrap(entry(b"k", b"t\x01"))


def test_special_floats_round_trip() -> None:
    for tag, fmt in (("f", ">f"), ("d", ">d")):
        for value in (math.inf, -math.inf, -0.0, 5e-324 if tag == "d" else 1e-45):
            wire = tag.encode() + struct.pack(fmt, value)
            (field, _) = decode_field(wire)
            assert encode_field(field) == wire
        wire = tag.encode() + struct.pack(fmt, math.nan)
        (field, _) = decode_field(wire)
        assert math.isnan(field[1])
        assert encode_field(field) == wire


def test_decimal_keeps_scale() -> None:
    for scale, unscaled in ((0, 0), (1, 150), (2, -5), (255, 2**31 - 1), (9, -(2**31)), (3, 0)):
        wire = b"D" + struct.pack(">Bi", scale, unscaled)
        (field, _) = decode_field(wire)
        assert field[1].as_tuple().exponent == -scale
        assert encode_field(field) == wire


def test_long_stays_long_and_double_stays_double() -> None:
    # The pamqp problems from the design notes: 'l' 5 became 'b', 1.1 became float32.
    data = wrap(entry(b"n", b"l" + struct.pack(">q", 5)) + entry(b"d", b"d" + struct.pack(">d", 1.1)))
    table, _ = decode_table(data)
    assert table == {"n": ("l", 5), "d": ("d", 1.1)}
    assert encode_table(table) == data


def test_nested_structures() -> None:
    table: Table = {
        "x-death": (
            "A",
            [
                (
                    "F",
                    {
                        "count": ("l", 1),
                        "reason": ("S", "expired"),
                        "queue": ("S", "q"),
                        "time": ("T", 1_700_000_000),
                        "exchange": ("S", ""),
                        "routing-keys": ("A", [("S", "rk")]),
                        "original-expiration": ("S", "100"),
                    },
                )
            ],
        ),
        "deep": ("F", {"a": ("A", [("A", [("F", {"b": ("u", 7)})])])}),
    }
    data = encode_table(table)
    decoded, end = decode_table(data)
    assert end == len(data)
    assert decoded == table
    assert encode_table(decoded) == data


# -- pika as an independent encoder -------------------------------------------------------------------------

PIKA_VALUES: dict[str, Any] = {
    "str": "hello",
    "unicode": "tâche ✓",
    "empty": "",
    "bytes": b"\x00\x01\xff",
    "true": True,
    "false": False,
    "small": 7,
    "neg": -7,
    "int32max": 2**31 - 1,
    "int32min": -(2**31),
    "big": 2**31,
    "bigneg": -(2**40),
    "int64max": 2**63 - 1,
    "decimal": Decimal("1.50"),
    "decimal-int": Decimal(100),
    "decimal-neg": Decimal("-0.25"),
    "datetime": datetime(2024, 5, 6, 7, 8, 9),
    "aware": datetime(2024, 5, 6, 7, 8, 9, tzinfo=timezone(timedelta(hours=2))),
    "none": None,
    "list": [1, "a", [2, None], {"k": "v"}],
    "dict": {"nested": {"deeper": [True, b"x"]}, "n": 2**40},
}


def test_decode_pika_encoding() -> None:
    data = pika_table(PIKA_VALUES)
    table, end = decode_table(data)
    assert end == len(data)
    assert list(table) == list(PIKA_VALUES)
    assert table["small"] == ("I", 7)
    assert table["big"] == ("l", 2**31)
    assert table["bytes"] == ("x", b"\x00\x01\xff")
    assert table["decimal"] == ("D", Decimal("1.5"))
    assert table["datetime"] == ("T", int(datetime(2024, 5, 6, 7, 8, 9, tzinfo=UTC).timestamp()))
    assert table["aware"] == ("T", int(datetime(2024, 5, 6, 5, 8, 9, tzinfo=UTC).timestamp()))
    assert table["none"] == ("V", None)
    assert table["list"] == (
        "A",
        [("I", 1), ("S", "a"), ("A", [("I", 2), ("V", None)]), ("F", {"k": ("S", "v")})],
    )
    assert encode_table(table) == data


def test_from_python_matches_pika_byte_for_byte() -> None:
    assert encode_table(table_from_python(PIKA_VALUES)) == pika_table(PIKA_VALUES)


def test_pika_cannot_encode_floats() -> None:
    # pika 1.4.4's encoder has no float branch (and decodes 'f'/'d' with long()); we use 'd' like pika#1705.
    with pytest.raises(pika.exceptions.UnsupportedAMQPFieldException):
        pika_table({"f": 1.5})
    assert from_python(1.5) == ("d", 1.5)


def test_table_to_python_matches_input() -> None:
    plain = table_to_python(table_from_python(PIKA_VALUES))
    expected = dict(PIKA_VALUES)
    expected["datetime"] = datetime(2024, 5, 6, 7, 8, 9, tzinfo=UTC)
    expected["aware"] = datetime(2024, 5, 6, 5, 8, 9, tzinfo=UTC)
    assert plain == expected
    assert plain["aware"].tzinfo is UTC
    assert str(plain["decimal"]) == "1.5"
    assert str(plain["decimal-int"]) == "100"


@given(st.binary(max_size=64), st.text(max_size=20))
def test_pika_agrees_on_strings_and_bytes(blob: bytes, text: str) -> None:
    values = {"b": blob, "s": text, text[:50]: [text, blob]}
    data = pika_table(values)
    table, _ = decode_table(data)
    assert table_to_python(table) == values
    assert encode_table(table) == data


# -- from_python / to_python --------------------------------------------------------------------------------


def test_from_python_tags() -> None:
    assert from_python("s") == ("S", "s")
    assert from_python(b"b") == ("x", b"b")
    assert from_python(bytearray(b"b")) == ("x", b"b")
    assert from_python(True) == ("t", True)
    assert from_python(0) == ("I", 0)
    assert from_python(2**31 - 1) == ("I", 2**31 - 1)
    assert from_python(-(2**31)) == ("I", -(2**31))
    assert from_python(2**31) == ("l", 2**31)
    assert from_python(-(2**31) - 1) == ("l", -(2**31) - 1)
    assert from_python(2**63 - 1) == ("l", 2**63 - 1)
    assert from_python(1.5) == ("d", 1.5)
    assert from_python(None) == ("V", None)
    assert from_python((1, "a")) == ("A", [("I", 1), ("S", "a")])
    assert from_python({"a": {"b": []}}) == ("F", {"a": ("F", {"b": ("A", [])})})
    assert from_python(datetime(1970, 1, 1, 0, 1)) == ("T", 60)
    assert from_python(datetime(1970, 1, 1, 1, 1, tzinfo=timezone(timedelta(hours=1)))) == ("T", 60)
    assert from_python(Decimal("1.50")) == ("D", Decimal("1.5"))
    assert from_python(Decimal("1E+2")) == ("D", Decimal(100))


@pytest.mark.parametrize(
    "value",
    [
        2**63,
        -(2**63) - 1,
        object(),
        {1: "non-str key"},
        Decimal("NaN"),
        Decimal("Infinity"),
        Decimal("1E+20"),
        Decimal("1E+999999999"),
        Decimal("1E-300"),
        datetime(1969, 12, 31),
        {1, 2},
    ],
)
def test_from_python_rejects(value: object) -> None:
    with pytest.raises(FieldError):
        from_python(value)


def test_from_python_rejects_self_reference() -> None:
    loop: list[object] = []
    loop.append(loop)
    with pytest.raises(FieldError, match="nested"):
        from_python(loop)
    d: dict[str, object] = {}
    d["d"] = d
    with pytest.raises(FieldError, match="nested"):
        table_from_python(d)


def test_to_python() -> None:
    assert to_python(("T", 0)) == datetime(1970, 1, 1, tzinfo=UTC)
    assert to_python(("T", 2**64 - 1)) == 2**64 - 1  # beyond datetime: raw int
    assert to_python(("S", "a\udcff")) == "a\udcff"
    assert to_python(("A", [("F", {"a": ("T", 60)})])) == [{"a": datetime(1970, 1, 1, 0, 1, tzinfo=UTC)}]
    assert to_python(("l", 5)) == 5
    assert to_python(("D", Decimal("1.50"))) == Decimal("1.50")


def test_type_names() -> None:
    assert type_name("l") == "long"
    assert type_name("S") == "longstr"
    assert type_name("F") == "table"
    assert type_name("I") == "signedint"
    assert type_name("i") == "unsignedint"
    assert len(TYPE_NAMES) == 17
    assert frozenset("bBsuIil") == INTEGER_TAGS
    with pytest.raises(FieldError):
        type_name("L")


# -- encoding errors ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "field",
    [
        ("b", 128),
        ("B", -1),
        ("s", 2**15),
        ("u", 2**16),
        ("I", 2**31),
        ("i", -1),
        ("l", 2**63),
        ("T", -1),
        ("I", "1"),
        ("I", 1.0),
        ("l", True),
        ("f", 1e300),
        ("d", "x"),
        ("D", Decimal("1E-256")),
        ("D", Decimal(2**31)),
        ("D", Decimal("NaN")),
        ("D", 1.5),
        ("S", 5),
        ("S", "\ud800"),  # a lone surrogate that surrogateescape cannot encode
        ("x", "str"),
        ("V", 0),
        ("A", "abc"),
        ("A", [("Q", 1)]),
        ("F", [("a", ("V", None))]),
        ("F", {"k": "not a field"}),
        ("F", {"k" * 256: ("V", None)}),
        ("F", {b"k": ("V", None)}),
        ("Q", 1),
        ([1], 1),
        ("S",),
    ],
)
def test_encode_errors(field: Any) -> None:
    with pytest.raises(FieldError):
        encode_field(field)


def test_encode_accepts_extras() -> None:
    assert encode_field(("S", b"\xff")) == b"S\x00\x00\x00\x01\xff"
    assert encode_field(("d", 1)) == b"d" + struct.pack(">d", 1.0)
    assert encode_field(("D", 5)) == b"D\x00\x00\x00\x00\x05"
    assert encode_field(("A", (("V", None),))) == b"A\x00\x00\x00\x01V"
    assert encode_table({"k" * 255: ("V", None)}) == wrap(entry(b"k" * 255, b"V"))


def test_encode_has_no_depth_limit_but_refuses_self_reference() -> None:
    table: Table = {}
    for _ in range(5000):
        table = {"t": ("F", table)}
    data = encode_table(table)
    assert data == nested_tables(5001)
    assert encode_table(decode_table(data)[0]) == data
    loop: list[Field] = []
    loop.append(("A", loop))
    with pytest.raises(FieldError, match="nested"):
        encode_field(("A", loop))


# -- malformed input ----------------------------------------------------------------------------------------


def nested_tables(depth: int) -> bytes:
    data = wrap(b"")
    for _ in range(depth - 1):
        data = wrap(entry(b"t", b"F" + data))
    return data


def nested_arrays(depth: int) -> bytes:
    """A table holding ``depth`` nested arrays (so ``depth + 1`` levels in all)."""
    data = wrap(b"")
    for _ in range(depth - 1):
        data = wrap(b"A" + data)
    return wrap(entry(b"k", b"A" + data))


@pytest.mark.parametrize("depth", [100, 101, 1000, 5000, 20000])
def test_any_depth_decodes_and_round_trips(depth: int) -> None:
    """RabbitMQ accepted 5,000 levels (issue 11); nothing here recurses on the Python stack."""
    for data in (nested_tables(depth), nested_arrays(depth)):
        table, end = decode_table(data)
        assert end == len(data)
        assert encode_table(table) == data
        plain = table_to_python(table)
        assert encode_table(table_from_python(plain)) == data
    pairs, _ = decode_table_pairs(nested_tables(depth))
    assert [key for key, _ in pairs] == ["t"]


def test_decode_table_pairs_keeps_repeated_keys() -> None:
    data = wrap(entry(b"a", b"I" + struct.pack(">i", 1)) + entry(b"a", b"I" + struct.pack(">i", 2)))
    assert decode_table_pairs(data)[0] == [("a", ("I", 1)), ("a", ("I", 2))]
    assert decode_table(data)[0] == {"a": ("I", 2)}


MALFORMED = {
    "empty": b"",
    "short length": b"\x00\x00\x00",
    "length past end": b"\x00\x00\x00\x05\x01kV",
    "key past end": wrap(b"\x05ab"),
    "missing tag": wrap(b"\x01k"),
    "unknown tag": wrap(entry(b"k", b"Q")),
    "truncated int": wrap(entry(b"k", b"I\x00\x00")),
    "truncated bool": wrap(entry(b"k", b"t")),
    "truncated decimal": wrap(entry(b"k", b"D\x01\x00\x00\x00")),
    "truncated longstr length": wrap(entry(b"k", b"S\x00\x00")),
    "longstr past end": wrap(entry(b"k", b"S\x00\x00\x00\x09abc")),
    "binary past end": wrap(entry(b"k", b"x\xff\xff\xff\xffabc")),
    "nested table past outer": wrap(entry(b"k", b"F\x00\x00\x00\x03")) + b"\x01kV",
    "array past outer": wrap(entry(b"k", b"A\x00\x00\x00\x02")) + b"VV",
    "nested value crosses nested end": wrap(entry(b"k", b"F" + wrap(entry(b"j", b"I")) + b"\x00\x00\x00\x01")),
    "array value crosses array end": wrap(entry(b"k", b"A" + wrap(b"s\x00")) + b"\x00"),
}


@pytest.mark.parametrize("data", MALFORMED.values(), ids=MALFORMED.keys())
def test_malformed(data: bytes) -> None:
    with pytest.raises(FieldError):
        decode_table(data)


def test_every_truncation_of_a_valid_table_is_rejected() -> None:
    data = encode_table(table_from_python(PIKA_VALUES))
    for cut in range(len(data)):
        with pytest.raises(FieldError):
            decode_table(data[:cut])
        # Also with the outer length corrected: the cut lands inside some value.
        if cut >= 4:
            body = data[4:cut]
            try:
                table, _ = decode_table(wrap(body))
            except FieldError:
                continue
            # Only a cut exactly between two entries can decode, and then it re-encodes exactly.
            assert encode_table(table) == wrap(body)


def test_negative_offset() -> None:
    with pytest.raises(FieldError):
        decode_table(wrap(b""), -1)


# -- property-based -----------------------------------------------------------------------------------------

_leaf: st.SearchStrategy[Field] = st.one_of(
    st.tuples(st.just("t"), st.booleans()),
    st.tuples(st.just("b"), st.integers(-(2**7), 2**7 - 1)),
    st.tuples(st.just("B"), st.integers(0, 2**8 - 1)),
    st.tuples(st.just("s"), st.integers(-(2**15), 2**15 - 1)),
    st.tuples(st.just("u"), st.integers(0, 2**16 - 1)),
    st.tuples(st.just("I"), st.integers(-(2**31), 2**31 - 1)),
    st.tuples(st.just("i"), st.integers(0, 2**32 - 1)),
    st.tuples(st.just("l"), st.integers(-(2**63), 2**63 - 1)),
    st.tuples(st.just("f"), st.floats(width=32, allow_nan=False)),
    st.tuples(st.just("d"), st.floats(allow_nan=False)),
    st.builds(
        lambda scale, raw: ("D", Decimal(raw).scaleb(-scale)),
        st.integers(0, 255),
        st.integers(-(2**31), 2**31 - 1),
    ),
    st.tuples(st.just("S"), st.binary(max_size=20).map(lambda b: b.decode("utf-8", "surrogateescape"))),
    st.tuples(st.just("x"), st.binary(max_size=20)),
    st.tuples(st.just("T"), st.integers(0, 2**64 - 1)),
    st.just(("V", None)),
)
_keys = st.binary(max_size=12).map(lambda b: b.decode("utf-8", "surrogateescape"))
fields: st.SearchStrategy[Field] = st.recursive(
    _leaf,
    lambda children: st.one_of(
        st.tuples(st.just("A"), st.lists(children, max_size=4)),
        st.tuples(st.just("F"), st.dictionaries(_keys, children, max_size=4)),
    ),
    max_leaves=20,
)
tables = st.dictionaries(_keys, fields, max_size=6)


@given(tables)
def test_round_trip_property(table: Table) -> None:
    data = encode_table(table)
    decoded, end = decode_table(data)
    assert end == len(data)
    assert decoded == table
    assert encode_table(decoded) == data


@given(fields)
def test_field_round_trip_property(field: Field) -> None:
    wire = encode_field(field)
    assert decode_field(wire) == (field, len(wire))


@settings(max_examples=500, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=200), st.integers(0, 8))
def test_fuzz_random_bytes(data: bytes, offset: int) -> None:
    try:
        table, end = decode_table(data, offset)
    except FieldError:
        return
    assert end <= len(data)
    table_to_python(table)


@settings(max_examples=500, suppress_health_check=[HealthCheck.too_slow])
@given(tables, st.data())
def test_fuzz_mutated_tables(table: Table, data: st.DataObject) -> None:
    wire = bytearray(encode_table(table))
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(0, len(wire) - 1))
        wire[pos] = data.draw(st.integers(0, 255))
    try:
        decoded, end = decode_table(bytes(wire))
    except FieldError:
        return
    assert end <= len(wire)
    encode_table(decoded)
    table_to_python(decoded)


def test_py_amqp_L_is_read_as_signed_long() -> None:
    # py-amqp writes 64-bit ints as 'L'; RabbitMQ accepts it and re-encodes it as 'l'.
    raw = wrap(entry(b"k", b"L" + struct.pack(">q", -(2**40))))
    table, _ = decode_table(raw)
    assert table == {"k": ("l", -(2**40))}
    assert encode_table(table) == wrap(entry(b"k", b"l" + struct.pack(">q", -(2**40))))
