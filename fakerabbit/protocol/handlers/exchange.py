"""exchange.declare / delete / bind / unbind (names lose CR and LF characters, as in ``rabbit_channel``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fakerabbit.protocol.codec import arguments_of, commands, strip_cr_lf

if TYPE_CHECKING:
    from fakerabbit.protocol.handlers.context import MethodChannel


def exchange_declare(ch: MethodChannel, m: commands.Exchange.Declare, payload: bytes) -> None:
    ch.session.vhost.declare_exchange(
        ch.session.conn,
        strip_cr_lf(m.exchange or ""),
        m.exchange_type or "",
        passive=bool(m.passive),
        durable=bool(m.durable),
        auto_delete=bool(m.auto_delete),
        internal=bool(m.internal),
        arguments=arguments_of(m),
    )
    if not m.nowait:
        ch.send(commands.Exchange.DeclareOk())


def exchange_delete(ch: MethodChannel, m: commands.Exchange.Delete, payload: bytes) -> None:
    ch.session.vhost.delete_exchange(ch.session.conn, strip_cr_lf(m.exchange or ""), if_unused=bool(m.if_unused))
    if not m.nowait:
        ch.send(commands.Exchange.DeleteOk())


def _binding(
    ch: MethodChannel, m: commands.Exchange.Bind | commands.Exchange.Unbind, payload: bytes, unbind: bool
) -> None:
    ch.session.vhost.bind(
        ch.session.conn,
        "exchange",
        strip_cr_lf(m.destination or ""),
        strip_cr_lf(m.source or ""),
        m.routing_key or "",
        arguments_of(m),
        unbind=unbind,
    )


def exchange_bind(ch: MethodChannel, m: commands.Exchange.Bind, payload: bytes) -> None:
    _binding(ch, m, payload, unbind=False)
    if not m.nowait:
        ch.send(commands.Exchange.BindOk())


def exchange_unbind(ch: MethodChannel, m: commands.Exchange.Unbind, payload: bytes) -> None:
    _binding(ch, m, payload, unbind=True)
    if not m.nowait:
        ch.send(commands.Exchange.UnbindOk())


HANDLERS: dict[type, Any] = {
    commands.Exchange.Declare: exchange_declare,
    commands.Exchange.Delete: exchange_delete,
    commands.Exchange.Bind: exchange_bind,
    commands.Exchange.Unbind: exchange_unbind,
}
