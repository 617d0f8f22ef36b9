"""``scripts/start-broker.sh``: installs on a fresh clone, and a warm start skips the reinstall."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _start(clone: Path) -> subprocess.CompletedProcess[str]:
    # --help: serve prints its usage and exits, after the script has installed what it needs.
    return subprocess.run(
        ["bash", "scripts/start-broker.sh", "--help"], cwd=clone, capture_output=True, text=True, timeout=600
    )


@pytest.mark.timeout(900)
def test_fresh_clone_installs_then_warm_start_skips_pip(tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    clone.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, clone / name)
    for folder in ("fakerabbit", "conftest_plugin"):
        shutil.copytree(ROOT / folder, clone / folder, ignore=shutil.ignore_patterns("__pycache__"))
    (clone / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "start-broker.sh", clone / "scripts" / "start-broker.sh")

    cold = _start(clone)
    if cold.returncode != 0 and "pip" in cold.stderr and "pamqp" in cold.stderr:
        pytest.skip(f"no package index reachable for a fresh install: {cold.stderr[-300:]}")
    assert cold.returncode == 0, cold.stderr
    assert "--rabbitmq-version" in cold.stdout
    assert (clone / ".venv" / ".fakerabbit-install").is_file()

    stamp = clone / ".venv" / ".fakerabbit-install"
    installed_at = stamp.stat().st_mtime_ns
    warm = _start(clone)
    assert warm.returncode == 0, warm.stderr
    assert "--rabbitmq-version" in warm.stdout
    assert stamp.stat().st_mtime_ns == installed_at  # no reinstall (how fast that is: a benchmark's business)

    # A changed pyproject.toml (a new dependency or entry point) installs again.
    (clone / "pyproject.toml").write_text((clone / "pyproject.toml").read_text() + "\n# changed\n")
    again = _start(clone)
    assert again.returncode == 0, again.stderr
    assert stamp.stat().st_mtime_ns != installed_at
