"""Erlang terms as RabbitMQ prints them in its texts (``io_lib:format``'s ``~w``, ``~p`` and ``~tp``): the one
printer behind the reader's frame errors, the declare-argument and policy errors, and binding validation.

Terms are Python values: ``int``, ``float``, ``bool`` (the atoms ``true`` / ``false``), ``None`` (``null``, as
RabbitMQ's JSON decoder gives it), :class:`Atom`, ``bytes`` (a binary), :class:`ErlStr` or ``str`` (a string,
i.e. a char list), ``tuple``, ``list`` and ``dict`` (a map, keys in the given order).

``~p`` prints a binary that is printable as ``<<"text">>``, else as byte values; it wraps a term that does not
fit on an 80-column line, indenting the continuation to the term's column, as OTP's ``io_lib_pretty`` does for
the terms that occur in RabbitMQ's texts (integers, atoms, strings, binaries and tuples of them). Up to 3.11
RabbitMQ prints with ``~p`` (``unicode=False`` here) and sends the octets raw: the text's non-ASCII characters
stand for the octets they encode to with ``surrogateescape``, and the line width counts octets. From 3.12 it
prints with ``~tp`` (``unicode=True``): a binary that is valid printable UTF-8 reads ``<<"ét"/utf8>>`` (no
suffix when it is ASCII), other printable octets are Latin-1 characters, and the text goes out as UTF-8 (see
:func:`text_octets`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Final

__all__ = ["LINE_LENGTH", "Atom", "ErlStr", "Format", "Term", "pretty", "text_octets", "write"]

LINE_LENGTH: Final = 80


@dataclass(frozen=True, slots=True)
class Atom:
    """An Erlang atom (printed bare when it can be, else quoted: ``'Quoted atom'``)."""

    name: str


@dataclass(frozen=True, slots=True)
class ErlStr:
    """An Erlang string (a char list), kept as the UTF-8 bytes RabbitMQ 3.10 formats byte by byte."""

    data: bytes

    @classmethod
    def of(cls, text: str) -> ErlStr:
        return cls(text.encode("utf-8", "surrogateescape"))


#: What a term may be (see the module docstring).
Term = Any

_PLAIN_ATOM: Final = re.compile(r"[a-z][A-Za-z0-9_@]*")
_ESCAPES: Final = {
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
_CONTROL_PRINTABLE: Final = frozenset(b"\n\r\t\x0b\x08\x0c\x1b")


def _printable_latin1(data: bytes) -> bool:
    """``io_lib:printable_latin1_list/1`` on the octets."""
    return all(32 <= b <= 126 or 160 <= b <= 255 or b in _CONTROL_PRINTABLE for b in data)


def _printable_unicode(text: str) -> bool:
    """``io_lib:printable_unicode_list/1`` (RabbitMQ runs with ``+pc unicode``)."""
    for ch in text:
        c = ord(ch)
        printable = 32 <= c <= 126 or 160 <= c < 0xD800 or (0xE000 <= c <= 0x10FFFF and c not in (0xFFFE, 0xFFFF))
        if not printable and c not in _CONTROL_PRINTABLE:
            return False
    return True


def _quoted(data: bytes) -> str:
    """The octets between double quotes, escaped; non-ASCII octets as the characters they encode (see above)."""
    text = data.decode("utf-8", "surrogateescape")
    return '"' + "".join(_ESCAPES.get(ord(c), c) if ord(c) < 128 else c for c in text) + '"'


def _binary_text(term: bytes, unicode: bool) -> str | None:
    """How ``~p`` (``~tp`` when ``unicode``) prints a binary as a string, or None if it prints octets."""
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
        return '<<"' + "".join(_ESCAPES.get(b, chr(b)) for b in term) + '">>'  # Latin-1 characters
    if not _printable_latin1(term):
        return None
    return "<<" + _quoted(term) + ">>"


def _float(f: float) -> str:
    """Erlang's shortest float text: ``1.5``, ``0.1``, ``1.0e20``."""
    r = repr(f)
    if "e" not in r or not math.isfinite(f):
        return r
    mantissa, exp = r.split("e")
    return f"{mantissa if '.' in mantissa else mantissa + '.0'}e{int(exp)}"


def write(term: Term, *, pretty: bool = True, unicode: bool = False) -> str:
    """The flat rendering: ``~w`` (``pretty=False``: binaries and strings as numbers), else ``~p`` that fits on
    the line (``~tp`` when ``unicode``)."""
    if isinstance(term, bool):
        return "true" if term else "false"
    if term is None:
        return "null"
    if isinstance(term, Atom):
        if _PLAIN_ATOM.fullmatch(term.name):
            return term.name
        return "'" + term.name.replace("\\", "\\\\").replace("'", "\\'") + "'"
    if isinstance(term, int):
        return str(term)
    if isinstance(term, float):
        return _float(term)
    if isinstance(term, str):
        term = ErlStr.of(term)
    if isinstance(term, ErlStr):
        if pretty and term.data and _printable_latin1(term.data):
            return _quoted(term.data)
        return "[" + ",".join(map(str, term.data)) + "]"
    if isinstance(term, bytes):
        text = _binary_text(term, unicode) if pretty else None
        if text is not None:
            return text
        return "<<" + ",".join(map(str, term)) + ">>"
    if isinstance(term, tuple):
        return "{" + ",".join(write(t, pretty=pretty, unicode=unicode) for t in term) + "}"
    if isinstance(term, list):
        return "[" + ",".join(write(t, pretty=pretty, unicode=unicode) for t in term) + "]"
    if isinstance(term, dict):
        return (
            "#{"
            + ",".join(
                f"{write(k, pretty=pretty, unicode=unicode)} => {write(v, pretty=pretty, unicode=unicode)}"
                for k, v in term.items()
            )
            + "}"
        )
    raise TypeError(f"cannot render {term!r} as an Erlang term")


@dataclass
class _Pretty:
    """``io_lib_pretty:print/2`` for one term starting at 1-based column ``col``."""

    unicode: bool = False
    line_length: int = LINE_LENGTH

    def width(self, text: str) -> int:
        """Columns ``text`` takes: characters with ``~tp``, octets with ``~p``."""
        return len(text) if self.unicode or text.isascii() else len(text.encode("utf-8", "surrogateescape"))

    def _is_leaf(self, term: Term) -> bool:
        if isinstance(term, tuple | list | dict):
            return False
        return not isinstance(term, bytes) or _binary_text(term, self.unicode) is not None

    def pp(self, term: Term, col: int, ind: int, ld: int) -> str:
        flat = write(term, unicode=self.unicode)
        if self.width(flat) < self.line_length - col - ld or self._is_leaf(term):
            return flat
        if isinstance(term, bytes):
            return "<<" + self._binary([str(b) for b in term], col + 2, ind + 2, ld) + ">>"
        if isinstance(term, tuple):
            return "{" + self._list(list(term), col + 1, ind + 1, ld) + "}"
        return flat  # lists and maps do not occur in the texts that wrap

    def _element(self, term: Term, col: int, ind: int, ld: int) -> tuple[str, int]:
        flat = write(term, unicode=self.unicode)
        width = self.width(flat)
        if width < self.line_length - col - ld and self._is_leaf(term):
            return flat, width
        return self.pp(term, col, ind, ld), self.line_length  # forces the next element onto a new line

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
            elen = 1 + self.width(flat)
            fits = (elen + 1 < self.line_length - col) if ld1 == 0 else (elen < self.line_length - col - ld1)
            if fits and self._is_leaf(item):
                out += "," + flat
                col += elen
            else:
                text, width = self._element(item, col0, ind, ld1)
                out += ",\n" + " " * ind + text
                col = col0 + width
        return out

    def _binary(self, parts: list[str], col: int, ind: int, ld: int) -> str:
        n0 = max(8, self.line_length - col - ld)
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


def pretty(term: Term, column: int, *, unicode: bool = False, line_length: int = LINE_LENGTH) -> str:
    """``~p`` (``~tp`` when ``unicode``; ``~255p`` with ``line_length=255``) of ``term`` printed at ``column``
    (0-based: the columns before it on its line)."""
    return _Pretty(unicode, line_length).pp(term, column + 1, column, 0)


class Format:
    """Builds an ``io_lib:format`` result piece by piece, tracking the column as OTP does for ``~p``."""

    def __init__(self, *, unicode: bool = False) -> None:
        self._parts: list[str] = []
        self._col = 0
        self._pretty = _Pretty(unicode)

    def _add(self, text: str) -> Format:
        self._parts.append(text)
        nl = text.rfind("\n")
        tail = text[nl + 1 :] if nl >= 0 else text
        self._col = (0 if nl >= 0 else self._col) + self._pretty.width(tail)
        return self

    def s(self, text: str) -> Format:
        """``~s``"""
        return self._add(text)

    def w(self, term: Term) -> Format:
        """``~w``"""
        return self._add(write(term, pretty=False))

    def p(self, term: Term) -> Format:
        """``~p`` (``~tp`` when the format is ``unicode``)"""
        return self._add(self._pretty.pp(term, self._col + 1, self._col, 0))

    def __str__(self) -> str:
        return "".join(self._parts)


def text_octets(text: str, *, unicode: bool = False) -> bytes:
    """A reply text as RabbitMQ sends it. Octets of a client's name that are not UTF-8 are surrogate escapes
    here: 3.10 sends them raw (``list_to_binary``), 3.12+ formats with ``~ts`` and sends UTF-8, so each such
    octet arrives as its Latin-1 character."""
    if unicode and any(0xDC80 <= ord(ch) <= 0xDCFF for ch in text):
        text = "".join(chr(ord(ch) - 0xDC00) if 0xDC80 <= ord(ch) <= 0xDCFF else ch for ch in text)
    return text.encode("utf-8", "surrogateescape")
