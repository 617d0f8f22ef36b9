"""A RabbitMQ-compatible management HTTP API for fakerabbit, and ``fakerabbit ctl``, its rabbitmqctl-style client.

``FakeRabbit(management=True)`` serves it on a free port (``rabbit.management_url``); ``fakerabbit serve`` serves
it on port 15672 by default. See docs/ci.md.
"""

from __future__ import annotations

from fakerabbit.management.server import ManagementListenError, ManagementServer

__all__ = ["ManagementListenError", "ManagementServer"]
