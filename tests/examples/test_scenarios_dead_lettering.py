"""The dead-lettering scenarios of docs/dead-lettering.md, run exactly as written there.

Each ```python block of the doc whose first line is ``# test_<name>.py`` is a complete test module; it is written
to a temporary directory and run by pytest in a subprocess (pytester) with the fakerabbit plugin, so the docs
cannot drift from tested code. Scenario 1 (reject/nack/TTL/max-length into a DLX, with and without a DLRK, a
policy DLX overridden by an argument) is ``test_dead_letter_basics.py``; scenario 3 (retry with back-off) is
``test_retry_backoff.py``; quorum at-least-once dead-lettering is ``test_at_least_once.py``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

DOC = Path(__file__).resolve().parents[2] / "docs" / "dead-lettering.md"
_BLOCK = re.compile(r"```python\n# (test_\w+\.py)\n(.*?)```", re.S)


def examples() -> list[tuple[str, str]]:
    return [(name, body) for name, body in _BLOCK.findall(DOC.read_text())]


def test_the_doc_has_both_scenarios() -> None:
    names = [name for name, _ in examples()]
    assert names == ["test_dead_letter_basics.py", "test_retry_backoff.py", "test_at_least_once.py"]


@pytest.mark.parametrize(("name", "body"), examples(), ids=[n for n, _ in examples()])
def test_scenario_runs(pytester: pytest.Pytester, name: str, body: str) -> None:
    pytester.path.joinpath(name).write_text(body)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q")
    result.assert_outcomes(passed=body.count("\ndef test_"))
