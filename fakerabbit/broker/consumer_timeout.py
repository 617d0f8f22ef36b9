"""The consumer delivery-acknowledgement timeout (RabbitMQ's ``consumer_timeout``), on the broker's clock.

Who times out a delivery that stays unacknowledged depends on the version (:attr:`Profile.consumer_timeout`):

* ``"node"`` (3.10, 3.11) and ``"queue"`` (3.12 - 4.2): the channel (``rabbit_channel``), as
  :class:`ChannelTicker`. Every manual-ack delivery, ``basic.get`` included and whatever the queue type, is kept
  with the time it was sent. On its tick (``channel_tick_interval``, 60 s) the channel looks at the *oldest* one
  (``evaluate_consumer_timeout``): sent more than the timeout ago, the channel is closed with 406
  PRECONDITION_FAILED (:func:`timed_out_text`) and its unacknowledged messages go back to their queues, as on any
  channel close. The timeout is the node's ``consumer_timeout``; from 3.12 the oldest delivery's queue may
  replace it with its ``consumer-timeout`` policy or ``x-consumer-timeout`` argument (the smaller of the two,
  :func:`queue_setting`). The tick timer starts with the channel; a channel with nothing unacknowledged that is
  idle for about a second hibernates, which stops the timer, and whatever wakes it next starts it again: the
  close comes at the first tick at or after the deadline, up to a minute late (live 4.0.5: a 1 000 ms policy
  closed the channel 60.0 s after it opened, and 60.0 s after a delivery made 20 s after the channel opened).
* ``"quorum"`` (4.3): the queue times its own deliveries (``rabbit_fifo``), as :class:`QuorumTimeouts`; only
  quorum queues do (classic queues and streams never time a delivery out any more: 4.3.0 release notes). The
  timeout is the consumer's ``x-consumer-timeout`` argument if it has one, else the queue's policy / argument,
  else the node's setting. At the deadline itself (a Ra timer) the queue returns every delivery of that consumer
  whose time is up (redelivered, ``x-acquired-count`` + 1, not a failed delivery: the delivery limit does not
  count it) and the consumer gets nothing more until the client has settled each of them (an ack, nack or
  reject of such a tag is accepted and changes nothing else). The channel tells the client with
  ``basic.cancel`` (nowait) when it announced ``consumer_cancel_notify`` - the consumer stays registered - and
  otherwise closes itself with 406 and ``Timeout value used: -1 ms``, as it does for a ``basic.get`` delivery
  (which has no consumer to cancel). Live 4.3.6.

The tick, the hibernation and the per-queue rules are RabbitMQ's source (rabbit_channel.erl, rabbit_fifo.erl,
rabbit_queue_type.erl of 3.10.8, 3.12.14, 4.0.5 and 4.3.6); what the live brokers showed is in
``notes/rabbitmq-consumer-timeout.md``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Final, Protocol, TypeVar

from fakerabbit.broker.fields import INTEGER_TAGS, Field, Table
from fakerabbit.broker.policy import policy_value
from fakerabbit.broker.queue import Consumer, Entry, Queue

if TYPE_CHECKING:
    from fakerabbit.broker.context import NodeContext
    from fakerabbit.clock import Clock, TimerHandle

__all__ = [
    "CHANNEL_TICK_MS",
    "DEFAULT_CONSUMER_TIMEOUT_MS",
    "HIBERNATE_MS",
    "UNDEFINED_TIMEOUT_MS",
    "AckTimer",
    "ChannelTicker",
    "QuorumTimeouts",
    "ack_timer",
    "queue_setting",
    "timed_out_text",
]

#: RabbitMQ's default ``consumer_timeout`` (30 minutes).
DEFAULT_CONSUMER_TIMEOUT_MS: Final = 1_800_000
#: ``channel_tick_interval``: how often a channel (≤4.2) looks at its oldest unacknowledged delivery.
CHANNEL_TICK_MS: Final = 60_000
#: How long a channel with nothing unacknowledged stays idle before it hibernates and stops its tick timer
#: (``?HIBERNATE_AFTER_MIN``: gen_server2's backoff starts at 1 s and grows to 2 s).
HIBERNATE_MS: Final = 1_000
#: 4.3 (rabbit_queue_type:get_consumer_timeout, 4.3.3+): a node ``consumer_timeout`` that is not an integer
#: (``undefined``) falls back to 24 hours.
UNDEFINED_TIMEOUT_MS: Final = 86_400_000


def timed_out_text(channel: int, timeout_ms: int) -> str:
    """The explanation of the 406 that closes a channel (``rabbit_channel:handle_consumer_timed_out``)."""
    return (
        f"delivery acknowledgement on channel {channel} timed out. Timeout value used: {timeout_ms} ms. "
        "This timeout value can be configured, see consumers doc guide to learn more"
    )


class _NotNumber:
    """An Erlang term that is not a number (a binary, atom, list, tuple): greater than every number."""


_NOT_NUMBER: Final = _NotNumber()


def _arg_term(field: Field) -> int | float | _NotNumber:
    tag = field[0]
    if tag in INTEGER_TAGS or tag == "T":
        return int(field[1])
    if tag in ("f", "d"):
        return float(field[1])
    return _NOT_NUMBER


def queue_setting(q: Queue) -> int | float | _NotNumber | None:
    """``rabbit_queue_type_util:args_policy_lookup(<<"consumer-timeout">>, fun erlang:min/2, Q)``: the queue's
    ``consumer-timeout`` policy value, its ``x-consumer-timeout`` argument (decoded as RabbitMQ does: any type
    up to 4.2), the smaller of the two in Erlang's term order (a number is smaller than any other term), or
    ``None`` when neither is set. Only an integer is a timeout; any other value means "no timeout"."""
    value = policy_value("consumer-timeout", *q.policies, q.ctx.profile)
    # (validated by set_policy: an integer >= 0)
    pol: int | None = value if isinstance(value, int) and not isinstance(value, bool) else None
    field = q.arguments.get("x-consumer-timeout")
    if field is None:
        return pol
    arg = _arg_term(field)
    if pol is None:
        return arg
    if isinstance(arg, _NotNumber):
        return pol
    return arg if arg < pol else pol


class Delivery(Protocol):
    """An unacknowledged delivery as a channel keeps it (:class:`fakerabbit.broker.session.Unacked`)."""

    tag: int
    queue: Queue
    entry: Entry
    consumer: Consumer | None
    #: when it was sent (ms), set by :meth:`AckTimer.delivered` where the rule needs it
    at: int
    #: 4.3: returned to its queue by the timeout; the channel still knows the tag
    timed_out: bool


D = TypeVar("D", bound=Delivery)


class TimedChannel(Protocol):
    """What the timeouts need of a channel (:class:`fakerabbit.broker.session.Session`)."""

    @property
    def number(self) -> int: ...

    @property
    def closed(self) -> bool: ...

    @property
    def broker(self) -> NodeContext: ...

    @property
    def unacked(self) -> Mapping[int, Delivery]:
        """Unacknowledged deliveries by delivery tag, oldest first."""
        ...

    @property
    def consumers(self) -> Mapping[str, Consumer]: ...

    def close_timed_out(self, reply_text: str) -> None:
        """Close the channel with 406 PRECONDITION_FAILED ``reply_text``."""
        ...

    def cancel_timed_out(self, c: Consumer) -> bool:
        """Send ``basic.cancel`` for ``c`` if the client announced ``consumer_cancel_notify``; False if not."""
        ...


class AckTimer:
    """A channel's side of the consumer timeout; this base times nothing (the management API's channels)."""

    __slots__ = ()

    def delivered(self, d: Delivery) -> None:
        """A delivery that waits for its acknowledgement was recorded (basic.deliver or basic.get)."""

    def settled(self, taken: list[D], requeue: bool = False) -> list[D]:
        """The client settled ``taken`` (already off the channel's list): acknowledged or discarded, or with
        ``requeue`` returned (reject / nack with requeue, recover). Returns those still held by their queues
        (4.3: a timed-out delivery is already back in its queue)."""
        return taken

    def active(self) -> None:
        """The client did something on the channel (consume, cancel, qos, get)."""

    def consumer_added(self, c: Consumer, arguments: Table) -> None:
        """A consumer started on the channel."""

    def close(self) -> None:
        """The channel closed."""


class ChannelTicker(AckTimer):
    """≤4.2: ``rabbit_channel``'s tick and ``evaluate_consumer_timeout``, for one channel.

    The tick timer is only put on the clock while something is unacknowledged; in between, the phase of the
    ticks is remembered (``_anchor``) together with the last time the channel was busy with nothing
    unacknowledged (``_quiet_since``): if it has been idle for :data:`HIBERNATE_MS` since, it hibernated and
    the delivery that wakes it starts a new timer (first tick a full interval later). A channel is "busy" when
    the client consumes, cancels, sets qos, gets, settles, or a manual-ack delivery goes out; publishes and
    no-ack deliveries are not looked at (they rarely change when the first tick comes).
    """

    __slots__ = ("_anchor", "_ch", "_clock", "_per_queue", "_quiet_since", "_timer")

    def __init__(self, ch: TimedChannel, *, per_queue: bool) -> None:
        self._ch = ch
        self._clock: Clock = ch.broker.clock
        self._per_queue = per_queue
        now = self._clock.now_ms()
        self._anchor = now  # rabbit_channel:init/1 starts the tick timer
        self._quiet_since = now
        self._timer: TimerHandle | None = None

    def timeout_for(self, q: Queue) -> int | None:
        """``get_consumer_timeout/2``: the timeout that applies to a delivery from ``q`` (``None``: none)."""
        node = self._ch.broker.consumer_timeout_ms
        if not self._per_queue or q.deleted:
            return node
        value = queue_setting(q)
        if value is None:
            return node
        return value if isinstance(value, int) else None

    def _wake(self, now: int) -> None:
        if now - self._quiet_since >= HIBERNATE_MS:
            self._anchor = now  # handle_post_hibernate -> init_tick_timer
        self._quiet_since = now

    def active(self) -> None:
        if self._timer is None:
            self._wake(self._clock.now_ms())

    def delivered(self, d: Delivery) -> None:
        now = d.at = self._clock.now_ms()
        if self._timer is None:  # the first one unacknowledged
            self._wake(now)
            anchor = self._anchor
            self._timer = self._clock.call_at(
                anchor + ((now - anchor) // CHANNEL_TICK_MS + 1) * CHANNEL_TICK_MS, self._tick
            )

    def settled(self, taken: list[D], requeue: bool = False) -> list[D]:
        if self._timer is not None and not self._ch.unacked:
            self._clock.cancel(self._timer)
            self._timer = None
            self._quiet_since = self._clock.now_ms()
        return taken

    def close(self) -> None:
        if self._timer is not None:
            self._clock.cancel(self._timer)
            self._timer = None

    def _tick(self) -> None:
        self._timer = None
        ch = self._ch
        if ch.closed:
            return
        now = self._clock.now_ms()
        self._anchor = now  # the next timer starts as this tick is handled
        head = next(iter(ch.unacked.values()), None)
        if head is None:
            self._quiet_since = now
            return
        timeout = self.timeout_for(head.queue)
        # RabbitMQ: ``Time < Now - Timeout``. Its tick comes a little after the nominal time (a timer never fires
        # early, and the next one is armed once the tick is handled), so a delivery made as the timer started is
        # past its deadline at the tick that falls on it: here, where ticks come on time, that is ``<=``.
        if timeout is not None and head.at <= now - timeout:
            ch.broker.events.emit(
                "consumer-timeout",
                head.entry.msg,
                queue=head.queue.name,
                delivery_tag=head.tag,
                timeout_ms=timeout,
            )
            ch.close_timed_out(timed_out_text(ch.number, timeout))
            return
        self._timer = self._clock.call_at(now + CHANNEL_TICK_MS, self._tick)


class _ConsumerClock:
    """4.3: one quorum consumer's timeout, its timer and the deliveries that timed out (not settled yet)."""

    __slots__ = ("consumer", "timed_out", "timeout", "timer")

    def __init__(self, consumer: Consumer, timeout: int) -> None:
        self.consumer = consumer
        self.timeout = timeout
        self.timer: TimerHandle | None = None
        self.timed_out: set[int] = set()


class QuorumTimeouts(AckTimer):
    """4.3: quorum queues time their deliveries (``rabbit_fifo``'s ``evaluate_consumer_timeout`` timer).

    Each quorum consumer's deliveries share its timeout and go out in order, so their deadlines grow with the
    delivery tag: one timer per consumer, at the deadline of its oldest delivery, is enough (it is not moved
    when that delivery is settled: when it fires it finds what is due, if anything, and goes on to the next
    deadline). A ``basic.get`` delivery has a timer of its own.

    A timed-out consumer (``{timeout, up}`` in rabbit_fifo) is :attr:`Consumer.suspended`. Settling its
    timed-out deliveries takes them off its list (``maybe_untimeout``); with the last one it is up again, but it
    is served again only when rabbit_fifo puts it back in its service queue (``update_or_remove_con``): an ack
    or a discard does, a return (reject or nack with requeue, recover) only if the same command also returns a
    delivery it still holds. Otherwise it stays "stalled" until one of its deliveries is settled (live 4.3.6:
    after an ack or a nack without requeue of the timed-out tag the message came again at once; after a
    requeue or a recover it did not).
    """

    __slots__ = ("_ch", "_clock", "_consumers", "_gets", "_held", "_stalled")

    def __init__(self, ch: TimedChannel) -> None:
        self._ch = ch
        self._clock: Clock = ch.broker.clock
        self._consumers: dict[Consumer, _ConsumerClock] = {}
        self._gets: dict[int, TimerHandle] = {}
        #: timed-out deliveries the client has not settled yet
        self._held = 0
        #: up again after a timeout but not back in rabbit_fifo's service queue
        self._stalled: set[_ConsumerClock] = set()

    def timeout_for(self, q: Queue, arguments: Table | None = None) -> int:
        """``rabbit_queue_type:consume/3`` and ``get_consumer_timeout/2``: the consumer's own argument, else
        the queue's policy / argument, else the node's setting (24 h when that is unset)."""
        field = arguments.get("x-consumer-timeout") if arguments is not None else None
        if field is not None and field[0] in INTEGER_TAGS:  # (checked by basic.consume: an integer >= 0)
            return int(field[1])
        value = queue_setting(q)
        if isinstance(value, int):
            return value
        node = self._ch.broker.consumer_timeout_ms
        return UNDEFINED_TIMEOUT_MS if node is None else node

    def consumer_added(self, c: Consumer, arguments: Table) -> None:
        if c.queue.is_quorum and not c.no_ack:
            self._consumers[c] = _ConsumerClock(c, self.timeout_for(c.queue, arguments))

    def delivered(self, d: Delivery) -> None:
        q = d.queue
        if not q.is_quorum:
            return
        c = d.consumer
        if c is None:
            d.at = now = self._clock.now_ms()
            timeout = self.timeout_for(q)
            self._gets[d.tag] = self._clock.call_at(now + timeout, lambda: self._get_timed_out(d, timeout))
            return
        cc = self._consumers.get(c)
        if cc is not None:
            d.at = now = self._clock.now_ms()
            if cc.timer is None:
                cc.timer = self._clock.call_at(now + cc.timeout, lambda: self._fire(cc))

    def settled(self, taken: list[D], requeue: bool = False) -> list[D]:
        if not self._held and not self._gets and not self._stalled:
            return taken
        held: list[D] = []
        touched: dict[_ConsumerClock, bool] = {}  # consumer -> one of its live deliveries is in the batch
        for d in taken:
            c = d.consumer
            if c is None:
                timer = self._gets.pop(d.tag, None)
                if timer is not None:
                    self._clock.cancel(timer)
                held.append(d)
                continue
            cc = self._consumers.get(c)
            if d.timed_out:
                self._held -= 1
                if cc is not None:
                    cc.timed_out.discard(d.tag)
                    touched.setdefault(cc, False)
                continue
            held.append(d)
            if cc is not None and c.suspended:
                touched[cc] = True
        for cc, live in touched.items():
            c = cc.consumer
            if not c.suspended or cc.timed_out:
                continue
            if requeue and not live:
                self._stalled.add(cc)
            else:  # (the channel dispatches its consumers' queues once the settlement is done)
                self._stalled.discard(cc)
                c.suspended = False
        return held

    def close(self) -> None:
        for cc in self._consumers.values():
            if cc.timer is not None:
                self._clock.cancel(cc.timer)
                cc.timer = None
        for timer in self._gets.values():
            self._clock.cancel(timer)
        self._consumers.clear()
        self._gets.clear()
        self._stalled.clear()

    def _fire(self, cc: _ConsumerClock) -> None:
        cc.timer = None
        ch = self._ch
        c = cc.consumer
        if ch.closed or c.queue.deleted:
            return
        now = self._clock.now_ms()
        due: list[Delivery] = []
        next_deadline: int | None = None
        for d in ch.unacked.values():
            if d.consumer is c and not d.timed_out:
                deadline = d.at + cc.timeout
                if deadline <= now:
                    due.append(d)
                elif next_deadline is None:
                    next_deadline = deadline
        if due:
            self._time_out(cc, due)
            if ch.closed:
                return
        if next_deadline is not None:
            cc.timer = self._clock.call_at(next_deadline, lambda: self._fire(cc))

    def _time_out(self, cc: _ConsumerClock, due: list[Delivery]) -> None:
        ch = self._ch
        c = cc.consumer
        q = c.queue
        events = ch.broker.events
        for d in due:
            events.emit(
                "consumer-timeout",
                d.entry.msg,
                queue=q.name,
                consumer_tag=c.tag,
                delivery_tag=d.tag,
                timeout_ms=cc.timeout,
            )
            d.timed_out = True
            cc.timed_out.add(d.tag)
        self._held += len(due)
        c.unacked -= len(due)  # the queue gives the consumer its credit back
        c.suspended = True
        if c.unacked == 0:
            q.lingering.discard(c)  # a cancelled consumer with nothing left goes (update_or_remove_con)
            if q.settings.single_active_consumer and c in q.consumers:
                # a timed-out single active consumer goes back among the waiting ones; the next one takes over
                q.consumers.remove(c)
                q.consumers.append(c)
        q.release([d.entry for d in due], failed=False)
        if ch.consumers.get(c.tag) is not c or not ch.cancel_timed_out(c):
            ch.close_timed_out(timed_out_text(ch.number, -1))

    def _get_timed_out(self, d: Delivery, timeout: int) -> None:
        self._gets.pop(d.tag, None)
        ch = self._ch
        q = d.queue
        if ch.closed or q.deleted or ch.unacked.get(d.tag) is not d:
            return
        ch.broker.events.emit("consumer-timeout", d.entry.msg, queue=q.name, delivery_tag=d.tag, timeout_ms=timeout)
        d.timed_out = True
        q.release([d.entry], failed=False)
        ch.close_timed_out(timed_out_text(ch.number, -1))


def ack_timer(ch: TimedChannel) -> AckTimer:
    """The consumer timeout of a new channel, by the node's version profile."""
    rule = ch.broker.profile.consumer_timeout
    if rule == "quorum":
        return QuorumTimeouts(ch)
    return ChannelTicker(ch, per_queue=rule == "queue")
