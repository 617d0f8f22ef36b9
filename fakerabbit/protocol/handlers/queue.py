"""queue.declare / bind / unbind / purge / delete."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pamqp import commands

from fakerabbit.protocol.codec import DeclareOk, typed_arguments

if TYPE_CHECKING:
    from fakerabbit.protocol.channel import ChannelHandler


def queue_declare(ch: ChannelHandler, m: commands.Queue.Declare, payload: bytes) -> None:
    q = ch.session.vhost.declare_queue(
        ch.session.conn,
        m.queue or "",
        passive=bool(m.passive),
        durable=bool(m.durable),
        exclusive=bool(m.exclusive),
        auto_delete=bool(m.auto_delete),
        arguments=typed_arguments(payload),
    )
    if not m.nowait:
        ch.send(DeclareOk(q.name, q.ready_count, len(q.consumers)))


def queue_bind(ch: ChannelHandler, m: commands.Queue.Bind, payload: bytes) -> None:
    ch.session.vhost.bind(
        ch.session.conn,
        "queue",
        m.queue or "",
        m.exchange or "",
        m.routing_key or "",
        typed_arguments(payload),
    )
    if not m.nowait:
        ch.send(commands.Queue.BindOk())


def queue_unbind(ch: ChannelHandler, m: commands.Queue.Unbind, payload: bytes) -> None:
    ch.session.vhost.bind(
        ch.session.conn,
        "queue",
        m.queue or "",
        m.exchange or "",
        m.routing_key or "",
        typed_arguments(payload),
        unbind=True,
    )
    ch.send(commands.Queue.UnbindOk())


def queue_purge(ch: ChannelHandler, m: commands.Queue.Purge, payload: bytes) -> None:
    n = ch.session.vhost.purge_queue(ch.session.conn, m.queue or "")
    if not m.nowait:
        ch.send(commands.Queue.PurgeOk(message_count=n))


def queue_delete(ch: ChannelHandler, m: commands.Queue.Delete, payload: bytes) -> None:
    n = ch.session.vhost.delete_queue_cmd(
        ch.session.conn, m.queue or "", if_unused=bool(m.if_unused), if_empty=bool(m.if_empty)
    )
    if not m.nowait:
        ch.send(commands.Queue.DeleteOk(message_count=n))


HANDLERS: dict[type, Any] = {
    commands.Queue.Declare: queue_declare,
    commands.Queue.Bind: queue_bind,
    commands.Queue.Unbind: queue_unbind,
    commands.Queue.Purge: queue_purge,
    commands.Queue.Delete: queue_delete,
}
