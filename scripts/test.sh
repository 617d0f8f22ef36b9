#!/usr/bin/env bash
# Install fakerabbit with its test dependencies into ./.venv and run the whole test suite:
# ruff on the package, tests and benchmarks, mypy --strict, then pytest (unit, conformance, clients, plugin,
# management, examples, robustness).
#
# Conformance tests also run against live RabbitMQ brokers. Unless FAKERABBIT_REAL_URLS is already set, this
# starts RabbitMQ 3.10, 4.0 and 4.3 with scripts/real-rabbitmq.sh (Debian chroots built once and cached; needs
# root): FAKERABBIT_REAL=none skips them, FAKERABBIT_REAL=require (CI) fails when one cannot be started, the
# default (auto) goes on without a broker that cannot be started, saying so.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e '.[test]'
mode="${FAKERABBIT_REAL:-auto}"
if [ -z "${FAKERABBIT_REAL_URLS:-}" ] && [ "$mode" != none ]; then
  urls=()
  for v in ${FAKERABBIT_REAL_VERSIONS:-3.10 4.0 4.3}; do
    if url=$(bash scripts/real-rabbitmq.sh "$v" | tail -n 1) && [ -n "$url" ]; then
      urls+=("$v=$url")
    elif [ "$mode" = require ]; then
      echo "test.sh: RabbitMQ $v could not be started (FAKERABBIT_REAL=require)" >&2
      exit 1
    else
      echo "test.sh: RabbitMQ $v could not be started; its conformance halves will not run" >&2
    fi
  done
  if [ ${#urls[@]} -gt 0 ]; then
    FAKERABBIT_REAL_URLS=$(IFS=,; echo "${urls[*]}")
    export FAKERABBIT_REAL_URLS
    # Tests that compare with one real broker only take the newest (the default profile copies it).
    export FAKERABBIT_REAL_URL="${FAKERABBIT_REAL_URL:-${urls[-1]#*=}}"
  fi
fi
echo "real brokers: ${FAKERABBIT_REAL_URLS:-none}"
.venv/bin/ruff check fakerabbit conftest_plugin tests benchmarks
.venv/bin/ruff format --check fakerabbit conftest_plugin tests benchmarks
.venv/bin/mypy fakerabbit conftest_plugin
.venv/bin/python -m pytest -p no:cacheprovider "$@"
