"""The one Erlang term printer (``fakerabbit.broker.erlterm``): ``~w``, ``~p`` and ``~tp`` as RabbitMQ's texts
use them. The frame-error texts built on it are in tests/conformance/test_protocol_texts.py."""

from __future__ import annotations

import pytest

from fakerabbit.broker.erlterm import Atom, ErlStr, Format, pretty, text_octets, write


def test_flat_terms() -> None:
    assert write((Atom("value_negative"), -1)) == "{value_negative,-1}"
    assert write(Atom("Quoted atom")) == "'Quoted atom'"
    assert write(Atom("it's")) == "'it\\'s'"
    assert write(ErlStr.of('a"b')) == '"a\\"b"'
    assert write(ErlStr(b"")) == "[]"
    assert write(ErlStr(b"\x01\x02")) == "[1,2]"
    assert write("text") == '"text"'  # a str is a string (a char list)
    assert write(b"abc") == '<<"abc">>'
    assert write(b"\x01") == "<<1>>"
    assert write([1, b"a"]) == '[1,<<"a">>]'
    assert write({b"a": 1}) == '#{<<"a">> => 1}'
    assert write(1e20) == "1.0e20"
    assert write(0.1) == "0.1"
    assert write(None) == "null"
    assert (write(True), write(False)) == ("true", "false")


def test_an_empty_binary_is_printed_bare() -> None:
    """``<<>>``, as RabbitMQ prints an empty x-match value (the printer of the declare arguments once gave
    ``<<"">>``)."""
    assert write(b"") == "<<>>"
    assert write(b"", unicode=True) == "<<>>"
    assert write(b"", pretty=False) == "<<>>"


def test_w_never_prints_strings() -> None:
    assert write(b"abc", pretty=False) == "<<97,98,99>>"
    assert write(ErlStr(b"ab"), pretty=False) == "[97,98]"
    assert write((Atom("a"), b"b"), pretty=False) == "{a,<<98>>}"


@pytest.mark.parametrize(
    ("octets", "p", "tp"),
    [
        (b"caf\xc3\xa9", '<<"caf\xc3\xa9">>', '<<"café"/utf8>>'),  # UTF-8: raw octets / a utf8 binary
        (b"caf\xe9", '<<"caf\xe9">>', '<<"café">>'),  # Latin-1: raw octet / a Latin-1 character
        (b"a\x00", "<<97,0>>", "<<97,0>>"),  # not printable either way
        (b'q"\\\n', '<<"q\\"\\\\\\n">>', '<<"q\\"\\\\\\n">>'),
    ],
)
def test_binaries_by_version(octets: bytes, p: str, tp: str) -> None:
    """3.10's ``~p`` sends a printable binary's octets raw (live: x-match ``é`` reads ``<<"\\xc3\\xa9">>``);
    3.12+'s ``~tp`` marks UTF-8 and sends Latin-1 octets as characters (live 4.0.5 and 4.3.6)."""
    assert text_octets(write(octets)) == p.encode("latin-1")
    assert text_octets(write(octets, unicode=True), unicode=True) == tp.encode("utf-8")


def test_pretty_breaks_a_tagged_pair_that_does_not_fit() -> None:
    assert pretty((Atom("a"), 1), 0) == "{a,1}"
    assert pretty((Atom("tag"), 12345), 70) == "{tag,\n" + " " * 71 + "12345}"
    assert pretty((Atom("tag"), 12345), 67) == "{tag,12345}"  # ends in column 78: fits
    assert pretty((Atom("tag"), 12345), 68) == "{tag,\n" + " " * 69 + "12345}"
    assert pretty(Atom("no_integer"), 79) == "no_integer"  # atoms never break
    assert pretty((Atom("tag"), 12345), 70, line_length=255) == "{tag,12345}"  # ~255p


def test_pretty_counts_octets_with_p_and_characters_with_tp() -> None:
    """3.10 prints byte by byte: a two-octet character takes two columns; ``~tp`` counts it once."""
    term = (Atom("leftover_string"), ErlStr.of("é" * 5))
    flat = '{leftover_string,"' + "é" * 5 + '"}'  # 29 characters, 34 octets
    assert pretty(term, 49, unicode=True) == flat
    assert pretty(term, 49) != flat
    assert pretty(term, 44) == flat


def test_format_tracks_the_column() -> None:
    out = Format().s("x" * 60).p((Atom("tag"), 123456789012345678))
    assert str(out) == "x" * 60 + "{tag,\n" + " " * 61 + "123456789012345678}"
    assert str(Format().s("a\n").p((Atom("tag"), 1))) == "a\n{tag,1}"


def test_text_octets() -> None:
    assert text_octets("plain") == b"plain"
    assert text_octets("caf\udce9") == b"caf\xe9"  # 3.10: a client's octet goes out raw
    assert text_octets("caf\udce9", unicode=True) == "café".encode()  # 3.12+: as its Latin-1 character
    assert text_octets("café", unicode=True) == "café".encode()
