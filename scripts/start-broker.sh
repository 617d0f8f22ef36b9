#!/usr/bin/env bash
# Install fakerabbit into ./.venv and start the standalone broker: AMQP on 5673, management API on 15673
# (RabbitMQ usually holds 5672 and 15672 on the same machine).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e .
exec .venv/bin/fakerabbit serve --port "${FAKERABBIT_PORT:-5673}" --management-port "${FAKERABBIT_MANAGEMENT_PORT:-15673}" "$@"
