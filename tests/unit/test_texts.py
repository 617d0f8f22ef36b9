"""The text catalogue (:mod:`fakerabbit.broker.texts`): RabbitMQ's words byte for byte, and written only there."""

from __future__ import annotations

import ast
from pathlib import Path

from fakerabbit.broker import texts

PACKAGE = Path(texts.__file__).resolve().parents[1]


def test_the_texts_are_rabbitmqs() -> None:
    assert texts.DEFAULT_EXCHANGE == "operation not permitted on the default exchange"
    assert texts.login_refused("PLAIN") == (
        "Login was refused using authentication mechanism PLAIN. For details see the broker logfile."
    )
    assert texts.channel_max_reached(3, 3) == "number of channels opened (3) has reached the negotiated channel_max (3)"
    assert texts.invalid_dlx_type("long", "queue 'q' in vhost '/'") == (
        "invalid type 'long' for arg 'x-dead-letter-exchange' in queue 'q' in vhost '/'"
    )
    assert texts.foreign_queue_arg("x-stream-offset", "queue 'q' in vhost '/'", "quorum") == (
        "invalid arg 'x-stream-offset' for queue 'q' in vhost '/' of queue type rabbit_quorum_queue"
    )


def test_no_module_writes_a_catalogued_text_again() -> None:
    catalogued = {v for k, v in vars(texts).items() if k.isupper() and isinstance(v, str)}
    again = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "texts.py" and path.parent.name == "broker":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Constant) and node.value in catalogued:
                again.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: {node.value!r}")
    assert again == []
