"""``erlang:phash2/2`` for the terms RabbitMQ hashes when it routes: a list of binaries (routing keys).

The ``x-modulus-hash`` exchange (RabbitMQ 4.3+, ``rabbit_exchange_type_modulus_hash``) picks the destination
``phash2(RoutingKeys, 1 bsl 27) rem N``. A client sees which queue got a message, so the fake computes the
same portable hash the Erlang VM does (``make_hash2`` in ERTS): each binary goes through Bob Jenkins' lookup2
block hash seeded with the hash so far, and the list's ``[]`` tail is mixed in at the end. Checked against
``rabbitmqctl eval 'erlang:phash2(...)'`` on RabbitMQ 4.3.6 (see tests/unit/test_erlhash.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

__all__ = ["phash2_binaries"]

_MASK: Final = 0xFFFFFFFF
_GOLDEN: Final = 0x9E3779B9  # the golden ratio, Jenkins' arbitrary start value
_BINARY_SEED: Final = (_GOLDEN * 13) & _MASK  # constant mixed into a binary's seed
_NIL_SEED: Final = (_GOLDEN * 2) & _MASK  # constant used for the [] that ends a list
_NIL_TAG: Final = 2  # the VM's tag value for []
_EMPTY_LIST_HASH: Final = 3468870702  # phash2([]) when nothing came before


def _mix(a: int, b: int, c: int) -> int:
    """Jenkins' 96-bit mix on three 32-bit words; returns the new ``c``."""
    a = ((a - b - c) & _MASK) ^ (c >> 13)
    b = ((b - c - a) & _MASK) ^ ((a << 8) & _MASK)
    c = ((c - a - b) & _MASK) ^ (b >> 13)
    a = ((a - b - c) & _MASK) ^ (c >> 12)
    b = ((b - c - a) & _MASK) ^ ((a << 16) & _MASK)
    c = ((c - a - b) & _MASK) ^ (b >> 5)
    a = ((a - b - c) & _MASK) ^ (c >> 3)
    b = ((b - c - a) & _MASK) ^ ((a << 10) & _MASK)
    return ((c - a - b) & _MASK) ^ (b >> 15)


def _mix_abc(a: int, b: int, c: int) -> tuple[int, int, int]:
    """The same mix, keeping all three words (for the 12-byte blocks)."""
    a = ((a - b - c) & _MASK) ^ (c >> 13)
    b = ((b - c - a) & _MASK) ^ ((a << 8) & _MASK)
    c = ((c - a - b) & _MASK) ^ (b >> 13)
    a = ((a - b - c) & _MASK) ^ (c >> 12)
    b = ((b - c - a) & _MASK) ^ ((a << 16) & _MASK)
    c = ((c - a - b) & _MASK) ^ (b >> 5)
    a = ((a - b - c) & _MASK) ^ (c >> 3)
    b = ((b - c - a) & _MASK) ^ ((a << 10) & _MASK)
    c = ((c - a - b) & _MASK) ^ (b >> 15)
    return a, b, c


def _block_hash(data: bytes, seed: int) -> int:
    """Jenkins' lookup2 over ``data`` (little-endian words), ``seed`` as the initial ``c``."""
    a = b = _GOLDEN
    c = seed
    n = len(data)
    whole = n - n % 12
    for i in range(0, whole, 12):
        a = (a + int.from_bytes(data[i : i + 4], "little")) & _MASK
        b = (b + int.from_bytes(data[i + 4 : i + 8], "little")) & _MASK
        c = (c + int.from_bytes(data[i + 8 : i + 12], "little")) & _MASK
        a, b, c = _mix_abc(a, b, c)
    tail = data[whole:]
    c = (c + n) & _MASK
    a = (a + int.from_bytes(tail[0:4], "little")) & _MASK
    b = (b + int.from_bytes(tail[4:8], "little")) & _MASK
    c = (c + (int.from_bytes(tail[8:11], "little") << 8)) & _MASK  # the low byte of c holds the length
    return _mix(a, b, c)


def phash2_binaries(items: Sequence[bytes], range_: int = 1 << 32) -> int:
    """``erlang:phash2(Items, Range)`` for a proper list of binaries (``Range`` ≤ 2**32)."""
    if not items:
        return _EMPTY_LIST_HASH % range_
    h = 0
    for item in items:
        seed = (_BINARY_SEED + h) & _MASK
        h = _block_hash(item, seed) if item else seed
    h = _EMPTY_LIST_HASH if h == 0 else _mix((_NIL_SEED + _NIL_TAG) & _MASK, _NIL_SEED, h)
    return h % range_
