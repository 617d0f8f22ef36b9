"""What a method handler needs of the channel it runs on: :class:`MethodChannel`, which
:class:`~fakerabbit.protocol.channel.ChannelHandler` implements. Handlers depend on this, never on the channel
class (which looks them up in ``HANDLERS``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from fakerabbit.broker.profile import AMQPRules
from fakerabbit.broker.session import Session
from fakerabbit.protocol.codec import base

__all__ = ["Handler", "MethodChannel"]


class MethodChannel(Protocol):
    """An open channel, as the handler of one of its methods sees it."""

    @property
    def number(self) -> int: ...

    @property
    def session(self) -> Session:
        """The channel's broker side."""
        ...

    @property
    def rules(self) -> AMQPRules:
        """The wire rules of the RabbitMQ version the broker behaves as."""
        ...

    def send(self, method: base.Frame) -> None:
        """Send a method on this channel (after the confirms of earlier publishes)."""
        ...

    def send_get(self, method: base.Frame, props: bytes, body: bytes) -> None:
        """``basic.get-ok`` with its content."""
        ...

    def write(self, frame: bytes) -> None:
        """Queue an encoded frame."""
        ...

    def close_by_client(self) -> None:
        """The client's ``channel.close``: close-ok follows once the reader is done with the current input."""
        ...


#: A handler: the channel, the decoded method and the method frame's payload (class and method ids included).
Handler = Callable[[MethodChannel, Any, bytes], None]
