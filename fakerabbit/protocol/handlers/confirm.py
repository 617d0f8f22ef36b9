"""confirm.select."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fakerabbit.protocol.codec import commands

if TYPE_CHECKING:
    from fakerabbit.protocol.channel import ChannelHandler


def confirm_select(ch: ChannelHandler, m: commands.Confirm.Select, payload: bytes) -> None:
    ch.session.confirm_select()
    if not m.nowait:
        ch.send(commands.Confirm.SelectOk())


HANDLERS: dict[type, Any] = {commands.Confirm.Select: confirm_select}
