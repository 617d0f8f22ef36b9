"""The delayed-message exchange: RabbitMQ's ``rabbitmq_delayed_message_exchange`` plugin, on the broker's clock.

Modelled on the plugin's own source (rabbitmq/rabbitmq-delayed-message-exchange: ``rabbit_exchange_type_delayed_
message.erl``, ``rabbit_delayed_message.erl``, ``rabbit_delayed_message_utils.erl``; the 3.10.x branch for the 3.10
profile, the message-container versions 3.13 - 4.2 for the others) and its test suite; the live brokers of this
project do not have the plugin installed.

* Declare (``validate/1``, :mod:`fakerabbit.broker.exchange_types.delayed`): ``x-delayed-type`` must be a string
  naming an exchange type the node has (``rabbit_exchange:check_type/1``'s errors, which differ by version), not
  ``x-delayed-message`` itself. Bindings are validated, and messages matched, by that type.
* Publish (``route/3``): a message whose ``x-delay`` header reads as an integer ``0 < delay <= 2^32 - 1`` (ms)
  routes to nothing *now* - so a mandatory publish is returned at once (312 NO_ROUTE), a confirm comes at once,
  and an alternate exchange of the delayed exchange gets the message at once - and is kept until it is due. Any
  other value (absent, zero, negative, too large, a type the plugin does not read) routes at once by the delayed
  type. A string is read as an integer (``binary_to_integer``: a string that is not one crashes the channel,
  541 INTERNAL_ERROR closing the connection); a float is truncated; a decimal crashes; see :func:`read_delay`.
* When due (``rabbit_delayed_message:route/3``): ``x-delay`` is replaced by minus the delay (a ``signedint``
  before 3.13, a ``long`` annotation since), the headers sorted, and the message routed through the exchange
  as it was at publish time - its type and arguments - with the bindings that exchange's name has *now*; queues
  get it without mandatory or confirms (nothing is told to the publisher).
* Pending messages are stored per node, keyed by exchange record (not by the exchange's life): deleting the
  exchange keeps them, and when due they route by the bindings of whatever exchange then has that name (none:
  only the alternate exchange). They survive a node restart, for durable and transient exchanges alike (the
  plugin's Mnesia table is on disk). ``messages_delayed`` counts them by exchange name.
* Same due time: released in publish order (the plugin orders keys by timestamp, then by exchange record).
"""

from __future__ import annotations

import heapq
import itertools
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Protocol

from fakerabbit.broker import errors
from fakerabbit.broker.exchange import Exchange, ExchangeType
from fakerabbit.broker.fields import Field, Table
from fakerabbit.broker.message import Message

if TYPE_CHECKING:
    from fakerabbit.broker.context import NodeContext
    from fakerabbit.broker.profile import Profile
    from fakerabbit.clock import TimerHandle

__all__ = [
    "DEFAULT_PLUGINS",
    "DESCRIPTION",
    "KNOWN_PLUGINS",
    "MAX_DELAY_MS",
    "PLUGIN",
    "TYPE",
    "DelayedMessages",
    "Pending",
    "check_plugins",
    "read_delay",
]

#: The plugin's name, as ``rabbitmq-plugins enable`` takes it.
PLUGIN: Final = "rabbitmq_delayed_message_exchange"
#: The exchange type it registers.
TYPE: Final = ExchangeType.DELAYED.value
#: Its ``description()`` (``/api/overview`` ``exchange_types``).
DESCRIPTION: Final = "Delayed Message Exchange."
#: ``?ERL_MAX_T``: the longest Erlang timer, in ms; a longer delay is no delay.
MAX_DELAY_MS: Final = 4294967295
#: The plugins fakerabbit models, and those on by default.
KNOWN_PLUGINS: Final = (PLUGIN,)
DEFAULT_PLUGINS: Final = (PLUGIN,)

# get_delay/1's type lists (tags of the fields of fakerabbit/broker/fields.py), before and since message
# containers (3.13): ``mc_amqpl:x_header`` maps ``byte`` to ``byte``, which the newer integer list lacks, and
# ``binary`` (``x``) to ``binary``, which the newer string list has; ``void`` becomes ``null``, which no clause
# of the newer get_delay/1 matches (a crash); ``decimal`` is a crash in both (``trunc`` of a tuple, no
# ``from_091`` clause).
_INT_TAGS_310: Final = frozenset("bsIlBui")
_INT_TAGS_MC: Final = frozenset("BsuIil")
_STR_TAGS_310: Final = frozenset("S")
_STR_TAGS_MC: Final = frozenset("Sx")
_CRASH_TAGS_310: Final = frozenset("D")
_CRASH_TAGS_MC: Final = frozenset("DV")
_ERLANG_INTEGER = re.compile(rb"[+-]?[0-9]+")


class _Crash(Exception):
    """Where the plugin's code crashes (the channel, or whichever process routes the message)."""


def check_plugins(plugins: Iterable[str]) -> frozenset[str]:
    """The enabled plugins, checked: ``ValueError`` names an unknown one. A single name may be given as a string."""
    enabled = frozenset((plugins,) if isinstance(plugins, str) else plugins)
    unknown = sorted(enabled - set(KNOWN_PLUGINS))
    if unknown:
        raise ValueError(f"unknown plugin(s) {', '.join(unknown)}; fakerabbit has: {', '.join(KNOWN_PLUGINS)}")
    return enabled


def read_delay(field: Field | None, profile: Profile) -> int | None:
    """``rabbit_delayed_message_utils:get_delay/1``: the ``x-delay`` header as an integer, or ``None`` when the
    plugin reads no delay from it. Raises :class:`_Crash` where the plugin crashes."""
    if field is None:
        return None
    tag, value = field
    mc = profile.message_containers
    if tag in (_INT_TAGS_MC if mc else _INT_TAGS_310):
        return int(value)
    if tag in (_STR_TAGS_MC if mc else _STR_TAGS_310):
        raw = value if isinstance(value, bytes) else str(value).encode("utf-8", "surrogateescape")
        if _ERLANG_INTEGER.fullmatch(raw) is None:
            raise _Crash(f"binary_to_integer({raw!r})")
        return int(raw)
    if tag in "fd":
        number = float(value)
        if not math.isfinite(number):
            raise _Crash(f"trunc({value!r})")
        return math.trunc(number)
    if tag in (_CRASH_TAGS_MC if mc else _CRASH_TAGS_310):
        raise _Crash(f"x-delay of type {tag!r}")
    return None


def _released_headers(headers: Table, delay: int, profile: Profile) -> Table:
    """``swap_delay_header/1``: ``x-delay`` = -delay, the headers sorted by key (``rabbit_misc:set_table_value``
    before 3.13; the annotation rendered by ``mc_amqpl:protocol_state/2`` since)."""
    out = dict(headers)
    if profile.message_containers:
        out["x-delay"] = ("l", -delay)
    else:  # a signedint: Erlang's <<V:32/signed>> keeps the low 32 bits
        out["x-delay"] = ("I", ((-delay + 2**31) % 2**32) - 2**31)
    return dict(sorted(out.items(), key=lambda kv: kv[0].encode("utf-8", "surrogateescape")))


@dataclass(slots=True)
class Pending:
    """A message the delayed exchange ``exchange`` (as it was at publish) holds until ``due_ms``."""

    due_ms: int
    seq: int
    delay_ms: int
    exchange: Exchange
    msg: Message

    def __lt__(self, other: Pending) -> bool:
        return (self.due_ms, self.seq) < (other.due_ms, other.seq)


class Target(Protocol):
    """A queue a released message goes to."""

    @property
    def name(self) -> str: ...

    def publish(self, msg: Message, untracked: bool = False, enqueuer: object = None) -> object: ...


class DelayHost(Protocol):
    """What the delayed messages of a vhost need from it (:class:`~fakerabbit.broker.vhost.Vhost`)."""

    @property
    def broker(self) -> NodeContext: ...

    @property
    def exchanges(self) -> Mapping[str, Exchange]: ...

    def route(self, x: Exchange, msg: Message) -> Sequence[Target]: ...


class DelayedMessages:
    """The pending delayed messages of one vhost, released on the broker's clock by one timer (the earliest)."""

    def __init__(self, vhost: DelayHost) -> None:
        self.vhost = vhost
        self._heap: list[Pending] = []
        self._counts: dict[str, int] = {}
        self._seq = itertools.count()
        self._timer: TimerHandle | None = None
        #: The message being released: no delayed exchange holds it again on that route (its ``x-delay`` now
        #: reads as minus the delay, also where a 3.10 signedint would wrap on the wire).
        self._releasing: Message | None = None

    # -- inspection -----------------------------------------------------------------------------------------------
    def count(self, exchange: str) -> int:
        """``messages_delayed``: how many messages are pending for exchanges named ``exchange``."""
        return self._counts.get(exchange, 0)

    def info(self, x: Exchange) -> int | None:
        """The plugin's ``info/1`` for exchange ``x``: ``messages_delayed`` if it is a delayed exchange, else None."""
        return self._counts.get(x.name, 0) if x.type == TYPE else None

    def pending(self, exchange: str | None = None) -> list[Pending]:
        """The pending messages (of ``exchange``, or all), in release order."""
        return sorted(p for p in self._heap if exchange is None or p.exchange.name == exchange)

    # -- publish ----------------------------------------------------------------------------------------------------
    def hold(self, x: Exchange, msg: Message) -> bool:
        """``route/3`` of the delayed exchange ``x``: True when it keeps ``msg`` (it routes nowhere now)."""
        if msg is self._releasing:
            return False
        broker = self.vhost.broker
        try:
            delay = read_delay(msg.header("x-delay"), broker.profile)
        except _Crash as exc:
            if msg.deaths:
                # dead-lettering: RabbitMQ's queue process would crash; the fake routes the copy undelayed
                broker.report_problem(
                    f"delayed exchange '{x.name}': x-delay of a dead-lettered message crashes RabbitMQ ({exc}); "
                    "routed without delay"
                )
                return False
            raise errors.InternalError("") from None
        if delay is None or not 0 < delay <= MAX_DELAY_MS:
            return False
        clock = broker.clock
        p = Pending(clock.now_ms() + delay, next(self._seq), delay, x, msg)
        heapq.heappush(self._heap, p)
        self._counts[x.name] = self._counts.get(x.name, 0) + 1
        broker.events.emit("delayed", msg, exchange=x.name, delay_ms=delay, due_ms=p.due_ms)
        if self._timer is None or p.due_ms < self._timer.when_ms:
            self._arm()
        return True

    # -- release ----------------------------------------------------------------------------------------------------
    def _arm(self) -> None:
        clock = self.vhost.broker.clock
        if self._timer is not None:
            clock.cancel(self._timer)
            self._timer = None
        if self._heap:
            self._timer = clock.call_at(self._heap[0].due_ms, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        now = self.vhost.broker.clock.now_ms()
        heap = self._heap
        while heap and heap[0].due_ms <= now:
            p = heapq.heappop(heap)
            name = p.exchange.name
            left = self._counts[name] - 1
            if left:
                self._counts[name] = left
            else:
                del self._counts[name]
            self._release(p)
        self._arm()

    def _release(self, p: Pending) -> None:
        v = self.vhost
        broker = v.broker
        old = p.msg
        props = old.props.replace(headers=_released_headers(old.headers(), p.delay_ms, broker.profile))
        msg = Message(old.exchange, old.routing_keys, props, old.body, bcc=old.bcc, ttl_ms=old.ttl_ms, msg_id=old.id)
        msg.deaths, msg.first_death = old.deaths, old.first_death
        stored = p.exchange
        current = v.exchanges.get(stored.name)
        x = current if current is stored else _stand_in(stored, current)
        self._releasing = msg
        try:
            queues = v.route(x, msg)
        finally:
            self._releasing = None
        broker.events.emit("delay-released", msg, exchange=stored.name, queues=[q.name for q in queues])
        for q in queues:
            q.publish(msg, enqueuer=self)

    def clear(self) -> None:
        """Forget every pending message (a reset node; RabbitMQ: disabling the plugin)."""
        if self._timer is not None:
            self.vhost.broker.clock.cancel(self._timer)
            self._timer = None
        self._heap.clear()
        self._counts.clear()


def _stand_in(stored: Exchange, current: Exchange | None) -> Exchange:
    """The exchange record a message was delayed by, with the bindings its name has now (none if it is gone)."""
    x = Exchange(
        stored.name,
        stored.type,
        durable=stored.durable,
        auto_delete=stored.auto_delete,
        internal=stored.internal,
        arguments=stored.arguments,
    )
    if current is not None:
        for b in current.bindings:
            x.add_binding(b)
    return x
