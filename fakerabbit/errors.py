"""The errors fakerabbit's public API raises (re-exported by :mod:`fakerabbit`).

- :class:`ListenError`: ``FakeRabbit`` could not bind a port (``address`` says which); its subclass
  :class:`ManagementListenError`: the management API's port.
- :class:`PolicyError`: ``rabbit.set_policy(...)`` refused, with RabbitMQ's validation message.
- :class:`AMQPError` (:class:`SoftError`, :class:`HardError`): what the broker raises for a refused operation,
  with RabbitMQ's reply ``code`` and ``reply_text`` (the protocol layer turns it into ``channel.close`` /
  ``connection.close``); the management API's 4xx answers carry the same texts.
"""

from __future__ import annotations

from fakerabbit.broker.errors import AMQPError, HardError, SoftError
from fakerabbit.broker.policy import PolicyError

__all__ = ["AMQPError", "HardError", "ListenError", "ManagementListenError", "PolicyError", "SoftError"]


class ListenError(OSError):
    """A listening port (AMQP, amqps, management) could not be bound: ``address`` (``HOST:PORT``) says which,
    ``errno`` and ``strerror`` why (``EADDRINUSE``: the port is taken)."""

    def __init__(self, errno: int | None, strerror: str | None, address: str) -> None:
        super().__init__(errno, strerror)
        self.address = address


class ManagementListenError(ListenError):
    """The management port (HTTP or HTTPS) could not be bound (``address`` says which)."""
