"""Handlers for client methods, one module per AMQP class; ``HANDLERS`` maps pamqp classes to them."""

from __future__ import annotations

from fakerabbit.protocol.handlers import basic, channel, confirm, exchange, extensions, queue, tx
from fakerabbit.protocol.handlers.context import Handler, MethodChannel

__all__ = ["HANDLERS", "Handler", "MethodChannel"]

HANDLERS: dict[type, Handler] = {}
for _module in (channel, exchange, queue, basic, confirm, tx, extensions):
    HANDLERS.update(_module.HANDLERS)
