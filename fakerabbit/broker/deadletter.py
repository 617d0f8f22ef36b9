"""How dead-lettering rewrites a message: death history, ``x-death`` and ``x-*-death-*`` headers, cycles.

Spec sections C–G of ``shared/spec/rabbitmq-behaviour.md``; version differences come from the profile.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fakerabbit.broker.fields import Field, Table
from fakerabbit.broker.message import Death, Message

if TYPE_CHECKING:
    from fakerabbit.broker.broker import Broker
    from fakerabbit.broker.queue import Entry

_LEGACY_SORTED = ("count", "exchange", "original-expiration", "queue", "reason", "routing-keys", "time")


def _subtract(keys: list[str], remove: list[str]) -> list[str]:
    """Erlang ``--``: removes the first occurrence of each element of ``remove``."""
    out = list(keys)
    for r in remove:
        if r in out:
            out.remove(r)
    return out


def _s(value: str) -> Field:
    return ("S", value)


class DeadLetters:
    """Dead-letter message rewriting for one broker (reads the broker's profile and clock)."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    # -- publishing side ------------------------------------------------------------------------------------
    def adopt_client_deaths(self, msg: Message) -> None:
        """3.13 parses a client-published ``x-death``; ≤3.12 edits it in place; 4.x ignores it."""
        mode = self.broker.profile.client_x_death
        field = msg.header("x-death")
        if field is None or field[0] != "A":
            return
        deaths: list[Death] = []
        for tag, entry in field[1]:
            if tag != "F":
                continue
            death = _death_from_table(entry)
            if death is None:
                if mode == "edit":
                    continue
                continue
            if mode == "edit":
                death.raw = entry
            deaths.append(death)
        msg.deaths = deaths

    # -- dead-lettering -------------------------------------------------------------------------------------
    def make_copy(self, msg: Message, queue: str, reason: str, dlx: str, dlrk: str | None) -> Message:
        profile = self.broker.profile
        now_s = self.broker.clock.now_ms() // 1000
        deaths = [
            Death(d.queue, d.reason, d.count, d.time_s, d.exchange, d.routing_keys, d.original_expiration, d.raw)
            for d in msg.deaths
        ]
        original_expiration: str | None = None
        raw_exp = msg.props.expiration
        if raw_exp is not None:
            original_expiration = str(msg.ttl_ms) if profile.normalise_expiration else raw_exp
        for i, d in enumerate(deaths):
            if d.queue == queue and d.reason == reason:
                d.count += 1
                if d.raw is not None:
                    d.raw = _legacy_bump(d.raw, d.count)
                deaths.insert(0, deaths.pop(i))
                break
        else:
            recorded = _subtract(msg.routing_keys, msg.bcc)
            deaths.insert(0, Death(queue, reason, 1, now_s, msg.exchange, recorded, original_expiration))
        first = msg.first_death or (reason, queue, msg.exchange)
        last = (reason, queue, msg.exchange)
        headers = dict(msg.props.headers or {})
        if dlrk is not None and not profile.keep_cc_with_dlrk:
            headers.pop("CC", None)
        headers["x-death"] = ("A", [("F", self._death_table(d, profile.x_death_mc_order)) for d in deaths])
        keep_client_first = profile.client_x_death != "ignore" and msg.first_death is None
        for suffix, value in zip(("reason", "queue", "exchange"), first, strict=True):
            key = f"x-first-death-{suffix}"
            if not (keep_client_first and key in headers):
                headers[key] = _s(value)
        if profile.last_death_headers:
            for suffix, value in zip(("reason", "queue", "exchange"), last, strict=True):
                headers[f"x-last-death-{suffix}"] = _s(value)
        if profile.x_death_mc_order:
            headers = dict(sorted(headers.items()))
        props = msg.props.replace(headers=headers, expiration=None)
        keys = [dlrk] if dlrk is not None else list(msg.routing_keys)
        new = Message(dlx, keys, props, msg.body, bcc=msg.bcc, ttl_ms=None, msg_id=msg.id)
        new.deaths = deaths
        new.first_death = first
        return new

    @staticmethod
    def _death_table(d: Death, mc_order: bool) -> Table:
        if d.raw is not None:
            return d.raw
        rks: Field = ("A", [_s(k) for k in d.routing_keys])
        if mc_order:
            t: Table = {}
            if d.original_expiration is not None:
                t["original-expiration"] = _s(d.original_expiration)
            t.update(
                {
                    "count": ("l", d.count),
                    "reason": _s(d.reason),
                    "queue": _s(d.queue),
                    "time": ("T", d.time_s),
                    "exchange": _s(d.exchange),
                    "routing-keys": rks,
                }
            )
            return t
        t = {
            "count": ("l", d.count),
            "reason": _s(d.reason),
            "queue": _s(d.queue),
            "time": ("T", d.time_s),
            "exchange": _s(d.exchange),
            "routing-keys": rks,
        }
        if d.original_expiration is not None:
            t["original-expiration"] = _s(d.original_expiration)
        if d.count > 1:
            t = {k: t[k] for k in _LEGACY_SORTED if k in t}
        return t

    @staticmethod
    def is_cycle(msg: Message, target_queue: str, reason: str) -> bool:
        """CY-1: a copy is dropped if it would return to a queue it died in with no ``rejected`` death between."""
        if reason == "rejected":
            return False
        for d in msg.deaths:
            if d.reason == "rejected":
                return False
            if d.queue == target_queue:
                return True
        return False

    # -- quorum queue delivery headers ----------------------------------------------------------------------
    def quorum_delivery_props(self, e: Entry) -> bytes:
        """Quorum queues add ``x-delivery-count`` (and from 4.3 ``x-acquired-count``) when redelivering."""
        profile = self.broker.profile
        counter = profile.delivery_limit_counter
        count = e.acquired_count if counter == "acquired" else e.delivery_count
        props = e.msg.props
        additions: dict[str, Any] = {}
        if count > 0 or profile.delivery_count_header_from_zero:
            additions["x-delivery-count"] = ("l", count)
        if profile.acquired_count_header and e.acquired_count > 0:
            additions["x-acquired-count"] = ("l", e.acquired_count)
        if not additions:
            return props.raw
        headers = dict(props.headers or {})
        headers.update(additions)
        return props.replace(headers=headers).raw


def _death_from_table(t: Table) -> Death | None:
    try:
        queue = t["queue"]
        reason = t["reason"]
        count = t["count"]
        time = t["time"]
        exchange = t["exchange"]
        rks = t["routing-keys"]
    except KeyError:
        return None
    if queue[0] != "S" or reason[0] != "S" or exchange[0] != "S" or rks[0] != "A":
        return None
    if not isinstance(count[1], int) or not isinstance(time[1], int):
        return None
    oe = t.get("original-expiration")
    return Death(
        queue[1],
        reason[1],
        count[1],
        time[1],
        exchange[1],
        [v for tag, v in rks[1] if tag == "S"],
        oe[1] if oe is not None and oe[0] == "S" else None,
    )


def _legacy_bump(raw: Table, count: int) -> Table:
    t = dict(raw)
    t["count"] = ("l", count)
    return dict(sorted(t.items()))
