"""benchmarks/attack_http.py runs end to end against `fakerabbit serve` (tiny numbers) and reports 4xx for every
malformed request."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "attack_http.py"


def test_attack_script_runs_and_every_malformed_request_is_a_4xx() -> None:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--held", "5", "--hold", "0.1"], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = re.findall(r"^(.{48}) \[(\d{3})\]", proc.stdout, re.MULTILINE)
    assert len(rows) == 13, proc.stdout
    assert all(400 <= int(status) < 600 for _, status in rows), proc.stdout
    assert "server RSS:" in proc.stdout and "open fds:" in proc.stdout
