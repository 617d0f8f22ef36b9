"""Handlers for client methods, one module per AMQP class; ``HANDLERS`` maps pamqp classes to them."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from fakerabbit.protocol.handlers import basic, channel, confirm, exchange, extensions, queue, tx

if TYPE_CHECKING:
    from fakerabbit.protocol.channel import ChannelHandler

Handler = Callable[["ChannelHandler", Any, bytes], None]

HANDLERS: dict[type, Handler] = {}
for _module in (channel, exchange, queue, basic, confirm, tx, extensions):
    HANDLERS.update(_module.HANDLERS)
