"""Unit tests for fakerabbit.broker.properties, the raw content-header property block."""

from __future__ import annotations

import struct
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pika.spec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fakerabbit.broker.fields import Table, encode_table, table_from_python
from fakerabbit.broker.properties import (
    EMPTY_PROPERTIES,
    PROPERTY_NAMES,
    PropertiesError,
    RawProperties,
    build_properties,
)

HEADERS_PLAIN: dict[str, Any] = {
    "x-int": 7,
    "x-long": 2**40,
    "x-str": "tâche",
    "x-bin": b"\x00\xff",
    "x-dec": Decimal("1.5"),
    "x-list": [1, "a", {"k": None}],
    "x-bool": True,
}

ALL_PLAIN: dict[str, Any] = {
    "content_type": "application/json",
    "content_encoding": "gzip",
    "headers": HEADERS_PLAIN,
    "delivery_mode": 2,
    "priority": 9,
    "correlation_id": "corr-1",
    "reply_to": "amq.rabbitmq.reply-to",
    "expiration": "60000",
    "message_id": "m-1",
    "timestamp": 1_700_000_000,
    "type": "order.created",
    "user_id": "guest",
    "app_id": "tests",
    "cluster_id": "c1",
}


def pika_raw(**values: Any) -> bytes:
    return b"".join(pika.spec.BasicProperties(**values).encode())


def build_all(**overrides: Any) -> bytes:
    """``ALL_PLAIN`` encoded by build_properties, with some values replaced (``headers`` as a Table)."""
    values = {**ALL_PLAIN, "headers": table_from_python(HEADERS_PLAIN), **overrides}
    return build_properties(**values)


# -- decoding -----------------------------------------------------------------------------------------------


def test_all_properties_from_pika() -> None:
    raw = pika_raw(**ALL_PLAIN)
    props = RawProperties(raw)
    assert props.raw == raw
    assert props.content_type == "application/json"
    assert props.content_encoding == "gzip"
    assert props.delivery_mode == 2
    assert props.priority == 9
    assert props.correlation_id == "corr-1"
    assert props.reply_to == "amq.rabbitmq.reply-to"
    assert props.expiration == "60000"
    assert props.message_id == "m-1"
    assert props.timestamp == 1_700_000_000
    assert props.type == "order.created"
    assert props.user_id == "guest"
    assert props.app_id == "tests"
    assert props.cluster_id == "c1"
    assert props.headers == table_from_python(HEADERS_PLAIN)
    assert props.headers is props.headers  # decoded once
    assert props.to_dict() == ALL_PLAIN
    assert list(props.to_dict()) == list(PROPERTY_NAMES)


def test_build_properties_matches_pika_byte_for_byte() -> None:
    assert build_all() == pika_raw(**ALL_PLAIN)
    assert build_properties() == pika_raw() == EMPTY_PROPERTIES
    assert build_properties(expiration="5") == pika_raw(expiration="5")
    assert build_properties(headers={}, cluster_id="") == pika_raw(headers={}, cluster_id="")


@pytest.mark.parametrize("name", PROPERTY_NAMES)
def test_each_property_alone(name: str) -> None:
    value = ALL_PLAIN[name]
    raw = pika_raw(**{name: value})
    props = RawProperties(raw)
    assert props.to_dict() == {name: value}
    for other in PROPERTY_NAMES:
        if other != name:
            assert getattr(props, other) is None
    assert build_all(**{n: None for n in PROPERTY_NAMES if n != name}) == raw


def test_empty_block() -> None:
    props = RawProperties(EMPTY_PROPERTIES)
    assert props.to_dict() == {}
    assert props.headers is None
    assert props.expiration is None
    props.validate()
    assert RawProperties() == props


def test_empty_strings_are_present() -> None:
    # pamqp drops content_type=''; a raw block keeps it.
    raw = pika_raw(content_type="", headers={})
    props = RawProperties(raw)
    assert props.content_type == ""
    assert props.headers == {}
    assert props.to_dict() == {"content_type": "", "headers": {}}


def test_non_utf8_shortstrs_round_trip() -> None:
    raw = b"\x80\x80" + b"\x02\xff\xfe" + b"\x01\x80"  # content_type, message_id: not UTF-8
    props = RawProperties(raw)
    assert props.content_type == "\udcff\udcfe"
    assert props.message_id == "\udc80"
    assert build_properties(content_type=props.content_type, message_id=props.message_id) == raw
    assert props.replace(expiration="1").raw == b"\x81\x80\x02\xff\xfe\x011\x01\x80"


def test_headers_keep_tags() -> None:
    headers: Table = {"l": ("l", 5), "d": ("d", 1.1), "T": ("T", 5), "S": ("S", "a\udcff"), "b": ("b", -1)}
    props = RawProperties(build_properties(headers=headers))
    assert props.headers == headers
    assert props.to_dict() == {
        "headers": {"l": 5, "d": 1.1, "T": datetime(1970, 1, 1, 0, 0, 5, tzinfo=UTC), "S": "a\udcff", "b": -1}
    }


def test_lazy_parsing_and_equality() -> None:
    bad = RawProperties(b"\xff")  # constructing never parses
    with pytest.raises(PropertiesError):
        _ = bad.priority
    assert RawProperties(bytearray(b"\x00\x00")) == RawProperties(memoryview(b"\x00\x00"))
    assert hash(RawProperties(b"\x00\x00")) == hash(RawProperties(b"\x00\x00"))
    assert RawProperties(b"\x00\x00") != RawProperties(build_properties(priority=1))
    assert "RawProperties" in repr(bad)


def test_timestamp_datetime() -> None:
    raw = build_properties(timestamp=datetime(1970, 1, 1, 0, 1))
    assert RawProperties(raw).timestamp == 60
    assert raw == pika_raw(timestamp=60)


# -- malformed blocks ---------------------------------------------------------------------------------------

MALFORMED = {
    "empty": b"",
    "one byte": b"\x00",
    "bit 1": b"\x00\x02",
    "bit 1 with others": b"\x80\x02\x00",
    "continuation truncated": b"\x00\x01",
    "continuation truncated 1 byte": b"\x00\x01\x00",
    "continuation with unknown flag": b"\x00\x01\x80\x00",
    "second continuation with unknown flag": b"\x00\x01\x00\x01\x00\x02",
    "shortstr missing": b"\x80\x00",
    "shortstr truncated": b"\x80\x00\x05abc",
    "table length truncated": b"\x20\x00\x00\x00",
    "table past end": b"\x20\x00\x00\x00\x00\x05V",
    "octet missing": b"\x10\x00",
    "timestamp truncated": b"\x00\x40\x00\x00\x00\x00\x00\x00\x00",
    "trailing bytes": b"\x00\x00\x00",
    "trailing after values": b"\x08\x00\x05\x00",
}


@pytest.mark.parametrize("raw", MALFORMED.values(), ids=MALFORMED.keys())
def test_malformed(raw: bytes) -> None:
    props = RawProperties(raw)
    with pytest.raises(PropertiesError):
        props.to_dict()
    with pytest.raises(PropertiesError):
        props.validate()
    with pytest.raises(PropertiesError):
        props.replace(headers=None)


def test_empty_continuation_words_are_accepted() -> None:
    props = RawProperties(b"\x08\x01\x00\x01\x00\x00\x05")
    assert props.to_dict() == {"priority": 5}
    # The continuation words are dropped; priority (bit 11) comes before expiration (bit 8).
    assert props.replace(expiration="1").raw == b"\x09\x00\x05\x011"


def test_malformed_headers_table_detected_on_access() -> None:
    raw = b"\x20\x00" + struct.pack(">I", 3) + b"\x01kQ"  # unknown tag inside a well-sized table
    props = RawProperties(raw)
    assert props.priority is None  # the layout is fine
    with pytest.raises(PropertiesError, match="headers"):
        _ = props.headers
    with pytest.raises(PropertiesError, match="headers"):
        props.validate()
    # Replacing the broken headers still works: other properties are untouched.
    assert props.replace(headers=None).raw == EMPTY_PROPERTIES


def test_every_truncation_is_rejected() -> None:
    raw = build_all()
    for cut in range(len(raw)):
        with pytest.raises(PropertiesError):
            RawProperties(raw[:cut]).validate()


@pytest.mark.parametrize(
    "kwargs",
    [
        {"priority": 256},
        {"priority": -1},
        {"delivery_mode": True},
        {"timestamp": -1},
        {"timestamp": 2**64},
        {"timestamp": "1"},
        {"content_type": "x" * 256},
        {"content_type": b"bytes"},
        {"headers": {"k": ("Q", 1)}},
        {"headers": [("k", ("V", None))]},
    ],
)
def test_build_rejects(kwargs: dict[str, Any]) -> None:
    with pytest.raises(PropertiesError):
        build_properties(**kwargs)


# -- replace ------------------------------------------------------------------------------------------------


def segments(raw: bytes) -> dict[str, bytes]:
    """Each present property's encoded value bytes, found independently of the module under test."""
    flags = struct.unpack_from(">H", raw)[0]
    pos = 2
    result: dict[str, bytes] = {}
    for i, name in enumerate(PROPERTY_NAMES):
        if not flags & (0x8000 >> i):
            continue
        start = pos
        if name == "headers":
            pos += 4 + struct.unpack_from(">I", raw, pos)[0]
        elif name in ("delivery_mode", "priority"):
            pos += 1
        elif name == "timestamp":
            pos += 8
        else:
            pos += 1 + raw[pos]
        result[name] = raw[start:pos]
    assert pos == len(raw)
    return result


def test_replace_headers_keeps_everything_else() -> None:
    raw = build_all()
    props = RawProperties(raw)
    new_headers: Table = {"x-death": ("A", [("F", {"count": ("l", 1)})]), "d": ("d", 0.5)}
    replaced = props.replace(headers=new_headers)
    assert replaced.headers == new_headers
    before, after = segments(raw), segments(replaced.raw)
    assert after.pop("headers") == encode_table(new_headers)
    before.pop("headers")
    assert after == before
    assert replaced.raw == build_all(headers=new_headers)


def test_replace_removes_and_adds() -> None:
    raw = build_all()
    props = RawProperties(raw)
    no_headers = props.replace(headers=None)
    assert no_headers.headers is None
    assert no_headers.raw == build_all(headers=None)
    back = no_headers.replace(headers=table_from_python(HEADERS_PLAIN))
    assert back.raw == raw
    no_exp = props.replace(expiration=None)
    assert no_exp.expiration is None
    assert no_exp.raw == build_all(expiration=None)
    assert no_exp.replace(expiration="60000").raw == raw
    both = props.replace(headers=None, expiration=None)
    assert both.raw == build_all(headers=None, expiration=None)
    assert both.to_dict() == {k: v for k, v in ALL_PLAIN.items() if k not in ("headers", "expiration")}


def test_replace_on_minimal_blocks() -> None:
    empty = RawProperties(EMPTY_PROPERTIES)
    assert empty.replace(headers={}).raw == pika_raw(headers={})
    assert empty.replace(expiration="10").raw == pika_raw(expiration="10")
    assert empty.replace(headers=None, expiration=None).raw == EMPTY_PROPERTIES
    only_cluster = RawProperties(pika_raw(cluster_id="c", content_type="t"))
    assert only_cluster.replace(expiration="1", headers={"a": ("V", None)}).raw == pika_raw(
        content_type="t", headers={"a": None}, expiration="1", cluster_id="c"
    )


def test_replace_nothing_returns_self() -> None:
    props = RawProperties(build_all())
    assert props.replace() is props


def test_replace_other_properties() -> None:
    props = RawProperties(build_all())
    changed = props.replace(reply_to="amq.rabbitmq.reply-to.abc", priority=None, timestamp=5)
    assert changed.raw == build_all(reply_to="amq.rabbitmq.reply-to.abc", priority=None, timestamp=5)


def test_replace_rejects_bad_values() -> None:
    props = RawProperties(build_all())
    with pytest.raises(PropertiesError):
        props.replace(expiration="9" * 256)
    with pytest.raises(PropertiesError):
        props.replace(headers={"k": ("I", 2**40)})


# -- property-based -----------------------------------------------------------------------------------------

_shortstr = st.text(max_size=30).filter(lambda s: len(s.encode()) <= 255)
_header_values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**63), 2**63 - 1),
        st.text(max_size=10),
        st.binary(max_size=10),
    ),
    lambda children: st.one_of(
        st.lists(children, max_size=3), st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=8,
)
plain_properties = st.fixed_dictionaries(
    {},
    optional={
        "content_type": _shortstr,
        "content_encoding": _shortstr,
        "headers": st.dictionaries(st.text(max_size=8), _header_values, max_size=4),
        "delivery_mode": st.integers(0, 255),
        "priority": st.integers(0, 255),
        "correlation_id": _shortstr,
        "reply_to": _shortstr,
        "expiration": _shortstr,
        "message_id": _shortstr,
        "timestamp": st.integers(0, 2**64 - 1),
        "type": _shortstr,
        "user_id": _shortstr,
        "app_id": _shortstr,
        "cluster_id": _shortstr,
    },
)


@given(plain_properties)
def test_agrees_with_pika(values: dict[str, Any]) -> None:
    raw = pika_raw(**values)
    props = RawProperties(raw)
    assert props.to_dict() == values
    ours = dict(values)
    if "headers" in ours:
        ours["headers"] = table_from_python(ours["headers"])
    assert build_properties(**ours) == raw


@given(plain_properties, st.dictionaries(st.text(max_size=8), _header_values, max_size=3) | st.none())
def test_replace_property(values: dict[str, Any], new_headers: dict[str, Any] | None) -> None:
    raw = pika_raw(**values)
    table = None if new_headers is None else table_from_python(new_headers)
    replaced = RawProperties(raw).replace(headers=table, expiration="42")
    expected = {**values, "headers": new_headers, "expiration": "42"}
    assert replaced.raw == pika_raw(**expected)
    before, after = segments(raw), segments(replaced.raw)
    for name in PROPERTY_NAMES:
        if name not in ("headers", "expiration"):
            assert before.get(name) == after.get(name)


@settings(max_examples=500, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=80))
def test_fuzz_random_bytes(raw: bytes) -> None:
    props = RawProperties(raw)
    try:
        props.validate()
        props.to_dict()
        props.replace(expiration="1", headers=None)
    except PropertiesError:
        return


@settings(max_examples=500, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 0xFFFF), st.binary(max_size=80))
def test_fuzz_flags_then_random_values(flags: int, rest: bytes) -> None:
    props = RawProperties(struct.pack(">H", flags & 0xFFFC) + rest)
    try:
        props.to_dict()
    except PropertiesError:
        return


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(plain_properties, st.data())
def test_fuzz_mutated_blocks(values: dict[str, Any], data: st.DataObject) -> None:
    raw = bytearray(pika_raw(**values))
    for _ in range(data.draw(st.integers(1, 3))):
        pos = data.draw(st.integers(0, len(raw) - 1))
        raw[pos] = data.draw(st.integers(0, 255))
    props = RawProperties(bytes(raw))
    try:
        props.validate()
        props.to_dict()
    except PropertiesError:
        return
    replaced = props.replace(headers=props.headers, expiration=props.expiration)
    replaced.validate()
    assert replaced.expiration == props.expiration
