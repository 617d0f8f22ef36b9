"""A virtual host: its exchanges, queues, bindings and policies; routing across exchanges (exchange-to-exchange
bindings, alternate exchanges, the default exchange)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from fakerabbit.broker import errors, texts
from fakerabbit.broker.arguments import (
    augment_declare_args,
    check_exchange_equivalence,
    check_queue_equivalence,
    validate_new_exchange,
    validate_new_queue,
)
from fakerabbit.broker.context import NodeContext
from fakerabbit.broker.delayed import DelayedMessages
from fakerabbit.broker.exchange import Binding, Exchange, ExchangeType
from fakerabbit.broker.exchange_types import check_type, kind_of
from fakerabbit.broker.fields import Table
from fakerabbit.broker.ids import new_tag
from fakerabbit.broker.message import Message
from fakerabbit.broker.policy import Policy, QueueSettings, effective_settings, select_policy
from fakerabbit.broker.queue import Queue
from fakerabbit.broker.stream.queue import new_stream

if TYPE_CHECKING:
    from fakerabbit.broker.auth import Auth
    from fakerabbit.broker.deadletter.publisher import DeadLetters


class Client(Protocol):
    """What a vhost reads of a client connection (:class:`~fakerabbit.broker.session.ConnectionInfo`)."""

    @property
    def id(self) -> int: ...

    @property
    def user(self) -> str: ...

    @property
    def exclusive_queues(self) -> dict[str, None]: ...


class VhostNode(NodeContext, Protocol):
    """What a vhost (and its sessions) read of the node that holds it (:class:`~fakerabbit.broker.broker.Broker`)."""

    @property
    def auth(self) -> Auth: ...

    @property
    def exchange_types(self) -> tuple[str, ...]: ...

    @property
    def connections(self) -> Mapping[int, Client]: ...

    @property
    def dead_letters(self) -> DeadLetters: ...

    @property
    def reply_sessions(self) -> dict[str, Any]:
        """Direct reply-to: the session of each reply-to token (a Session; typed there)."""
        ...

    @property
    def reply_pids(self) -> set[str]: ...


_PREDECLARED = (
    ("amq.direct", "direct", False),
    ("amq.fanout", "fanout", False),
    ("amq.topic", "topic", False),
    ("amq.headers", "headers", False),
    ("amq.match", "headers", False),
    ("amq.rabbitmq.trace", "topic", True),
)

RESERVED_TEXT = "{kind} name '{name}' contains reserved prefix 'amq.*'"

_DELAYED = ExchangeType.DELAYED.value

#: 540 for quorum ``queue.delete`` with a condition (``rabbit_quorum_queue:delete/4``; if-unused is checked first).
_QQ_DELETE_FLAG = "cannot delete {rs}. queue.delete operations with {flag} flag set are not supported by quorum queues"


class Vhost:
    def __init__(self, broker: VhostNode, name: str) -> None:
        self.broker = broker
        self.name = name
        self.exchanges: dict[str, Exchange] = {}
        self.queues: dict[str, Queue] = {}
        self.policies: dict[str, Policy] = {}
        self.operator_policies: dict[str, Policy] = {}
        self._pseudo: dict[str, Queue] = {}
        #: Messages the delayed-message exchanges of this vhost hold (fakerabbit/broker/delayed.py).
        self.delayed = DelayedMessages(self)
        self.reset()

    def reset(self) -> None:
        for q in list(self.queues.values()):
            q.on_deleted()
        self.queues.clear()
        self.policies.clear()
        self.operator_policies.clear()
        self.delayed.clear()
        self.exchanges = {"": Exchange("", "direct")}
        for name, type_, internal in _PREDECLARED:
            self.exchanges[name] = Exchange(name, type_, internal=internal)

    # -- lookups --------------------------------------------------------------------------------------------
    def get_exchange(self, name: str) -> Exchange:
        x = self.exchanges.get(name)
        if x is None:
            raise errors.NotFound(f"no {errors.rs_exchange(name, self.name)}")
        return x

    def get_queue(self, name: str, conn: Client | None) -> Queue:
        q = self.queues.get(name)
        if q is None:
            raise errors.NotFound(f"no {errors.rs_queue(name, self.name)}")
        if conn is not None and q.exclusive_owner is not None and q.exclusive_owner != conn.id:
            raise errors.ResourceLocked(errors.locked_queue(name, self.name))
        return q

    def pseudo_queue(self, name: str) -> Queue:
        """An unregistered queue object used as the target of special consumers (direct reply-to)."""
        q = self._pseudo.get(name)
        if q is None:
            q = Queue(
                self,
                name,
                queue_type="classic",
                durable=False,
                exclusive_owner=None,
                auto_delete=False,
                arguments={},
                settings=QueueSettings(),
            )
            self._pseudo[name] = q
        return q

    # -- exchanges ------------------------------------------------------------------------------------------
    def declare_exchange(
        self,
        conn: Client | None,
        name: str,
        type_: str,
        *,
        passive: bool,
        durable: bool,
        auto_delete: bool,
        internal: bool,
        arguments: Table,
    ) -> Exchange:
        # rabbit_channel's exchange.declare: type, default exchange, configure permission, then either
        # equivalence with the existing exchange or (only for a new one) the reserved-name rule.
        if passive:
            if name == "":
                raise errors.AccessRefused(texts.DEFAULT_EXCHANGE)
            return self.get_exchange(name)
        profile = self.broker.profile
        check_type(type_, self.broker.exchange_types, profile)
        if name == "":
            raise errors.AccessRefused(texts.DEFAULT_EXCHANGE)
        if conn is not None:
            self.broker.auth.check(conn.user, self.name, "configure", "exchange", name)
        existing = self.exchanges.get(name)
        if existing is not None:
            check_exchange_equivalence(
                name,
                self.name,
                current_type=existing.type,
                current_durable=existing.durable,
                current_auto_delete=existing.auto_delete,
                current_internal=existing.internal,
                current_args=existing.arguments,
                new_type=type_,
                new_durable=durable,
                new_auto_delete=auto_delete,
                new_internal=internal,
                new_args=arguments,
                profile=self.broker.profile,
            )
            return existing
        if name.startswith("amq."):
            raise errors.AccessRefused(RESERVED_TEXT.format(kind="exchange", name=name))
        validate_new_exchange(name, self.name, arguments)
        ae = arguments.get("alternate-exchange")
        if conn is not None and ae is not None:
            self.broker.auth.check(conn.user, self.name, "read", "exchange", name)
            self.broker.auth.check(conn.user, self.name, "write", "exchange", str(ae[1]))
        kind_of(type_).validate(arguments, self.broker.exchange_types, profile)  # in rabbit_exchange:declare
        x = Exchange(name, type_, durable=durable, auto_delete=auto_delete, internal=internal, arguments=arguments)
        self.exchanges[name] = x
        self.broker.events.emit("exchange-declared", None, exchange=name)
        return x

    def delete_exchange(self, conn: Client | None, name: str, *, if_unused: bool) -> None:
        if name == "":
            raise errors.AccessRefused(texts.DEFAULT_EXCHANGE)
        if name.startswith("amq."):
            raise errors.AccessRefused(f"deletion of system {errors.rs_exchange(name, self.name)} not allowed")
        if conn is not None:
            self.broker.auth.check(conn.user, self.name, "configure", "exchange", name)
        x = self.exchanges.get(name)
        if x is None:
            return
        if if_unused and x.bindings:
            raise errors.PreconditionFailed(f"{errors.rs_exchange(name, self.name)} in use")
        self.remove_exchange(x)

    def clear_pseudo_queues(self) -> None:
        """Forget the pseudo queues (direct reply-to) this vhost made (a node restart)."""
        self._pseudo.clear()

    def remove_exchange(self, x: Exchange) -> None:
        """Remove exchange ``x`` and the bindings to it (no checks, no event): a delete, auto-delete or restart."""
        self.exchanges.pop(x.name, None)
        for other in list(self.exchanges.values()):
            if other.remove_destination("exchange", x.name):
                self._maybe_auto_delete(other)
        self.broker.events.emit("exchange-deleted", None, exchange=x.name)

    def _maybe_auto_delete(self, x: Exchange) -> None:
        if x.auto_delete and not x.bindings and x.name in self.exchanges:
            self.remove_exchange(x)

    # -- bindings -------------------------------------------------------------------------------------------
    def bind(
        self,
        conn: Client | None,
        kind: str,
        destination: str,
        source: str,
        routing_key: str,
        arguments: Table,
        *,
        unbind: bool = False,
    ) -> None:
        # rabbit_channel:binding_action/10: write on the destination, the default exchange rule (destination,
        # then source), read on the source; then the source must exist, then the destination. Unbinding what
        # does not exist is fine; only an existing binding checks the queue's exclusive owner.
        if conn is not None:
            self.broker.auth.check(conn.user, self.name, "write", kind, destination)
        if (kind == "exchange" and destination == "") or source == "":
            raise errors.AccessRefused(texts.DEFAULT_EXCHANGE)
        if conn is not None:
            self.broker.auth.check(conn.user, self.name, "read", "exchange", source)
        x = self.exchanges.get(source)
        if unbind:
            if x is None:
                return
            b = Binding(source, destination, kind, routing_key, arguments)
            if not x.has_binding(b):
                return
            if kind == "queue":
                self.get_queue(destination, conn)
            if x.remove_binding(b):
                self._maybe_auto_delete(x)
            return
        if x is None:
            raise errors.NotFound(f"no {errors.rs_exchange(source, self.name)}")
        queue_type = None
        if kind == "queue":
            queue_type = self.get_queue(destination, conn).queue_type
        else:
            self.get_exchange(destination)
        x.kind.validate_binding(routing_key, arguments, queue_type, self.broker.profile)
        x.add_binding(Binding(source, destination, kind, routing_key, arguments))

    # -- queues ---------------------------------------------------------------------------------------------
    def declare_queue(
        self,
        conn: Client | None,
        name: str,
        *,
        passive: bool,
        durable: bool,
        exclusive: bool,
        auto_delete: bool,
        arguments: Table,
    ) -> Queue:

        if passive:
            q = self.get_queue(name, conn)
            q.touch()
            return q
        if name == "":
            qtype = arguments.get("x-queue-type")
            if qtype is not None and qtype[1] in ("quorum", "stream"):
                raise errors.PreconditionFailed(f"Cannot declare a server-named queue for type rabbit_{qtype[1]}_queue")
            name = new_tag("amq.gen-")
        elif name.startswith("amq."):
            raise errors.AccessRefused(RESERVED_TEXT.format(kind="queue", name=name))
        if conn is not None:
            self.broker.auth.check(conn.user, self.name, "configure", "queue", name)
        existing = self.queues.get(name)
        if existing is not None:
            q = self.get_queue(name, conn)
            if conn is not None and exclusive != (q.exclusive_owner is not None):
                raise errors.ResourceLocked(errors.locked_queue(name, self.name))
            check_queue_equivalence(
                name,
                self.name,
                queue_type=q.queue_type,
                durable=q.durable,
                auto_delete=q.auto_delete,
                stored_args=q.arguments,
                new_durable=durable,
                new_auto_delete=auto_delete,
                new_args=arguments,
                profile=self.broker.profile,
                exclusive=q.exclusive_owner is not None,
                new_exclusive=exclusive,
            )
            q.touch()
            return q
        # configure was checked first (live 3.10.8: 403 before the DLX type's 406), then the DLX rule: read on
        # the queue and write on the DLX exchange ("" is checked as amq.default).
        dlx = arguments.get("x-dead-letter-exchange")
        if dlx is not None and dlx[0] != "S":
            from fakerabbit.broker.fields import type_name

            raise errors.PreconditionFailed(texts.invalid_dlx_type(type_name(dlx[0]), errors.rs_queue(name, self.name)))
        if conn is not None:
            auth = self.broker.auth
            if dlx is not None:
                auth.check(conn.user, self.name, "read", "queue", name)
                auth.check(conn.user, self.name, "write", "exchange", str(dlx[1]))
        arguments = augment_declare_args(arguments, profile=self.broker.profile)
        queue_type = validate_new_queue(
            name,
            self.name,
            arguments,
            durable=durable,
            exclusive=exclusive,
            auto_delete=auto_delete,
            profile=self.broker.profile,
        )
        q = (
            new_stream(self, name, durable=durable, arguments=arguments)
            if queue_type == "stream"
            else Queue(
                self,
                name,
                queue_type=queue_type,
                durable=durable,
                exclusive_owner=conn.id if exclusive and conn is not None else None,
                auto_delete=auto_delete,
                arguments=arguments,
                settings=QueueSettings(),
            )
        )
        self.queues[name] = q
        if q.exclusive_owner is not None and conn is not None:
            conn.exclusive_queues[name] = None
        self._apply_policies(q)
        self.exchanges[""]  # the default exchange binds every queue implicitly
        self.broker.events.emit("queue-declared", None, queue=name)
        q.touch()
        return q

    def delete_queue(self, q: Queue) -> int:
        """Remove a queue: its ready messages are discarded (not dead-lettered), consumers are cancelled."""
        if self.queues.get(q.name) is not q:
            return 0
        count = q.ready_count
        del self.queues[q.name]
        if q.exclusive_owner is not None:
            owner = self.broker.connections.get(q.exclusive_owner)
            if owner is not None:
                owner.exclusive_queues.pop(q.name, None)
        for x in list(self.exchanges.values()):
            if x.remove_destination("queue", q.name):
                self._maybe_auto_delete(x)
        consumers = list(q.consumers)
        q.consumers.clear()
        q.on_deleted()
        for c in consumers:
            c.session.server_cancel(c)
        self.broker.events.emit("queue-deleted", None, queue=q.name)
        return count

    def delete_queue_cmd(self, conn: Client | None, name: str, *, if_unused: bool, if_empty: bool) -> int:
        if conn is not None:
            self.broker.auth.check(conn.user, self.name, "configure", "queue", name)
        if name not in self.queues:
            return 0
        q = self.get_queue(name, conn)
        if q.is_stream:  # rabbit_stream_queue:delete/4 ignores both flags; delete-ok says 0 (live 3.10.8 - 4.3.6)
            self.delete_queue(q)
            return 0
        if q.queue_type == "quorum" and (if_unused or if_empty):
            flag = "if-unused" if if_unused else "if-empty"
            raise errors.NotImplemented_(_QQ_DELETE_FLAG.format(rs=errors.rs_queue(name, self.name), flag=flag))
        if if_unused and q.consumers:
            raise errors.PreconditionFailed(f"{errors.rs_queue(name, self.name)} in use")
        if if_empty and q.ready_count:
            raise errors.PreconditionFailed(f"{errors.rs_queue(name, self.name)} not empty")
        return self.delete_queue(q)

    def purge_queue(self, conn: Client | None, name: str) -> int:
        if conn is not None:
            self.broker.auth.check(conn.user, self.name, "read", "queue", name)
        q = self.get_queue(name, conn)
        return q.purge()

    # -- routing --------------------------------------------------------------------------------------------
    def route(self, x: Exchange, msg: Message) -> list[Queue]:
        """Queues the message goes to, each once, following exchange-to-exchange bindings and alternates."""
        if x.name == "":  # the default exchange: each routing key names a queue (no bindings, no alternate)
            queues = self.queues
            if len(msg.routing_keys) == 1:
                q = queues.get(msg.routing_keys[0])
                return [] if q is None else [q]
            direct: dict[str, Queue] = {}
            for key in msg.routing_keys:
                q = queues.get(key)
                if q is not None and key not in direct:
                    direct[key] = q
            return list(direct.values())
        found: dict[str, Queue] = {}
        seen: set[str] = set()
        stack = [x]
        while stack:
            ex = stack.pop()
            if ex.name in seen:
                continue
            seen.add(ex.name)
            if ex.name == "":
                for key in msg.routing_keys:
                    q = self.queues.get(key)
                    if q is not None:
                        found.setdefault(key, q)
                continue
            if ex.type == _DELAYED and self.delayed.hold(ex, msg):
                matched = []  # an x-delayed-message exchange keeps it for later: nowhere now (alternates do apply)
            else:
                kind = ex.kind
                # Only a headers exchange reads the headers (decoding them, or building a dead-lettered copy's).
                matched = kind.match(msg.routing_keys, msg.props.headers if kind.reads_headers else None)
            if not matched:
                ae_name = self.alternate_exchange(ex)
                ae = self.exchanges.get(ae_name) if ae_name is not None else None
                if ae is not None:
                    stack.append(ae)
                continue
            for b in matched:
                if b.destination_kind == "queue":
                    q = self.queues.get(b.destination)
                    if q is not None:
                        found.setdefault(b.destination, q)
                else:
                    dest = self.exchanges.get(b.destination)
                    if dest is not None:
                        stack.append(dest)
        return list(found.values())

    def alternate_exchange(self, x: Exchange) -> str | None:
        ae = x.alternate_exchange
        if ae is not None:
            return ae
        policy = select_policy(
            self.policies.values(), x.name, None, kind="exchange", vhost=self.name, profile=self.broker.profile
        )
        value = policy.definition.get("alternate-exchange") if policy is not None else None
        return value if isinstance(value, str) else None

    @property
    def dead_letters(self) -> DeadLetters:
        """The node's dead-letter publisher (the queues of this vhost hand it their dead messages)."""
        return self.broker.dead_letters

    # -- policies -------------------------------------------------------------------------------------------
    def _apply_policies(self, q: Queue) -> None:
        pol = select_policy(
            self.policies.values(), q.name, q.queue_type, kind="queue", vhost=self.name, profile=self.broker.profile
        )
        op = select_policy(
            self.operator_policies.values(),
            q.name,
            q.queue_type,
            kind="queue",
            vhost=self.name,
            profile=self.broker.profile,
        )
        q.policy_name = pol.name if pol is not None else None
        q.operator_policy_name = op.name if op is not None else None
        changed = (pol, op) != q.policies
        q.policies = (pol, op)
        settings = effective_settings(q.queue_type, q.arguments, pol, op, self.broker.profile)
        if settings != q.settings or (changed and q.is_stream):  # a stream reads its policy's keys itself
            q.apply_settings(settings)
        if changed:
            q.policy_changed()

    def reapply_policies(self) -> None:
        for q in list(self.queues.values()):
            if not q.deleted:
                self._apply_policies(q)
