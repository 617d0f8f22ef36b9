"""The dead-letter publisher (``rabbit_dead_letter:publish/5``): a message that died in a queue is copied, its
death recorded (:mod:`fakerabbit.broker.deadletter.xdeath`), routed through the queue's dead-letter exchange and
published to every target queue it has not died in before (cycles, ``rabbit_dead_letter:detect_cycles/3``); or it
is dropped.

At-most-once (every queue type's default) publishes and forgets. At-least-once (a quorum queue's
``x-dead-letter-strategy``) hands the messages to the queue's worker, which publishes them through this same
publisher until every target accepted them (:mod:`fakerabbit.broker.deadletter.at_least_once`).

Dead-lettering is never recursive: a copy that dies again in its target queue (TTL 0, overflow, a loop of such
queues) is queued here and published by the outermost call, as RabbitMQ publishes dead letters asynchronously;
however long the chain, the Python stack does not grow.

Nor does an endless loop hold the node: RabbitMQ 3.10-3.12 miss a cycle when their x-death order hides it (see
:mod:`fakerabbit.broker.deadletter.xdeath`), and the copy circulates for ever, one more in the loop's exits each
lap, while the broker serves its clients. A turn publishes every death of a cascade, but once
:data:`REPEATS_PER_TURN` of them were deaths in a queue the message had died in before for the same reason (laps
of a loop), or :data:`HOPS_PER_TURN` in all, the rest waits for the next turn of the server's loop
(:meth:`NodeContext.run_soon`), and clients are served in between, as there.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

from fakerabbit.broker import texts
from fakerabbit.broker.deadletter.at_least_once import DeadLetterWorker
from fakerabbit.broker.deadletter.xdeath import history_for
from fakerabbit.broker.events import DEAD_LETTERED
from fakerabbit.broker.message import Message

if TYPE_CHECKING:
    from fakerabbit.broker.context import NodeContext
    from fakerabbit.broker.queue import Queue

__all__ = ["HOPS_PER_TURN", "REPEATS_PER_TURN", "DeadLetters"]

#: How many deaths in a queue the message had died in before, for the same reason, one turn publishes before the
#: rest waits for the next turn of the server's loop. A cascade without a loop has none, or one per timer that
#: fired (a retry through a TTL queue): only a loop's laps reach it.
REPEATS_PER_TURN = 20
#: How many queued deaths (a queue's batch of deaths is one) one turn publishes in all.
HOPS_PER_TURN = 10_000


class DeadLetters:
    """The dead-letter publisher of one node (reads the node's profile, clock, events and settings)."""

    def __init__(self, ctx: NodeContext) -> None:
        self.ctx = ctx
        #: how this node's RabbitMQ records deaths and finds cycles
        self.history = history_for(ctx.profile)
        #: dead letters waiting to be published: (queue they died in, messages, reason, delivery counts)
        self._work: deque[tuple[Queue, list[Message], str, list[int] | None]] = deque()
        self._publishing = False
        self._resume_pending = False
        self._generation = 0

    # -- what the queues call ---------------------------------------------------------------------------------
    def dead_letter(self, queue: Queue, msgs: list[Message], reason: str, counts: list[int] | None = None) -> None:
        """Dead-letter messages that died in ``queue``: route copies through its DLX, or drop them.

        Queued, and published now unless an outer call (or :meth:`hold`) publishes them when it finishes.
        ``counts`` are the failed deliveries of each message where it died (4.3's ``delivery_count``
        annotation).
        """
        self._work.append((queue, msgs, reason, counts))
        if self._publishing:
            return
        self._publishing = True
        self.release()

    def worker(self, queue: Queue) -> DeadLetterWorker:
        """A new at-least-once worker (and discards buffer) for the quorum queue ``queue``."""
        return DeadLetterWorker(queue, self)

    # -- what a publish calls -----------------------------------------------------------------------------
    def hold(self) -> bool:
        """Queue dead letters instead of publishing them, until :meth:`release` (a publish being handed to all its
        queues). False when they are held already (by an outer publish or dead-lettering, which releases them)."""
        if self._publishing:
            return False
        self._publishing = True
        return True

    def release(self) -> None:
        """Publish the dead letters queued while held (and those their publishing causes), then stop holding.
        Past :data:`REPEATS_PER_TURN` laps of a loop (or :data:`HOPS_PER_TURN` deaths), the rest goes on at the
        next turn."""
        work = self._work
        more = False
        hops = repeats = 0
        try:
            while work:
                queue, msgs, reason, counts = work.popleft()
                self._publish(queue, msgs, reason, counts)
                hops += 1
                if msgs and _died_there_before(msgs[0], queue.name, reason):
                    repeats += 1
                if repeats >= REPEATS_PER_TURN or hops >= HOPS_PER_TURN:
                    more = bool(work)
                    break
        finally:
            self._publishing = False
            if not more:
                work.clear()
            elif not self._resume_pending:
                self._resume_pending = True
                generation = self._generation
                self.ctx.run_soon(lambda: self._resume(generation))

    def _resume(self, generation: int) -> None:
        if generation != self._generation:
            return  # the node was reset since
        self._resume_pending = False
        if self._work and not self._publishing:
            self._publishing = True
            self.release()

    @property
    def pending(self) -> int:
        """How many queued deaths wait for a later turn (an endless loop has some, always)."""
        return len(self._work)

    def reset(self) -> None:
        """Forget the dead letters still to publish (a reset node)."""
        self._work.clear()
        self._generation += 1
        self._resume_pending = False
        self._publishing = False

    # -- the steps both strategies share ------------------------------------------------------------------
    def make_copy(self, msg: Message, queue: str, reason: str, dlx: str, dlrk: str | None) -> Message:
        """The copy of ``msg`` that ``queue`` publishes to ``dlx`` because it died for ``reason`` (now)."""
        return self.history.copy(msg, queue, reason, dlx, dlrk, self.ctx.clock.now_ms() // 1000)

    def is_cycle(self, msg: Message, target_queue: str, reason: str) -> bool:
        """The copy ``msg`` would go back to ``target_queue``, where it died before with no rejection since."""
        return self.history.is_cycle(msg, target_queue, reason)

    def route(self, queue: Queue, copy: Message) -> list[Queue] | None:
        """The queues of ``queue``'s vhost that ``copy`` routes to through its exchange; None if that is missing."""
        vhost = queue.vhost
        x = vhost.exchanges.get(copy.exchange)
        return None if x is None else vhost.route(x, copy)

    # -- at-most-once ---------------------------------------------------------------------------------------
    def _publish(self, queue: Queue, msgs: list[Message], reason: str, counts: list[int] | None) -> None:
        ctx = self.ctx
        dlx = queue.settings.dead_letter_exchange
        if not ctx.dead_lettering or dlx is None:
            why = "no dead-letter exchange" if ctx.dead_lettering else "dead-lettering turned off"
            for m in msgs:
                ctx.events.emit("dropped", m, queue=queue.name, reason=reason, why=why)
            return
        worker = queue.dlx_worker
        if worker is not None:
            # at-least-once (quorum): kept in the queue until every target queue accepted them
            worker.discard(msgs, reason, counts)
            return
        vhost = queue.vhost
        x = vhost.exchanges.get(dlx)
        if x is None:
            for m in msgs:
                ctx.events.emit(
                    "dropped", m, queue=queue.name, reason=reason, why=texts.dead_letter_exchange_missing(dlx)
                )
            return
        dlrk = queue.settings.dead_letter_routing_key
        # (bound once: expiring a big queue runs this loop for every message)
        history = self.history
        make_copy, is_cycle, now_s = history.copy, history.is_cycle, ctx.clock.now_ms() // 1000
        events, route, name = ctx.events, vhost.route, queue.name
        emit, record = events.emit, events.record
        for i, m in enumerate(msgs):
            new = make_copy(m, name, reason, dlx, dlrk, now_s)
            if counts is not None:
                new.delivery_count = counts[i]
            targets = route(x, new)
            if events.enabled:
                record(DEAD_LETTERED, m.id, name, reason, dlx, tuple([t.name for t in targets]))
            for t in targets:
                if is_cycle(new, t.name, reason):
                    emit("dropped", new, queue=t.name, reason=reason, why="dead-letter cycle")
                    continue
                # rabbit_dead_letter delivers untracked: a quorum target's reject-publish (enforced by each
                # tracked enqueuer, rabbit_fifo_client) never refuses it
                t.publish(new, untracked=True)


def _died_there_before(msg: Message, queue: str, reason: str) -> bool:
    """``msg``'s history has a death in ``queue`` for ``reason`` (it is going round a loop, or a timer fired)."""
    return any(d.queue == queue and d.reason == reason for d in msg.deaths)
