"""Management API handlers for the node: overview, vhosts, users, permissions, connections, channels,
consumers, definitions, health checks, and fakerabbit's own clock, reset and events."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from fakerabbit.broker import errors, texts
from fakerabbit.broker.auth import InvalidRegexp, validate_regexp
from fakerabbit.broker.exchange_types import kind_of
from fakerabbit.broker.policy import PolicyError
from fakerabbit.broker.session import ConnectionInfo
from fakerabbit.clock import FollowingClock, VirtualClock
from fakerabbit.management.core import (
    Ctx,
    at_least_4,
    bad_request,
    created,
    json_response,
    listing,
    newer_than_4_0,
    no_content,
    not_authorised,
    not_found,
)
from fakerabbit.management.definitions import (
    DefinitionsError,
    PasswordHash,
    check_password_hash,
    error_reason,
    export_definitions,
    import_definitions,
    password_hash,
    user_tags,
)
from fakerabbit.management.http import Response
from fakerabbit.management.render import (
    NODE,
    Connections,
    channel_json,
    channel_name,
    channels,
    connection_json,
    consumer_json,
    jsonable,
)

if TYPE_CHECKING:
    from fakerabbit.broker.queue import Queue


def _exchange_types(types: tuple[str, ...]) -> list[dict[str, object]]:
    """The node's exchange types in name order, as ``/api/overview`` lists them (``rabbit_mgmt_wm_overview`` sorts
    the registry by name)."""
    return [
        {
            "name": t,
            "description": kind_of(t).description,  # (live 3.10.8, 4.0.5 and 4.3.6)
            "enabled": True,
        }
        for t in sorted(types)
    ]


def _conns(ctx: Ctx) -> Connections:
    return Connections(ctx.rabbit.server)


# -- overview --------------------------------------------------------------------------------------------------------
def overview(ctx: Ctx) -> Response:
    broker, rabbit = ctx.broker, ctx.rabbit
    version = broker.profile.server_version
    queues = [q for v in broker.vhosts.values() for q in v.queues.values()]
    ready = sum(q.ready_count for q in queues)
    unacked = sum(q.unacked for q in queues)
    held = _held(queues)
    bound = [*rabbit.server.bound, *(rabbit.management.bound if rabbit.management is not None else ())]
    tls_key = newer_than_4_0(broker)  # live 4.3.6 says whether each listener uses TLS; 4.0.5 and 3.10.8 do not
    listeners = [
        {
            "node": NODE,
            "protocol": b.protocol,
            "ip_address": b.ip_address,
            "port": b.port,
            **({"tls": b.protocol in ("amqp/ssl", "https")} if tls_key else {}),
        }
        for b in bound
    ]
    return json_response(
        200,
        {
            "management_version": version,
            "rates_mode": "none",
            "exchange_types": _exchange_types(broker.exchange_types),
            "product_version": version,
            "product_name": "RabbitMQ",
            "rabbitmq_version": version,
            "cluster_name": NODE,
            "erlang_version": "26.2.5",
            "disable_stats": False,
            "enable_queue_totals": True,
            "message_stats": {},
            "queue_totals": {
                "messages": ready + unacked + held,
                "messages_ready": ready,
                "messages_unacknowledged": unacked,
            },
            "object_totals": {
                "channels": sum(len(c.sessions) for c in broker.connections.values()),
                "connections": len(broker.connections),
                "consumers": sum(len(q.consumers) for q in queues),
                "exchanges": sum(len(v.exchanges) for v in broker.vhosts.values()),
                "queues": len(queues),
            },
            "node": NODE,
            "listeners": listeners,
            "fakerabbit": {"clock": _clock_json(ctx)},
        },
    )


def whoami(ctx: Ctx) -> Response:
    return json_response(200, {"name": ctx.user, "tags": user_tags(ctx.broker, ctx.user)})


def ok(ctx: Ctx) -> Response:
    """Health checks: a fake node is always healthy."""
    return json_response(200, {"status": "ok"})


def aliveness(ctx: Ctx) -> Response:
    ctx.vhost()
    return json_response(200, {"status": "ok"})


# -- vhosts, users, permissions -------------------------------------------------------------------------------------
def _vhost_json(ctx: Ctx, name: str) -> dict[str, Any]:
    v = ctx.broker.vhosts[name]
    ready = sum(q.ready_count for q in v.queues.values())
    unacked = sum(q.unacked for q in v.queues.values())
    held = _held(v.queues.values())
    return {
        "name": name,
        "description": "Default virtual host" if name == "/" else "",
        "tags": [],
        "default_queue_type": "undefined",
        "metadata": {"description": "Default virtual host" if name == "/" else "", "tags": []},
        "tracing": False,
        "cluster_state": {NODE: "running"},
        "messages": ready + unacked + held,
        "messages_ready": ready,
        "messages_unacknowledged": unacked,
    }


def list_vhosts(ctx: Ctx) -> Response:
    return listing(ctx, (_vhost_json(ctx, n) for n in sorted(ctx.broker.vhosts)))


def get_vhost(ctx: Ctx) -> Response:
    return json_response(200, _vhost_json(ctx, ctx.vhost().name))


def put_vhost(ctx: Ctx) -> Response:
    ctx.object_body()
    name = ctx.params["vhost"]
    if name in ctx.broker.vhosts:
        return no_content()
    # RabbitMQ grants full permissions on a new vhost to the user who created it, and to nobody else.
    ctx.broker.add_vhost(name, owner=ctx.user)
    return created()


def delete_vhost(ctx: Ctx) -> Response:
    ctx.broker.delete_vhost(ctx.vhost().name)
    return no_content()


def _user_json(ctx: Ctx, name: str) -> dict[str, Any]:
    password = ctx.broker.auth.users[name]
    return {
        "name": name,
        "password_hash": password_hash(name, password),
        "hashing_algorithm": password.algorithm
        if isinstance(password, PasswordHash)
        else "rabbit_password_hashing_sha256",
        "tags": user_tags(ctx.broker, name),
        "limits": {},
    }


def list_users(ctx: Ctx) -> Response:
    return listing(ctx, (_user_json(ctx, n) for n in sorted(ctx.broker.auth.users)))


def _user(ctx: Ctx) -> str:
    name = ctx.params["user"]
    if name not in ctx.broker.auth.users:
        raise not_found()
    return name


def get_user(ctx: Ctx) -> Response:
    return json_response(200, _user_json(ctx, _user(ctx)))


def put_user(ctx: Ctx) -> Response:
    body = ctx.object_body()
    if "password_hash" in body and "password" not in body:
        try:
            check_password_hash(
                body["password_hash"], body.get("hashing_algorithm"), erlang_text=at_least_4(ctx.broker)
            )
        except DefinitionsError as exc:
            raise bad_request(str(exc)) from None
    name = ctx.params["user"]
    auth = ctx.broker.auth
    existed = name in auth.users
    password: str | None = None
    if "password" in body:
        password = str(body["password"])
    elif "password_hash" in body:
        algorithm = str(body.get("hashing_algorithm") or "rabbit_password_hashing_sha256")
        password = PasswordHash(str(body["password_hash"]), algorithm)
    elif not existed:
        raise bad_request("[{key_missing,password}]")
    tags = body.get("tags", [])
    if isinstance(tags, str):
        tags = [t for t in tags.split(",") if t]
    auth.put_user(name, password, [str(t) for t in tags])
    return no_content() if existed else created()


def delete_user(ctx: Ctx) -> Response:
    ctx.broker.auth.delete_user(_user(ctx))
    return no_content()


def _perm_json(user: str, vhost: str, p: Any) -> dict[str, Any]:
    return {"user": user, "vhost": vhost, "configure": p.configure, "write": p.write, "read": p.read}


def list_permissions(ctx: Ctx) -> Response:
    """All permissions, or those of the vhost or user in the path."""
    if "vhost" in ctx.params:
        ctx.vhost()
    if "user" in ctx.params:
        _user(ctx)
    vhost, user = ctx.params.get("vhost"), ctx.params.get("user")
    perms = [
        (k, p)
        for k, p in sorted(ctx.broker.auth.permissions.items())
        if (vhost is None or k[1] == vhost) and (user is None or k[0] == user)
    ]
    return listing(ctx, (_perm_json(u, v, p) for (u, v), p in perms))


def get_permission(ctx: Ctx) -> Response:
    v, user = ctx.vhost().name, _user(ctx)
    p = ctx.broker.auth.permissions.get((user, v))
    if p is None:
        raise not_found()
    return json_response(200, _perm_json(user, v, p))


def put_permission(ctx: Ctx) -> Response:
    v = ctx.vhost(missing="write").name
    user = ctx.params["user"]
    if user not in ctx.broker.auth.users:
        raise bad_request(f"user '{user}' does not exist")
    body = ctx.object_body(required=("configure", "write", "read"))
    for key in ("configure", "write", "read"):
        _check_regexp(ctx, str(body[key]))
    existed = (user, v) in ctx.broker.auth.permissions
    ctx.broker.auth.set_permissions(user, v, str(body["configure"]), str(body["write"]), str(body["read"]))
    return no_content() if existed else created()


def _check_regexp(ctx: Ctx, pattern: str) -> None:
    """400 ``invalid_regexp`` as RabbitMQ renders it (an Erlang error term: strings as lists of code points)."""
    try:
        validate_regexp(pattern, pcre1=not newer_than_4_0(ctx.broker))
    except InvalidRegexp as exc:
        raise bad_request(
            ["invalid_regexp", [ord(c) for c in exc.pattern], [[ord(c) for c in exc.message], exc.offset]]
        ) from None


def delete_permission(ctx: Ctx) -> Response:
    v, user = ctx.vhost().name, _user(ctx)
    if not ctx.broker.auth.clear_permissions(user, v):
        raise not_found()
    return no_content()


# -- connections, channels, consumers ---------------------------------------------------------------------------------
def list_connections(ctx: Ctx) -> Response:
    conns = _conns(ctx)
    vhost = ctx.vhost().name if "vhost" in ctx.params else None
    infos = [c for c in conns.all(ctx.broker) if vhost is None or c.vhost == vhost]
    serial = newer_than_4_0(ctx.broker)
    return listing(ctx, (connection_json(c, conns, serial_number=serial) for c in infos))


def _connection(ctx: Ctx, *, write: bool = False) -> ConnectionInfo:
    info = _conns(ctx).by_name(ctx.broker, ctx.params["name"])
    if info is None:
        raise not_found()
    _own(ctx, info.user, write=write)
    return info


def _own(ctx: Ctx, owner: str, *, write: bool = False) -> None:
    """Management users see and close their own connections and channels only (monitoring users see all;
    administrators close any): 401 ``User not authorised to access object`` (live 3.10.8 and 4.3.6)."""
    allowed = ctx.has_tag("administrator") if write else ctx.sees_all
    if owner != ctx.user and not allowed:
        raise not_authorised(texts.NOT_AUTHORISED)


def get_connection(ctx: Ctx) -> Response:
    info = _connection(ctx)
    serial = newer_than_4_0(ctx.broker)
    return json_response(200, connection_json(info, _conns(ctx), serial_number=serial, single=True))


def delete_connection(ctx: Ctx) -> Response:
    info = _connection(ctx, write=True)
    reason = ctx.request.header("x-reason") or texts.MANAGEMENT_CLOSE
    if info.close is not None:
        info.close(320, reason)
    return no_content()


def connection_channels(ctx: Ctx) -> Response:
    info = _connection(ctx)
    conns = _conns(ctx)
    return listing(ctx, (channel_json(info, info.sessions[n], conns) for n in sorted(info.sessions)))


def list_channels(ctx: Ctx) -> Response:
    conns = _conns(ctx)
    vhost = ctx.vhost().name if "vhost" in ctx.params else None
    return listing(
        ctx,
        (channel_json(i, s, conns) for i, s in channels(ctx.broker, conns) if vhost is None or i.vhost == vhost),
    )


def get_channel(ctx: Ctx) -> Response:
    conns = _conns(ctx)
    for info, s in channels(ctx.broker, conns):
        if channel_name(info, s.number, conns) == ctx.params["name"]:
            _own(ctx, info.user)
            return json_response(200, channel_json(info, s, conns))
    raise not_found()


def list_consumers(ctx: Ctx) -> Response:
    conns = _conns(ctx)
    vhosts = [ctx.vhost()] if "vhost" in ctx.params else [ctx.broker.vhosts[n] for n in sorted(ctx.broker.vhosts)]
    return listing(
        ctx,
        (
            consumer_json(c, conns)
            for v in vhosts
            for q in sorted(v.queues.values(), key=lambda q: q.name)
            for c in q.consumers
        ),
    )


# -- definitions ------------------------------------------------------------------------------------------------------
def get_definitions(ctx: Ctx) -> Response:
    vhost = ctx.vhost().name if "vhost" in ctx.params else None
    return json_response(200, export_definitions(ctx.broker, vhost))


def post_definitions(ctx: Ctx) -> Response:
    vhost = ctx.vhost().name if "vhost" in ctx.params else None
    defs = ctx.body(empty={}, error="failed_to_parse_json")
    try:
        import_definitions(ctx.broker, defs, vhost)
    except (DefinitionsError, PolicyError, errors.AMQPError) as exc:
        raise bad_request(error_reason(exc)) from None
    return no_content()


# -- fakerabbit's own: clock, reset, events ----------------------------------------------------------------------------
def _clock_json(ctx: Ctx) -> dict[str, Any]:
    """``type`` names the clock as ``FakeRabbit(clock=...)`` does: ``virtual``, ``frozen`` (follows freezegun /
    time-machine) or ``system``. Only the system clock keeps its timers on the event loop, uncounted."""
    clock = ctx.rabbit.clock
    now_ms = clock.now_ms()
    if isinstance(clock, VirtualClock):
        kind, pending = "virtual", clock.pending()
    elif isinstance(clock, FollowingClock):
        kind, pending = "frozen", clock.pending()
    else:
        kind, pending = "system", None
    return {
        "type": kind,
        "now": datetime.fromtimestamp(now_ms / 1000, tz=UTC).isoformat().replace("+00:00", "Z"),
        "now_ms": now_ms,
        "pending_timers": pending,
    }


def get_clock(ctx: Ctx) -> Response:
    return json_response(200, _clock_json(ctx))


def advance_clock(ctx: Ctx) -> Response:
    clock = ctx.rabbit.clock
    if isinstance(clock, FollowingClock):
        raise bad_request(
            "the clock follows the test's time library (clock='frozen'): move time with freezegun or time-machine"
        )
    if not isinstance(clock, VirtualClock):
        raise bad_request("the clock is the system clock; start fakerabbit with --clock virtual to control time")
    body = ctx.object_body()
    if "seconds" in body:
        seconds = body["seconds"]
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds < 0:
            raise bad_request("seconds must be a number >= 0")
        clock.advance(seconds)
    elif "to" in body:
        try:
            when = datetime.fromisoformat(str(body["to"]).replace("Z", "+00:00"))
            clock.advance_to(when)
        except ValueError as exc:
            raise bad_request(f"to: {exc}") from None
    else:
        raise bad_request("[{key_missing,seconds}]")
    return json_response(200, _clock_json(ctx))


def reset(ctx: Ctx) -> Response:
    ctx.rabbit.reset()
    return no_content()


def events(ctx: Ctx) -> Response:
    q = ctx.request.query
    kinds = {k for k in q.get("kind", "").split(",") if k}
    queue = q.get("queue")
    message_id = q.get("message_id")
    rows = []
    for e in ctx.broker.events.snapshot():
        if kinds and e.kind not in kinds:
            continue
        if queue is not None and e.details.get("queue") != queue:
            continue
        if message_id is not None and str(e.message_id) != message_id:
            continue
        rows.append(
            {
                "kind": e.kind,
                "time": datetime.fromtimestamp(e.time_ms / 1000, tz=UTC).isoformat().replace("+00:00", "Z"),
                "time_ms": e.time_ms,
                "message_id": e.message_id,
                "details": jsonable(e.details),
            }
        )
    limit = q.get("limit")
    if limit:
        try:
            rows = rows[-int(limit) :] if int(limit) > 0 else []
        except ValueError:
            raise bad_request("limit must be an integer") from None
    return json_response(200, rows)


def _held(queues: Iterable[Queue]) -> int:
    """Dead letters held by at-least-once quorum queues: in ``messages`` (as each queue's), not ready or unacked."""
    return sum(q.held_dead_letters()[0] for q in queues)
