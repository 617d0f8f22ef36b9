"""``python -m tests.differential``: a longer differential campaign by hand.

    python -m tests.differential --examples 200                # every configured live broker
    python -m tests.differential --examples 500 --version 4.3  # one of them
    python -m tests.differential --replay scenario.txt --version 4.0

Brokers come from ``FAKERABBIT_REAL_URLS`` (``scripts/real-rabbitmq.sh VERSION`` starts each); without it the three
local brokers of ``scripts/real-rabbitmq.sh`` are assumed. For each version it prints ``identical X/Y`` (examples
whose every step matched), then each difference found, shrunk to a minimal replayable list of operations (same
kind of difference, and checked to be reproducible on the live broker itself), grouped by kind.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time

from hypothesis.stateful import run_state_machine_as_test

from tests.differential import ops as O
from tests.differential.engine import Difference, fake_url, replay, replay_real_twice, shrink
from tests.differential.machine import machine_for, machine_settings
from tests.realbrokers import real_brokers

LOCAL = (
    "3.10=amqp://guest:guest@127.0.0.1:5672/%2F,"
    "4.0=amqp://guest:guest@127.0.0.1:5675/%2F,"
    "4.3=amqp://guest:guest@127.0.0.1:5674/%2F"
)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.differential", description=__doc__.split("\n\n")[0])
    p.add_argument("--examples", type=int, default=50, help="examples per version (default 50)")
    p.add_argument("--steps", type=int, default=25, help="operations per example (default 25)")
    p.add_argument("--version", action="append", help="only this broker version label (repeatable)")
    p.add_argument("--seed", type=int, help="hypothesis seed (default: random; printed)")
    p.add_argument("--no-shrink", action="store_true", help="print differences as found, unshrunk")
    p.add_argument("--settle", type=float, default=0.01, help="live-broker settle interval in seconds")
    p.add_argument("--replay", metavar="FILE", help="run one printed scenario (a Python list of operations)")
    args = p.parse_args(argv)

    if not os.environ.get("FAKERABBIT_REAL_URLS") and not os.environ.get("FAKERABBIT_REAL_URL"):
        os.environ["FAKERABBIT_REAL_URLS"] = LOCAL
    brokers = [b for b in real_brokers() if not args.version or b.label in args.version]
    if not brokers:
        print("no live broker selected", file=sys.stderr)
        return 2

    if args.replay:
        with open(args.replay) as fh:
            ops = O.parse_scenario(fh.read())
        status = 0
        for b in brokers:
            d = replay(b.label, fake_url(b.profile), b.url, ops, settle=args.settle)
            print(f"RabbitMQ {b.label}: " + ("identical" if d is None else "differs"))
            if d is not None:
                print(d.render())
                status = 1
        return status

    seed = args.seed if args.seed is not None else random.randrange(2**32)
    print(f"seed {seed}")
    total_diffs = 0
    for b in brokers:
        found: list[Difference] = []
        machine = machine_for(b.label, fake_url(b.profile), b.url, collect=found, settle=args.settle)
        machine._hypothesis_internal_use_seed = seed  # type: ignore[attr-defined]
        started = time.monotonic()
        run_state_machine_as_test(
            machine, settings=machine_settings(args.examples, steps=args.steps, derandomize=False, shrink=False)
        )
        runs = machine.examples
        print(
            f"RabbitMQ {b.label} (fakerabbit profile {b.profile}): identical {sum(runs)}/{len(runs)}"
            f" in {time.monotonic() - started:.0f}s",
            flush=True,
        )
        by_kind: dict[str, Difference] = {}
        for d in sorted(found, key=lambda d: len(d.ops)):  # the shortest example of each kind
            by_kind.setdefault(d.signature() + (str(len(by_kind)) if args.no_shrink else ""), d)
        if not args.no_shrink:
            by_kind = {
                k: shrink(b.label, fake_url(b.profile), b.url, d, settle=args.settle) for k, d in by_kind.items()
            }
        for d in by_kind.values():
            total_diffs += 1
            stable = replay_real_twice(b.url, d.ops, settle=args.settle)
            print()
            print(d.render())
            if not stable:
                print("  NOTE: the live broker itself observed this scenario differently on two runs (timing?)")
        print(flush=True)
    return 1 if total_diffs else 0


if __name__ == "__main__":
    sys.exit(main())
