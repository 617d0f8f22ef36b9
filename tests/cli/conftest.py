"""Helpers to run the ``fakerabbit`` command as a subprocess, as a CI job would."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from fakerabbit import FakeRabbit


def fakerabbit_command() -> list[str]:
    """The installed ``fakerabbit`` script next to this interpreter, else ``python -m fakerabbit``."""
    script = Path(sys.executable).with_name("fakerabbit")
    return [str(script)] if script.exists() else [sys.executable, "-m", "fakerabbit"]


def run_ctl(rabbit: FakeRabbit, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """``fakerabbit ctl --management-url URL ARGS...``"""
    return subprocess.run(
        [*fakerabbit_command(), "ctl", "--management-url", rabbit.management_url, *args],
        capture_output=True,
        text=True,
        timeout=60,
        input=stdin,
    )


@pytest.fixture
def rabbit() -> object:
    with FakeRabbit(management=True) as r:
        yield r
