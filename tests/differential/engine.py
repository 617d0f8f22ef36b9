"""Run a scenario against fakerabbit and a live RabbitMQ side by side and compare what a client observes."""

from __future__ import annotations

import atexit
import dataclasses
import pprint
import uuid
from dataclasses import dataclass
from typing import Any

from fakerabbit import FakeRabbit
from tests.differential import ops as O
from tests.differential.harness import Side

_FAKES: dict[str, FakeRabbit] = {}


def fake_url(profile: str) -> str:
    """The URL of this process's fakerabbit with ``profile`` (started on first use, stopped at exit)."""
    if profile not in _FAKES:
        rabbit = FakeRabbit(rabbitmq_version=profile)
        rabbit.start()
        _FAKES[profile] = rabbit
        atexit.register(rabbit.stop)
    return _FAKES[profile].url


@dataclass
class Difference:
    """The first operation whose observation differs, with the scenario that led to it."""

    label: str
    ops: list[O.Op]
    fake: dict[str, Any]
    real: dict[str, Any]
    prefix: str

    @property
    def op(self) -> O.Op:
        return self.ops[-1]

    def differing(self) -> dict[str, tuple[Any, Any]]:
        out: dict[str, tuple[Any, Any]] = {}
        for key in ("reply", "counts"):
            if self.fake[key] != self.real[key]:
                out[key] = (self.fake[key], self.real[key])
        fe, re_ = self.fake["events"], self.real["events"]
        for key in sorted(set(fe) | set(re_)):
            if fe.get(key) != re_.get(key):
                out[key] = (fe.get(key), re_.get(key))
        return out

    def signature(self) -> str:
        """A short key for grouping differences: the operation type and which observations differ."""
        return f"{type(self.op).__name__}:{','.join(sorted(self.differing()))}"

    def render(self) -> str:
        lines = [f"RabbitMQ {self.label}: scenario (replay with python -m tests.differential --replay FILE):"]
        lines.append(strip(O.format_scenario(self.ops), self.prefix))
        lines.append(f"the last operation differs ({self.signature()}):")
        for key, (f, r) in self.differing().items():
            lines.append(f"  {key}:")
            lines.append(
                "    fakerabbit: " + strip(pprint.pformat(f, width=110), self.prefix).replace("\n", "\n      ")
            )
            lines.append(
                "    RabbitMQ:   " + strip(pprint.pformat(r, width=110), self.prefix).replace("\n", "\n      ")
            )
        return "\n".join(lines)


def strip(text: str, prefix: str) -> str:
    return text.replace(prefix, "")


class Pair:
    """One scenario: the same operations against fakerabbit and a live broker, compared step by step."""

    def __init__(self, label: str, fake: str, real: str, *, settle: float = 0.01) -> None:
        self.label = label
        self.prefix = f"dz{uuid.uuid4().hex[:8]}-"
        self.fake = Side("fake", fake, self.prefix, live=False)
        self.real = Side(f"real-{label}", real, self.prefix, live=True, settle=settle)
        self.ops: list[O.Op] = []

    def step(self, op: O.Op) -> Difference | None:
        self.ops.append(op)
        f = self.fake.run(op)
        r = self.real.run(op)
        if f != r:
            return Difference(self.label, list(self.ops), f, r, self.prefix)
        return None

    def close(self) -> None:
        for side in (self.fake, self.real):
            side.close()
            side.cleanup()


def replay(label: str, fake: str, real: str, ops: list[O.Op], *, settle: float = 0.01) -> Difference | None:
    """Run ``ops`` on a fresh pair; the first difference, or None."""
    pair = Pair(label, fake, real, settle=settle)
    try:
        for op in ops:
            d = pair.step(op)
            if d is not None:
                return d
        return None
    finally:
        pair.close()


def replay_real_twice(real: str, ops: list[O.Op], *, settle: float = 0.01) -> bool:
    """Does the live broker itself observe the same thing on two runs of ``ops``? (False: timing-dependent.)"""
    observations = []
    for _ in range(2):
        prefix = f"dz{uuid.uuid4().hex[:8]}-"
        side = Side("real", real, prefix, live=True, settle=settle)
        try:
            observations.append([strip(repr(side.run(op)), prefix) for op in ops])
        finally:
            side.close()
            side.cleanup()
    return observations[0] == observations[1]


def shrink(
    label: str, fake: str, real: str, diff: Difference, *, settle: float = 0.01, budget: int = 200
) -> Difference:
    """Delta-debug a differing scenario: drop operations while some difference of the same signature remains."""
    best = diff
    target = diff.signature()
    tries = 0

    def still(ops: list[O.Op]) -> Difference | None:
        nonlocal tries
        tries += 1
        d = replay(label, fake, real, ops, settle=settle)
        return d if d is not None and d.signature() == target else None

    changed = True
    while changed and tries < budget:
        changed = False
        ops = best.ops
        # chunks first, then single operations, always keeping the differing last step
        size = max(len(ops) // 2, 1)
        while size >= 1 and tries < budget:
            i = len(ops) - 1 - size
            while i >= 0 and tries < budget:
                cand = ops[:i] + ops[i + size :]
                d = still(cand)
                if d is not None:
                    best = d
                    ops = best.ops
                    changed = True
                i -= size
            size //= 2
    # then simplify the operations' parameters: drop dict keys and list items, unset flags, channel 1
    i = 0
    while i < len(best.ops) and tries < budget:
        for cand_op in simpler(best.ops[i]):
            if tries >= budget:
                break
            d = still([*best.ops[:i], cand_op, *best.ops[i + 1 :]])
            if d is not None and len(d.ops) == len(best.ops):
                best = d
                break  # simplify this operation further
        else:
            i += 1
    return best


def simpler(op: O.Op) -> list[O.Op]:
    """Variants of ``op`` with one parameter simplified (tried in order by :func:`shrink`)."""
    out: list[O.Op] = []
    for f in dataclasses.fields(op):
        value = getattr(op, f.name)
        if isinstance(value, dict):
            for key in value:
                out.append(dataclasses.replace(op, **{f.name: {k: v for k, v in value.items() if k != key}}))
            for key, v in value.items():
                if isinstance(v, list) and len(v) > 1:
                    out.append(dataclasses.replace(op, **{f.name: {**value, key: v[:1]}}))
        elif value is True:
            out.append(dataclasses.replace(op, **{f.name: False}))
        elif f.name == "ch" and value != 1:
            out.append(dataclasses.replace(op, ch=1))
        elif f.default is None and value is not None:
            out.append(dataclasses.replace(op, **{f.name: None}))
    return out
