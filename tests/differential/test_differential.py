"""The differential fuzzer under pytest: a bounded, deterministic run per configured live broker.

Each configured live RabbitMQ (``FAKERABBIT_REAL_URLS``, see ``tests/realbrokers.py``) is compared with fakerabbit
running that broker's profile. Without a live broker the test skips. ``FAKERABBIT_DIFF_EXAMPLES`` sets the number
of examples per version (default 20) and ``FAKERABBIT_DIFF_STEPS`` the operations per example (default 25); the
run is derandomized, so CI sees the same scenarios every time. Every example runs to the end; the test then fails
listing each kind of difference once, shrunk to a short replayable scenario (``python -m tests.differential``
runs longer, random campaigns).
"""

from __future__ import annotations

import os

import pytest
from hypothesis.stateful import run_state_machine_as_test

from tests.differential.engine import Difference, fake_url, shrink
from tests.differential.machine import machine_for, machine_settings
from tests.realbrokers import real_brokers

EXAMPLES = int(os.environ.get("FAKERABBIT_DIFF_EXAMPLES", "20"))
STEPS = int(os.environ.get("FAKERABBIT_DIFF_STEPS", "25"))
SHRINK_BUDGET = int(os.environ.get("FAKERABBIT_DIFF_SHRINK_BUDGET", "20"))


@pytest.mark.timeout(900)
@pytest.mark.parametrize("real", [b.param for b in real_brokers()] or ["no-live-broker"])
def test_fakerabbit_matches_live_rabbitmq(real: str) -> None:
    brokers = {b.param: b for b in real_brokers()}
    if real not in brokers:
        pytest.skip("no live RabbitMQ configured (FAKERABBIT_REAL_URLS)")
    broker = brokers[real]
    found: list[Difference] = []
    fake = fake_url(broker.profile)
    machine = machine_for(broker.label, fake, broker.url, collect=found)
    run_state_machine_as_test(machine, settings=machine_settings(EXAMPLES, steps=STEPS, shrink=False))
    if not found:
        return
    kinds: dict[str, Difference] = {}
    for d in found:
        kinds.setdefault(d.signature(), d)
    budget = SHRINK_BUDGET
    report = []
    for d in kinds.values():
        small = shrink(broker.label, fake, broker.url, d, budget=budget) if budget > 0 else d
        budget = max(budget // 2, 0)
        report.append(small.render())
    runs = machine.examples
    pytest.fail(
        f"fakerabbit {broker.profile} differs from RabbitMQ {broker.label} in {len(runs) - sum(runs)}/{len(runs)}"
        " examples:\n\n" + "\n\n".join(report),
        pytrace=False,
    )
