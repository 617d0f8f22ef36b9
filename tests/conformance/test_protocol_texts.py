"""The Erlang term printing behind RabbitMQ's frame-error texts, without a broker (the codec's decoders are in
tests/unit/test_protocol_codec.py).

Every expected text below was read from RabbitMQ 3.10.8 (the differential fuzzer compares many more).
"""

from __future__ import annotations

import pytest

from fakerabbit.broker.erlterm import Atom, write
from fakerabbit.protocol.framing import frame_error_text, unexpected_frame_text


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
