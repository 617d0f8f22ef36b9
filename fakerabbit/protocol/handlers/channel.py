"""channel.flow and channel.close (channel.open is handled by the channel's state machine).

A client's ``channel.flow-ok`` and an unsolicited ``channel.close-ok`` have no handler: RabbitMQ answers them
with 503 ``unimplemented method``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fakerabbit.broker import errors
from fakerabbit.protocol.codec import commands

if TYPE_CHECKING:
    from fakerabbit.protocol.channel import ChannelHandler


def channel_flow(ch: ChannelHandler, m: commands.Channel.Flow, payload: bytes) -> None:
    # RabbitMQ stopped honouring a client's flow(active=false) in 3.3: it is a connection error.
    if not m.active:
        raise errors.NotImplemented_("active=false")
    ch.send(commands.Channel.FlowOk(active=True))


def channel_close(ch: ChannelHandler, m: commands.Channel.Close, payload: bytes) -> None:
    ch.flush_confirms()  # the confirms of publishes before the close still go out
    ch.release()
    ch.state = "closing"  # anything more on it is ignored until the close-ok is out
    ch.conn.channel_closing(ch)


HANDLERS: dict[type, Any] = {
    commands.Channel.Flow: channel_flow,
    commands.Channel.Close: channel_close,
}
