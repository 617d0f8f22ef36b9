"""docs/ci.md, executed: its CI job script starts ``fakerabbit serve``, waits with ``fakerabbit ctl await_startup``
and runs its pika and aio-pika example tests, which drive the broker with the management API and the CLI."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "ci.md"
_EXAMPLE = re.compile(r"<!-- example: (\S+) -->\n```\w+\n(.*?)```", re.DOTALL)


def examples() -> dict[str, str]:
    """The marked code blocks of docs/ci.md, by file name."""
    return dict(_EXAMPLE.findall(DOC.read_text(encoding="utf-8")))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_page_has_the_examples_this_test_runs() -> None:
    assert set(examples()) == {"ci.sh", "test_orders_pika.py", "test_retry_aio_pika.py"}


def test_the_documented_ci_job_runs_the_documented_tests(tmp_path: Path) -> None:
    found = examples()
    tests = tmp_path / "integration"
    tests.mkdir()
    for name, code in found.items():
        if name.endswith(".py"):
            (tests / name).write_text(code, encoding="utf-8")
    amqp_port, management_port = _free_port(), _free_port()
    bin_dir = str(Path(sys.executable).parent)
    env = {
        **os.environ,
        "PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""),
        "AMQP_PORT": str(amqp_port),
        "MANAGEMENT_PORT": str(management_port),
        "TESTS": str(tests),
        "AMQP_URL": f"amqp://guest:guest@127.0.0.1:{amqp_port}/%2F",
        "RABBITMQ_MANAGEMENT_URL": f"http://127.0.0.1:{management_port}",
        "FAKERABBIT_MANAGEMENT_URL": f"http://guest:guest@127.0.0.1:{management_port}",
        "PYTEST_ADDOPTS": "-p no:cacheprovider -q",
    }
    r = subprocess.run(
        ["bash", "-c", found["ci.sh"]], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "2 passed" in r.stdout, r.stdout
