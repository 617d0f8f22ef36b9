"""queue.declare / bind / unbind / purge / delete.

As in ``rabbit_channel``: names lose CR and LF characters; an empty queue name means the queue this channel
declared last (404 ``no previously declared queue`` if none), and so does an empty routing key in
``queue.bind`` / ``queue.unbind`` with an empty queue name; ``amq.rabbitmq.reply-to`` always "exists".
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fakerabbit.broker.session import REPLY_TO
from fakerabbit.protocol.codec import DeclareOk, arguments_of, commands, strip_cr_lf

if TYPE_CHECKING:
    from fakerabbit.protocol.handlers.context import MethodChannel


def queue_declare(ch: MethodChannel, m: commands.Queue.Declare, payload: bytes) -> None:
    name = strip_cr_lf(m.queue or "")
    session = ch.session
    if name == REPLY_TO:
        if not m.nowait:
            ch.send(DeclareOk(name, 0, 1))
        return
    q = session.vhost.declare_queue(
        session.conn,
        name,
        passive=bool(m.passive),
        durable=bool(m.durable),
        exclusive=bool(m.exclusive),
        auto_delete=bool(m.auto_delete),
        arguments=arguments_of(m),
    )
    session.last_queue = q.name
    if not m.nowait:
        ch.send(DeclareOk(q.name, *q.stat()))


def _binding(ch: MethodChannel, m: commands.Queue.Bind | commands.Queue.Unbind, payload: bytes, unbind: bool) -> None:
    session = ch.session
    raw_queue = strip_cr_lf(m.queue or "")
    queue = session.expand_queue_name(raw_queue)
    routing_key = m.routing_key or ""
    if raw_queue == "" and routing_key == "":
        routing_key = queue
    session.vhost.bind(
        session.conn,
        "queue",
        queue,
        strip_cr_lf(m.exchange or ""),
        routing_key,
        arguments_of(m),
        unbind=unbind,
    )


def queue_bind(ch: MethodChannel, m: commands.Queue.Bind, payload: bytes) -> None:
    _binding(ch, m, payload, unbind=False)
    if not m.nowait:
        ch.send(commands.Queue.BindOk())


def queue_unbind(ch: MethodChannel, m: commands.Queue.Unbind, payload: bytes) -> None:
    _binding(ch, m, payload, unbind=True)
    ch.send(commands.Queue.UnbindOk())


def queue_purge(ch: MethodChannel, m: commands.Queue.Purge, payload: bytes) -> None:
    session = ch.session
    n = session.vhost.purge_queue(session.conn, session.expand_queue_name(m.queue or ""))
    if not m.nowait:
        ch.send(commands.Queue.PurgeOk(message_count=n))


def queue_delete(ch: MethodChannel, m: commands.Queue.Delete, payload: bytes) -> None:
    session = ch.session
    name = session.expand_queue_name(strip_cr_lf(m.queue or ""))
    n = session.vhost.delete_queue_cmd(session.conn, name, if_unused=bool(m.if_unused), if_empty=bool(m.if_empty))
    if not m.nowait:
        ch.send(commands.Queue.DeleteOk(message_count=n))


HANDLERS: dict[type, Any] = {
    commands.Queue.Declare: queue_declare,
    commands.Queue.Bind: queue_bind,
    commands.Queue.Unbind: queue_unbind,
    commands.Queue.Purge: queue_purge,
    commands.Queue.Delete: queue_delete,
}
