"""Users, passwords, tags and per-vhost configure/write/read permissions, checked where RabbitMQ checks them."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from fakerabbit.broker import errors

#: Tags that let a user into the management API (RabbitMQ's ``rabbit_mgmt_util``): anything else is refused with
#: 401 ``Not management user``. Each includes the rights of those after it.
MANAGEMENT_TAGS = ("administrator", "monitoring", "policymaker", "management")


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
        if pattern == "":
            return False
        search = _search(pattern)
        return search is not None and search(name) is not None


@functools.lru_cache(maxsize=256)
def _search(pattern: str) -> Callable[[str], re.Match[str] | None] | None:
    """The compiled pattern's ``search``, compiled once per pattern (``re``'s own cache costs a lookup); ``None``
    for a pattern that does not compile (it matches nothing: such patterns are refused when set)."""
    try:
        return re.compile(pattern).search
    except (re.error, RecursionError, OverflowError):
        return None


class InvalidRegexp(ValueError):
    """A permission pattern that does not compile. ``pattern``, ``message`` and ``offset`` are what RabbitMQ's
    ``{invalid_regexp, Pattern, {Message, Offset}}`` error carries (PCRE's wording where it is known)."""

    def __init__(self, pattern: str, message: str, offset: int) -> None:
        super().__init__(f"invalid_regexp {pattern!r}: {message} at {offset}")
        self.pattern = pattern
        self.message = message
        self.offset = offset


# Python ``re`` messages -> PCRE2's (RabbitMQ 4.x); RabbitMQ 3.x's PCRE1 wording is in ``pcre1``.
_PCRE_MESSAGES: tuple[tuple[str, str, str], ...] = (
    ("missing ), unterminated subpattern", "missing closing parenthesis", "missing )"),
    (
        "unterminated character set",
        "missing terminating ] for character class",
        "missing terminating ] for character class",
    ),
    ("unbalanced parenthesis", "unmatched closing parenthesis", "unmatched parentheses"),
    ("nothing to repeat", "quantifier does not follow a repeatable item", "nothing to repeat"),
    ("multiple repeat", "quantifier does not follow a repeatable item", "nothing to repeat"),
    ("bad escape (end of pattern)", "\\ at end of pattern", "\\ at end of pattern"),
)


def validate_regexp(pattern: str, *, pcre1: bool = False) -> None:
    """Raise :class:`InvalidRegexp` unless ``pattern`` compiles (RabbitMQ refuses such permissions with 400)."""
    try:
        re.compile(pattern)
    except re.error as exc:
        text = str(exc.msg)
        message = text
        for py, pcre2, pcre1_text in _PCRE_MESSAGES:
            if text.startswith(py):
                message = pcre1_text if pcre1 else pcre2
                break
        raise InvalidRegexp(pattern, message, len(pattern.encode())) from None
    except (RecursionError, OverflowError):
        raise InvalidRegexp(pattern, "regular expression is too large", 0) from None


@dataclass(frozen=True, slots=True)
class AuthState:
    """A copy of an :class:`Auth`'s users, tags and permissions (what a reset restores)."""

    users: dict[str, str]
    tags: dict[str, list[str]]
    permissions: dict[tuple[str, str], Permission]


@dataclass(slots=True)
class Auth:
    users: dict[str, str] = field(default_factory=lambda: {"guest": "guest"})
    permissions: dict[tuple[str, str], Permission] = field(default_factory=dict)
    tags: dict[str, list[str]] = field(default_factory=dict)
    #: 4.x: a refused resource access names the permission (``configure access to queue 'q' …``); 3.x does not.
    names_permission: bool = False

    def authenticate(self, user: str, password: str) -> bool:
        stored = self.users.get(user)
        if stored is None:
            return False
        try:
            return bool(stored == password)
        except (KeyError, ValueError, TypeError):  # a stored hash that cannot be checked never logs in
            return False

    def can_access_vhost(self, user: str, vhost: str) -> bool:
        return (user, vhost) in self.permissions

    def user_tags(self, user: str) -> list[str]:
        """A user's tags; users without a tags entry (``FakeRabbit(users=...)``) are administrators."""
        tags = self.tags.get(user)
        return list(tags) if tags is not None else ["administrator"]

    def has_tag(self, user: str, tag: str) -> bool:
        """Does ``user`` have ``tag`` or a tag that includes it (administrator > monitoring > management,
        administrator > policymaker > management)?"""
        tags = set(self.user_tags(user))
        if "administrator" in tags:
            return True
        if tag == "management":
            return bool(tags & set(MANAGEMENT_TAGS))
        return tag in tags

    def set_permissions(
        self, user: str, vhost: str, configure: str = ".*", write: str = ".*", read: str = ".*"
    ) -> None:
        """Give ``user`` these permission patterns on ``vhost``; :class:`InvalidRegexp` if one does not compile."""
        for pattern in (configure, write, read):
            if pattern not in (".*", ""):
                validate_regexp(pattern)
        self.permissions[(user, vhost)] = Permission(configure, write, read)

    def put_user(self, name: str, password: str | None = None, tags: list[str] | None = None) -> None:
        """Create or update user ``name``: its password (plain, or a hash object that compares equal to the
        password) when given, its tags when given."""
        if password is not None:
            self.users[name] = password
        if tags is not None:
            self.tags[name] = list(tags)

    def delete_user(self, name: str) -> None:
        """Remove user ``name`` with its tags and permissions."""
        self.users.pop(name, None)
        self.tags.pop(name, None)
        for key in [k for k in self.permissions if k[0] == name]:
            del self.permissions[key]

    def clear_permissions(self, user: str, vhost: str) -> bool:
        """Remove ``user``'s permissions on ``vhost``; False if it had none."""
        return self.permissions.pop((user, vhost), None) is not None

    def forget_vhost(self, vhost: str) -> None:
        """Remove every user's permissions on ``vhost`` (it was deleted)."""
        for key in [k for k in self.permissions if k[1] == vhost]:
            del self.permissions[key]

    def snapshot(self) -> AuthState:
        """Users, tags and permissions as they are now (for :meth:`restore`)."""
        return AuthState(
            dict(self.users),
            {u: list(t) for u, t in self.tags.items()},
            {k: replace(p) for k, p in self.permissions.items()},
        )

    def restore(self, state: AuthState) -> None:
        """Back to the users, tags and permissions of ``state`` (the same dicts, refilled)."""
        self.users.clear()
        self.users.update(state.users)
        self.tags.clear()
        self.tags.update({u: list(t) for u, t in state.tags.items()})
        self.permissions.clear()
        self.permissions.update({k: replace(p) for k, p in state.permissions.items()})

    def allows(self, user: str, vhost: str, kind: str, resource: str, name: str) -> bool:
        """Does ``user`` have ``kind`` permission on the resource (no exception)?"""
        perm = self.permissions.get((user, vhost))
        checked = "amq.default" if resource == "exchange" and name == "" else name
        return perm is not None and perm.allows(kind, checked)

    def check(self, user: str, vhost: str, kind: str, resource: str, name: str) -> None:
        """Raise 403 ACCESS_REFUSED unless ``user`` has ``kind`` permission on the resource."""
        if not self.allows(user, vhost, kind, resource, name):
            checked = "amq.default" if resource == "exchange" and name == "" else name
            rendered = errors.rs_queue(checked, vhost) if resource == "queue" else errors.rs_exchange(checked, vhost)
            prefix = f"{kind} access" if self.names_permission else "access"
            raise errors.AccessRefused(f"{prefix} to {rendered} refused for user '{user}'")
