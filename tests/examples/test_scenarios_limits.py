"""The scenarios of docs/limits.md, run exactly as written there: scenario 2 (a queue declared with the whole
argument map: TTL, expiry, length and byte limits, overflow, DLX and DLRK) is ``test_queue_with_every_limit.py``;
scenario 4 (a poison message moved to a DLQ by the quorum delivery limit, then redriven to the queue it came from)
is ``test_poison_message_redrive.py``. Each block is a complete test module, run by pytest in a subprocess with the
fakerabbit plugin, so the page cannot drift from working code."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

DOC = Path(__file__).resolve().parents[2] / "docs" / "limits.md"
_BLOCK = re.compile(r"```python\n# (test_\w+\.py)\n(.*?)```", re.S)


def examples() -> list[tuple[str, str]]:
    return [(name, body) for name, body in _BLOCK.findall(DOC.read_text(encoding="utf-8"))]


def test_the_page_has_both_scenarios() -> None:
    assert [name for name, _ in examples()] == ["test_queue_with_every_limit.py", "test_poison_message_redrive.py"]


def test_the_scenarios_pass(pytester: pytest.Pytester) -> None:
    total = 0
    for name, body in examples():
        pytester.path.joinpath(name).write_text(body, encoding="utf-8")
        total += len(re.findall(r"^def test_", body, re.M))
    assert total == 6
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q")
    result.assert_outcomes(passed=total)
