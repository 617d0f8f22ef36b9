#!/usr/bin/env bash
# Install fakerabbit with its test dependencies into ./.venv and run the whole test suite:
# pytest (unit, conformance, plugin, examples), ruff on the package, tests and benchmarks, then mypy --strict.
# Conformance tests also run against a real RabbitMQ when FAKERABBIT_REAL_URL is set.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e '.[test]'
.venv/bin/ruff check fakerabbit conftest_plugin tests benchmarks
.venv/bin/ruff format --check fakerabbit conftest_plugin tests benchmarks
.venv/bin/mypy fakerabbit
.venv/bin/python -m pytest -p no:cacheprovider "$@"
