"""At-least-once dead-lettering of a quorum queue (``rabbit_fifo_dlx`` and ``rabbit_fifo_dlx_worker``).

A quorum queue with ``x-dead-letter-strategy: at-least-once`` (effective only with a DLX and overflow
``reject-publish``, ``rabbit_quorum_queue:dlh/5``) does not publish its dead letters and forget them. It keeps them
in a *discards* buffer that counts towards its length limits, and a worker forwards them to the DLX and removes each
one only when every queue it routes to has accepted it. What this module models, as RabbitMQ 3.10 - 4.x do:

* The worker takes at most ``prefetch`` (``dead_letter_worker_consumer_prefetch``, 32) messages out of the
  discards at a time. A message is dead-lettered (its ``x-death`` recorded, at the clock's time) when the worker
  takes it, then routed through the DLX with the queue's dead-letter routing key or its own routing keys, by
  the node's publisher (:mod:`fakerabbit.broker.deadletter.publisher`: the same copy, routing and cycle test as
  at-most-once).
* It is settled (gone) once every target queue accepted it. It stays *pending* when the DLX does not exist
  (``rabbit_fifo_dlx_integration_SUITE:dlx_missing``), when nothing is bound (or only the queue it would cycle back
  to, ``rabbit_fifo_dlx_integration_SUITE:cycle``), or when a target
  refused it (``reject-publish`` overflow); the queues that accepted it are not sent it again.
* Pending messages are retried when the worker's timer fires, ``dead_letter_worker_publisher_confirm_timeout``
  (180 s) after the first message became pending and again every interval while any is pending: a message
  that was never published is retried every time, one a target refused once its last attempt is that old.
  A change of the queue's policy (``lookup_topology``) retries at once by the same rule. Declaring the
  exchange or a binding alone does not: RabbitMQ's worker is not told about it. Without a dead-letter routing
  key a retry routes by the message's keys (3.13+) or, up to 3.12, by the newest x-death entry's
  ``routing-keys`` (no BCC).
* The discards count in ``messages`` (management, not the ready count of ``declare-ok`` / ``get-ok``) and in
  the queue's ``x-max-length`` / ``x-max-length-bytes``: a full buffer makes the queue refuse publishes.
* Leaving at-least-once (a policy switches the strategy or the overflow) deletes what the buffer holds, as does
  deleting the queue. Purging does not touch it up to 4.2. From 4.3 a purge purges it too (``rabbit_fifo``
  ``dlx_purge``): the discards are gone, and what the worker took no longer counts (purge-ok counts it, then the
  limits and ``messages_dlx`` do not), though the worker, which is not told, still delivers it.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Protocol

from fakerabbit.broker import texts
from fakerabbit.broker.message import Message
from fakerabbit.clock import TimerHandle

if TYPE_CHECKING:
    from fakerabbit.broker.context import NodeContext
    from fakerabbit.broker.deadletter.xdeath import History
    from fakerabbit.broker.queue import Queue


class Publisher(Protocol):
    """The dead-letter publisher the worker publishes through
    (:class:`~fakerabbit.broker.deadletter.publisher.DeadLetters`)."""

    @property
    def ctx(self) -> NodeContext: ...

    @property
    def history(self) -> History: ...

    def make_copy(self, msg: Message, queue: str, reason: str, dlx: str, dlrk: str | None) -> Message: ...

    def is_cycle(self, msg: Message, target_queue: str, reason: str) -> bool: ...

    def route(self, queue: Queue, copy: Message) -> list[Queue] | None: ...


__all__ = ["PREFETCH", "DeadLetterWorker", "Pending"]

#: ``dead_letter_worker_consumer_prefetch``: how many discards the worker holds at once.
PREFETCH = 32


class Pending:
    """A dead letter the worker took and has not settled yet (``#pending{}``)."""

    __slots__ = ("count", "msg", "original", "published_at", "reason", "settled")

    def __init__(self, msg: Message, reason: str, original: Message, count: int = 0) -> None:
        #: the dead-lettered copy (x-death recorded) as last sent to the DLX
        self.msg = msg
        self.reason = reason
        #: the message as it died (what the queue's discards hold, and get back if the worker restarts)
        self.original = original
        #: its failed deliveries where it died (4.3's ``delivery_count`` annotation on the copy)
        self.count = count
        #: names of the target queues that accepted it
        self.settled: list[str] = []
        #: virtual ms of the last attempt that reached a queue; None while it never did
        self.published_at: int | None = None


class DeadLetterWorker:
    """The discards buffer of one at-least-once quorum queue and the worker that forwards it."""

    def __init__(self, queue: Queue, publisher: Publisher) -> None:
        self.queue = queue
        self.publisher = publisher
        self.ctx = publisher.ctx
        #: (reason, message as it died, its failed deliveries) not yet taken by the worker, oldest first
        self.discards: deque[tuple[str, Message, int]] = deque()
        #: taken and not yet settled, by the order they were taken
        self.pending: dict[int, Pending] = {}
        self._next = 0
        #: what the discards and the pending messages count (a 4.3 purge forgets the pending ones: see :meth:`purge`)
        self.count = 0
        self.bytes = 0
        #: keys of pending messages the queue forgot (4.3 purge): settled without being counted off
        self._forgotten: set[int] = set()
        self._timer: TimerHandle | None = None
        self.closed = False

    # -- intake --------------------------------------------------------------------------------------------
    def discard(self, msgs: list[Message], reason: str, counts: list[int] | None = None) -> None:
        """``rabbit_fifo_dlx:discard/4``: buffer the messages, then let the worker take what it can."""
        emit = self.ctx.events.emit
        for i, m in enumerate(msgs):
            self.discards.append((reason, m, 0 if counts is None else counts[i]))
            self.count += 1
            self.bytes += self.queue.msg_bytes(m)
            emit("dead-letter-buffered", m, queue=self.queue.name, reason=reason)
        self._checkout()
        self.queue.check_limit()  # the discards count towards the queue's length limits

    def messages(self) -> list[tuple[str, Message]]:
        """What the buffer holds, oldest first: (reason, message) - pending ones as last sent."""
        return [(p.reason, p.msg) for p in self.pending.values()] + [(r, m) for r, m, _ in self.discards]

    # -- the worker ----------------------------------------------------------------------------------------
    def _checkout(self) -> None:
        while self.discards and len(self.pending) < PREFETCH and not self.closed:
            reason, msg, count = self.discards.popleft()
            self._forward(reason, msg, count)
        self._maybe_set_timer()

    def _forward(self, reason: str, msg: Message, count: int = 0) -> None:
        """``rabbit_fifo_dlx_worker:forward/6``: record the death, route, publish."""
        q = self.queue
        dlx = q.settings.dead_letter_exchange or ""
        copy = self.publisher.make_copy(msg, q.name, reason, dlx, q.settings.dead_letter_routing_key)
        copy.delivery_count = count
        p = Pending(copy, reason, msg, count)
        key = self._next
        self._next += 1
        self.pending[key] = p
        self._publish(key, p)

    def _publish(self, key: int, p: Pending) -> None:
        """Route ``p`` through the DLX and offer it to the target queues that have not accepted it yet."""
        q = self.queue
        publisher = self.publisher
        routed = publisher.route(q, p.msg)
        emit = self.ctx.events.emit
        if routed is None:
            why = texts.dead_letter_exchange_missing(p.msg.exchange)
            emit("dead-letter-held", p.msg, queue=q.name, reason=p.reason, why=why)
            return
        if not routed and p.settled:
            # the routes changed and nothing is awaited any more: one queue accepted it (mandatory semantics)
            self._settle(key)
            return
        # not sent again to a queue that accepted it; a route back into a queue it died in is a cycle
        is_cycle = publisher.is_cycle
        unsettled = [t for t in routed if t.name not in p.settled]
        todo = [t for t in unsettled if not is_cycle(p.msg, t.name, p.reason)]
        if not todo:
            if unsettled:
                why = "dead-letter cycle"
            elif routed:  # RabbitMQ keeps it pending too (redeliver0/5 sends nothing, acks nothing)
                why = "delivered to every queue it routes to, but not to one it no longer routes to"
            else:
                why = "no queue to route to"
            emit("dead-letter-held", p.msg, queue=q.name, reason=p.reason, why=why)
            return
        p.published_at = self.ctx.clock.now_ms()
        queues = [t.name for t in todo]
        emit("dead-lettered", p.msg, queue=q.name, reason=p.reason, exchange=p.msg.exchange, queues=queues)
        refused = []
        for t in todo:
            if t.publish(p.msg, enqueuer=self):
                p.settled.append(t.name)
            else:
                refused.append(t.name)
        if refused:
            emit("dead-letter-held", p.msg, queue=q.name, reason=p.reason, why=f"refused by {', '.join(refused)}")
        else:
            self._settle(key)

    def _settle(self, key: int) -> None:
        p = self.pending.pop(key)
        if key in self._forgotten:
            self._forgotten.discard(key)
            return
        self.count -= 1
        self.bytes -= self.queue.msg_bytes(p.msg)
        self.queue.unblock_below_soft_limit()

    def purge(self) -> int:
        """4.3's ``queue.purge`` (``rabbit_fifo`` ``dlx_purge``): the discards are deleted and the queue forgets the
        messages its worker took, which the worker still delivers. Returns how many the queue held."""
        held = self.count
        emit = self.ctx.events.emit
        for reason, m, _count in self.discards:
            emit("dropped", m, queue=self.queue.name, reason=reason, why="purged")
        self.discards.clear()
        self._forgotten.update(self.pending)
        self.count = self.bytes = 0
        return held

    def redeliver(self) -> None:
        """``redeliver_and_ack``: retry what is due (the timer fired, or the queue's policy changed)."""
        if self.closed:
            return
        q = self.queue
        now = self.ctx.clock.now_ms()
        dlx = q.settings.dead_letter_exchange or ""
        dlrk = q.settings.dead_letter_routing_key
        if dlx in q.vhost.exchanges:
            timeout = self.ctx.dead_letter_confirm_timeout_ms
            for key, p in list(self.pending.items()):
                if p.published_at is not None and p.published_at + timeout > now:
                    continue
                keys = (dlrk,) if dlrk is not None else self.publisher.history.retry_keys(p.msg, p.original)
                if p.msg.exchange != dlx or p.msg.routing_keys != keys:
                    p.msg = _readdressed(p.msg, dlx, keys)
                self._publish(key, p)
        self._checkout()

    def restart(self) -> None:
        """The node restarted: a new worker starts. What the old one had taken goes back to the discards, in
        order, as it died (the copies are lost), and is taken again at once: dead-lettered anew, at the
        current time, through the current topology (``rabbit_fifo_dlx`` checkout by a new consumer)."""
        if self.closed:
            return
        forgotten = self._forgotten
        back = [(p.reason, p.original, p.count) for k, p in self.pending.items() if k not in forgotten]
        self.pending.clear()
        forgotten.clear()
        self.discards.extendleft(reversed(back))
        if self._timer is not None:
            self.ctx.clock.cancel(self._timer)
            self._timer = None
        self._checkout()

    # -- timer ---------------------------------------------------------------------------------------------
    def _maybe_set_timer(self) -> None:
        clock = self.ctx.clock
        if not self.pending or self.closed:
            if self._timer is not None:
                clock.cancel(self._timer)
                self._timer = None
            return
        if self._timer is None:
            self._timer = clock.call_at(clock.now_ms() + self.ctx.dead_letter_confirm_timeout_ms, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        if not self.queue.deleted:
            self.redeliver()

    def close(self, why: str) -> None:
        """The queue left at-least-once or was deleted: what the buffer holds is deleted."""
        if self.closed:
            return
        self.closed = True
        emit = self.ctx.events.emit
        for reason, m in self.messages():
            emit("dropped", m, queue=self.queue.name, reason=reason, why=why)
        self.pending.clear()
        self.discards.clear()
        self._forgotten.clear()
        self.count = self.bytes = 0
        self._maybe_set_timer()


def _readdressed(msg: Message, exchange: str, keys: tuple[str, ...]) -> Message:
    """The same dead letter sent to another exchange or with other routing keys (the death is not re-recorded)."""
    new = Message(exchange, keys, msg.props, msg.body, bcc=msg.bcc, ttl_ms=msg.ttl_ms, msg_id=msg.id)
    new.deaths = msg.deaths
    new.first_death = msg.first_death
    new.delivery_count = msg.delivery_count
    return new
