"""Users and per-vhost configure/write/read permissions, checked where RabbitMQ checks them (rabbit_channel).

On the fake a user is made with ``FakeRabbit(users=...)`` and ``broker.auth``; on the real broker with
``rabbitmqctl`` (a uniquely named user, deleted afterwards). Each test gives its user a name prefix it may use.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pika
import pika.exceptions
import pytest

from fakerabbit import FakeRabbit
from tests.conformance.conftest import Target


@dataclass
class User:
    name: str
    url: str
    grant: Callable[[str, str, str], None]  # configure, write, read regexps on vhost "/"
    revoke: Callable[[], None]
    admin_url: str  # guest on the same broker
    names_permission: bool = False  # 4.x: "configure access to queue ..." (3.x: "access to queue ...")

    def connect(self) -> pika.BlockingConnection:
        return pika.BlockingConnection(pika.URLParameters(self.url))

    def own(self, base: str) -> str:
        return f"{self.name}-{base}"


@pytest.fixture
def user(broker: Target) -> Iterator[User]:
    name = f"perm-{uuid.uuid4().hex[:8]}"
    if broker.fake is not None:
        with FakeRabbit(users={"guest": "guest", name: "pw"}) as rabbit:
            auth = rabbit._broker.auth

            def grant_fake(configure: str, write: str, read: str) -> None:
                rabbit._call(lambda: auth.set_permissions(name, "/", configure, write, read))

            def revoke_fake() -> None:
                rabbit._call(lambda: auth.permissions.pop((name, "/"), None))

            yield User(
                name,
                f"amqp://{name}:pw@127.0.0.1:{rabbit.port}/%2F",
                grant_fake,
                revoke_fake,
                rabbit.url,
                broker.at_least("4.0"),
            )
        return
    real = broker.real
    assert real is not None
    real.add_user(name, "pw")

    def grant_real(configure: str, write: str, read: str) -> None:
        real.set_permissions(name, configure, write, read)

    def revoke_real() -> None:
        real.clear_permissions(name)

    try:
        yield User(
            name,
            re.sub(r"//[^@]*@", f"//{name}:pw@", real.url),
            grant_real,
            revoke_real,
            real.url,
            broker.at_least("4.0"),
        )
    finally:
        real.delete_user(name)
        _cleanup_real(real.url, name)


def _cleanup_real(url: str, prefix: str) -> None:
    conn = pika.BlockingConnection(pika.URLParameters(url))
    try:
        for suffix in ("q", "q2", "x", "x2", "dst", "ae"):
            ch = conn.channel()
            ch.queue_delete(f"{prefix}-{suffix}")
            ch.exchange_delete(f"{prefix}-{suffix}")
            ch.close()
    finally:
        conn.close()


def refused(conn: pika.BlockingConnection, fn: Callable[[Any], object]) -> tuple[int, str]:
    ch = conn.channel()
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as exc:
        fn(ch)
        ch.basic_qos(prefetch_count=1)  # flush asynchronous methods (publish, ack)
    return exc.value.reply_code, exc.value.reply_text


def denied(user: User, perm: str, kind: str, name: str) -> tuple[int, str]:
    """RabbitMQ's 403; 4.x names the permission that is missing (checked live on 3.10.8, 4.0.5 and 4.3.6)."""
    access = f"{perm} access" if user.names_permission else "access"
    return 403, f"ACCESS_REFUSED - {access} to {kind} '{name}' in vhost '/' refused for user '{user.name}'"


def test_no_permissions_on_the_vhost(broker: Target, user: User) -> None:
    user.revoke()
    with pytest.raises(pika.exceptions.ProbableAccessDeniedError) as exc:
        user.connect()
    assert "NOT_ALLOWED - access to vhost '/' refused for user" in str(exc.value)


def test_configure_is_needed_to_declare_and_delete(broker: Target, user: User) -> None:
    own = "^" + re.escape(user.name) + "-"
    user.grant(own, ".*", ".*")
    conn = user.connect()
    try:
        ch = conn.channel()
        ch.queue_declare(user.own("q"))
        ch.exchange_declare(user.own("x"), "fanout")
        other_q, other_x = "perm-not-mine-q", "perm-not-mine-x"
        assert refused(conn, lambda ch: ch.queue_declare(other_q)) == denied(user, "configure", "queue", other_q)
        assert refused(conn, lambda ch: ch.exchange_declare(other_x, "direct")) == denied(
            user, "configure", "exchange", other_x
        )
        # permission comes before existence: deleting something missing is still refused
        assert refused(conn, lambda ch: ch.queue_delete(other_q)) == denied(user, "configure", "queue", other_q)
        assert refused(conn, lambda ch: ch.exchange_delete(other_x)) == denied(user, "configure", "exchange", other_x)
        # passive declares need no permission
        conn.channel().exchange_declare("amq.direct", "direct", passive=True)
        ch = conn.channel()
        ch.queue_delete(user.own("q"))
        ch.exchange_delete(user.own("x"))
    finally:
        conn.close()


def test_redeclaring_an_existing_queue_needs_configure(broker: Target, user: User) -> None:
    user.grant("^$", ".*", ".*")
    q = user.own("q")
    admin = pika.BlockingConnection(pika.URLParameters(user.admin_url))
    try:
        admin.channel().queue_declare(q)
        conn = user.connect()
        try:
            assert refused(conn, lambda ch: ch.queue_declare(q)) == denied(user, "configure", "queue", q)
            conn.channel().queue_declare(q, passive=True)
        finally:
            conn.close()
    finally:
        admin.channel().queue_delete(q)
        admin.close()


def test_write_is_needed_to_publish(broker: Target, user: User) -> None:
    user.grant(".*", "^" + re.escape(user.name) + "-", ".*")
    conn = user.connect()
    try:
        ch = conn.channel()
        ch.exchange_declare(user.own("x"), "fanout")
        ch.confirm_delivery()
        ch.basic_publish(user.own("x"), "", b"ok")
        assert refused(conn, lambda ch: ch.basic_publish("", "anything", b"x")) == denied(
            user, "write", "exchange", "amq.default"
        )
        # write is checked before the exchange is looked up
        assert refused(conn, lambda ch: ch.basic_publish("perm-missing-x", "k", b"x")) == denied(
            user, "write", "exchange", "perm-missing-x"
        )
        conn.channel().exchange_delete(user.own("x"))
    finally:
        conn.close()


def test_read_is_needed_to_get_consume_and_purge(broker: Target, user: User) -> None:
    own = "^" + re.escape(user.name) + "-"
    user.grant(".*", ".*", own)
    q, q2 = user.own("q"), user.own("q2")
    conn = user.connect()
    try:
        ch = conn.channel()
        ch.queue_declare(q)
        ch.basic_get(q)
        ch.queue_purge(q)
        not_mine = "perm-not-mine-q"
        for op in (
            lambda ch: ch.basic_get(not_mine),
            lambda ch: ch.basic_consume(not_mine, lambda *a: None),
            lambda ch: ch.queue_purge(not_mine),
        ):
            assert refused(conn, op) == denied(user, "read", "queue", not_mine)  # even though the queue does not exist
        conn.channel().queue_declare(q2)
        conn.channel().queue_delete(q2)
        conn.channel().queue_delete(q)
    finally:
        conn.close()


def test_bindings_need_write_on_the_destination_and_read_on_the_source(broker: Target, user: User) -> None:
    own = "^" + re.escape(user.name) + "-"
    user.grant(".*", own, own)
    q, x, dst = user.own("q"), user.own("x"), user.own("dst")
    conn = user.connect()
    try:
        ch = conn.channel()
        ch.queue_declare(q)
        ch.exchange_declare(x, "fanout")
        ch.exchange_declare(dst, "fanout")
        ch.queue_bind(q, x)
        ch.exchange_bind(dst, x)
        assert refused(conn, lambda ch: ch.queue_bind(q, "amq.fanout")) == denied(
            user, "read", "exchange", "amq.fanout"
        )
        assert refused(conn, lambda ch: ch.exchange_bind("amq.fanout", x)) == denied(
            user, "write", "exchange", "amq.fanout"
        )
        assert refused(conn, lambda ch: ch.queue_unbind(q, "amq.fanout")) == denied(
            user, "read", "exchange", "amq.fanout"
        )
        # write on the destination is checked first, even if it does not exist
        assert refused(conn, lambda ch: ch.queue_bind("perm-other-q", "amq.fanout")) == denied(
            user, "write", "queue", "perm-other-q"
        )
        ch = conn.channel()
        ch.queue_delete(q)
        ch.exchange_delete(x)
        ch.exchange_delete(dst)
    finally:
        conn.close()


def test_alternate_exchange_needs_write_on_it(broker: Target, user: User) -> None:
    own = "^" + re.escape(user.name) + "-"
    user.grant(".*", own, ".*")
    conn = user.connect()
    try:
        assert refused(
            conn,
            lambda ch: ch.exchange_declare(user.own("x"), "direct", arguments={"alternate-exchange": "amq.fanout"}),
        ) == denied(user, "write", "exchange", "amq.fanout")
        conn.channel().exchange_declare(user.own("x2"), "direct", arguments={"alternate-exchange": user.own("ae")})
        conn.channel().exchange_delete(user.own("x2"))
    finally:
        conn.close()


def test_empty_pattern_denies_everything(broker: Target, user: User) -> None:
    user.grant("", "", "")
    conn = user.connect()
    try:
        q = user.own("q")
        assert refused(conn, lambda ch: ch.queue_declare(q)) == denied(user, "configure", "queue", q)
        assert refused(conn, lambda ch: ch.basic_publish("amq.direct", "k", b"x")) == denied(
            user, "write", "exchange", "amq.direct"
        )
    finally:
        conn.close()


def test_user_id_must_be_the_connected_user(broker: Target, user: User) -> None:
    user.grant(".*", ".*", ".*")
    conn = user.connect()
    try:
        conn.channel().basic_publish("amq.direct", "k", b"x", pika.BasicProperties(user_id=user.name))
        code, text = refused(
            conn, lambda ch: ch.basic_publish("amq.direct", "k", b"x", pika.BasicProperties(user_id="someone"))
        )
        assert (code, text) == (
            406,
            f"PRECONDITION_FAILED - user_id property set to 'someone' but authenticated user was '{user.name}'",
        )
    finally:
        conn.close()
