#!/usr/bin/env bash
# Install fakerabbit into ./.venv and start the standalone broker on port 5673 (5672 is usually RabbitMQ's).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e .
exec .venv/bin/fakerabbit serve --port "${FAKERABBIT_PORT:-5673}" "$@"
