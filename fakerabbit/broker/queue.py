"""Queues: ready messages, consumers, dispatch, TTL, length limits, expiry, requeue and delivery limits."""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Protocol

from fakerabbit.broker.events import ACKED, EXPIRED
from fakerabbit.broker.fields import Table
from fakerabbit.broker.message import Message
from fakerabbit.broker.policy import Policy, QueueSettings
from fakerabbit.broker.quorum_delivery import count_return
from fakerabbit.clock import TimerHandle

if TYPE_CHECKING:
    from fakerabbit.broker.context import NodeContext
    from fakerabbit.broker.exchange import Exchange


class QueueHost(Protocol):
    """What a queue needs from the vhost that holds it (:class:`~fakerabbit.broker.vhost.Vhost`)."""

    @property
    def name(self) -> str: ...

    @property
    def broker(self) -> NodeContext: ...

    @property
    def exchanges(self) -> Mapping[str, Exchange]:
        """The vhost's exchanges (the dead-letter publisher routes through them)."""
        ...

    def route(self, x: Exchange, msg: Message) -> list[Queue]: ...

    def delete_queue(self, q: Queue) -> int:
        """Remove ``q`` (it expired, or lost its last consumer with auto-delete)."""
        ...

    @property
    def dead_letters(self) -> DeadLetterSink:
        """Where the queue's dead messages go (the node's dead-letter publisher)."""
        ...


class DeadLetterSink(Protocol):
    """The dead-letter publisher (:class:`~fakerabbit.broker.deadletter.publisher.DeadLetters`)."""

    def dead_letter(self, queue: Queue, msgs: list[Message], reason: str, counts: list[int] | None = None) -> None:
        """Take messages that died in ``queue``."""
        ...

    def worker(self, queue: Queue) -> DeadLetterBuffer:
        """A new at-least-once dead-letter worker (discards buffer) for ``queue``."""
        ...


class DeadLetterBuffer(Protocol):
    """An at-least-once quorum queue's discards buffer and its worker
    (:class:`~fakerabbit.broker.deadletter.at_least_once.DeadLetterWorker`)."""

    count: int
    bytes: int

    def discard(self, msgs: list[Message], reason: str, counts: list[int] | None = None) -> None: ...

    def messages(self) -> list[tuple[str, Message]]: ...

    def redeliver(self) -> None: ...

    def restart(self) -> None: ...

    def purge(self) -> int: ...

    def close(self, why: str) -> None: ...


class ConsumerChannel(Protocol):
    """The channel a consumer delivers to (:class:`~fakerabbit.broker.session.Session`)."""

    @property
    def flow_active(self) -> bool: ...

    def has_global_capacity(self) -> bool: ...

    def deliver(self, c: Consumer, q: Queue, e: Entry) -> None: ...

    def server_cancel(self, c: Consumer) -> None: ...


_seq = itertools.count(1)


class Entry:
    """A message's place in one queue."""

    __slots__ = ("acquired_count", "delivery_count", "expires_at", "msg", "priority", "redelivered", "seq")

    def __init__(self, msg: Message, expires_at: int | None, priority: int) -> None:
        self.msg = msg
        self.seq = next(_seq)
        self.expires_at = expires_at
        self.redelivered = False
        self.delivery_count = 0
        self.acquired_count = 0
        self.priority = priority


class Consumer:
    """A ``basic.consume`` subscription."""

    __slots__ = (
        "arguments",
        "exclusive",
        "no_ack",
        "prefetch",
        "priority",
        "queue",
        "session",
        "suspended",
        "tag",
        "unacked",
    )

    def __init__(
        self,
        tag: str,
        queue: Queue,
        session: ConsumerChannel,
        *,
        no_ack: bool,
        exclusive: bool,
        priority: int,
        prefetch: int,
        arguments: Table,
    ) -> None:
        self.tag = tag
        self.queue = queue
        self.session = session
        self.no_ack = no_ack
        self.exclusive = exclusive
        self.priority = priority
        self.prefetch = prefetch
        self.unacked = 0
        self.arguments = arguments
        #: 4.3 quorum: timed out (``consumer_timeout``), it gets nothing until the client settles what timed out
        self.suspended = False

    def can_accept(self) -> bool:
        if self.suspended:
            return False
        if self.no_ack:
            return self.session.flow_active
        return (
            (self.prefetch == 0 or self.unacked < self.prefetch)
            and self.session.flow_active
            and self.session.has_global_capacity()
        )


def _body_bytes(msg: Message) -> int:
    return len(msg.body)


def _body_and_property_bytes(msg: Message) -> int:
    return len(msg.body) + len(msg.props.raw)


class Queue:
    """One queue in a vhost. All methods run on the broker's single thread."""

    #: a stream (:class:`~fakerabbit.broker.stream.StreamQueue`)
    is_stream = False

    def __init__(
        self,
        vhost: QueueHost,
        name: str,
        *,
        queue_type: str,
        durable: bool,
        exclusive_owner: int | None,
        auto_delete: bool,
        arguments: Table,
        settings: QueueSettings,
    ) -> None:
        self.vhost = vhost
        #: the node: clock, events, profile, settings
        self.ctx = vhost.broker
        self.name = name
        self.queue_type = queue_type
        #: ``x-queue-type`` is quorum (fixed for the queue's life).
        self.is_quorum = queue_type == "quorum"
        #: what a message counts in the byte limits and statistics: its body; a 4.3 quorum queue adds the
        #: property block (``mc:size/1``'s metadata size; checked live on 4.3.6, 4.0.5 counts the body only)
        self.msg_bytes = (
            _body_and_property_bytes
            if self.is_quorum and self.ctx.profile.quorum_bytes_include_properties
            else _body_bytes
        )
        self.durable = durable
        self.exclusive_owner = exclusive_owner
        self.auto_delete = auto_delete
        self.arguments = arguments
        self.settings = settings
        self.policy_name: str | None = None
        self.operator_policy_name: str | None = None
        #: the user and operator policy in force (a change of either is a ``policy_changed``)
        self.policies: tuple[Policy | None, Policy | None] = (None, None)
        self.consumers: list[Consumer] = []
        #: quorum: basic.get deliveries (manual ack) not yet settled; rabbit_fifo keeps a consumer for each
        self.unsettled_gets = 0
        #: quorum: cancelled consumers that still hold unsettled deliveries (rabbit_fifo keeps their records)
        self.lingering: set[Consumer] = set()
        self._rr = 0
        self.unacked = 0
        self.deleted = False
        self._levels: list[deque[Entry]] = [deque()]
        self._qq_counter = 0
        self._qq_prio = self._qq_strict = False
        self._ttl_seen = False  # a message with an expiry was ever enqueued (4.3 quorum: skip the level scans)
        self._set_levels()
        self.ready_count = 0
        self.ready_bytes = 0
        self._ttl_timer: TimerHandle | None = None
        self._ttl_timer_at: int | None = None
        self._expiry_timer: TimerHandle | None = None
        #: quorum ``reject-publish``: the enqueuers registered with this queue (rabbit_fifo's ``enqueuers`` map:
        #: channels, the dead-letter worker, the delayed exchange) and those of them told ``reject_publish``
        self._qq_enqueuers: set[object] = set()
        self._qq_blocked: set[object] = set()
        #: where messages that die here go
        self.dead_letters = vhost.dead_letters
        #: at-least-once dead-lettering (quorum): the discards buffer and its worker
        self.dlx_worker: DeadLetterBuffer | None = None
        if settings.dead_letter_strategy == "at-least-once":
            self.dlx_worker = self.dead_letters.worker(self)

    # -- structure ------------------------------------------------------------------------------------------
    def _set_levels(self) -> None:
        mp = self.settings.max_priority if not self.is_quorum else None
        n = (mp + 1) if mp is not None else 1
        # 4.0 - 4.2 quorum: levels [normal, high, returns] served by _qq_next; 4.3 quorum: priorities 0 - 31, then
        # the returns on top (strictly highest level first, like a classic priority queue)
        qq_priorities = self.ctx.profile.quorum_priorities if self.is_quorum else "none"
        self._qq_prio = qq_priorities == "two"
        self._qq_strict = qq_priorities == "strict"
        if self._qq_prio:
            n = 3
        elif self._qq_strict:
            n = 33
        if n != len(self._levels):
            old = list(self._iter_ready())
            self._levels = [deque() for _ in range(n)]
            for e in old:
                self._levels[self._level(e)].append(e)

    def _entry_priority(self, msg: Message) -> int:
        """The priority level a new message is queued at."""
        if len(self._levels) == 1:
            return 0
        if not self.is_quorum:
            return msg.priority
        p = msg.props.priority
        return 4 if p is None else max(0, min(p, 31))  # rabbit_fifo:msg_priority/1

    def _level(self, e: Entry) -> int:
        if self._qq_prio:
            return 1 if e.priority > 4 else 0
        if self._qq_strict:
            return min(e.priority, 31)  # rabbit_fifo:msg_priority/1 (set by _entry_priority; requeues: 4)
        return min(e.priority, len(self._levels) - 1)

    def _qq_next(self) -> deque[Entry] | None:
        """4.0+ quorum: the level the next message comes from (rabbit_fifo get_next_msg / rabbit_fifo_q:next)."""
        no, hi, returns = self._levels
        if returns:
            return returns
        if hi and no and self._qq_counter == 2:
            return hi if hi[0].seq < no[0].seq else no
        return hi or no or None

    def _iter_ready(self) -> Iterator[Entry]:
        for level in reversed(self._levels):
            yield from level

    def ready_entries(self) -> list[Entry]:
        """Ready messages in delivery order."""
        return list(self._iter_ready())

    def _head(self) -> Entry | None:
        if self._qq_prio:
            nxt = self._qq_next()
            return nxt[0] if nxt else None
        for level in reversed(self._levels):
            if level:
                return level[0]
        return None

    def _pop_head(self) -> Entry:
        if self._qq_prio:
            return self._qq_pop()
        for level in reversed(self._levels):
            if level:
                e = level.popleft()
                self.ready_count -= 1
                self.ready_bytes -= self.msg_bytes(e.msg)
                return e
        raise IndexError("queue is empty")

    def _qq_pop(self) -> Entry:
        """4.0+ quorum: take the next message (rabbit_fifo take_next_msg: returns first, else rabbit_fifo_q:out,
        which counts its dequeues: every third may go to an older normal-priority message)."""
        level = self._qq_next()
        if level is None:
            raise IndexError("queue is empty")
        if level is not self._levels[2]:
            self._qq_counter = 0 if self._qq_counter == 2 else self._qq_counter + 1
        e = level.popleft()
        self.ready_count -= 1
        self.ready_bytes -= self.msg_bytes(e.msg)
        return e

    def _push_tail(self, e: Entry) -> None:
        self._levels[self._level(e)].append(e)
        self.ready_count += 1
        self.ready_bytes += self.msg_bytes(e.msg)

    def _push_front(self, e: Entry) -> None:
        # Quorum queues keep returned messages in a FIFO "returns" queue served before the others
        # (rabbit_fifo lqueue:in): a return goes after earlier returns still waiting at the head.
        level = self._levels[-1 if self._qq_prio or self._qq_strict else self._level(e)]  # 4.0+ quorum: returns
        i = 0
        while i < len(level) and level[i].redelivered:
            i += 1
        level.insert(i, e)
        self.ready_count += 1
        self.ready_bytes += self.msg_bytes(e.msg)

    def _insert_by_seq(self, e: Entry) -> None:
        level = self._levels[self._level(e)]
        # Requeued messages usually belong near the head: scan from the left.
        i = 0
        for i, other in enumerate(level):  # noqa: B007
            if other.seq > e.seq:
                break
        else:
            i = len(level)
        level.insert(i, e)
        self.ready_count += 1
        self.ready_bytes += self.msg_bytes(e.msg)

    # -- settings -------------------------------------------------------------------------------------------
    def apply_settings(self, settings: QueueSettings) -> None:
        """New effective settings (a policy changed): applied at once, as RabbitMQ does."""
        old = self.settings
        self.settings = settings
        if settings.dead_letter_strategy != old.dead_letter_strategy:
            # rabbit_fifo_dlx:update_config/4: leaving at-least-once deletes the discards
            if self.dlx_worker is not None:
                self.dlx_worker.close("dead-letter strategy changed")
            self.dlx_worker = (
                self.dead_letters.worker(self) if settings.dead_letter_strategy == "at-least-once" else None
            )
        self._set_levels()
        self.touch()
        self._drop_over_limit()
        self._expire_head()
        self.dispatch()

    def policy_changed(self) -> None:
        """Its user or operator policy changed (``rabbit_quorum_queue:policy_changed``): an at-least-once worker
        looks the topology up again (``lookup_topology``) and retries what is due."""
        if self.dlx_worker is not None:
            self.dlx_worker.redeliver()

    # -- publishing -----------------------------------------------------------------------------------------
    def _would_overflow(self, size: int) -> bool:
        s = self.settings
        return (s.max_length is not None and self.ready_count + 1 > s.max_length) or (
            s.max_length_bytes is not None and self.ready_bytes + size > s.max_length_bytes
        )

    def held_dead_letters(self) -> tuple[int, int]:
        """(count, body bytes) of the dead letters an at-least-once quorum queue holds undelivered."""
        w = self.dlx_worker
        return (0, 0) if w is None else (w.count, w.bytes)

    def _limit_usage(self) -> tuple[int, int]:
        """What the length limits count: ready messages and, as ``rabbit_fifo:is_over_limit``, held dead letters."""
        w = self.dlx_worker
        if w is None:
            return self.ready_count, self.ready_bytes
        return self.ready_count + w.count, self.ready_bytes + w.bytes

    def _over_limit(self) -> bool:
        s = self.settings
        count, size = self._limit_usage()
        return (s.max_length is not None and count > s.max_length) or (
            s.max_length_bytes is not None and size > s.max_length_bytes
        )

    def check_limit(self) -> None:
        """A quorum queue over its limit with ``reject-publish`` blocks every enqueuer registered with it, until
        it is below 80 % of the limit (``rabbit_fifo:evaluate_limit``)."""
        if self.is_quorum and self._overflow_mode() == "reject-publish" and self._over_limit():
            self._qq_blocked.update(self._qq_enqueuers)

    def _overflow_mode(self) -> str:
        mode = self.settings.overflow
        if self.is_quorum and mode == "reject-publish-dlx":
            return "drop-head"
        return mode

    def publish(self, msg: Message, untracked: bool = False, enqueuer: object = None) -> bool:
        """Enqueue a routed message. Returns False when the queue rejects it (overflow reject-publish).

        ``enqueuer``: who enqueues (a channel's session, the dead-letter worker, ...). A quorum queue's
        ``reject-publish`` blocks enqueuers, not the queue (``rabbit_fifo``): all those registered when it goes
        over its limit, and one that registers (its first publish here) only if the queue is over the limit then.
        ``untracked``: an enqueue without an enqueuer (at-most-once dead-lettering), which it never refuses."""
        s = self.settings
        mode = s.overflow
        if mode != "drop-head" and (mode := self._overflow_mode()) != "drop-head":
            if self.is_quorum:
                if not untracked and self._qq_refuses(enqueuer):
                    self.ctx.events.emit("rejected-publish", msg, queue=self.name)
                    return False
            elif self._would_overflow(self.msg_bytes(msg)):
                self.ctx.events.emit("rejected-publish", msg, queue=self.name)
                if mode == "reject-publish-dlx":
                    counts = [msg.delivery_count] if self.ctx.profile.dead_letter_delivery_count else None
                    self.dead_letters.dead_letter(self, [msg], "maxlen", counts)
                return False
        ttl = s.message_ttl
        if msg.ttl_ms is not None and (ttl is None or msg.ttl_ms < ttl):
            ttl = msg.ttl_ms
        if ttl is not None:
            self._ttl_seen = True
        levels = self._levels
        entry = Entry(
            msg,
            None if ttl is None else self.ctx.clock.now_ms() + ttl,
            0 if len(levels) == 1 else self._entry_priority(msg),
        )
        if msg.delivery_count:
            # 4.3: a dead letter's failed deliveries count on here, and it goes out as redelivered - except from
            # a classic queue to a consumer waiting for it (attempt_delivery sends the publish's own flag)
            entry.delivery_count = msg.delivery_count
            entry.redelivered = self.is_quorum
        if self.is_quorum:
            self._expire_head()
        # (a classic queue checks no expiry before a publish: rabbit_amqqueue_process:deliver_or_enqueue)
        if self.ready_count == 0 and self.consumers and self._deliver_now(entry):
            return True
        if msg.delivery_count:
            entry.redelivered = True  # not taken by a waiting consumer: fetched later (set_deliver_flag)
        if ttl == 0 and s.message_ttl == 0 and s.dead_letter_exchange is None:
            # rabbit_amqqueue_process:deliver_or_enqueue's shortcut: queue TTL 0 and no DLX -> discard.
            self.ctx.events.emit("expired", msg, queue=self.name)
            self.dead_letters.dead_letter(self, [msg], "expired")
            return True
        levels[self._level(entry) if len(levels) > 1 else 0].append(entry)
        self.ready_count += 1
        self.ready_bytes += self.msg_bytes(msg)
        if self.is_quorum:
            self.check_limit()
        dropped = (s.max_length is not None or s.max_length_bytes is not None) and self._drop_over_limit()
        if self.is_quorum:
            if self.ready_count == 1 or dropped or len(levels) > 1:
                self._expire_head()
                self._schedule_ttl()
        elif (dropped or self.ready_count == 1) and not (
            dropped and self.ready_count == 1 and entry.expires_at is None
        ):
            # deliver_or_enqueue: expiry is checked (and the TTL timer armed for the head) only when the queue had
            # been empty or something was dropped - not when the message joins others, even as the new head of a
            # priority queue: an expired message stays counted (and is even what the next basic.get returns)
            self._expire_head()
        return True

    def _qq_refuses(self, enqueuer: object) -> bool:
        """Whether a quorum ``reject-publish`` queue refuses ``enqueuer``'s publish (``rabbit_fifo_client``)."""
        if enqueuer not in self._qq_enqueuers:
            # register_enqueuer: its reply is reject_publish if the queue is over the limit at that moment
            self._qq_enqueuers.add(enqueuer)
            if self._over_limit():
                self._qq_blocked.add(enqueuer)
        blocked = self._qq_blocked
        if blocked and self._below_soft_limit():
            blocked.clear()  # below the soft limit: every enqueuer is told `go`
        return enqueuer in blocked

    def unblock_below_soft_limit(self) -> None:
        """The end of a command that may have shrunk the queue (``rabbit_fifo:evaluate_limit``): once below 80 %
        of its limit, every blocked enqueuer is told ``go``, even if returns take the queue back up later."""
        if self._qq_blocked and self._below_soft_limit():
            self._qq_blocked.clear()

    def forget_enqueuer(self, enqueuer: object) -> None:
        """``enqueuer`` is gone (a closed channel): a later one registers afresh."""
        self._qq_enqueuers.discard(enqueuer)
        self._qq_blocked.discard(enqueuer)

    def _below_soft_limit(self) -> bool:
        s = self.settings
        count, size = self._limit_usage()
        ok_len = s.max_length is None or count <= 0.8 * s.max_length
        ok_bytes = s.max_length_bytes is None or size <= 0.8 * s.max_length_bytes
        return ok_len and ok_bytes

    def _drop_over_limit(self) -> bool:
        """drop-head: remove (and dead-letter, reason ``maxlen``) head messages while over a limit."""
        if self._overflow_mode() != "drop-head":
            return False
        gone: list[Entry] = []
        while self.ready_count and self._over_limit():
            gone.append(self._pop_head())
        dropped = [e.msg for e in gone]
        if dropped:
            for m in dropped:
                self.ctx.events.emit("dropped-maxlen", m, queue=self.name)
            self.dead_letters.dead_letter(self, dropped, "maxlen", self._counts(gone))
        return bool(dropped)

    # -- TTL ------------------------------------------------------------------------------------------------
    def _expire_head(self) -> None:
        """Drop or dead-letter expired messages at the head (RabbitMQ only expires at the head)."""
        levels = self._levels
        if len(levels) == 1:
            level = levels[0]
            if not level or level[0].expires_at is None:
                return
            # One level (no x-max-priority): pop the due run off the deque directly.
            gone = self._expire_level_heads()
        elif self._qq_strict:
            if not self._ttl_seen:
                return
            gone = self._expire_level_heads()
        else:
            head = self._head()
            if head is None or head.expires_at is None:
                return
            now = self.ctx.clock.now_ms()
            gone = []
            while head is not None and head.expires_at is not None and head.expires_at <= now:
                gone.append(self._pop_head())
                head = self._head()
        if gone:
            expired = [e.msg for e in gone]
            self.ctx.events.record_each(EXPIRED, expired, self.name)
            self.dead_letters.dead_letter(self, expired, "expired", self._counts(gone))
        self._schedule_ttl()

    def _expire_level_heads(self) -> list[Entry]:
        """The expired run at the head of every level, highest first: a queue of one level, and 4.3 quorum queues
        (rabbit_fifo expire_batch: the returns and every priority level; RabbitMQ checks when the next message is
        due or its timer, the earliest head, fires, which on the virtual clock is the same moment)."""
        now = self.ctx.clock.now_ms()
        expired: list[Entry] = []
        size = 0
        for level in reversed(self._levels):
            while level:
                at = level[0].expires_at
                if at is None or at > now:
                    break
                e = level.popleft()
                expired.append(e)
                size += self.msg_bytes(e.msg)
        self.ready_count -= len(expired)
        self.ready_bytes -= size
        return expired

    def _schedule_ttl(self) -> None:
        """Keep one timer, at the head's expiry (if it has one)."""
        levels = self._levels
        if len(levels) == 1:
            level = levels[0]
            at = level[0].expires_at if level else None
        elif self._qq_strict:
            # 4.3 quorum (rabbit_fifo timer_effect): the earliest expiry among the head of every level
            heads = [lv[0].expires_at for lv in levels if lv and lv[0].expires_at is not None] if self._ttl_seen else []
            at = min(heads) if heads else None
        else:
            head = self._head()
            at = head.expires_at if head is not None else None
        if at == self._ttl_timer_at:
            return
        clock = self.ctx.clock
        if self._ttl_timer is not None:
            clock.cancel(self._ttl_timer)
            self._ttl_timer = None
        self._ttl_timer_at = at
        if at is not None:
            self._ttl_timer = clock.call_at(at, self._on_ttl_timer)

    def _on_ttl_timer(self) -> None:
        self._ttl_timer = None
        self._ttl_timer_at = None
        if self.deleted:
            return
        self._expire_head()
        self.dispatch()
        self.unblock_below_soft_limit()

    # -- queue expiry (x-expires) ---------------------------------------------------------------------------
    def touch(self) -> None:
        """Restart the x-expires countdown (declare, basic.get, last consumer gone)."""
        clock = self.ctx.clock
        if self._expiry_timer is not None:
            clock.cancel(self._expiry_timer)
            self._expiry_timer = None
        exp = self.settings.expires
        if exp is None or self.consumers or self.deleted:
            return
        self._expiry_timer = clock.call_at(clock.now_ms() + exp, self._on_expiry_timer)

    def _on_expiry_timer(self) -> None:
        self._expiry_timer = None
        if not self.deleted and not self.consumers:
            self.ctx.events.emit("queue-expired", None, queue=self.name)
            self.vhost.delete_queue(self)

    # -- consumers and dispatch -----------------------------------------------------------------------------
    def add_consumer(self, c: Consumer) -> None:
        self.consumers.append(c)
        if self._expiry_timer is not None:
            self.ctx.clock.cancel(self._expiry_timer)
            self._expiry_timer = None

    def remove_consumer(self, c: Consumer) -> None:
        if c in self.consumers:
            self.consumers.remove(c)
            if not self.consumers:
                self.touch()
                if self.auto_delete and not self.deleted:
                    self.vhost.delete_queue(self)
                    return
            self.dispatch()

    def _active_consumers(self) -> list[Consumer]:
        if self.settings.single_active_consumer and self.consumers:
            if self.is_quorum and self.ctx.profile.quorum_sac_priority:
                return self._quorum_single_active()
            return self.consumers[:1]
        return self.consumers

    def _quorum_single_active(self) -> list[Consumer]:
        """4.x ``rabbit_fifo:activate_next_consumer``: the first consumer is the active one; a waiting one of
        higher priority takes over when the active one has nothing unacknowledged, and until then the active one
        is quiescing (gets nothing)."""
        consumers = self.consumers
        active = consumers[0]
        best: Consumer | None = None
        for c in consumers[1:]:
            if best is None or c.priority > best.priority:
                best = c
        if best is None or best.priority <= active.priority:
            return [active]
        if active.unacked:
            return []
        consumers.remove(best)
        consumers.insert(0, best)
        return [best]

    def _next_consumer(self) -> Consumer | None:
        consumers = self._active_consumers()
        n = len(consumers)
        if n == 1:  # (the loop below, for one consumer)
            c = consumers[0]
            if c.can_accept():
                self._rr = 1
                return c
            return None
        best: Consumer | None = None
        best_i = 0
        for i in range(n):
            idx = (self._rr + i) % n
            c = consumers[idx]
            if c.can_accept() and (best is None or c.priority > best.priority):
                best, best_i = c, idx
        if best is not None:
            self._rr = best_i + 1
        return best

    def _deliver_now(self, entry: Entry) -> bool:
        if not self.consumers:
            return False
        c = self._next_consumer()
        if c is None:
            return False
        c.session.deliver(c, self, entry)
        return True

    def dispatch(self) -> None:
        """Hand ready messages to consumers with capacity, round-robin, highest priority first."""
        if not self.consumers or self.deleted:
            return
        quorum = self.is_quorum
        while self.ready_count:
            if quorum:
                self._expire_head()
                if not self.ready_count:
                    break
            c = self._next_consumer()
            if c is None:
                break
            e = self._pop_head()
            if not quorum:
                # rabbit_amqqueue_process:fetch/2 takes the head as it is, then drops what became expired
                self._expire_head()
            c.session.deliver(c, self, e)
        self._schedule_ttl()
        if self._qq_blocked:
            self.unblock_below_soft_limit()

    def fetch(self, settled: bool = False) -> Entry | None:
        """``basic.get``: the head message. A quorum queue never hands out an expired one; a classic queue
        takes its head as it is (``fetch/2``: "we will send expired messages at times"), which is expired only
        where RabbitMQ checked no expiry (a TTL-0 message that became the head of a priority queue)."""
        if self.is_quorum:
            self._expire_head()
        if not self.ready_count:
            return None
        e = self._pop_head()
        if settled or not self.is_quorum:
            # As rabbit_amqqueue_process:fetch/2: what the fetch exposed is expired before get-ok's message_count;
            # in rabbit_fifo a settled (no-ack) dequeue settles at once, and the settle's checkout expires it.
            self._expire_head()
        # rabbit_fifo expires at the start of a command and on its timer: an unsettled get's get-ok still counts an
        # expired message the dequeue exposed, and the timer (due now) drops it before the client's next command.
        self._schedule_ttl()
        if self._qq_blocked:
            self.unblock_below_soft_limit()
        return e

    # -- settlement -----------------------------------------------------------------------------------------
    def on_delivered(self, e: Entry, acked: bool) -> None:
        """Bookkeeping when an entry leaves the ready list for a client."""
        if not acked:
            self.unacked += 1

    def ack(self, e: Entry) -> None:
        self.unacked -= 1
        self.ctx.events.record(ACKED, e.msg.id, self.name)

    def reject(self, entries: list[Entry], *, requeue: bool, explicit_nack: bool = False) -> None:
        """Settle unacked entries negatively: requeue them or dead-letter them (reason ``rejected``)."""
        self.unacked -= len(entries)
        if self.deleted:
            return
        for e in entries:
            self.ctx.events.emit("rejected", e.msg, queue=self.name, requeue=requeue)
        if requeue:
            self.requeue(entries, failed=not explicit_nack)
        else:
            # 4.3: basic.reject is a failed delivery (discard), basic.nack is not (modify, undeliverable here)
            counts = self._counts(entries, 0 if explicit_nack else 1)
            self.dead_letters.dead_letter(self, [e.msg for e in entries], "rejected", counts)

    def release(self, entries: list[Entry], *, failed: bool = True) -> None:
        """Unacked entries come back because their channel or connection closed (a failed delivery) or the
        client asked for them again with ``basic.recover`` (not one: 4.3 counts neither its delivery limit nor
        its ``delivery_count`` for it, live 4.3.6)."""
        self.unacked -= len(entries)
        if not self.deleted:
            self.requeue(entries, failed=failed)

    def requeue(self, entries: Iterable[Entry], *, failed: bool) -> None:
        profile = self.ctx.profile
        limit = self.settings.delivery_limit if self.is_quorum else None
        back: list[Entry] = []
        over: list[Entry] = []
        for e in entries:
            e.redelivered = True
            if not self.is_quorum and failed and profile.dead_letter_delivery_count:
                e.delivery_count += 1  # rabbit_variable_queue:maybe_inc_delivery_count
            if self.is_quorum:
                count = count_return(e, profile.delivery_limit_counter, failed=failed)
                if limit is not None and count > limit:
                    over.append(e)
                    continue
            back.append(e)
        for e in back:
            if self.is_quorum:
                if limit is not None:
                    self._push_front(e)
                else:
                    if len(self._levels) > 1:
                        # rabbit_fifo #requeue{} (no delivery limit): enqueued anew, at the default priority
                        e.priority = 4
                        e.seq = next(_seq)
                    self._push_tail(e)
            else:
                self._insert_by_seq(e)
        if over:
            for e in over:
                self.ctx.events.emit("delivery-limit", e.msg, queue=self.name)
            self.dead_letters.dead_letter(self, [e.msg for e in over], "delivery_limit", self._counts(over))
        self._drop_over_limit()
        self._expire_head()
        self.dispatch()

    def _counts(self, entries: list[Entry], failed_now: int = 0) -> list[int] | None:
        """The failed deliveries dead-lettered copies carry (4.3's ``delivery_count`` annotation), or None."""
        if not self.ctx.profile.dead_letter_delivery_count:
            return None
        return [e.delivery_count + failed_now for e in entries]

    def purge(self) -> int:
        """Remove the ready messages; the count purge-ok reports (4.3: held dead letters too, not removed)."""
        n = self.ready_count
        if self.ctx.profile.purge_takes_held_dead_letters and self.dlx_worker is not None:
            n += self.dlx_worker.purge()
        for level in self._levels:
            level.clear()
        self.ready_count = 0
        self.ready_bytes = 0
        self._schedule_ttl()
        self.unblock_below_soft_limit()
        return n

    def on_deleted(self) -> None:
        self.deleted = True
        clock = self.ctx.clock
        for t in (self._ttl_timer, self._expiry_timer):
            if t is not None:
                clock.cancel(t)
        self._ttl_timer = self._expiry_timer = None
        if self.dlx_worker is not None:
            self.dlx_worker.close("queue deleted")
        for level in self._levels:
            level.clear()
        self.ready_count = 0
        self.ready_bytes = 0

    def stat(self) -> tuple[int, int]:
        """``queue.declare-ok``'s message and consumer counts (``rabbit_amqqueue:stat/1``)."""
        return self.ready_count, self.consumer_count()

    def start_consumer(self, c: Consumer) -> None:
        """A consumer's consume-ok went out: deliver to it."""
        self.dispatch()

    def consumer_count(self) -> int:
        """``queue.declare-ok``'s consumer_count. Quorum queues report rabbit_fifo's consumers map: with single
        active consumer only the active one (the others wait apart), and every unsettled manual-ack
        ``basic.get`` is a consumer of its own (its delivery tag is the consumer tag) until it is settled."""
        n = len(self.consumers)
        if self.is_quorum:
            if n and self.settings.single_active_consumer:
                n = 1
            n += self.unsettled_gets + len(self.lingering)
        return n

    def restart(self, survives: Callable[[Entry], bool], why: str) -> None:
        """The node restarted (``restart.py``): keep the ready messages ``survives`` accepts, drop the rest (each an
        event ``dropped`` with ``why``), forget consumers and unacknowledged deliveries, restart the timers."""
        events = self.ctx.events
        count = 0
        size = 0
        for level in self._levels:
            kept: deque[Entry] = deque()
            for e in level:
                if survives(e):
                    kept.append(e)
                    count += 1
                    size += self.msg_bytes(e.msg)
                else:
                    events.emit("dropped", e.msg, queue=self.name, reason="restart", why=why)
            level.clear()
            level.extend(kept)
        self.ready_count = count
        self.ready_bytes = size
        self.unacked = 0
        self.consumers.clear()
        self._rr = 0
        self._schedule_ttl()
        self.touch()
