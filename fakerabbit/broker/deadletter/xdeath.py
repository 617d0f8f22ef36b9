"""How dead-lettering records a death on the copy it publishes: ``x-death`` and the ``x-*-death-*`` headers, per
version profile, and the cycle test that reads them.

Pinned by tests/conformance/test_dead_lettering_xdeath.py on every profile. Two renderings, chosen by the profile
(:func:`history_for`):

* :class:`LegacyHistory` (≤ 3.12, ``Profile.x_death_mc_order`` false) edits the ``x-death`` header *in place*,
  exactly like ``rabbit_dead_letter:update_x_death_header/2`` of 3.10 - 3.12 (checked byte for byte against a
  live 3.10.8): the first death prepends ``{count, reason, queue, time, exchange, routing-keys[,
  original-expiration]}`` and sets ``x-first-death-*``; a later death takes the (queue, reason) entry out, bumps
  its ``count`` (or builds a new one) and puts it first **with its keys sorted**; every
  ``rabbit_misc:set_table_value`` call sorts the top-level headers by key; a DLRK deletes ``CC``. A
  client-published ``x-death`` is simply part of the headers and is edited the same way; a non-array
  ``x-death`` is replaced by a fresh one-entry array.
* :class:`RecordHistory` (≥ 3.13) keeps the history as :class:`~fakerabbit.broker.message.Death` records
  (``mc:record_death``) and renders them (``mc_amqpl:death_table``): ``original-expiration`` first,
  ``x-last-death-*`` too, headers sorted and the ``CC`` header kept. 3.13 parses a client ``x-death`` into records
  (:func:`adopt_client_deaths`, ``mc_amqpl:headers_to_deaths`` of 3.13); 4.x ignores it (4.0.1 release notes).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from fakerabbit.broker.fields import Field, Table, sort_field_table
from fakerabbit.broker.message import Death, Message
from fakerabbit.broker.properties import DeferredProperties, RawProperties

if TYPE_CHECKING:
    from fakerabbit.broker.profile import Profile

__all__ = [
    "History",
    "LegacyHistory",
    "RecordHistory",
    "adopt_client_deaths",
    "deaths_from_header",
    "history_for",
]


def _subtract(keys: Sequence[str], remove: Sequence[str]) -> list[str]:
    """Erlang ``--``: removes the first occurrence of each element of ``remove``."""
    out = list(keys)
    for r in remove:
        if r in out:
            out.remove(r)
    return out


@functools.lru_cache(maxsize=256)
def _dlrk_keys(dlrk: str) -> tuple[str]:
    """``(dlrk,)``, one tuple shared by every copy dead-lettered with that routing key: a dead-letter queue
    holding 100,000 copies holds 100,000 tuples fewer (memory, and objects for the garbage collector)."""
    return (dlrk,)


def _s(value: str) -> Field:
    return ("S", value)


def _text(value: Any) -> Any:
    """Erlang compares binaries: a ``longstr`` (str) and a ``binary`` (bytes) with the same bytes are equal."""
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", "surrogateescape")
    return value


def _cc_keys(headers: Table) -> list[str]:
    """``rabbit_basic:header_routes/1`` on the current headers (``BCC`` is already stripped at publish)."""
    out: list[str] = []
    for name in ("CC", "BCC"):
        f = headers.get(name)
        if f is not None and f[0] == "A":
            out.extend(v for t, v in f[1] if t == "S")
    return out


def _new_message(msg: Message, dlx: str, dlrk: str | None, headers: Table | RawProperties) -> Message:
    """The copy of ``msg`` published to ``dlx``: with ``headers`` and no expiration, or with the property block
    ``headers`` when that is one already (a :class:`DeferredProperties`)."""
    props = headers if isinstance(headers, RawProperties) else msg.props.replace(headers=headers, expiration=None)
    keys = _dlrk_keys(dlrk) if dlrk is not None else msg.routing_keys  # tuples: Message keeps them as they are
    return Message(dlx, keys, props, msg.body, bcc=msg.bcc, msg_id=msg.id)


class History:
    """A version's death history: how a dead-lettered copy records its death, and how its cycles are found."""

    __slots__ = ("profile",)

    def __init__(self, profile: Profile) -> None:
        self.profile = profile

    def copy(self, msg: Message, queue: str, reason: str, dlx: str, dlrk: str | None, now_s: int) -> Message:
        """The copy of ``msg`` that ``queue`` publishes to ``dlx`` because it died for ``reason`` at ``now_s``."""
        raise NotImplementedError

    def is_cycle(self, msg: Message, target_queue: str, reason: str) -> bool:
        """``rabbit_dead_letter:detect_cycles/3``: drop the copy for ``target_queue`` if it died there before with no
        ``rejected`` death since.

        ``msg`` is the dead-lettered copy (its newest death first)."""
        raise NotImplementedError

    def retry_keys(self, copy: Message, original: Message) -> tuple[str, ...]:
        """The routing keys an at-least-once retry without a dead-letter routing key uses for ``copy`` (made of
        ``original``)."""
        raise NotImplementedError


class LegacyHistory(History):
    """3.10 - 3.12: the ``x-death`` header is the history (``rabbit_dead_letter`` of those releases)."""

    __slots__ = ()

    def copy(self, msg: Message, queue: str, reason: str, dlx: str, dlrk: str | None, now_s: int) -> Message:
        """``rabbit_dead_letter:make_msg/5`` of 3.10 - 3.12."""
        headers: Table = dict(msg.props.headers or {})
        rks = [msg.routing_keys[0], *_cc_keys(headers)]
        info: Table = {
            "reason": _s(reason),
            "queue": _s(queue),
            "time": ("T", now_s),
            "exchange": _s(msg.exchange),
            "routing-keys": ("A", [_s(k) for k in rks]),
        }
        raw_exp = msg.props.expiration
        if raw_exp is not None:
            info["original-expiration"] = _s(raw_exp)
        fresh: Table = {"count": ("l", 1), **info}
        current = headers.get("x-death")
        if current is None:
            headers["x-first-death-reason"] = _s(reason)
            headers["x-first-death-queue"] = _s(queue)
            headers["x-first-death-exchange"] = _s(msg.exchange)
            headers["x-death"] = ("A", [("F", fresh)])
        elif current[0] == "A":
            tables = _group_by_queue_and_reason(current[1])
            match: Table | None = None
            others: list[Field] = []
            for item in tables:
                if match is None and item[0] == "F" and _is_key(item[1], queue, reason):
                    match = item[1]
                else:
                    others.append(item)
            entry = fresh if match is None else _increment(match)
            headers["x-death"] = ("A", [("F", sort_field_table(entry)), *others])
        else:
            # rabbitmq-server#767: a non-array x-death (a client re-published it as a string) is reset.
            headers["x-death"] = ("A", [("F", fresh)])
        headers = sort_field_table(headers)
        if dlrk is not None:
            headers.pop("CC", None)
        new = _new_message(msg, dlx, dlrk, headers)
        new.deaths = deaths_from_header(headers["x-death"])
        return new

    def is_cycle(self, msg: Message, target_queue: str, reason: str) -> bool:
        """``rabbit_dead_letter:is_cycle/2`` on the ``x-death`` header, where an entry that is not a table (put
        there by a client) means "not fully automatic", so no cycle."""
        if reason == "rejected":
            return False
        field = msg.header("x-death")
        if field is None or field[0] != "A":
            return False
        for tag, value in field[1]:
            if tag != "F":
                return False
            if value.get("reason") == ("S", "rejected"):
                return False
            if value.get("queue") == ("S", target_queue):
                return True
        return False

    def retry_keys(self, copy: Message, original: Message) -> tuple[str, ...]:
        """Up to 3.12 the worker reads them from the ``routing-keys`` of the newest ``x-death`` entry
        (``redeliver/4``): routing key and CC, no BCC, and the keys of an *earlier* death when the entry was only
        counted up (checked on 3.10.8)."""
        field = copy.header("x-death")
        if field is not None and field[0] == "A" and field[1] and field[1][0][0] == "F":
            rks = field[1][0][1].get("routing-keys")
            if rks is not None and rks[0] == "A":
                return tuple(v for tag, v in rks[1] if tag == "S")
        return original.routing_keys  # (RabbitMQ's worker would crash on such a header)


class RecordHistory(History):
    """3.13+: :class:`Death` records on the message (``mc:record_death/3``), rendered when the headers are read."""

    __slots__ = ()

    def copy(self, msg: Message, queue: str, reason: str, dlx: str, dlrk: str | None, now_s: int) -> Message:
        """``mc:record_death/3`` and ``mc_amqpl:protocol_state/2`` (3.13, 4.x)."""
        profile = self.profile
        deaths: list[Death] = []
        for d in msg.deaths:  # copied (a Death is mutable); a loop, not a comprehension: a first death has none
            deaths.append(
                Death(d.queue, d.reason, d.count, d.time_s, d.exchange, list(d.routing_keys), d.original_expiration)
            )
        for i, d in enumerate(deaths):
            if d.queue == queue and d.reason == reason:
                d.count += 1
                deaths.insert(0, deaths.pop(i))
                break
        else:
            original_expiration: str | None = None
            if msg.ttl_ms is not None and msg.props.expiration is not None:
                original_expiration = str(msg.ttl_ms) if profile.normalise_expiration else msg.props.expiration
            recorded = _subtract(msg.routing_keys, msg.bcc) if msg.bcc else list(msg.routing_keys)
            deaths.insert(0, Death(queue, reason, 1, now_s, msg.exchange, recorded, original_expiration))
        if isinstance(msg.props, DeferredProperties):
            # a copy of a copy: build the source's headers now, so that deferred headers never chain (a message
            # that died a thousand times unread would otherwise render through a thousand nested frames)
            msg.props.headers  # noqa: B018
        last = (reason, queue, msg.exchange)
        first = msg.first_death or last
        keep_client_first = msg.first_death is None and profile.client_x_death == "parse"
        # The headers are built when first needed: expiring 100,000 messages into a DLQ must not build and
        # encode 100,000 header tables nobody may read.
        args = (msg.props, deaths, first, last, dlrk, profile, keep_client_first)
        new = _new_message(msg, dlx, dlrk, DeferredProperties(msg.props, _mc_headers, args, drop_expiration=True))
        new.deaths = deaths
        new.first_death = first
        return new

    def is_cycle(self, msg: Message, target_queue: str, reason: str) -> bool:
        if reason == "rejected":
            return False
        for d in msg.deaths:
            if d.reason == "rejected":
                return False
            if d.queue == target_queue:
                return True
        return False

    def retry_keys(self, copy: Message, original: Message) -> tuple[str, ...]:
        """3.13+ (``mc``) keep the message's own keys (routing key, CC, BCC) in ``#pending{}``."""
        return original.routing_keys


def history_for(profile: Profile) -> History:
    """The death history of ``profile``'s RabbitMQ."""
    return RecordHistory(profile) if profile.x_death_mc_order else LegacyHistory(profile)


def adopt_client_deaths(msg: Message) -> None:
    """Record a client-published ``x-death`` as the message's history (3.13 parses it: ``mc_amqpl:headers_to_deaths``).

    In LEGACY profiles the header itself is the history (it is edited in place when the message dies) and
    the records are only kept for inspection; 4.x never calls this.
    """
    field = msg.header("x-death")
    if field is None or field[0] != "A":
        return
    msg.deaths = deaths_from_header(field)


def _mc_death_table(d: Death) -> Table:
    """``mc_amqpl:death_table/7``: ``original-expiration`` (if any) first, then the fixed fields."""
    t: Table = {}
    if d.original_expiration is not None:
        t["original-expiration"] = _s(d.original_expiration)
    t["count"] = ("l", d.count)
    t["reason"] = _s(d.reason)
    t["queue"] = _s(d.queue)
    t["time"] = ("T", d.time_s)
    t["exchange"] = _s(d.exchange)
    t["routing-keys"] = ("A", [_s(k) for k in d.routing_keys])
    return t


def _value(table: Table, key: str) -> Any:
    """``x_death_event_key/2``: the value of ``key`` whatever its type, or None."""
    f = table.get(key)
    return None if f is None else f[1]


def _is_key(table: Table, queue: str, reason: str) -> bool:
    return bool(_text(_value(table, "queue")) == queue and _text(_value(table, "reason")) == reason)


def _increment(table: Table) -> Table:
    """``increment_xdeath_event_count/1``: count + 1 as a ``long`` (1 if the entry had none)."""
    t = dict(table)
    count = _value(t, "count")
    t["count"] = ("l", count + 1 if isinstance(count, int) and not isinstance(count, bool) else 1)
    return t


def _group_by_queue_and_reason(items: list[Field]) -> list[Field]:
    """3.10 - 3.12 ``group_by_queue_and_reason/1``: duplicate (queue, reason) tables collapse into the first one.

    Only arrays of more than one element are grouped, and the grouping (a ``lists:foldl`` that prepends, never
    reversed) **reverses** the entries: with three or more deaths the older entries flip order at every death,
    which is observable (live 3.10.8) and even changes cycle detection (``dead_lettering_SUITE``'s
    ``dead_letter_reject_expire_expire`` drops the message on its second lap). An entry without ``count`` gets the
    number of tables it stands for. Elements that are not tables are kept (RabbitMQ would crash the queue on them).
    """
    if len(items) <= 1:
        return items
    tables = [v for t, v in items if t == "F"]
    seen: set[tuple[Any, Any]] = set()
    out: list[Field] = []
    for tag, value in items:
        if tag != "F":
            out.append((tag, value))
            continue
        key = (_text(_value(value, "queue")), _text(_value(value, "reason")))
        if key in seen:
            continue
        seen.add(key)
        t = value
        if "count" not in t:
            n = sum(1 for other in tables if (_text(_value(other, "queue")), _text(_value(other, "reason"))) == key)
            t = {**t, "count": ("l", n)}
        out.append(("F", t))
    out.reverse()
    return out


def _mc_headers(
    source: RawProperties,
    deaths: list[Death],
    first: tuple[str, str, str],
    last: tuple[str, str, str],
    dlrk: str | None,
    profile: Profile,
    keep_client_first: bool,
) -> Table:
    """The headers of an MC dead-lettered copy (``mc_amqpl:protocol_state/2``): sorted, x-death rendered."""
    headers = dict(source.headers or {})
    if dlrk is not None and not profile.keep_cc_with_dlrk:
        headers.pop("CC", None)
    headers["x-death"] = ("A", [("F", _mc_death_table(d)) for d in deaths])
    for suffix, value in zip(("reason", "queue", "exchange"), first, strict=True):
        key = f"x-first-death-{suffix}"
        if not (keep_client_first and key in headers):
            headers[key] = _s(value)
    if profile.last_death_headers:
        for suffix, value in zip(("reason", "queue", "exchange"), last, strict=True):
            headers[f"x-last-death-{suffix}"] = _s(value)
    return sort_field_table(headers)


def deaths_from_header(field: Field) -> list[Death]:
    """The valid entries of an ``x-death`` array as :class:`Death` records (3.13 ``headers_to_deaths``).

    An entry counts only if it is a table with ``queue``, ``reason``, ``exchange`` (strings),
    ``routing-keys`` (an array), an integer ``count`` and an integer ``time``; others are left out.
    """
    if field[0] != "A":
        return []
    out: list[Death] = []
    for tag, entry in field[1]:
        if tag == "F":
            d = _death_from_table(entry)
            if d is not None:
                out.append(d)
    return out


def _death_from_table(t: Table) -> Death | None:
    try:
        queue, reason, count, time = t["queue"], t["reason"], t["count"], t["time"]
        exchange, rks = t["exchange"], t["routing-keys"]
    except KeyError:
        return None
    if queue[0] != "S" or reason[0] != "S" or exchange[0] != "S" or rks[0] != "A":
        return None
    if isinstance(count[1], bool) or not isinstance(count[1], int) or not isinstance(time[1], int):
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
