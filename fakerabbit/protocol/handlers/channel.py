"""channel.flow and channel.close (channel.open is handled by the channel's state machine).

A client's ``channel.flow-ok`` and an unsolicited ``channel.close-ok`` have no handler: RabbitMQ answers them
with 503 ``unimplemented method``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fakerabbit.broker import errors
from fakerabbit.protocol.codec import commands

if TYPE_CHECKING:
    from fakerabbit.protocol.handlers.context import MethodChannel


def channel_flow(ch: MethodChannel, m: commands.Channel.Flow, payload: bytes) -> None:
    # RabbitMQ stopped honouring a client's flow(active=false) in 3.3: it is a connection error.
    if not m.active:
        raise errors.NotImplemented_("active=false")
    ch.send(commands.Channel.FlowOk(active=True))


def channel_close(ch: MethodChannel, m: commands.Channel.Close, payload: bytes) -> None:
    ch.close_by_client()


HANDLERS: dict[type, Any] = {
    commands.Channel.Flow: channel_flow,
    commands.Channel.Close: channel_close,
}
