"""A channel's broker-side state: publishing, confirms, transactions, consumers, deliveries and settlement.

The protocol layer owns one :class:`Session` per open channel and gives it a :class:`SessionSink` through which
the session emits what the client must be told (deliveries, returns, confirms, consumer cancellations).
"""

from __future__ import annotations

import base64
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, cast

from fakerabbit.broker import errors, texts
from fakerabbit.broker.arguments import check_consumer_timeout_argument, parse_expiration
from fakerabbit.broker.consumer_args import check_consume_arguments
from fakerabbit.broker.consumer_timeout import AckTimer, ack_timer
from fakerabbit.broker.deadletter.xdeath import adopt_client_deaths
from fakerabbit.broker.events import DELIVERED, DELIVERED_GET, PUBLISHED, ROUTED
from fakerabbit.broker.fields import Table
from fakerabbit.broker.ids import new_tag
from fakerabbit.broker.message import Message
from fakerabbit.broker.properties import PUBLISH_READ_FLAGS, PropertiesError, RawProperties
from fakerabbit.broker.queue import Consumer, Entry, Queue
from fakerabbit.broker.quorum_delivery import delivery_props
from fakerabbit.broker.stream.queue import StreamQueue

if TYPE_CHECKING:
    from fakerabbit.broker.stream.log import StreamEntry
    from fakerabbit.broker.vhost import Vhost

REPLY_TO = "amq.rabbitmq.reply-to"
_REPLY_TO_PREFIX = REPLY_TO + "."


class SessionSink(Protocol):
    """What a session needs from the protocol layer.

    A sink may also have ``close_channel(exc)``: the broker closes the channel on its own (a consumer timeout),
    channel.close then wait for close-ok. A sink without it (the management API's) has the session closed.
    """

    def send_deliver(
        self,
        consumer_tag: str,
        delivery_tag: int,
        redelivered: bool,
        exchange: str,
        routing_key: str,
        props: bytes,
        body: bytes,
    ) -> None: ...

    def send_return(
        self, reply_code: int, reply_text: str, exchange: str, routing_key: str, props: bytes, body: bytes
    ) -> None: ...

    def send_confirm(self, ack: bool, delivery_tag: int, multiple: bool) -> None: ...

    def send_cancel(self, consumer_tag: str) -> None: ...

    def writable(self) -> bool:
        """False while the client's socket does not take more data (TCP back-pressure): no deliveries then."""
        ...


@dataclass(slots=True)
class Unacked:
    tag: int
    queue: Queue
    entry: Entry
    consumer: Consumer | None
    #: when it was sent (ms; set where the consumer timeout needs it)
    at: int = 0
    #: 4.3: the consumer timeout returned it to its queue (the tag may still be settled, to no effect)
    timed_out: bool = False


@dataclass(slots=True)
class GetResult:
    delivery_tag: int
    redelivered: bool
    exchange: str
    routing_key: str
    message_count: int
    props: bytes
    body: bytes


class Session:
    """One channel of one connection, as the broker sees it."""

    def __init__(self, conn: ConnectionInfo, number: int, vhost: Vhost, sink: SessionSink) -> None:
        self.conn = conn
        self.number = number
        self.vhost = vhost
        self.broker = vhost.broker
        self.sink = sink
        self._writable = getattr(sink, "writable", None)  # sinks written before back-pressure may lack it
        self.next_tag = 1
        self.unacked: dict[int, Unacked] = {}
        self.consumers: dict[str, Consumer] = {}
        self.consumer_prefetch = 0
        self.global_prefetch = 0
        self.global_unacked = 0
        #: Bytes of message bodies delivered on this channel and not yet settled (for the memory alarm).
        self.unacked_bytes = 0
        #: The queue this channel declared last: what an empty queue name stands for (RabbitMQ's
        #: most_recently_declared_queue).
        self.last_queue = ""
        self.confirm = False
        self.next_publish_seq = 1
        self.tx = False
        #: quorum queues this channel has enqueued to (rabbit_fifo_client registers an enqueuer on the first publish)
        self._enqueuer_of: set[Queue] = set()
        self._tx_publishes: list[tuple[Message, str, bool, int]] = []
        self._tx_settles: list[tuple[str, list[Unacked], bool]] = []
        self.reply_to_token: str | None = None
        self.reply_consumer: Consumer | None = None
        self.closed = False
        #: the consumer timeout (``consumer_timeout``) of this channel
        self.ack_timer: AckTimer = ack_timer(self)

    # -- publishing -----------------------------------------------------------------------------------------
    @property
    def flow_active(self) -> bool:
        """Deliveries may go out (the client's socket is writable; RabbitMQ refuses channel.flow active=false)."""
        writable = self._writable
        return True if writable is None else bool(writable())

    def publish(
        self,
        exchange: str,
        routing_key: str,
        mandatory: bool,
        immediate: bool,
        props_raw: bytes,
        body: bytes,
        *,
        check_properties: bool = False,
    ) -> None:
        """basic.publish, checked in rabbit_channel's order: write permission, the exchange, internal, the
        property block (which RabbitMQ decodes here: a malformed one crashes the channel, 541; checked when
        ``check_properties``, i.e. for a client's block), user-id, expiration, then the message itself."""
        if immediate:
            raise errors.NotImplemented_("immediate=true")
        vhost = self.vhost
        self.broker.auth.check(self.conn.user, vhost.name, "write", "exchange", exchange)
        x = vhost.get_exchange(exchange)
        if x.internal:
            raise errors.AccessRefused(f"cannot publish to internal {errors.rs_exchange(exchange, vhost.name)}")
        props = RawProperties(props_raw)
        if check_properties:
            try:
                props.validate()
            except PropertiesError:
                raise errors.InternalError("") from None
        broker = self.broker
        if len(props_raw) < 2 or (props_raw[0] << 8 | props_raw[1]) & PUBLISH_READ_FLAGS:
            msg = self._message(exchange, routing_key, props, body)
        else:  # none of the properties read below is set: no TTL, user-id or reply-to, no headers to sort or read
            msg = Message(exchange, (routing_key,), props, body, msg_id=broker.next_msg_id())
        seq = 0
        if self.confirm:
            seq = self.next_publish_seq
            self.next_publish_seq += 1
        if self.tx:
            self._tx_publishes.append((msg, exchange, mandatory, seq))
            return
        self._route(msg, exchange, mandatory, seq)

    def _message(self, exchange: str, routing_key: str, props: RawProperties, body: bytes) -> Message:
        """The message of a publish whose properties are read: expiration, user-id, delivery-mode and reply-to
        checked in rabbit_channel's order, headers sorted (3.13+), CC/BCC and a client's x-death read."""
        ttl: int | None = None
        expiration = props.expiration
        if expiration is not None:
            ttl = parse_expiration(expiration)
            if self.broker.profile.normalise_expiration and expiration != str(ttl):
                props = props.replace(expiration=str(ttl))
        user_id = props.user_id
        if user_id is not None and user_id != self.conn.user:
            raise errors.PreconditionFailed(
                f"user_id property set to '{user_id}' but authenticated user was '{self.conn.user}'"
            )
        delivery_mode = props.delivery_mode
        if delivery_mode is not None and delivery_mode not in (1, 2) and self.broker.profile.amqp.check_delivery_mode:
            raise errors.PreconditionFailed(f"invalid message: {{delivery_mode_unknown,{delivery_mode}}}")
        if props.reply_to == REPLY_TO:
            if self.reply_to_token is None:
                raise errors.PreconditionFailed("fast reply consumer does not exist")
            props = props.replace(reply_to=f"{REPLY_TO}.{self.reply_to_token}")
        msg = Message.from_publish(
            exchange,
            routing_key,
            props,
            body,
            ttl_ms=ttl,
            msg_id=self.broker.next_msg_id(),
            sort_headers=self.broker.profile.message_containers,
        )
        if self.broker.profile.client_x_death != "ignore":
            adopt_client_deaths(msg)
        return msg

    def _route(self, msg: Message, exchange: str, mandatory: bool, seq: int) -> None:
        events = self.broker.events
        routing_key = msg.routing_keys[0]
        events.record(PUBLISHED, msg.id, exchange, routing_key)
        if exchange == "" and routing_key.startswith(_REPLY_TO_PREFIX):
            self._direct_reply(msg, mandatory, seq)
            return
        vhost = self.vhost
        x = vhost.exchanges.get(exchange)
        queues = vhost.route(x, msg) if x is not None else []
        if events.enabled:
            events.record(ROUTED, msg.id, (queues[0].name,) if len(queues) == 1 else tuple([q.name for q in queues]))
        accepted = True
        if len(queues) > 1:
            # RabbitMQ hands the message to every queue before any of them dead-letters it (dead letters are
            # published asynchronously): a copy that dies at once in one queue reaches the others after it.
            # A channel's first publish to a quorum queue waits for rabbit_fifo_client's enqueuer registration (a
            # round trip to the queue): what the other queues dead-letter into it meanwhile lands first.
            dead_letters = self.broker.dead_letters
            registering: list[Queue] | None = None
            held = dead_letters.hold()
            try:
                for q in queues:
                    if q.is_quorum and q not in self._enqueuer_of:
                        self._enqueuer_of.add(q)
                        if registering is None:
                            registering = [q]
                        else:
                            registering.append(q)
                    elif not (
                        q.write(msg, self, seq > 0) if isinstance(q, StreamQueue) else q.publish(msg, enqueuer=self)
                    ):
                        accepted = False
            finally:
                if held:
                    dead_letters.release()
            if registering is not None:
                for q in registering:
                    if not q.publish(msg, enqueuer=self):
                        accepted = False
        elif queues:
            q = queues[0]
            if q.is_quorum:
                self._enqueuer_of.add(q)
            if not (
                q.write(msg, self, seq > 0)
                if q.is_stream and isinstance(q, StreamQueue)
                else q.publish(msg, enqueuer=self)
            ):
                accepted = False
        if not queues and mandatory:
            self.broker.events.emit("returned", msg)
            self.sink.send_return(312, "NO_ROUTE", exchange, msg.routing_key, msg.props.raw, msg.body)
        elif not queues:
            self.broker.events.emit("unroutable", msg)
        if seq:
            # rabbit_channel:send_confirms sends a lone ack as is, but nacks always go through
            # coalesce_and_send: with nothing older unconfirmed (always, here) that is multiple=true.
            self.sink.send_confirm(accepted, seq, not accepted)

    def _direct_reply(self, msg: Message, mandatory: bool, seq: int) -> None:
        token = msg.routing_key[len(REPLY_TO) + 1 :]
        broker = self.broker
        target: Session | None = broker.reply_sessions.get(token)
        consumer = target.reply_consumer if target is not None else None
        if broker.profile.reply_to_volatile_queue:
            # rabbit_volatile_queue:exists/1 - the pid half decodes to a channel of this node
            routed = token.partition(".")[0] in broker.reply_pids
        else:
            # rabbit_channel:deliver_reply (≤4.2): a reply is never "routed" to a queue, so mandatory returns it
            routed = False
            if consumer is None and not _v1_decodable(token):
                raise errors.InternalError("")  # binary_to_term on what is not an encoded pid
        if mandatory and not routed:
            self.sink.send_return(312, "NO_ROUTE", "", msg.routing_key, msg.props.raw, msg.body)
        if seq:
            self.sink.send_confirm(True, seq, False)
        if target is not None and consumer is not None:
            tag = target.next_tag
            if broker.profile.reply_to_volatile_queue:
                target.next_tag += 1
            # (≤4.2: RabbitMQ gives a reply the channel's next delivery tag without using it up)
            target.sink.send_deliver(consumer.tag, tag, False, "", msg.routing_key, msg.props.raw, msg.body)

    # -- consuming ------------------------------------------------------------------------------------------
    def has_global_capacity(self) -> bool:
        return self.global_prefetch == 0 or self.global_unacked < self.global_prefetch

    def expand_queue_name(self, name: str) -> str:
        """rabbit_channel:expand_queue_name_shortcut/2: "" is the queue this channel declared last."""
        if name:
            return name
        if not self.last_queue:
            raise errors.NotFound(texts.NO_PREVIOUS_QUEUE)
        return self.last_queue

    def qos(self, prefetch_size: int, prefetch_count: int, global_: bool) -> None:
        if prefetch_size != 0:
            raise errors.NotImplemented_(f"prefetch_size!=0 ({prefetch_size})")
        self.ack_timer.active()
        if global_ and self.broker.profile.global_qos:
            self.global_prefetch = prefetch_count
        else:
            # rabbit_channel: a per-consumer qos also lifts the channel-wide limit (rabbit_limiter:unlimit_prefetch)
            self.consumer_prefetch = prefetch_count
            self.global_prefetch = 0
        self._dispatch_all()

    def consume(self, queue_name: str, tag: str, no_ack: bool, exclusive: bool, arguments: Table) -> Consumer:
        """Register a consumer; the caller sends consume-ok and then calls :meth:`start`."""
        if tag in self.consumers:
            raise errors.NotAllowed(f"attempt to reuse consumer tag '{tag}'")
        if queue_name == REPLY_TO:
            return self._consume_reply_to(tag, no_ack)
        self.broker.auth.check(self.conn.user, self.vhost.name, "read", "queue", queue_name)
        q = self.vhost.get_queue(queue_name, self.conn)
        check_consume_arguments(q.name, self.vhost.name, q.queue_type, arguments, self.broker.profile)
        check_consumer_timeout_argument(arguments, q.name, self.vhost.name, q.queue_type, self.broker.profile)
        if isinstance(q, StreamQueue):
            return self._add_consumer(
                q.new_consumer(
                    tag or new_tag("amq.ctag-"),
                    self,
                    no_ack=no_ack,
                    exclusive=exclusive,
                    arguments=arguments,
                    prefetch=self.consumer_prefetch,
                    global_prefetch=self.global_prefetch,
                )
            )
        if q.is_quorum and self.global_prefetch:
            raise errors.NotImplemented_(f"{errors.rs_queue(q.name, self.vhost.name)} does not support global qos")
        if not q.is_quorum and (
            (exclusive and (q.consumers or _sac_classic(q))) or any(c.exclusive for c in q.consumers)
        ):  # quorum queues ignore exclusive consumes (checked live on 3.10.8, 4.0.5, 4.3.6)
            raise errors.AccessRefused(f"{errors.rs_queue(q.name, self.vhost.name)} in exclusive use")
        prio = arguments.get("x-priority")
        priority = int(prio[1]) if prio is not None and isinstance(prio[1], int) else 0
        c = Consumer(
            tag or new_tag("amq.ctag-"),
            q,
            self,
            no_ack=no_ack,
            exclusive=exclusive,
            priority=priority,
            prefetch=self.consumer_prefetch,
            arguments=arguments,
        )
        return self._add_consumer(c)

    def _add_consumer(self, c: Consumer) -> Consumer:
        self.consumers[c.tag] = c
        c.queue.add_consumer(c)
        self.ack_timer.active()
        self.ack_timer.consumer_added(c, c.arguments)
        self.broker.events.emit("consumer-added", None, queue=c.queue.name, consumer_tag=c.tag)
        return c

    def _consume_reply_to(self, tag: str, no_ack: bool) -> Consumer:
        if not no_ack:
            raise errors.PreconditionFailed("reply consumer cannot acknowledge")
        if self.reply_to_token is not None:
            raise errors.PreconditionFailed("reply consumer already set")
        # shaped like RabbitMQ's: base64 of the channel's (Erlang) pid, ".", base64 of a 16-byte key with padding
        self.reply_to_token = (
            base64.b64encode(b"\x83X" + os.urandom(28)).decode().replace("/", "_").replace("+", "-")
            + "."
            + base64.b64encode(os.urandom(16)).decode().replace("/", "_").replace("+", "-")
        )
        self.broker.reply_sessions[self.reply_to_token] = self
        self.broker.reply_pids.add(self.reply_to_token.partition(".")[0])
        pseudo = self.vhost.pseudo_queue(REPLY_TO)
        c = Consumer(
            tag or new_tag("amq.ctag-"),
            pseudo,
            self,
            no_ack=True,
            exclusive=False,
            priority=0,
            prefetch=0,
            arguments={},
        )
        self.consumers[c.tag] = c
        self.reply_consumer = c
        return c

    def start(self, c: Consumer) -> None:
        if c is not self.reply_consumer:
            c.queue.start_consumer(c)

    def cancel(self, tag: str) -> bool:
        c = self.consumers.pop(tag, None)
        if c is None:
            return False
        if c is self.reply_consumer:
            if self.reply_to_token is not None:
                self.broker.reply_sessions.pop(self.reply_to_token, None)
            self.reply_consumer = self.reply_to_token = None
            return True
        self.ack_timer.active()
        c.queue.remove_consumer(c)
        if c.unacked and c.queue.is_quorum:
            c.queue.lingering.add(c)  # still a consumer of the quorum queue until its deliveries are settled
        self.broker.events.emit("consumer-cancelled", None, queue=c.queue.name, consumer_tag=tag)
        return True

    def server_cancel(self, c: Consumer) -> None:
        """The queue went away: tell the client (consumer_cancel_notify)."""
        if self.consumers.pop(c.tag, None) is not None and not self.closed:
            self.sink.send_cancel(c.tag)

    def deliver(self, c: Consumer, q: Queue, e: Entry) -> None:
        tag = self.next_tag
        self.next_tag += 1
        no_ack = c.no_ack
        q.on_delivered(e, no_ack)
        msg = e.msg
        if not no_ack:
            u = self.unacked[tag] = Unacked(tag, q, e, c)
            c.unacked += 1
            self.global_unacked += 1
            self.unacked_bytes += q.msg_bytes(msg)
            self.ack_timer.delivered(u)
        if q.is_quorum:
            props = delivery_props(e, self.broker.profile)
        elif q.is_stream:
            props = cast("StreamEntry", e).delivery_props()  # the x-stream-offset header
        else:
            props = msg.props.raw
        self.broker.events.record(DELIVERED, msg.id, q.name, c.tag, tag)
        self.sink.send_deliver(c.tag, tag, e.redelivered, msg.exchange, msg.routing_keys[0], props, msg.body)

    def _delivery_props(self, q: Queue, e: Entry, *, get: bool = False) -> bytes:
        if not q.is_quorum:
            if q.is_stream:
                return cast("StreamEntry", e).delivery_props()
            return e.msg.props.raw
        return delivery_props(e, self.broker.profile, get=get)

    def get(self, queue_name: str, no_ack: bool) -> GetResult | None:
        self.broker.auth.check(self.conn.user, self.vhost.name, "read", "queue", queue_name)
        q = self.vhost.get_queue(queue_name, self.conn)
        if q.is_quorum and q.settings.single_active_consumer:
            raise errors.ResourceLocked(_sac_get_refused(q, self.broker.profile.sac_get_error_prints_type_term))
        q.touch()
        self.ack_timer.active()
        e = q.fetch(no_ack)
        if e is None:
            return None
        tag = self.next_tag
        self.next_tag += 1
        q.on_delivered(e, no_ack)
        if not no_ack:
            u = self.unacked[tag] = Unacked(tag, q, e, None)
            self.global_unacked += 1
            self.unacked_bytes += q.msg_bytes(e.msg)
            if q.is_quorum:
                q.unsettled_gets += 1
            self.ack_timer.delivered(u)
        msg = e.msg
        self.broker.events.record(DELIVERED_GET, msg.id, q.name, tag)
        return GetResult(
            tag,
            e.redelivered,
            msg.exchange,
            msg.routing_key,
            q.ready_count,
            self._delivery_props(q, e, get=True),
            msg.body,
        )

    # -- settlement -----------------------------------------------------------------------------------------
    def _take(self, tag: int, multiple: bool) -> list[Unacked]:
        # As rabbit_channel:collect_acks: tag 0 with multiple means everything; otherwise the tag must be
        # outstanding, and multiple takes it with every older one.
        if multiple and tag == 0:
            taken = list(self.unacked.values())
        elif tag not in self.unacked:
            raise errors.PreconditionFailed(f"unknown delivery tag {tag}")
        elif multiple:
            taken = [u for t, u in self.unacked.items() if t <= tag]
        else:
            taken = [self.unacked[tag]]
        for u in taken:
            del self.unacked[u.tag]
            self.global_unacked -= 1
            self.unacked_bytes -= u.queue.msg_bytes(u.entry.msg)
            if u.consumer is not None and not u.timed_out:
                u.consumer.unacked -= 1
        return taken

    def ack(self, tag: int, multiple: bool) -> None:
        if not multiple and not self.tx:
            # one delivery acknowledged (the common case): _take and _settle for a single delivery
            u = self.unacked.pop(tag, None)
            if u is None:
                raise errors.PreconditionFailed(f"unknown delivery tag {tag}")
            q = u.queue
            self.global_unacked -= 1
            self.unacked_bytes -= q.msg_bytes(u.entry.msg)
            c = u.consumer
            if c is not None and not u.timed_out:
                c.unacked -= 1
            taken = [u]
            if q.is_quorum:
                _gets_settled(taken)
            if self.ack_timer.settled(taken, False):
                q.ack(u.entry)
            self._dispatch_all()
            return
        taken = self._take(tag, multiple)
        if self.tx:
            self._tx_settles.append(("ack", taken, False))
            return
        self._settle("ack", taken, False)

    def nack(self, tag: int, multiple: bool, requeue: bool, *, explicit: bool = True) -> None:
        taken = self._take(tag, multiple)
        kind = "nack" if explicit else "reject"
        if self.tx:
            self._tx_settles.append((kind, taken, requeue))
            return
        self._settle(kind, taken, requeue)

    def _settle(self, kind: str, taken: list[Unacked], requeue: bool) -> None:
        _gets_settled(taken)
        taken = self.ack_timer.settled(taken, requeue and kind != "ack")
        for u in taken:
            if kind == "ack":
                u.queue.ack(u.entry)
            else:
                u.queue.reject([u.entry], requeue=requeue, explicit_nack=kind == "nack")
        self._dispatch_all()

    def recover(self) -> None:
        """basic.recover(requeue=true): every unacked message goes back to its queue, marked redelivered."""
        taken = self._take(0, True)
        _gets_settled(taken)
        taken = self.ack_timer.settled(taken, True)
        for q, entries in _group(taken):
            q.release(entries, failed=False)
        self._dispatch_all()

    def dispatch_all(self) -> None:
        """Offer ready messages to this channel's consumers again (e.g. its socket became writable)."""
        self._dispatch_all()

    def _dispatch_all(self) -> None:
        consumers = self.consumers
        if len(consumers) < 2:
            if consumers:
                next(iter(consumers.values())).queue.dispatch()
            return
        seen: set[int] = set()
        for c in list(self.consumers.values()):
            if id(c.queue) not in seen:
                seen.add(id(c.queue))
                c.queue.dispatch()

    # -- flow, confirms, transactions -----------------------------------------------------------------------
    def confirm_select(self) -> None:
        if self.tx:
            raise errors.PreconditionFailed("cannot switch from tx to confirm mode")
        self.confirm = True

    def tx_select(self) -> None:
        if self.confirm:
            raise errors.PreconditionFailed("cannot switch from confirm to tx mode")
        self.tx = True

    def tx_commit(self) -> None:
        if not self.tx:
            raise errors.PreconditionFailed(texts.NOT_TRANSACTIONAL)
        publishes, settles = self._tx_publishes, self._tx_settles
        self._tx_publishes, self._tx_settles = [], []
        for msg, exchange, mandatory, seq in publishes:
            self._route(msg, exchange, mandatory, seq)
        for kind, taken, requeue in settles:
            self._settle(kind, taken, requeue)

    def tx_rollback(self) -> None:
        if not self.tx:
            raise errors.PreconditionFailed(texts.NOT_TRANSACTIONAL)
        self._tx_publishes = []
        for _kind, taken, _requeue in self._tx_settles:
            for u in taken:
                self.unacked[u.tag] = u
                self.global_unacked += 1
                self.unacked_bytes += u.queue.msg_bytes(u.entry.msg)
                if u.consumer is not None and not u.timed_out:
                    u.consumer.unacked += 1
        self.unacked = dict(sorted(self.unacked.items()))
        self._tx_settles = []

    # -- teardown -------------------------------------------------------------------------------------------
    def close(self) -> None:
        """The channel closed: cancel its consumers and requeue everything it had not acked."""
        if self.closed:
            return
        self.closed = True
        self.ack_timer.close()
        for q in self._enqueuer_of:
            q.forget_enqueuer(self)  # rabbit_fifo's enqueuer monitor: the channel process went down
        self._enqueuer_of.clear()
        for tag in list(self.consumers):
            self.cancel(tag)
        taken = list(self.unacked.values())
        self.unacked.clear()
        self.global_unacked = 0
        self.unacked_bytes = 0
        _gets_settled(taken, released=True)
        for _kind, pending, _requeue in self._tx_settles:
            _gets_settled(pending, released=True)
        for q, entries in _group([u for u in taken if not u.timed_out]):
            q.release(entries)

    # -- consumer timeout -----------------------------------------------------------------------------------
    def close_timed_out(self, reply_text: str) -> None:
        """The consumer timeout closes this channel: 406 PRECONDITION_FAILED (RabbitMQ's handle_exception)."""
        close = getattr(self.sink, "close_channel", None)  # sinks written before the timeout may lack it
        if close is not None:
            close(errors.PreconditionFailed(reply_text))
        else:
            self.close()

    def cancel_timed_out(self, c: Consumer) -> bool:
        """4.3: tell the client its consumer timed out with ``basic.cancel``, if it announced
        ``consumer_cancel_notify`` (the consumer stays registered, as in rabbit_channel); False if not."""
        caps = self.conn.client_properties.get("capabilities")
        if not isinstance(caps, dict) or caps.get("consumer_cancel_notify") is not True:
            return False
        self.sink.send_cancel(c.tag)
        return True


def _v1_decodable(token: str) -> bool:
    """``rabbit_direct_reply_to:decode_reply_to_v1/1`` does not crash: the token is not two ``.``-separated
    parts, or its first part is base64 of an Erlang term (as every token this fake issues is)."""
    parts = [p for p in token.split(".") if p]
    if len(parts) != 2:
        return True
    try:
        raw = base64.b64decode(parts[0].replace("-", "+").replace("_", "/"), validate=True)
    except ValueError:
        return False
    return raw[:1] == b"\x83"


def _sac_get_refused(q: Queue, type_term: bool) -> str:
    """The 405 text for ``basic.get`` on a quorum queue with single active consumer."""
    kind = '<<"quorum">>' if type_term else "quorum"
    return (
        f"cannot obtain access to locked {errors.rs_queue(q.name, q.vhost.name)}. basic.get operations "
        f"are not supported by {kind} queues with single active consumer"
    )


def _sac_classic(q: Queue) -> bool:
    """rabbit_amqqueue_process refuses every exclusive consume on a classic single-active-consumer queue."""
    return q.queue_type == "classic" and q.settings.single_active_consumer


def _gets_settled(taken: Iterable[Unacked], *, released: bool = False) -> None:
    """Quorum deliveries settled (or ``released`` with their channel): the rabbit_fifo consumer records of
    ``basic.get`` deliveries and of cancelled consumers with nothing left unsettled go away."""
    for u in taken:
        if not u.queue.is_quorum:
            continue
        if u.consumer is None:
            u.queue.unsettled_gets -= 1
        elif released or u.consumer.unacked == 0:
            u.queue.lingering.discard(u.consumer)


def _group(taken: Iterable[Unacked]) -> list[tuple[Queue, list[Entry]]]:
    groups: dict[int, tuple[Queue, list[Entry]]] = {}
    for u in taken:
        groups.setdefault(id(u.queue), (u.queue, []))[1].append(u.entry)
    return list(groups.values())


@dataclass(slots=True, eq=False)
class ConnectionInfo:
    """A client connection as the broker sees it: the owner of its sessions (channels)."""

    id: int
    user: str
    vhost: str
    peer: str = ""
    client_properties: dict[str, Any] = field(default_factory=dict)
    sessions: dict[int, Session] = field(default_factory=dict)
    # Set by the protocol layer: close(reply_code, reply_text) and drop() (reset, no close frame).
    close: Callable[[int, str], None] | None = None
    drop: Callable[[], None] | None = None
    #: Names of the exclusive queues this connection declared, in order (kept by the vhost): closing the
    #: connection deletes them without scanning every queue.
    exclusive_queues: dict[str, None] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return f"{self.peer} -> fakerabbit" if self.peer else f"connection {self.id}"
