"""benchmarks/attack_amqp.py runs end to end (small numbers) and reports that the broker held up."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "attack_amqp.py"


def test_attack_script_in_process() -> None:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--target", "thread"], capture_output=True, text=True, timeout=180
    )
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    assert "held: 50" in out
    assert "logins with deep client properties: 20/20" in out
    assert "5,000-deep headers read back unchanged: True" in out
    assert "log lines: 0" in out
    assert "tags confirmed: 200/200" in out and "delivered to a consumer: 200/200" in out
    assert "connection.close 504 CHANNEL_ERROR - expected 'channel.open'" in out
    assert "clients closed with: {'320': 4}" in out
