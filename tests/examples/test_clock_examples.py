"""docs/clock.md, executed: every ```python block whose first line is ``# test_<name>.py`` is a complete test module;
it is written to a temporary directory and run by pytest in a subprocess (pytester, with the fakerabbit plugin and
pytest-asyncio in auto mode), so the page cannot drift from working code. A subprocess, because an in-process run
unloads the modules it imported afterwards, and freezegun and time-machine patch process-wide state."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

DOC = Path(__file__).resolve().parents[2] / "docs" / "clock.md"
_BLOCK = re.compile(r"```python\n# (test_\w+\.py)\n(.*?)```", re.S)


def examples() -> list[tuple[str, str]]:
    return [(name, body) for name, body in _BLOCK.findall(DOC.read_text(encoding="utf-8"))]


def test_the_page_has_the_examples_this_test_runs() -> None:
    assert [name for name, _ in examples()] == [
        "test_virtual_clock.py",
        "test_clock_asyncio.py",
        "test_following_freezegun.py",
        "test_following_time_machine.py",
        "test_following_asyncio.py",
    ]


def test_the_examples_pass(pytester: pytest.Pytester) -> None:
    """All examples in one pytest subprocess (each alone would pay pytest's start-up again)."""
    total = 0
    for name, body in examples():
        pytester.path.joinpath(name).write_text(body, encoding="utf-8")
        total += len(re.findall(r"^(?:async )?def test_", body, re.M))
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-q", "-o", "asyncio_mode=auto", "-W", "ignore::pytest.PytestAssertRewriteWarning"
    )
    assert total == 7
    result.assert_outcomes(passed=total)
