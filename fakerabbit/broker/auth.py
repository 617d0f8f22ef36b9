"""Users, passwords and per-vhost configure/write/read permissions, checked where RabbitMQ checks them."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from fakerabbit.broker import errors


@dataclass(slots=True)
class Permission:
    configure: str = ".*"
    write: str = ".*"
    read: str = ".*"

    def allows(self, kind: str, name: str) -> bool:
        if kind == "write":
            pattern = self.write
        elif kind == "read":
            pattern = self.read
        elif kind == "configure":
            pattern = self.configure
        else:
            raise KeyError(kind)
        if pattern == ".*":  # the default, full permission: matches every name (this runs on every publish)
            return True
        # RabbitMQ anchors nothing but matches with re:run on the whole name; "" matches nothing.
        return pattern != "" and _search(pattern)(name) is not None


@functools.lru_cache(maxsize=256)
def _search(pattern: str) -> Callable[[str], re.Match[str] | None]:
    """The compiled pattern's ``search``, compiled once per pattern (``re``'s own cache costs a lookup)."""
    return re.compile(pattern).search


@dataclass(slots=True)
class Auth:
    users: dict[str, str] = field(default_factory=lambda: {"guest": "guest"})
    permissions: dict[tuple[str, str], Permission] = field(default_factory=dict)
    tags: dict[str, list[str]] = field(default_factory=dict)

    def authenticate(self, user: str, password: str) -> bool:
        return self.users.get(user) == password

    def can_access_vhost(self, user: str, vhost: str) -> bool:
        return (user, vhost) in self.permissions

    def set_permissions(
        self, user: str, vhost: str, configure: str = ".*", write: str = ".*", read: str = ".*"
    ) -> None:
        self.permissions[(user, vhost)] = Permission(configure, write, read)

    def check(self, user: str, vhost: str, kind: str, resource: str, name: str) -> None:
        """Raise 403 ACCESS_REFUSED unless ``user`` has ``kind`` permission on the resource."""
        perm = self.permissions.get((user, vhost))
        checked = "amq.default" if resource == "exchange" and name == "" else name
        if perm is None or not perm.allows(kind, checked):
            rendered = errors.rs_queue(checked, vhost) if resource == "queue" else errors.rs_exchange(checked, vhost)
            raise errors.AccessRefused(f"access to {rendered} refused for user '{user}'")
