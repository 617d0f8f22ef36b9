"""Definitions export and import in RabbitMQ's format (``GET``/``POST /api/definitions``, ``load_definitions``).

Import goes through the broker's normal declare paths (the same validation as ``queue.declare``,
``exchange.declare``, ``queue.bind`` and ``rabbitmqctl set_policy``), in RabbitMQ's order: vhosts, users,
permissions, policies and operator policies, exchanges, queues, bindings. It is not atomic (neither is
RabbitMQ's): objects imported before an error stay.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Mapping
from typing import Any

from fakerabbit.broker import errors
from fakerabbit.broker.auth import InvalidRegexp, validate_regexp
from fakerabbit.broker.broker import Broker
from fakerabbit.broker.fields import FieldError
from fakerabbit.broker.policy import PolicyError, validate_policy
from fakerabbit.management.render import PREDECLARED, json_to_table, policy_json, table_json

__all__ = [
    "DefinitionsError",
    "PasswordHash",
    "check_password_hash",
    "error_reason",
    "export_definitions",
    "import_definitions",
    "password_hash",
]

_SHA256 = "rabbit_password_hashing_sha256"
_HASHES = {
    _SHA256: hashlib.sha256,
    "rabbit_password_hashing_sha512": hashlib.sha512,
    "rabbit_password_hashing_md5": hashlib.md5,
}


class DefinitionsError(ValueError):
    """The definitions were refused; ``str(err)`` says why. ``reason`` is the management API's 400 ``reason``
    when RabbitMQ renders it as something other than that text (an Erlang term as a JSON list)."""

    def __init__(self, message: str, reason: Any = None) -> None:
        super().__init__(message)
        self.reason = message if reason is None else reason


def check_password_hash(value: Any, algorithm: Any, *, erlang_text: bool = True) -> None:
    """Refuse what RabbitMQ refuses in a user's ``password_hash``: not base64 (400 ``{not_base64,<<"x">>}`` on
    4.x, ``["not_base64","x"]`` on 3.x) or a ``hashing_algorithm`` that is not a string (``function_clause``).

    An unknown algorithm *name* is accepted, as RabbitMQ 3.10.8 and 4.3.6 accept it (checked live): that user
    simply cannot log in.
    """
    if algorithm is not None and not isinstance(algorithm, str):
        raise DefinitionsError("function_clause")
    text = value if isinstance(value, str) else json.dumps(value)
    try:
        if not isinstance(value, str):
            raise ValueError(value)
        base64.b64decode(value, validate=True)
    except (ValueError, binascii.Error):
        if erlang_text:
            raise DefinitionsError(f'{{not_base64,<<"{text}">>}}') from None
        raise DefinitionsError(f"not_base64 {text}", ["not_base64", text]) from None


def password_hash(user: str, password: str) -> str:
    """RabbitMQ's ``rabbit_password_hashing_sha256`` hash: base64(salt + sha256(salt + password)).

    The 4-byte salt is derived from the user and password so that an export is reproducible.
    """
    if isinstance(password, PasswordHash):
        return password.hash
    salt = hashlib.sha256(f"{user}\x00{password}".encode()).digest()[:4]
    return base64.b64encode(salt + hashlib.sha256(salt + password.encode()).digest()).decode()


class PasswordHash(str):
    """A stored password known only by its RabbitMQ hash (a user imported with ``password_hash``).

    The broker compares the stored password with what a client sends (``stored == sent``); this compares by
    hashing the sent password with the stored salt instead.
    """

    hash: str
    algorithm: str

    def __new__(cls, hash_b64: str, algorithm: str = _SHA256) -> PasswordHash:
        obj = super().__new__(cls, hash_b64)
        obj.hash = hash_b64
        obj.algorithm = algorithm
        return obj

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, str) or isinstance(other, PasswordHash):
            return str.__eq__(self, other)
        hasher = _HASHES.get(self.algorithm)
        if hasher is None:  # an algorithm RabbitMQ does not know: nobody logs in with it
            return False
        try:
            raw = base64.b64decode(self.hash)
        except ValueError:
            return False
        salt = raw[:4]
        return salt + hasher(salt + other.encode()).digest() == raw

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return str.__hash__(self)


# -- export -------------------------------------------------------------------------------------------------------
def _queues(broker: Broker, vhosts: list[str], with_vhost: bool) -> list[dict[str, Any]]:
    out = []
    typed = broker.profile.release > (4, 0)
    for vname in vhosts:
        for q in sorted(broker.vhosts[vname].queues.values(), key=lambda q: q.name):
            if q.exclusive_owner is not None:
                continue
            item: dict[str, Any] = {"name": q.name, "vhost": vname}
            item.update(durable=q.durable, auto_delete=q.auto_delete, arguments=table_json(q.arguments))
            if typed:  # RabbitMQ 4.3.6 exports each queue's type (4.0.5 does not)
                item["type"] = str(q.queue_type)
            if not with_vhost:
                del item["vhost"]
            out.append(item)
    return out


def _exchanges(broker: Broker, vhosts: list[str], with_vhost: bool) -> list[dict[str, Any]]:
    out = []
    typed = broker.profile.release > (4, 0)
    for vname in vhosts:
        for x in sorted(broker.vhosts[vname].exchanges.values(), key=lambda x: x.name):
            if x.name in PREDECLARED:
                continue
            item: dict[str, Any] = {"name": x.name, "vhost": vname, "type": str(x.type), "durable": x.durable}
            item.update(auto_delete=x.auto_delete, internal=x.internal, arguments=table_json(x.arguments))
            if typed and not x.internal:  # RabbitMQ 4.3.6 leaves out internal=false (4.0.5 does not)
                del item["internal"]
            if not with_vhost:
                del item["vhost"]
            out.append(item)
    return out


def _bindings(broker: Broker, vhosts: list[str], with_vhost: bool) -> list[dict[str, Any]]:
    out = []
    for vname in vhosts:
        v = broker.vhosts[vname]
        for x in sorted(v.exchanges.values(), key=lambda x: x.name):
            for b in x.bindings:
                if b.destination_kind == "queue":
                    q = v.queues.get(b.destination)
                    if q is not None and q.exclusive_owner is not None:
                        continue
                item: dict[str, Any] = {"source": b.source, "vhost": vname, "destination": b.destination}
                item.update(
                    destination_type=b.destination_kind, routing_key=b.routing_key, arguments=table_json(b.arguments)
                )
                if not with_vhost:
                    del item["vhost"]
                out.append(item)
    return out


def _policies(broker: Broker, vhosts: list[str], with_vhost: bool) -> tuple[list[Any], list[Any]]:
    policies, parameters = [], []
    for vname in vhosts:
        v = broker.vhosts[vname]
        for p in sorted(v.policies.values(), key=lambda p: p.name):
            item = policy_json(p)
            if not with_vhost:
                del item["vhost"]
            policies.append(item)
        for p in sorted(v.operator_policies.values(), key=lambda p: p.name):
            value = {"pattern": p.pattern, "definition": dict(p.definition), "priority": p.priority}
            value["apply-to"] = p.apply_to
            param: dict[str, Any] = {"value": value, "vhost": vname, "component": "operator_policy", "name": p.name}
            if not with_vhost:
                del param["vhost"]
            parameters.append(param)
    return policies, parameters


def export_definitions(broker: Broker, vhost: str | None = None) -> dict[str, Any]:
    """The node's definitions (``vhost=None``) or one vhost's, as RabbitMQ exports them."""
    version = broker.profile.server_version
    if vhost is not None:
        policies, parameters = _policies(broker, [vhost], False)
        return {
            "rabbit_version": version,
            "parameters": parameters,
            "policies": policies,
            "queues": _queues(broker, [vhost], False),
            "exchanges": _exchanges(broker, [vhost], False),
            "bindings": _bindings(broker, [vhost], False),
        }
    vhosts = sorted(broker.vhosts)
    auth = broker.auth
    policies, parameters = _policies(broker, vhosts, True)
    return {
        "rabbit_version": version,
        "rabbitmq_version": version,
        "product_name": "RabbitMQ",
        "product_version": version,
        "users": [
            {
                "name": name,
                "password_hash": password_hash(name, password),
                "hashing_algorithm": password.algorithm if isinstance(password, PasswordHash) else _SHA256,
                "tags": user_tags(broker, name),
                "limits": {},
            }
            for name, password in sorted(auth.users.items())
        ],
        "vhosts": [{"name": name} for name in vhosts],
        "permissions": [
            {"user": user, "vhost": vname, "configure": p.configure, "write": p.write, "read": p.read}
            for (user, vname), p in sorted(auth.permissions.items())
        ],
        "topic_permissions": [],
        "parameters": parameters,
        "global_parameters": [],
        "policies": policies,
        "queues": _queues(broker, vhosts, True),
        "exchanges": _exchanges(broker, vhosts, True),
        "bindings": _bindings(broker, vhosts, True),
    }


def user_tags(broker: Broker, name: str) -> list[str]:
    """A user's tags; fakerabbit's users are administrators unless tags were set (by a definitions import)."""
    return broker.auth.user_tags(name)


# -- import -------------------------------------------------------------------------------------------------------
def _items(defs: Mapping[str, Any], key: str) -> list[Mapping[str, Any]]:
    items = defs.get(key) or []
    if not isinstance(items, list) or not all(isinstance(i, Mapping) for i in items):
        raise DefinitionsError(f"'{key}' must be a list of objects")
    return items


def _str(item: Mapping[str, Any], key: str, default: str | None = None) -> str:
    value = item.get(key, default)
    if not isinstance(value, str):
        raise DefinitionsError(f"key_missing or not a string: {key} in {dict(item)}")
    return value


def _bool(item: Mapping[str, Any], key: str, default: bool) -> bool:
    value = item.get(key, default)
    if isinstance(value, str) and value in ("true", "false"):
        return value == "true"
    if not isinstance(value, bool):
        raise DefinitionsError(f"{key} must be true or false in {dict(item)}")
    return value


def _vhost_of(item: Mapping[str, Any], vhost: str | None) -> str:
    return vhost if vhost is not None else _str(item, "vhost")


def import_definitions(broker: Broker, defs: Any, vhost: str | None = None) -> None:
    """Import ``defs`` (parsed JSON) into the broker: the whole node's, or into ``vhost`` when given.

    Raises :class:`DefinitionsError` (or an ``AMQPError`` / ``PolicyError`` from the declare paths).
    """
    if not isinstance(defs, Mapping):
        raise DefinitionsError("definitions must be a JSON object")
    if vhost is not None and vhost not in broker.vhosts:
        raise DefinitionsError(f"vhost '{vhost}' does not exist")
    try:
        if vhost is None:
            _import_node_level(broker, defs)
        _import_policies(broker, defs, vhost)
        _import_topology(broker, defs, vhost)
    except FieldError as exc:
        raise DefinitionsError(str(exc)) from None


def _check_regexp(pattern: str, erlang_text: bool, pcre2: bool) -> None:
    """RabbitMQ refuses a permission whose pattern does not compile: 4.x renders ``{invalid_regexp,"(",{"missing
    closing parenthesis",1}}`` as text, 3.x the same term as a JSON list of code-point lists."""
    try:
        validate_regexp(pattern, pcre1=not pcre2)
    except InvalidRegexp as exc:
        if erlang_text:
            raise DefinitionsError(
                f"{{invalid_regexp,{json.dumps(exc.pattern)},{{{json.dumps(exc.message)},{exc.offset}}}}}"
            ) from None
        raise DefinitionsError(
            str(exc), ["invalid_regexp", [ord(c) for c in exc.pattern], [[ord(c) for c in exc.message], exc.offset]]
        ) from None


def _import_node_level(broker: Broker, defs: Mapping[str, Any]) -> None:
    major, minor = broker.profile.release
    erlang_text = major >= 4  # 4.x renders error terms as text, 3.x as JSON lists
    pcre2 = (major, minor) > (4, 0)  # 4.3.6's Erlang has PCRE2's messages; 4.0.5's still PCRE's
    for item in _items(defs, "vhosts"):
        broker.add_vhost(_str(item, "name"))
    auth = broker.auth
    for item in _items(defs, "users"):
        name = _str(item, "name")
        password: str
        if "password" in item:
            password = _str(item, "password")
        elif "password_hash" in item:
            algorithm = item.get("hashing_algorithm") or _SHA256
            check_password_hash(item["password_hash"], algorithm, erlang_text=erlang_text)
            password = PasswordHash(item["password_hash"], algorithm)
        else:
            raise DefinitionsError(f"user '{name}' has neither password nor password_hash")
        tags = item.get("tags", [])
        if isinstance(tags, str):
            tags = [t for t in tags.split(",") if t]
        auth.put_user(name, password, [str(t) for t in tags])
    for item in _items(defs, "permissions"):
        user, vname = _str(item, "user"), _str(item, "vhost")
        if user not in auth.users:
            raise DefinitionsError(f"no user '{user}' for permissions")
        if vname not in broker.vhosts:
            raise DefinitionsError(f"no vhost '{vname}' for permissions")
        patterns = (_str(item, "configure", ".*"), _str(item, "write", ".*"), _str(item, "read", ".*"))
        for pattern in patterns:
            _check_regexp(pattern, erlang_text, pcre2)
        auth.set_permissions(user, vname, *patterns)
    if _items(defs, "topic_permissions"):
        raise DefinitionsError("fakerabbit does not support topic permissions")


def _set_policy(broker: Broker, vname: str, name: str, value: Mapping[str, Any], *, operator: bool) -> None:
    pattern = _str(value, "pattern")
    definition = value.get("definition")
    if not isinstance(definition, Mapping):
        raise DefinitionsError(f"policy '{name}': definition must be an object")
    priority = value.get("priority", 0)
    if isinstance(priority, bool) or not isinstance(priority, int | float):
        raise DefinitionsError(f"policy '{name}': priority should be a number, actually was {priority!r}")
    apply_to = _str(value, "apply-to", "all")
    if vname not in broker.vhosts:
        raise DefinitionsError(f"no vhost '{vname}' for policy '{name}'")
    validate_policy(definition, operator=operator, apply_to=apply_to, profile=broker.profile, pattern=pattern)
    broker.set_policy(
        name, pattern, dict(definition), priority=priority, apply_to=apply_to, vhost=vname, operator=operator
    )


def _import_policies(broker: Broker, defs: Mapping[str, Any], vhost: str | None) -> None:
    for item in _items(defs, "policies"):
        _set_policy(broker, _vhost_of(item, vhost), _str(item, "name"), item, operator=False)
    for item in _items(defs, "parameters"):
        component = _str(item, "component")
        if component != "operator_policy":
            raise DefinitionsError(f"fakerabbit does not support runtime parameters of component '{component}'")
        value = item.get("value")
        if not isinstance(value, Mapping):
            raise DefinitionsError("operator policy parameter without a value object")
        _set_policy(broker, _vhost_of(item, vhost), _str(item, "name"), value, operator=True)


def _existing_vhost(broker: Broker, name: str) -> Any:
    v = broker.vhosts.get(name)
    if v is None:
        raise DefinitionsError(f"vhost '{name}' does not exist")
    return v


def _import_topology(broker: Broker, defs: Mapping[str, Any], vhost: str | None) -> None:
    for item in _items(defs, "exchanges"):
        v = _existing_vhost(broker, _vhost_of(item, vhost))
        name = _str(item, "name")
        if name.startswith("amq."):
            # RabbitMQ's import skips exchanges with the reserved prefix silently (``amq.rabbitmq.log`` and the
            # predeclared ones are in every 4.x export)
            continue
        v.declare_exchange(
            None,
            name,
            _str(item, "type", "direct"),
            passive=False,
            durable=_bool(item, "durable", True),
            auto_delete=_bool(item, "auto_delete", False),
            internal=_bool(item, "internal", False),
            arguments=json_to_table(item.get("arguments") or {}),
        )
    for item in _items(defs, "queues"):
        v = _existing_vhost(broker, _vhost_of(item, vhost))
        v.declare_queue(
            None,
            _str(item, "name"),
            passive=False,
            durable=_bool(item, "durable", True),
            exclusive=False,
            auto_delete=_bool(item, "auto_delete", False),
            arguments=json_to_table(item.get("arguments") or {}),
        )
    for item in _items(defs, "bindings"):
        v = _existing_vhost(broker, _vhost_of(item, vhost))
        kind = _str(item, "destination_type", "queue")
        if kind not in ("queue", "exchange"):
            raise DefinitionsError(f"destination_type must be 'queue' or 'exchange', not '{kind}'")
        v.bind(
            None,
            kind,
            _str(item, "destination"),
            _str(item, "source"),
            _str(item, "routing_key", ""),
            json_to_table(item.get("arguments") or {}),
        )


def describe_error(exc: Exception) -> str:
    """The 400 reason for an import error."""
    if isinstance(exc, errors.AMQPError):
        return exc.reply_text
    if isinstance(exc, PolicyError):
        return f"Validation failed\n\n{exc}\n"
    return str(exc)


def error_reason(exc: Exception) -> Any:
    """The management API's 400 ``reason`` for an import error (RabbitMQ's term where it renders one)."""
    if isinstance(exc, DefinitionsError):
        return exc.reason
    return describe_error(exc)
