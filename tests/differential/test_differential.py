"""The differential fuzzer under pytest: a bounded, deterministic run per configured live broker.

Each configured live RabbitMQ (``FAKERABBIT_REAL_URLS``, see ``tests/realbrokers.py``) is compared with fakerabbit
running that broker's profile. Without a live broker the test skips. ``FAKERABBIT_DIFF_EXAMPLES`` sets the number
of examples per version (default 12); the run is derandomized, so CI sees the same scenarios every time.
``python -m tests.differential`` runs longer, random campaigns and prints every difference shrunk.
"""

from __future__ import annotations

import os

import pytest
from hypothesis.stateful import run_state_machine_as_test

from tests.differential.engine import fake_url
from tests.differential.machine import machine_for, machine_settings
from tests.realbrokers import real_brokers

EXAMPLES = int(os.environ.get("FAKERABBIT_DIFF_EXAMPLES", "12"))
STEPS = int(os.environ.get("FAKERABBIT_DIFF_STEPS", "25"))


@pytest.mark.timeout(900)
@pytest.mark.parametrize("real", [b.param for b in real_brokers()] or ["no-live-broker"])
def test_fakerabbit_matches_live_rabbitmq(real: str) -> None:
    brokers = {b.param: b for b in real_brokers()}
    if real not in brokers:
        pytest.skip("no live RabbitMQ configured (FAKERABBIT_REAL_URLS)")
    broker = brokers[real]
    machine = machine_for(broker.label, fake_url(broker.profile), broker.url)
    run_state_machine_as_test(machine, settings=machine_settings(EXAMPLES, steps=STEPS))
