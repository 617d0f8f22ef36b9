"""confirm.select."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fakerabbit.protocol.codec import commands

if TYPE_CHECKING:
    from fakerabbit.protocol.handlers.context import MethodChannel


def confirm_select(ch: MethodChannel, m: commands.Confirm.Select, payload: bytes) -> None:
    ch.session.confirm_select()
    if not m.nowait:
        ch.send(commands.Confirm.SelectOk())


HANDLERS: dict[type, Any] = {commands.Confirm.Select: confirm_select}
