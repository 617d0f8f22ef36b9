"""What the model below the broker root reads from its node: a leaf, so that no broker module reaches up.

:class:`~fakerabbit.broker.broker.Broker` implements :class:`NodeContext` (structurally); queues, dead-letter
workers, delayed messages and vhosts hold it typed as this Protocol (or a narrower one they declare), never as
``Broker``, so their imports point down only (``tests/unit/test_layers.py`` keeps it so).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from fakerabbit.broker.events import EventLog
    from fakerabbit.broker.profile import Profile
    from fakerabbit.clock import Clock

__all__ = ["NodeContext"]


class NodeContext(Protocol):
    """The node's clock, event log, version profile, settings and id source."""

    @property
    def clock(self) -> Clock: ...

    @property
    def events(self) -> EventLog: ...

    @property
    def profile(self) -> Profile: ...

    @property
    def dead_lettering(self) -> bool:
        """Dead-lettering is on (``FakeRabbit(dead_lettering=False)`` turns it off)."""
        ...

    @property
    def dead_letter_confirm_timeout_ms(self) -> int:
        """How often an at-least-once dead-letter worker retries what it could not deliver."""
        ...

    @property
    def consumer_timeout_ms(self) -> int | None:
        """The node's ``consumer_timeout`` (1 800 000 ms); ``None``: unset (RabbitMQ's ``undefined``)."""
        ...

    def next_msg_id(self) -> int:
        """A new message id (unique in the node)."""
        ...

    def run_soon(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` after the work in hand, between client commands (work RabbitMQ does in the background)."""
        ...

    def report_problem(self, text: str) -> None:
        """Record something the fake does not model (re-raised at fixture teardown)."""
        ...
