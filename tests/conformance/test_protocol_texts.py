"""The Erlang term printing behind RabbitMQ's frame-error texts and the codec's validators, without a broker.

Every expected text below was read from RabbitMQ 3.10.8 (the differential fuzzer compares many more).
"""

from __future__ import annotations

import struct

import pytest
from pamqp import commands

from fakerabbit.protocol.codec import MethodDecodeError, check_properties, decode_args, valid_table_body
from fakerabbit.protocol.erlfmt import Atom, frame_error_text, unexpected_frame_text, write


@pytest.mark.parametrize(
    ("ftype", "payload", "error", "text"),
    [
        (9, b"abc", Atom("unknown_frame"), 'type 9, all octets = <<"abc">>: unknown_frame'),
        (8, b"", (Atom("invalid_frame_end_marker"), 255), "type 8, all octets = <<>>: {invalid_frame_end_marker,255}"),
        (
            1,
            bytes([0, 50, 0, 10, 0, 0, 0, 0, 0, 0, 0, 0]),
            (Atom("invalid_frame_end_marker"), 0),
            "type 1, all octets = <<0,50,0,10,0,0,0,0,0,0,0,0>>: {invalid_frame_end_marker,\n" + " " * 53 + "0}",
        ),
        (
            3,
            bytes(range(120, 150)),
            (Atom("invalid_frame_end_marker"), 1),
            "type 3, first 16 octets = <<120,121,122,123,124,125,126,127,128,129,130,131,\n"
            + " " * 28
            + "132,133,134,135>>: {invalid_frame_end_marker,1}",
        ),
        (
            3,
            bytes(range(1, 31)),
            (Atom("invalid_frame_end_marker"), 1),
            "type 3, first 16 octets = <<1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16>>: {invalid_frame_end_marker,\n"
            + " " * 71
            + "1}",
        ),
        (3, b"", (Atom("frame_too_large"), 5000, 4088), "type 3, all octets = <<>>: {frame_too_large,5000,4088}"),
    ],
)
def test_frame_error_texts(ftype: int, payload: bytes, error: object, text: str) -> None:
    assert frame_error_text(ftype, payload, error) == text  # type: ignore[arg-type]


def test_unexpected_frame_texts() -> None:
    assert unexpected_frame_text(2, bytes([0, 60, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0])) == (
        "type 2, all octets = <<0,60,0,0,0,0,0,0,0,0,0,5,0,0>>"
    )
    assert unexpected_frame_text(3, b"hello") == 'type 3, all octets = <<"hello">>'
    assert unexpected_frame_text(3, b'a"b\\c\n') == 'type 3, all octets = <<"a\\"b\\\\c\\n">>'
    # Latin-1 octets come out raw (here as surrogate escapes, encoded back with surrogateescape)
    assert unexpected_frame_text(3, b"\xe9").encode("utf-8", "surrogateescape") == b'type 3, all octets = <<"\xe9">>'


def test_w_never_prints_strings() -> None:
    assert write(b"abc", pretty=False) == "<<97,98,99>>"
    assert write(b"abc") == '<<"abc">>'
    assert write(b"") == "<<>>"


@pytest.mark.parametrize(
    ("props", "ok"),
    [
        (b"\x00\x00", True),
        (b"\x00\x01", True),  # RabbitMQ ignores the continuation bit...
        (b"\x00\x01\x00\x00", False),  # ...so a second flags word is trailing garbage
        (b"", False),
        (b"\x80\x00\x0atext/plain", True),
        (b"\x80\x00\x0atext/plai", False),
        (b"\x00\x40" + struct.pack(">Q", 1), True),  # timestamp
        (b"\x20\x00" + struct.pack(">I", 6) + b"\x01aI\x00\x00", False),  # int cut short
        (b"\x20\x00" + struct.pack(">I", 7) + b"\x01aI\x00\x00\x00\x05", True),
        (b"\x20\x00" + struct.pack(">I", 11) + b"\x01ad" + struct.pack(">d", float("nan")), False),
        (b"\x18\x00\x02\x05", True),  # delivery mode and priority
    ],
)
def test_check_properties(props: bytes, ok: bool) -> None:
    assert check_properties(props) is ok


def test_table_validator_follows_rabbit_binary_parser() -> None:
    good = b"\x01aS" + struct.pack(">I", 2) + b"hi" + b"\x01bA" + struct.pack(">I", 2) + b"b\x05" + b"\x01cV"
    assert valid_table_body(good, 0, len(good))
    assert not valid_table_body(b"\x01aZ", 0, 3)  # unknown type
    assert not valid_table_body(b"\x05ab", 0, 3)  # key runs past the end
    assert valid_table_body(b"\x01aL" + bytes(8), 0, 11)  # RabbitMQ takes L (64 bits)


def test_decode_args_is_exact() -> None:
    qos = decode_args(commands.Basic.Qos, struct.pack(">IHB", 0, 5, 1))
    assert (qos.prefetch_count, qos.global_) == (5, True)
    for bad, kind in (
        (struct.pack(">IHB", 0, 5, 1) + b"x", "undecodable"),
        (struct.pack(">IH", 0, 5), "undecodable"),
    ):
        with pytest.raises(MethodDecodeError) as exc:
            decode_args(commands.Basic.Qos, bad)
        assert exc.value.kind == kind
    with pytest.raises(MethodDecodeError) as exc:
        decode_args(commands.Queue.Declare, b"\x00\x00\x02\xff\xfe\x00" + struct.pack(">I", 0))
    assert exc.value.kind == "utf8"
    with pytest.raises(MethodDecodeError) as exc:
        decode_args(commands.Queue.Declare, b"\x00\x00\x01q\x00" + struct.pack(">I", 3) + b"\x01aZ")
    assert exc.value.kind == "table"
