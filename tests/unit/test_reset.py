"""Broker.reset(): back to the initial definitions (vhosts, users, tags, permissions), socket-free."""

from __future__ import annotations

from fakerabbit.broker.broker import Broker
from fakerabbit.clock import VirtualClock


def test_reset_restores_vhosts_users_tags_and_permissions() -> None:
    broker = Broker(VirtualClock(), users={"guest": "guest"}, vhosts=("/", "a"))
    broker.delete_vhost("/")
    broker.add_vhost("b", owner="guest")
    broker.auth.put_user("new", "pw", ["administrator"])
    broker.auth.put_user("guest", "other", ["monitoring"])
    broker.auth.set_permissions("guest", "a", "^x$", "", "")
    broker.reset()
    assert list(broker.vhosts) == ["/", "a"]
    assert broker.auth.users == {"guest": "guest"}
    assert broker.auth.tags == {}
    assert {k: (p.configure, p.write, p.read) for k, p in broker.auth.permissions.items()} == {
        ("guest", "/"): (".*", ".*", ".*"),
        ("guest", "a"): (".*", ".*", ".*"),
    }
    assert broker.vhost("/").exchanges["amq.direct"].type == "direct"


def test_keep_definitions_moves_what_reset_restores() -> None:
    """``fakerabbit serve --definitions``: the imported definitions are the node's initial ones."""
    broker = Broker(VirtualClock())
    broker.auth.put_user("app", "secret", [])
    broker.add_vhost("imported")
    broker.keep_definitions()
    broker.auth.delete_user("app")
    broker.delete_vhost("imported")
    broker.reset()
    assert list(broker.vhosts) == ["/", "imported"]
    assert broker.auth.users == {"guest": "guest", "app": "secret"}
    assert broker.auth.can_access_vhost("app", "imported")


def test_a_new_vhost_with_an_owner_gives_permissions_to_it_only() -> None:
    broker = Broker(VirtualClock(), users={"guest": "guest", "other": "x"})
    broker.add_vhost("mine", owner="other")
    assert broker.auth.can_access_vhost("other", "mine")
    assert not broker.auth.can_access_vhost("guest", "mine")
    broker.delete_vhost("mine")
    assert not broker.auth.can_access_vhost("other", "mine")
    assert "mine" not in broker.vhosts
