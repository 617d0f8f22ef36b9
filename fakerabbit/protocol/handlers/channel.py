"""channel.flow, channel.close, channel.close-ok (channel.open is handled by the connection)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pamqp import commands

if TYPE_CHECKING:
    from fakerabbit.protocol.channel import ChannelHandler


def channel_flow(ch: ChannelHandler, m: commands.Channel.Flow, payload: bytes) -> None:
    ch.session.flow(bool(m.active))
    ch.send(commands.Channel.FlowOk(active=bool(m.active)))


def channel_close(ch: ChannelHandler, m: commands.Channel.Close, payload: bytes) -> None:
    ch.session.close()
    ch.send(commands.Channel.CloseOk())
    ch.conn.channel_gone(ch.number)


def channel_close_ok(ch: ChannelHandler, m: commands.Channel.CloseOk, payload: bytes) -> None:
    ch.conn.channel_gone(ch.number)


def channel_flow_ok(ch: ChannelHandler, m: commands.Channel.FlowOk, payload: bytes) -> None:
    return None


HANDLERS: dict[type, Any] = {
    commands.Channel.Flow: channel_flow,
    commands.Channel.FlowOk: channel_flow_ok,
    commands.Channel.Close: channel_close,
    commands.Channel.CloseOk: channel_close_ok,
}
