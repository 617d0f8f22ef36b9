"""Each benchmark script runs end to end with a tiny N (fake only: no real broker, no profiler)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"

CASES = {
    "startup": ["bench_startup.py", "-n", "3"],
    "throughput": [
        "bench_throughput.py",
        "-n",
        "50",
        "--cycles",
        "3",
        "--reps",
        "1",
        "--no-real",
        "--targets",
        "process,thread",
    ],
    "scale": ["bench_scale.py", "--quick", "--queues", "50", "--messages", "500", "--bindings", "100"],
    "hotpath": ["bench_hotpath.py", "--quick", "--reps", "1", "-n", "300", "--bindings", "100"],
    "cpu": ["bench_cpu.py", "-n", "200", "--rounds", "1", "--targets", "process,thread"],
    "protocol": ["bench_protocol.py", "-n", "300", "--reps", "1"],
    "wakeup": ["bench_wakeup.py", "-n", "200", "--gaps", "0"],
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_benchmark_script_runs(case: str) -> None:
    script, *args = CASES[case]
    proc = subprocess.run(
        [sys.executable, str(BENCH / script), *args], capture_output=True, text=True, timeout=120, cwd=BENCH
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip(), "printed nothing"
