"""Management API handlers for the node: ``/api/nodes``, feature flags, deprecated features and health checks
that really check (listeners, alarms), as RabbitMQ answers them (checked live on 3.10.8, 4.0.5 and 4.3.6)."""

from __future__ import annotations

import os
import platform
import time
from typing import TYPE_CHECKING, Any

from fakerabbit.management.core import APIError, Ctx, at_least_4, json_response, newer_than_4_0, not_found
from fakerabbit.management.http import Response
from fakerabbit.management.render import NODE

if TYPE_CHECKING:
    from fakerabbit.protocol.listener import BoundAddress

_STARTED = time.monotonic()

_EXCHANGE_TYPES = [
    {"name": t, "description": f"AMQP {t} exchange, as per the AMQP specification", "enabled": True}
    for t in ("direct", "fanout", "headers", "topic")
]
_AUTH_MECHANISMS = [
    {"name": "AMQPLAIN", "description": "QPid AMQPLAIN mechanism", "enabled": True},
    {"name": "PLAIN", "description": "SASL PLAIN authentication mechanism", "enabled": True},
]

# Feature flags of the live brokers (the 4.x list is 4.3.6's; ``rabbitmq_4.N.0`` flags up to the profile's minor).
_FLAGS_3 = (
    "classic_mirrored_queue_version",
    "drop_unroutable_metric",
    "empty_basic_get_metric",
    "implicit_default_bindings",
    "maintenance_mode_status",
    "quorum_queue",
    "stream_queue",
    "user_limits",
    "virtual_host_metadata",
)
_FLAGS_4 = (
    "classic_mirrored_queue_version",
    "classic_queue_type_delivery_support",
    "detailed_queues_endpoint",
    "direct_exchange_routing_v2",
    "drop_unroutable_metric",
    "empty_basic_get_metric",
    "feature_flags_v2",
    "implicit_default_bindings",
    "khepri_db",
    "listener_records_in_ets",
    "maintenance_mode_status",
    "message_containers",
    "message_containers_deaths_v2",
    "quorum_queue",
    "quorum_queue_non_voters",
    "rabbit_exchange_type_local_random",
    "restart_streams",
    "stream_filtering",
    "stream_queue",
    "stream_sac_coordinator_unblock_group",
    "stream_single_active_consumer",
    "stream_update_config_command",
    "tie_binding_to_dest_with_keep_while_cond",
    "topic_binding_projection_v4",
    "topic_binding_projection_v5",
    "track_qq_members_uids",
    "tracking_records_in_ets",
    "user_limits",
    "virtual_host_metadata",
)

_TRANSIENT_NONEXCL = {
    "name": "transient_nonexcl_queues",
    "desc": "",
    "deprecation_phase": "permitted_by_default",
    "doc_url": "https://blog.rabbitmq.com/posts/2021/08/4.0-deprecation-announcements/"
    "#removal-of-transient-non-exclusive-queues",
    "provided_by": "rabbit",
}
_DEPRECATED = (
    {**_TRANSIENT_NONEXCL, "state": "permitted"},
    {
        "name": "global_qos",
        "state": "permitted",
        "desc": "",
        "deprecation_phase": "permitted_by_default",
        "doc_url": "https://blog.rabbitmq.com/posts/2021/08/4.0-deprecation-announcements/#removal-of-global-qos",
        "provided_by": "rabbit",
    },
    {
        "name": "queue_master_locator",
        "state": "denied",
        "desc": "",
        "deprecation_phase": "denied_by_default",
        "doc_url": "",
        "provided_by": "rabbit",
    },
)


def _minor(ctx: Ctx) -> tuple[int, int]:
    return ctx.broker.profile.release


# -- nodes -----------------------------------------------------------------------------------------------------------
def _node_json(ctx: Ctx) -> dict[str, Any]:
    rabbit = ctx.rabbit
    alarms = rabbit.server.alarms
    memory = "memory" in alarms.active or alarms.injected is not None
    limit = alarms.memory_high_watermark if alarms.memory_high_watermark is not None else 2**34
    version = ctx.broker.profile.server_version
    mgmt = rabbit.management
    contexts = []
    if mgmt is not None:
        contexts.append(
            {
                "description": "RabbitMQ Management",
                "path": "/",
                "cowboy_opts": "[{sendfile,false}]",
                "ip": mgmt.host,
                "port": str(mgmt.port),
            }
        )
    return {
        "name": NODE,
        "type": "disc",
        "running": True,
        "being_drained": False,
        "partitions": [],
        "os_pid": str(os.getpid()),
        "fd_total": 1024,
        "fd_used": 0,
        "sockets_total": 0,
        "sockets_used": 0,
        "proc_total": 1048576,
        "proc_used": 0,
        "mem_limit": limit,
        "mem_used": alarms.memory_used(),
        "mem_alarm": memory,
        "mem_calculation_strategy": "rss",
        "disk_free_limit": 50000000,
        "disk_free": 2**40,
        "disk_free_alarm": "disk" in alarms.active,
        "rates_mode": "none",
        "uptime": int((time.monotonic() - _STARTED) * 1000),
        "run_queue": 0,
        "processors": os.cpu_count() or 1,
        "net_ticktime": 60,
        "exchange_types": _EXCHANGE_TYPES,
        "auth_mechanisms": _AUTH_MECHANISMS,
        "applications": [],
        "contexts": contexts,
        "log_files": ["<stdout>"],
        "db_dir": "",
        "config_files": [],
        "enabled_plugins": sorted(ctx.broker.plugins | ({"rabbitmq_management"} if mgmt is not None else set())),
        "cluster_links": [],
        "rabbitmq_version": version,
        "erlang_version": "26.2.5",
        "erlang_full_version": f"fakerabbit on Python {platform.python_version()}",
        "crypto_lib_version": "",
    }


def list_nodes(ctx: Ctx) -> Response:
    return json_response(200, [_node_json(ctx)])


def get_node(ctx: Ctx) -> Response:
    if ctx.params["node"] != NODE:
        raise not_found()
    return json_response(200, _node_json(ctx))


# -- feature flags and deprecated features ---------------------------------------------------------------------------
def feature_flags(ctx: Ctx) -> Response:
    major, minor = _minor(ctx)
    rows: list[dict[str, Any]]
    if major < 4:
        rows = [
            {"name": n, "desc": "", "doc_url": "", "state": "enabled", "stability": "stable", "provided_by": "rabbit"}
            for n in _FLAGS_3
        ]
    else:
        names = list(_FLAGS_4) + [f"rabbitmq_4.{m}.0" for m in range(minor + 1)]
        rows = [
            {
                "name": n,
                "desc": "",
                "doc_url": "",
                "state": "enabled",
                "stability": "required",
                "require_level": "hard",
                "experiment_level": "supported",
                "callbacks": [],
                "provided_by": "rabbit",
            }
            for n in sorted(names)
        ]
    return json_response(200, rows)


def _deprecated_only_4(ctx: Ctx) -> None:
    if not at_least_4(ctx.broker):  # 3.x has no deprecated-features endpoints (404 on live 3.10.8)
        raise not_found()


def deprecated_features(ctx: Ctx) -> Response:
    _deprecated_only_4(ctx)
    return json_response(200, list(_DEPRECATED))


def deprecated_features_used(ctx: Ctx) -> Response:
    """The deprecated features in use: transient non-exclusive queues when any such queue exists."""
    _deprecated_only_4(ctx)
    used = any(
        not q.durable and q.exclusive_owner is None for v in ctx.broker.vhosts.values() for q in v.queues.values()
    )
    return json_response(200, [_TRANSIENT_NONEXCL] if used else [])


# -- health checks ---------------------------------------------------------------------------------------------------
def _ok(**extra: Any) -> Response:
    return json_response(200, {"status": "ok", **extra})


def _failed(reason: str, **extra: Any) -> Response:
    return json_response(503, {"status": "failed", "reason": reason, **extra})


def _bound(ctx: Ctx) -> list[BoundAddress]:
    rabbit = ctx.rabbit
    return [*rabbit.server.bound, *(rabbit.management.bound if rabbit.management is not None else ())]


def _ports(ctx: Ctx) -> list[int]:
    return sorted({b.port for b in _bound(ctx)})


def _protocols(ctx: Ctx) -> list[str]:
    return list(dict.fromkeys(b.protocol for b in _bound(ctx)))


#: ``rabbit_mgmt_wm_health_check_protocol_listener:normalize_protocol/1`` (the AMQP 0-9-1 and HTTP names; any
#: other name stands for itself).
_ALIASES = {
    "amqp091": "amqp",
    "amqp0.9.1": "amqp",
    "amqp0-9-1": "amqp",
    "amqp0_9_1": "amqp",
    "amqps": "amqp/ssl",
    "http1": "http",
    "http1.1": "http",
    "http_api": "http",
    "management": "http",
    "management_ui": "http",
    "ui": "http",
}


def health_check(ctx: Ctx) -> Response:
    """``/api/health/checks/...``: listeners and alarms are really checked; other checks pass (one node)."""
    rest = ctx.request.segments[3:]
    name = rest[0] if rest else ""
    if name in ("alarms", "local-alarms"):
        alarms = ctx.rabbit.server.alarms
        resources = sorted(alarms.active | ({"memory"} if alarms.injected is not None else set()))
        if resources:
            where = "in the cluster" if name == "alarms" else "on the node"
            return _failed(
                f"There are alarms in effect {where}", alarms=[{"node": NODE, "resource": r} for r in resources]
            )
        return _ok()
    if name == "port-listener" and len(rest) == 2:
        try:
            port = int(rest[1])
        except ValueError:
            raise APIError(400, "bad_request", "Invalid port") from None
        ports = _ports(ctx)
        if port in ports:
            return _ok(port=port)
        return _failed("No active listener", missing=port, ports=ports)
    if name == "protocol-listener" and len(rest) == 2:
        wanted = rest[1].lower()
        protocols = _protocols(ctx)
        four = newer_than_4_0(ctx.broker)  # live 4.3.6 lists the protocols; 4.0.5 and 3.10.8 name one
        protocol = _ALIASES.get(wanted, wanted)
        if protocol in protocols:
            return _ok(protocols=protocols) if four else _ok(protocol=protocol)
        return _failed("No active listener", missing=[protocol] if four else protocol, protocols=protocols)
    if name == "node-is-quorum-critical":
        return _ok(reason="single node cluster")
    return _ok()
