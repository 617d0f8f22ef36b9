"""Broker objects as the RabbitMQ management API renders them (JSON shapes of 3.10-4.x, stats left out).

Every function here runs on the server's loop and only reads the broker.
"""

from __future__ import annotations

import base64
import datetime as _dt
import decimal
import hashlib
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import quote_plus

from fakerabbit.broker.exchange import Binding, Exchange
from fakerabbit.broker.fields import Field, FieldError, Table, from_python
from fakerabbit.broker.policy import Policy
from fakerabbit.broker.queue import Consumer, Queue
from fakerabbit.broker.session import ConnectionInfo, Session
from fakerabbit.protocol.addresses import url_host

if TYPE_CHECKING:
    from fakerabbit.broker.broker import Broker
    from fakerabbit.protocol.listener import ConnectionDetails, Listener

NODE = "rabbit@fakerabbit"
PREDECLARED = frozenset({"", "amq.direct", "amq.fanout", "amq.topic", "amq.headers", "amq.match", "amq.rabbitmq.trace"})
_RATE = {"rate": 0.0}


# -- values -----------------------------------------------------------------------------------------------------
def field_json(f: Field) -> Any:
    """A typed AMQP field as JSON: timestamps as epoch seconds, binaries as text, decimals as numbers.

    Iterative, like every converter here: RabbitMQ accepts tables nested thousands deep, and so must the API."""
    holder: list[Any] = [None]
    stack: list[tuple[Field, Any, Any]] = [(f, holder, 0)]
    while stack:
        (tag, value), parent, key = stack.pop()
        if tag == "F":
            out: dict[str, Any] = {}
            for k, v in value.items():
                out[k] = None
                stack.append((v, out, k))
            parent[key] = out
        elif tag == "A":
            items: list[Any] = [None] * len(value)
            stack.extend((v, items, i) for i, v in enumerate(value))
            parent[key] = items
        else:
            parent[key] = jsonable(value)
    return holder[0]


def table_json(table: Mapping[str, Field]) -> dict[str, Any]:
    """A typed AMQP table as a JSON object."""
    result: dict[str, Any] = field_json(("F", dict(table)))
    return result


def _leaf(value: Any) -> Any:
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).decode("utf-8", "replace")
    if isinstance(value, decimal.Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, _dt.datetime):
        return int(value.timestamp())
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


def jsonable(value: Any) -> Any:
    """Any plain value (client properties, event details) made JSON-serialisable, at any depth."""
    holder: list[Any] = [None]
    stack: list[tuple[Any, Any, Any]] = [(value, holder, 0)]
    while stack:
        v, parent, key = stack.pop()
        if isinstance(v, dict):
            out: dict[str, Any] = {}
            for k, x in v.items():
                out[str(k)] = None
                stack.append((x, out, str(k)))
            parent[key] = out
        elif isinstance(v, list | tuple | set | frozenset):
            items: list[Any] = [None] * len(v)
            stack.extend((x, items, i) for i, x in enumerate(v))
            parent[key] = items
        else:
            parent[key] = _leaf(v)
    return holder[0]


def json_to_field(value: Any) -> Field:
    """A JSON value as the management plugin types it: integers are ``long``, objects tables, lists arrays."""
    if isinstance(value, bool):
        return ("t", value)
    if isinstance(value, int):
        return ("l", value)
    if isinstance(value, dict):
        return ("F", json_to_table(value))
    if isinstance(value, list):
        return ("A", [json_to_field(v) for v in value])
    return from_python(value)


def json_to_table(values: Mapping[str, Any]) -> Table:
    """A JSON object as an AMQP table (see :func:`json_to_field`); raises ``FieldError`` for bad values."""
    if not isinstance(values, Mapping):
        raise FieldError("arguments must be a JSON object")
    return {str(k): json_to_field(v) for k, v in values.items()}


# -- connections and channels ----------------------------------------------------------------------------------------
def _split_peer(peer: str) -> tuple[str, int]:
    """``"127.0.0.1:50000"`` or ``"[::1]:50000"`` -> (host, port): ``peer_host`` is ``rabbit_misc:ntoa/1``'s
    form, IPv6 without brackets."""
    host, _, port = peer.rpartition(":")
    try:
        return host.removeprefix("[").removesuffix("]"), int(port)
    except ValueError:
        return peer, 0


class Connections:
    """Finds the AMQP connection objects behind the broker's :class:`ConnectionInfo` records."""

    def __init__(self, server: Listener) -> None:
        self.server = server

    def details(self, info: ConnectionInfo) -> ConnectionDetails | None:
        return self.server.details(info)

    def name(self, info: ConnectionInfo) -> str:
        """RabbitMQ's connection name: ``"127.0.0.1:50000 -> 127.0.0.1:5672"``, IPv6 addresses in brackets
        (``rabbit_net:connection_string/2``)."""
        d = self.details(info)
        local = f"{url_host(d.local_host)}:{d.local_port}" if d is not None and d.local_host else ""
        return f"{info.peer} -> {local}" if info.peer and local else info.name

    def all(self, broker: Broker) -> list[ConnectionInfo]:
        return sorted(broker.connections.values(), key=lambda c: c.id)

    def by_name(self, broker: Broker, name: str) -> ConnectionInfo | None:
        for info in broker.connections.values():
            if self.name(info) == name:
                return info
        return None


def connection_json(
    info: ConnectionInfo, conns: Connections, *, serial_number: bool = False, single: bool = False
) -> dict[str, Any]:
    """``GET /api/connections`` item (``single``: ``GET /api/connections/{name}``); ``serial_number`` adds
    ``peer_cert_serial_number`` (live 4.3.6 has it, 4.0.5 and 3.10.8 do not). The ``ssl_*`` and ``peer_cert_*``
    items are ``rabbit_ssl:info/2`` and ``rabbit_cert_info``'s; RabbitMQ's ``''`` for "none" (a plain connection,
    no client certificate) is null in the list and ``""`` for a single connection (live 3.10.8, 4.0.5, 4.3.6)."""
    conn = conns.details(info)
    name = conns.name(info)
    peer_host, peer_port = _split_peer(info.peer)
    host, port = (conn.local_host, conn.local_port) if conn is not None else ("", 0)
    tls = conn.tls if conn is not None else None
    empty = "" if single else None
    cert = (tls.peer_cert_subject, tls.peer_cert_issuer, tls.peer_cert_validity) if tls is not None else ()
    subject, issuer, validity = (v if v is not None else empty for v in cert) if cert else (empty, empty, empty)
    props = jsonable(dict(info.client_properties))
    user_name = props.get("connection_name") if isinstance(props, dict) else None
    out: dict[str, Any] = {
        "auth_mechanism": "PLAIN",
        "channel_max": conn.channel_max if conn is not None else 0,
        "channels": len(info.sessions),
        "client_properties": props,
        "frame_max": conn.frame_max if conn is not None else 0,
        "host": host,
        "name": name,
        "node": NODE,
        "peer_cert_issuer": issuer,
        "peer_cert_subject": subject,
        "peer_cert_validity": validity,
        "peer_host": peer_host,
        "peer_port": peer_port,
        "port": port,
        "protocol": "AMQP 0-9-1",
        "ssl": tls is not None,
        "ssl_cipher": tls.cipher if tls is not None else empty,
        "ssl_hash": tls.hash if tls is not None else empty,
        "ssl_key_exchange": tls.key_exchange if tls is not None else empty,
        "ssl_protocol": tls.protocol if tls is not None else empty,
        "state": "running",
        "timeout": conn.heartbeat if conn is not None else 0,
        "type": "network",
        "user": info.user,
        "user_who_performed_action": info.user,
        "vhost": info.vhost,
    }
    if serial_number:
        serial = tls.peer_cert_serial_number if tls is not None else None
        out["peer_cert_serial_number"] = serial if serial is not None else empty
    if user_name is not None:
        out["user_provided_name"] = user_name
    return out


def _connection_details(info: ConnectionInfo, conns: Connections) -> dict[str, Any]:
    peer_host, peer_port = _split_peer(info.peer)
    return {"name": conns.name(info), "peer_host": peer_host, "peer_port": peer_port}


def channel_name(info: ConnectionInfo, number: int, conns: Connections) -> str:
    return f"{conns.name(info)} ({number})"


def channel_json(info: ConnectionInfo, s: Session, conns: Connections) -> dict[str, Any]:
    """``GET /api/channels`` item."""
    return {
        "acks_uncommitted": 0,
        "confirm": s.confirm,
        "connection_details": _connection_details(info, conns),
        "consumer_count": len([c for c in s.consumers.values() if c is not s.reply_consumer]),
        "global_prefetch_count": s.global_prefetch,
        "messages_unacknowledged": len(s.unacked),
        "messages_uncommitted": 0,
        "messages_unconfirmed": 0,
        "name": channel_name(info, s.number, conns),
        "node": NODE,
        "number": s.number,
        "pending_raft_commands": 0,
        "prefetch_count": s.consumer_prefetch,
        "state": "running",
        "transactional": s.tx,
        "user": info.user,
        "user_who_performed_action": info.user,
        "vhost": info.vhost,
    }


def channels(broker: Broker, conns: Connections) -> Iterator[tuple[ConnectionInfo, Session]]:
    for info in conns.all(broker):
        for number in sorted(info.sessions):
            yield info, info.sessions[number]


def consumer_json(c: Consumer, conns: Connections) -> dict[str, Any]:
    """``GET /api/consumers`` item (and ``consumer_details`` of a queue)."""
    session = _session(c)
    info = session.conn
    peer_host, peer_port = _split_peer(info.peer)
    q = c.queue
    active = not q.settings.single_active_consumer or (bool(q.consumers) and q.consumers[0] is c)
    status = "up"
    if q.settings.single_active_consumer:
        status = "single_active" if active else "waiting"
    return {
        "arguments": table_json(c.arguments),
        "ack_required": not c.no_ack,
        "active": active,
        "activity_status": status,
        "channel_details": {
            "connection_name": conns.name(info),
            "name": channel_name(info, session.number, conns),
            "node": NODE,
            "number": session.number,
            "peer_host": peer_host,
            "peer_port": peer_port,
            "user": info.user,
        },
        "consumer_tag": c.tag,
        "exclusive": c.exclusive,
        "prefetch_count": c.prefetch,
        "queue": {"name": q.name, "vhost": q.vhost.name},
    }


# -- queues --------------------------------------------------------------------------------------------------------
def unacked_bytes(broker: Broker) -> dict[int, int]:
    """Bytes of unacknowledged messages per queue (keyed by ``id(queue)``)."""
    out: dict[int, int] = {}
    for info in broker.connections.values():
        for s in info.sessions.values():
            for u in s.unacked.values():
                out[id(u.queue)] = out.get(id(u.queue), 0) + u.queue.msg_bytes(u.entry.msg)
    return out


def queue_json(q: Queue, conns: Connections, unacked: dict[int, int], *, details: bool = False) -> dict[str, Any]:
    """``GET /api/queues`` item; ``details`` adds what ``GET /api/queues/{vhost}/{name}`` shows."""
    ready, unack = q.ready_count, q.unacked
    ub = unacked.get(id(q), 0)
    exclusive_tag = next((c.tag for c in q.consumers if c.exclusive), None)
    sac = q.consumers[0].tag if q.settings.single_active_consumer and q.consumers else None
    out: dict[str, Any] = {
        "arguments": table_json(q.arguments),
        "auto_delete": q.auto_delete,
        "consumers": len(q.consumers),
        "durable": q.durable,
        "effective_policy_definition": dict(q.settings.policy_definition),
        "exclusive": q.exclusive_owner is not None,
        "exclusive_consumer_tag": exclusive_tag,
        "message_bytes": q.ready_bytes + ub,
        "message_bytes_ready": q.ready_bytes,
        "message_bytes_unacknowledged": ub,
        "messages": ready + unack,
        "messages_details": dict(_RATE),
        "messages_ready": ready,
        "messages_ready_details": dict(_RATE),
        "messages_unacknowledged": unack,
        "messages_unacknowledged_details": dict(_RATE),
        "name": q.name,
        "node": NODE,
        "operator_policy": q.operator_policy_name,
        "policy": q.policy_name,
        "single_active_consumer_tag": sac,
        "state": "running",
        "type": q.queue_type,
        "vhost": q.vhost.name,
    }
    if q.is_quorum:
        out.update(leader=NODE, members=[NODE], online=[NODE])
        # rabbit_fifo's discards (at-least-once dead letters not delivered yet) count in messages and bytes
        held, held_bytes = q.held_dead_letters()
        out.update(messages_dlx=held, message_bytes_dlx=held_bytes)
        out["messages"] += held
        out["message_bytes"] += held_bytes
    if q.exclusive_owner is not None:
        owner = conns.server.broker.connections.get(q.exclusive_owner)
        if owner is not None:
            out["owner_pid_details"] = _connection_details(owner, conns)
    if details:
        out["consumer_details"] = [consumer_json(c, conns) for c in q.consumers]
        out["deliveries"] = []
        out["incoming"] = []
    return out


# -- exchanges, bindings, policies -------------------------------------------------------------------------------------
def exchange_json(x: Exchange, vhost: str, messages_delayed: int | None = None) -> dict[str, Any]:
    """``GET /api/exchanges`` item; ``messages_delayed`` for an ``x-delayed-message`` exchange (the plugin's
    ``info/1``, which ``rabbit_exchange:info/1`` appends)."""
    out: dict[str, Any] = {
        "arguments": table_json(x.arguments),
        "auto_delete": x.auto_delete,
        "durable": x.durable,
        "internal": x.internal,
    }
    if messages_delayed is not None:
        out["messages_delayed"] = messages_delayed
    return out | {
        "name": x.name,
        "type": str(x.type),
        "user_who_performed_action": "rmq-internal" if x.name in PREDECLARED else "",
        "vhost": vhost,
    }


def properties_key(routing_key: str, arguments: Table) -> str:
    """The binding's ``properties_key`` (its id in ``/api/bindings/.../{props}`` URLs)."""
    if not arguments:
        return "~" if routing_key == "" else quote_plus(routing_key, safe="")
    digest = hashlib.sha1(repr(sorted(arguments.items())).encode(), usedforsecurity=False).digest()[:6]
    return quote_plus(routing_key, safe="") + "~" + base64.urlsafe_b64encode(digest).decode()


def binding_json(vhost: str, source: str, destination: str, kind: str, routing_key: str, args: Table) -> dict[str, Any]:
    """``GET /api/bindings`` item."""
    return {
        "source": source,
        "vhost": vhost,
        "destination": destination,
        "destination_type": kind,
        "routing_key": routing_key,
        "arguments": table_json(args),
        "properties_key": properties_key(routing_key, args),
    }


def default_binding_json(q: Queue) -> dict[str, Any]:
    """The implicit binding of a queue to the default exchange."""
    return binding_json(q.vhost.name, "", q.name, "queue", q.name, {})


def explicit_bindings(exchanges: Mapping[str, Exchange]) -> list[Binding]:
    """Every declared binding of a vhost, in a stable order."""
    out = [b for x in exchanges.values() for b in x.bindings]
    out.sort(key=lambda b: (b.source, b.destination_kind, b.destination, b.routing_key))
    return out


def policy_json(p: Policy) -> dict[str, Any]:
    """``GET /api/policies`` item."""
    return {
        "vhost": p.vhost,
        "name": p.name,
        "pattern": p.pattern,
        "apply-to": p.apply_to,
        "definition": dict(p.definition),
        "priority": p.priority,
    }


def _session(c: Consumer) -> Session:
    """The broker session (channel) of consumer ``c`` (queues see it through a narrow Protocol)."""
    assert isinstance(c.session, Session)
    return c.session
