"""Erlang's ``~p`` / ``~w`` term rendering, for the reply texts RabbitMQ builds with ``io_lib:format``.

Frame errors read like ``FRAME_ERROR - type 1, all octets = <<0,20,0,10,0>>: {invalid_frame_end_marker,0}``;
the octets are a binary printed by ``~p`` (as ``<<"text">>`` when printable, else as byte values) and ``~p``
wraps a term that does not fit on an 80-column line, indenting the continuation to the term's column. Latin-1
octets of a printable binary come out as single raw bytes (as surrogate escapes here: encode the text with
``surrogateescape``). From 3.12 RabbitMQ prints with ``~tp`` (``unicode=True`` here): a binary that is valid
printable UTF-8 reads ``<<"ét"/utf8>>`` (no suffix when it is ASCII), other printable octets are Latin-1
characters, and the text goes out as UTF-8. This
module reproduces OTP's ``io_lib_pretty`` layout for the terms that occur there: integers, atoms, binaries of up
to 16 bytes and flat tuples of atoms and integers.
"""

from __future__ import annotations

from dataclasses import dataclass

LINE_LENGTH = 80


class Atom(str):
    """An Erlang atom (printed bare)."""

    __slots__ = ()


Term = int | Atom | bytes | tuple["Term", ...]


def _printable_latin1(data: bytes) -> bool:
    return all(32 <= b <= 126 or 160 <= b <= 255 or b in b"\n\r\t\x0b\x08\x0c\x1b" for b in data)


_ESCAPES = {
    ord('"'): '\\"',
    ord("\\"): "\\\\",
    ord("\n"): "\\n",
    ord("\r"): "\\r",
    ord("\t"): "\\t",
    0x0B: "\\v",
    0x08: "\\b",
    0x0C: "\\f",
    0x1B: "\\e",
}


def _printable_unicode(text: str) -> bool:
    """OTP's ``io_lib:printable_unicode_list/1`` (RabbitMQ runs with ``+pc unicode``)."""
    for ch in text:
        c = ord(ch)
        printable = 32 <= c <= 126 or 160 <= c < 0xD800 or (0xE000 <= c <= 0x10FFFF and c not in (0xFFFE, 0xFFFF))
        if not printable and ch not in "\n\r\t\x0b\x08\x0c\x1b":
            return False
    return True


def _binary_text(term: bytes, unicode: bool) -> str | None:
    """How ``~p`` (or ``~tp`` when ``unicode``) prints a binary as a string, or None if it prints octets."""
    if not term:
        return None
    if unicode:
        try:
            text = term.decode("utf-8")
        except UnicodeDecodeError:
            pass
        else:
            if not _printable_unicode(text):
                return None
            body = "".join(_ESCAPES.get(ord(ch), ch) for ch in text)
            return '<<"' + body + ('">>' if text.isascii() else '"/utf8>>')
    if not _printable_latin1(term):
        return None
    high = 0 if unicode else 0xDC00  # 3.10 sends the raw octet (a surrogate escape here)
    return '<<"' + "".join(_ESCAPES.get(b, chr(b) if b < 128 else chr(high + b)) for b in term) + '">>'


def write(term: Term, *, pretty: bool = True, unicode: bool = False) -> str:
    """The flat rendering (``~w``, or ``~p`` that fits on the line; ``~tp`` when ``unicode``)."""
    if isinstance(term, bool):
        return "true" if term else "false"
    if isinstance(term, int):
        return str(term)
    if isinstance(term, Atom):
        return str(term)
    if isinstance(term, bytes):
        text = _binary_text(term, unicode) if pretty else None
        if text is not None:
            return text
        return "<<" + ",".join(str(b) for b in term) + ">>"
    return "{" + ",".join(write(t, pretty=pretty, unicode=unicode) for t in term) + "}"


@dataclass
class _Pretty:
    """``io_lib_pretty:print/2`` for one term starting at 1-based column ``col``."""

    unicode: bool = False

    def _is_leaf(self, term: Term) -> bool:
        if isinstance(term, tuple):
            return False
        return not isinstance(term, bytes) or _binary_text(term, self.unicode) is not None

    def pp(self, term: Term, col: int, ind: int, ld: int) -> str:
        flat = write(term, unicode=self.unicode)
        if len(flat) < LINE_LENGTH - col - ld or self._is_leaf(term):
            return flat
        if isinstance(term, bytes):
            return "<<" + self._binary([str(b) for b in term], col + 2, ind + 2, ld) + ">>"
        assert isinstance(term, tuple)
        return "{" + self._list(list(term), col + 1, ind + 1, ld) + "}"

    def _element(self, term: Term, col: int, ind: int, ld: int) -> tuple[str, int]:
        flat = write(term, unicode=self.unicode)
        if len(flat) < LINE_LENGTH - col - ld and self._is_leaf(term):
            return flat, len(flat)
        return self.pp(term, col, ind, ld), LINE_LENGTH  # forces the next element onto a new line

    def _list(self, items: list[Term], col0: int, ind: int, ld: int) -> str:
        if not items:
            return ""
        first, rest = items[0], items[1:]
        out, width = self._element(first, col0, ind, ld + 1 if not rest else 0)
        col = col0 + width
        for i, item in enumerate(rest):
            last = i == len(rest) - 1
            ld1 = ld + 1 if last else 0
            flat = write(item, unicode=self.unicode)
            elen = 1 + len(flat)
            fits = (elen + 1 < LINE_LENGTH - col) if ld1 == 0 else (elen < LINE_LENGTH - col - ld1)
            if fits and self._is_leaf(item):
                out += "," + flat
                col += elen
            else:
                text, width = self._element(item, col0, ind, ld1)
                out += ",\n" + " " * ind + text
                col = col0 + width
        return out

    def _binary(self, parts: list[str], col: int, ind: int, ld: int) -> str:
        n0 = max(8, LINE_LENGTH - col - ld)
        n = n0
        out = ""
        for i, part in enumerate(parts):
            if i < len(parts) - 1:
                length = len(part) + 1
                if n - length < 0:
                    out += "\n" + " " * ind + part + ","
                    n = n0 - length
                else:
                    out += part + ","
                    n -= length
            elif len(part) > n:
                out += "\n" + " " * ind + part
            else:
                out += part
        return out


class Format:
    """Builds an ``io_lib:format`` result piece by piece, tracking the column as OTP does for ``~p``."""

    def __init__(self, *, unicode: bool = False) -> None:
        self._parts: list[str] = []
        self._col = 0
        self._unicode = unicode

    def _add(self, text: str) -> Format:
        self._parts.append(text)
        nl = text.rfind("\n")
        self._col = len(text) - nl - 1 if nl >= 0 else self._col + len(text)
        return self

    def s(self, text: str) -> Format:
        """``~s``"""
        return self._add(text)

    def w(self, term: Term) -> Format:
        """``~w``"""
        return self._add(write(term, pretty=False))

    def p(self, term: Term) -> Format:
        """``~p``"""
        return self._add(_Pretty(self._unicode).pp(term, self._col + 1, self._col, 0))

    def __str__(self) -> str:
        return "".join(self._parts)


def snippet(payload: bytes) -> tuple[str, bytes]:
    """``rabbit_reader:payload_snippet/1``: the whole payload up to 16 octets, else the first 16."""
    if len(payload) <= 16:
        return "all", payload
    return "first 16", payload[:16]


def frame_error_text(ftype: int, payload: bytes, error: Term, *, unicode: bool = False) -> str:
    """``type ~p, ~s octets = ~p: ~p`` (without the ``FRAME_ERROR - `` prefix)."""
    which, data = snippet(payload)
    return str(Format(unicode=unicode).s("type ").p(ftype).s(f", {which} octets = ").p(data).s(": ").p(error))


def unexpected_frame_text(ftype: int, payload: bytes, *, unicode: bool = False) -> str:
    """``type ~p, ~s octets = ~p`` (without the ``UNEXPECTED_FRAME - `` prefix)."""
    which, data = snippet(payload)
    return str(Format(unicode=unicode).s("type ").p(ftype).s(f", {which} octets = ").p(data))


def text_octets(text: str, *, unicode: bool = False) -> bytes:
    """A reply text as RabbitMQ sends it. Octets of a client's name that are not UTF-8 are surrogate escapes
    here: 3.10 sends them raw (``list_to_binary``), 3.12+ formats with ``~ts`` and sends UTF-8, so each such
    octet arrives as its Latin-1 character."""
    if unicode and any(0xDC80 <= ord(ch) <= 0xDCFF for ch in text):
        text = "".join(chr(ord(ch) - 0xDC00) if 0xDC80 <= ord(ch) <= 0xDCFF else ch for ch in text)
    return text.encode("utf-8", "surrogateescape")
