"""``erlang:phash2/2`` of lists of binaries, against values computed by RabbitMQ 4.3.6's VM
(``scripts/real-rabbitmq.sh ctl 4.3 eval '[erlang:phash2(X, 134217728) || X <- [...]].'``)."""

from __future__ import annotations

import pytest

from fakerabbit.broker.erlhash import phash2_binaries

RANGE = 1 << 27


@pytest.mark.parametrize(
    ("items", "expected"),
    [
        ([], 113427502),
        ([b""], 38220213),
        ([b"", b""], 8578898),
        ([b"a"], 53691870),
        ([b"a", b"bc"], 20875735),
        ([b"rk1"], 67931666),
        ([b"abcdefghijkl"], 89208944),  # exactly one 12-byte block
        ([b"0123456789abcdef"], 87452270),
        ([b"hello world, 25 bytes!!!"], 21777322),
        ([b"abcdefghijklmnopqrstuvwx", b"y"], 18032094),
        ([bytes([255, 0, 128, 7])], 71368279),
        ([b"k", b"cc1", b"cc2"], 65280267),
    ],
)
def test_phash2_matches_the_erlang_vm(items: list[bytes], expected: int) -> None:
    assert phash2_binaries(items, RANGE) == expected


def test_other_ranges() -> None:
    assert phash2_binaries([b"x"], RANGE) == 50193253  # phash2/1's default range is 2^27
    assert phash2_binaries([b"x"], 7) == 4
