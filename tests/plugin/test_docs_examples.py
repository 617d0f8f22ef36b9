"""Every complete test module in docs/pytest.md and docs/recovery.md (a ```python block whose first line is
``# test_<name>.py``) runs and passes, through pytester."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

DOCS = Path(__file__).resolve().parents[2] / "docs"
_BLOCK = re.compile(r"```python\n# (test_\w+\.py)\n(.*?)```", re.S)


def examples() -> list[tuple[str, str, str]]:
    found = []
    for doc in ("pytest.md", "recovery.md"):
        for name, body in _BLOCK.findall((DOCS / doc).read_text()):
            found.append((doc, name, body))
    return found


def test_the_docs_have_examples() -> None:
    names = {name for _doc, name, _body in examples()}
    assert {"test_orders_pika.py", "test_orders_aio_pika.py", "test_recovery_pika.py", "test_restart.py"} <= names


@pytest.mark.parametrize(("doc", "name", "body"), examples(), ids=[f"{d}:{n}" for d, n, _ in examples()])
def test_example_runs(pytester: pytest.Pytester, doc: str, name: str, body: str) -> None:
    pytester.makeini("[pytest]\nasyncio_mode = auto\nasyncio_default_fixture_loop_scope = function\n")
    pytester.path.joinpath(name).write_text(body)
    result = pytester.runpytest("-p", "no:cacheprovider", "-q", "-W", "ignore::pytest.PytestAssertRewriteWarning")
    result.assert_outcomes(passed=body.count("\ndef test_") + body.count("\nasync def test_"))
