"""docs/tls.md, executed: the ```python blocks whose first line is ``# test_<name>.py`` run as test modules through
pytester (with the fakerabbit plugin); the other ```python block runs as a script; the ``fakerabbit serve`` session
shown is run (on free ports) and prints lines of the same shape."""

from __future__ import annotations

import re
import socket
import subprocess
from pathlib import Path

import pytest
import trustme  # noqa: F401  # imported once: cryptography cannot be imported again by each in-process pytester run

from tests.cli.conftest import fakerabbit_command

pytest_plugins = ["pytester"]

DOC = Path(__file__).resolve().parents[2] / "docs" / "tls.md"
_PYTHON = re.compile(r"```python\n(.*?)```", re.S)
_SERVE = re.compile(r"```\n(fakerabbit serve [^\n]*)\n(.*?)```", re.S)


def blocks() -> list[str]:
    return _PYTHON.findall(DOC.read_text(encoding="utf-8"))


def test_the_page_has_the_examples_this_test_runs() -> None:
    first_lines = [b.splitlines()[0] for b in blocks()]
    assert first_lines == ["import asyncio", "# test_tls_orders.py", "# test_ipv6.py"]


def test_the_client_settings_script_runs() -> None:
    script = blocks()[0]
    exec(compile(script, str(DOC), "exec"), {"__name__": "tls_doc_example"})


def test_the_test_modules_pass(pytester: pytest.Pytester) -> None:
    total = 0
    for body in blocks()[1:]:
        name = body.splitlines()[0].removeprefix("# ")
        pytester.path.joinpath(name).write_text(body, encoding="utf-8")
        total += len(re.findall(r"^def test_", body, re.M))
    pytester.makeini("[pytest]\nasyncio_mode = auto\nasyncio_default_fixture_loop_scope = function\n")
    result = pytester.runpytest("-p", "no:cacheprovider", "-q", "-W", "ignore::pytest.PytestAssertRewriteWarning")
    result.assert_outcomes(passed=total)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_serve_session_prints_what_the_page_shows(tmp_path: Path) -> None:
    command, shown = _SERVE.search(DOC.read_text(encoding="utf-8")).groups()  # type: ignore[union-attr]
    ports = {"5672": _free_port(), "15672": _free_port(), "5671": _free_port(), "15671": _free_port()}
    args = command.split()[1:]
    args = [str(ports.get(a, a)) if a != "./certs" else str(tmp_path / "certs") for a in args]
    args += ["--port", str(ports["5672"]), "--management-port", str(ports["15672"])]
    proc = subprocess.Popen([*fakerabbit_command(), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        printed: list[str] = []
        while not printed or "accepting AMQP connections" not in printed[-1]:
            line = proc.stdout.readline()
            assert line, proc.stderr.read() if proc.stderr else ""
            printed.append(line.rstrip("\n"))
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    expected = shown.strip().splitlines()
    for port, free in ports.items():
        expected = [re.sub(rf":{port}\b", f":{free}", line) for line in expected]
    expected = [line.replace("./certs", str(tmp_path / "certs")) for line in expected]
    assert printed == expected
