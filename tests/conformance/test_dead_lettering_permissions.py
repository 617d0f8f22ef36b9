"""The DLX permission rule at ``queue.declare``: a queue with ``x-dead-letter-exchange`` needs *read* on itself
and *write* on the DLX (``rabbit_channel`` ``check_read_permitted`` / ``check_write_permitted``).

On the fake the user is made with ``FakeRabbit(users=...)`` and ``broker.auth.set_permissions``; on the real broker
with ``rabbitmqctl`` (a uniquely named user, deleted afterwards).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pika
import pytest

from fakerabbit import FakeRabbit
from tests.conformance.conftest import Target


@dataclass
class LimitedUser:
    """Connects as a user whose permissions the test sets."""

    url: str
    user: str
    set: object  # (configure, write, read) -> None
    names_permission: bool = False  # 4.x: "write access to exchange ..." (3.x: "access to exchange ...")

    def refused(self, perm: str, resource: str) -> str:
        """RabbitMQ's 403 text (4.x names the permission; checked live on 3.10.8, 4.0.5 and 4.3.6)."""
        access = f"{perm} access" if self.names_permission else "access"
        return f"ACCESS_REFUSED - {access} to {resource} in vhost '/' refused for user '{self.user}'"


@pytest.fixture
def limited(broker: Target) -> Iterator[LimitedUser]:
    user = f"dlperm-{uuid.uuid4().hex[:8]}"
    if broker.fake is not None:
        with FakeRabbit(users={user: "pw"}) as rabbit:

            def set_fake(configure: str, write: str, read: str) -> None:
                rabbit._call(lambda: rabbit._broker.auth.set_permissions(user, "/", configure, write, read))

            yield LimitedUser(f"amqp://{user}:pw@127.0.0.1:{rabbit.port}/%2F", user, set_fake, broker.at_least("4.0"))
        return
    real = broker.real
    assert real is not None
    real.add_user(user, "pw")

    def set_real(configure: str, write: str, read: str) -> None:
        real.set_permissions(user, configure, write, read)

    try:
        yield LimitedUser(re.sub(r"//[^@]*@", f"//{user}:pw@", real.url), user, set_real, broker.at_least("4.0"))
    finally:
        real.delete_user(user)


def _declare(url: str, queue: str, arguments: dict[str, object]) -> pika.exceptions.ChannelClosedByBroker | None:
    conn = pika.BlockingConnection(pika.URLParameters(url))
    try:
        ch = conn.channel()
        try:
            ch.queue_declare(queue, arguments=arguments)
        except pika.exceptions.ChannelClosedByBroker as e:
            return e
        ch.queue_delete(queue)
        return None
    finally:
        if conn.is_open:
            conn.close()


def test_dlx_needs_write_on_the_exchange(broker: Target, limited: LimitedUser) -> None:
    """Read on the queue but no write on the DLX: 403 naming the exchange."""
    q = f"{limited.user}-q"
    limited.set("^" + re.escape(limited.user), "^" + re.escape(limited.user), ".*")
    err = _declare(limited.url, q, {"x-dead-letter-exchange": "other-dlx"})
    assert err is not None and err.reply_code == 403
    assert err.reply_text == limited.refused("write", "exchange 'other-dlx'")


def test_default_exchange_as_dlx_is_checked_as_amq_default(broker: Target, limited: LimitedUser) -> None:
    """The default exchange as DLX is checked under the name ``amq.default``."""
    q = f"{limited.user}-q"
    limited.set("^" + re.escape(limited.user), "^" + re.escape(limited.user), ".*")
    err = _declare(limited.url, q, {"x-dead-letter-exchange": ""})
    assert err is not None and err.reply_code == 403
    assert err.reply_text == limited.refused("write", "exchange 'amq.default'")


def test_dlx_needs_read_on_the_queue(broker: Target, limited: LimitedUser) -> None:
    """Write on the DLX but no read on the queue: 403 naming the queue."""
    q = f"{limited.user}-q"
    limited.set(".*", ".*", "^nothing$")
    err = _declare(limited.url, q, {"x-dead-letter-exchange": "dlx"})
    assert err is not None and err.reply_code == 403
    assert err.reply_text == limited.refused("read", f"queue '{q}'")


def test_dlx_permissions_granted(broker: Target, limited: LimitedUser) -> None:
    """Configure+read on the queue and write on the DLX: the declare succeeds (the DLX need not exist)."""
    q = f"{limited.user}-q"
    limited.set("^" + re.escape(limited.user), "^" + re.escape(limited.user), "^" + re.escape(limited.user))
    assert _declare(limited.url, q, {"x-dead-letter-exchange": f"{limited.user}-dlx"}) is None


def test_no_dlx_needs_no_read(broker: Target, limited: LimitedUser) -> None:
    """Without a DLX argument only configure is needed to declare."""
    q = f"{limited.user}-q"
    limited.set(".*", "^nothing$", "^nothing$")
    assert _declare(limited.url, q, {"x-message-ttl": 10}) is None


def test_configure_is_checked_before_the_dlx(broker: Target, limited: LimitedUser) -> None:
    """Without configure permission the error names the queue's configure check, before the DLX checks."""
    q = f"{limited.user}-q"
    limited.set("^nothing$", "^nothing$", "^nothing$")
    err = _declare(limited.url, q, {"x-dead-letter-exchange": "dlx"})
    assert err is not None and err.reply_code == 403
    assert err.reply_text == limited.refused("configure", f"queue '{q}'")


def test_dlx_type_error_versus_permissions(broker: Target, limited: LimitedUser) -> None:
    """Configure is checked before the DLX type (live 3.10.8; RabbitMQ's source reads as if the type came first); with
    configure
    granted, the wrong type is a 406 before any DLX permission check (RabbitMQ:
    ``rabbit_amqqueue:check_declare_arguments/3``; ``rabbit_channel`` (rabbit_misc:r_arg))."""
    q = f"{limited.user}-q"
    limited.set("^nothing$", "^nothing$", "^nothing$")
    err = _declare(limited.url, q, {"x-dead-letter-exchange": 5})
    assert err is not None and err.reply_code == 403
    assert err.reply_text == limited.refused("configure", f"queue '{q}'")
    limited.set(".*", "^nothing$", "^nothing$")
    err = _declare(limited.url, q, {"x-dead-letter-exchange": 5})
    assert err is not None and err.reply_code == 406
    assert err.reply_text == (
        f"PRECONDITION_FAILED - invalid type 'signedint' for arg 'x-dead-letter-exchange' in queue '{q}' in vhost '/'"
    )
