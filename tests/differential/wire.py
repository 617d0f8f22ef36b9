"""Typed decoding of AMQP field tables for the differential fuzzer.

pika decodes header tables into plain dicts and so hides the wire type of each value (``l`` long vs ``I`` int,
``S`` vs ``x``, ``T`` timestamp). The fuzzer compares headers with their types and key order, so it decodes the
headers table of each content header itself, with this small decoder (independent of fakerabbit's codec).
"""

from __future__ import annotations

import struct
from typing import Any

_FIXED: dict[str, tuple[str, int]] = {
    "t": (">B", 1),
    "b": (">b", 1),
    "B": (">B", 1),
    "s": (">h", 2),
    "u": (">H", 2),
    "I": (">i", 4),
    "i": (">I", 4),
    "l": (">q", 8),
    "L": (">Q", 8),
    "f": (">f", 4),
    "d": (">d", 8),
    "T": (">Q", 8),
}

Typed = tuple[str, Any]
"""A decoded field: its one-letter wire tag and its value (tables as lists of ``(key, Typed)``)."""


def decode_value(data: bytes, pos: int) -> tuple[Typed, int]:
    tag = chr(data[pos])
    pos += 1
    if tag in _FIXED:
        fmt, size = _FIXED[tag]
        (v,) = struct.unpack_from(fmt, data, pos)
        return (tag, v), pos + size
    if tag == "D":
        scale = data[pos]
        (v,) = struct.unpack_from(">i", data, pos + 1)
        return (tag, (scale, v)), pos + 5
    if tag in "Sx":
        (n,) = struct.unpack_from(">I", data, pos)
        raw = bytes(data[pos + 4 : pos + 4 + n])
        return (tag, raw.decode("utf-8", "surrogateescape") if tag == "S" else raw), pos + 4 + n
    if tag == "A":
        (n,) = struct.unpack_from(">I", data, pos)
        end = pos + 4 + n
        pos += 4
        items: list[Typed] = []
        while pos < end:
            item, pos = decode_value(data, pos)
            items.append(item)
        return (tag, items), end
    if tag == "F":
        table, pos = decode_table(data, pos)
        return (tag, table), pos
    if tag == "V":
        return (tag, None), pos
    raise ValueError(f"unknown field tag {tag!r} at {pos - 1}")


def decode_table(data: bytes, pos: int) -> tuple[list[tuple[str, Typed]], int]:
    """A field table at ``pos`` (with its 4-byte length) as ``[(key, (tag, value)), ...]`` in wire order."""
    (n,) = struct.unpack_from(">I", data, pos)
    end = pos + 4 + n
    pos += 4
    out: list[tuple[str, Typed]] = []
    while pos < end:
        klen = data[pos]
        key = bytes(data[pos + 1 : pos + 1 + klen]).decode("utf-8", "surrogateescape")
        pos += 1 + klen
        value, pos = decode_value(data, pos)
        out.append((key, value))
    return out, end


def typed_headers(header_payload: bytes) -> list[tuple[str, Typed]] | None:
    """The headers table of a content-header frame payload (class, weight, size, flags, properties), or None."""
    (flags,) = struct.unpack_from(">H", header_payload, 12)
    pos = 14
    if not flags & (1 << 13):
        return None
    for bit in (15, 14):  # content-type, content-encoding: shortstr
        if flags & (1 << bit):
            pos += 1 + header_payload[pos]
    table, _ = decode_table(header_payload, pos)
    return table
