"""docs/consumer-timeout.md, executed: every ```python block whose first line is ``# test_<name>.py`` is a complete
test module; they run together in a pytest subprocess (pytester, with the fakerabbit plugin), so the page cannot
drift from working code."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

DOC = Path(__file__).resolve().parents[2] / "docs" / "consumer-timeout.md"
_BLOCK = re.compile(r"```python\n# (test_\w+\.py)\n(.*?)```", re.S)


def examples() -> list[tuple[str, str]]:
    return [(name, body) for name, body in _BLOCK.findall(DOC.read_text(encoding="utf-8"))]


def test_the_page_has_the_examples_this_test_runs() -> None:
    assert [name for name, _ in examples()] == [
        "test_consumer_timeout_cancel.py",
        "test_consumer_timeout_close.py",
        "test_consumer_timeout_short.py",
    ]


def test_the_examples_pass(pytester: pytest.Pytester) -> None:
    total = 0
    for name, body in examples():
        pytester.path.joinpath(name).write_text(body, encoding="utf-8")
        total += len(re.findall(r"^def test_", body, re.M))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q")
    assert total == 3
    result.assert_outcomes(passed=total)
