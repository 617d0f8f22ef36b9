#!/usr/bin/env bash
# Install fakerabbit into ./.venv and start the standalone broker: AMQP on 5673, management API on 15673
# (RabbitMQ usually holds 5672 and 15672 on the same machine).
# The install is editable, so later source changes need no reinstall: a warm start skips pip when the venv
# already holds this checkout's install made from the same pyproject.toml (a stamp file in .venv records it).
set -euo pipefail
cd "$(dirname "$0")/.."
stamp=.venv/.fakerabbit-install
want="$(pwd) $(sha256sum pyproject.toml | cut -d' ' -f1)"
if [[ ! -x .venv/bin/fakerabbit || ! -f $stamp || "$(cat "$stamp")" != "$want" ]] \
    || ! .venv/bin/python -c "import fakerabbit, fakerabbit_pytest" 2>/dev/null; then
    [[ -x .venv/bin/python ]] || python3 -m venv .venv
    .venv/bin/python -m pip install -q --upgrade pip
    .venv/bin/python -m pip install -q -e .
    echo "$want" > "$stamp"
fi
exec .venv/bin/fakerabbit serve --port "${FAKERABBIT_PORT:-5673}" --management-port "${FAKERABBIT_MANAGEMENT_PORT:-15673}" "$@"
