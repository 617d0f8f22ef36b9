"""The errors fakerabbit's public API raises (re-exported by :mod:`fakerabbit`).

- :class:`ManagementListenError`: ``FakeRabbit(management=True)`` could not bind the management port.
- :class:`PolicyError`: ``rabbit.set_policy(...)`` refused, with RabbitMQ's validation message.
- :class:`AMQPError` (:class:`SoftError`, :class:`HardError`): what the broker raises for a refused operation,
  with RabbitMQ's reply ``code`` and ``reply_text`` (the protocol layer turns it into ``channel.close`` /
  ``connection.close``); the management API's 4xx answers carry the same texts.
"""

from __future__ import annotations

from fakerabbit.broker.errors import AMQPError, HardError, SoftError
from fakerabbit.broker.policy import PolicyError

__all__ = ["AMQPError", "HardError", "ManagementListenError", "PolicyError", "SoftError"]


class ManagementListenError(OSError):
    """The management port could not be bound (``address`` says which)."""

    def __init__(self, errno: int | None, strerror: str | None, address: str) -> None:
        super().__init__(errno, strerror)
        self.address = address
