"""The management API: RabbitMQ's paths, methods, basic auth and error answers, dispatched to handlers."""

from __future__ import annotations

import base64
import binascii
from typing import TYPE_CHECKING

from fakerabbit.broker import texts
from fakerabbit.management import admin, node, policies, topology
from fakerabbit.management.core import (
    APIError,
    Ctx,
    Route,
    at_least_4,
    json_response,
    newer_than_4_0,
    not_authorised,
    not_found,
    route,
)
from fakerabbit.management.http import Request, Response

if TYPE_CHECKING:
    from fakerabbit.management.core import ServedNode

_Q = "/api/queues/{vhost}/{name}"
_X = "/api/exchanges/{vhost}/{name}"
_B = "/api/bindings/{vhost}/e/{source}/{kind}/{dest}"

ROUTES: tuple[Route, ...] = (
    route("/api/overview", GET=admin.overview),
    route("/api/whoami", GET=admin.whoami),
    route("/api/aliveness-test/{vhost}", GET=admin.aliveness),
    route("/api/health/checks/*", GET=node.health_check),
    route("/api/nodes", GET=node.list_nodes),
    route("/api/nodes/{node}", GET=node.get_node),
    route("/api/feature-flags", GET=node.feature_flags),
    route("/api/deprecated-features", GET=node.deprecated_features),
    route("/api/deprecated-features/used", GET=node.deprecated_features_used),
    route("/api/vhosts", GET=admin.list_vhosts),
    route("/api/vhosts/{vhost}", GET=admin.get_vhost, PUT=admin.put_vhost, DELETE=admin.delete_vhost),
    route("/api/vhosts/{vhost}/connections", GET=admin.list_connections),
    route("/api/vhosts/{vhost}/channels", GET=admin.list_channels),
    route("/api/vhosts/{vhost}/permissions", GET=admin.list_permissions),
    route("/api/users", GET=admin.list_users),
    route("/api/users/{user}", GET=admin.get_user, PUT=admin.put_user, DELETE=admin.delete_user),
    route("/api/users/{user}/permissions", GET=admin.list_permissions),
    route("/api/permissions", GET=admin.list_permissions),
    route(
        "/api/permissions/{vhost}/{user}",
        GET=admin.get_permission,
        PUT=admin.put_permission,
        DELETE=admin.delete_permission,
    ),
    route("/api/queues", GET=topology.list_queues),
    route("/api/queues/{vhost}", GET=topology.list_queues),
    route(_Q, GET=topology.get_queue, PUT=topology.put_queue, DELETE=topology.delete_queue),
    route(_Q + "/contents", DELETE=topology.purge_queue),
    route(_Q + "/get", POST=topology.get_messages),
    route(_Q + "/bindings", GET=topology.queue_bindings),
    route("/api/exchanges", GET=topology.list_exchanges),
    route("/api/exchanges/{vhost}", GET=topology.list_exchanges),
    route(_X, GET=topology.get_exchange, PUT=topology.put_exchange, DELETE=topology.delete_exchange),
    route(_X + "/publish", POST=topology.publish),
    route(_X + "/bindings/{side}", GET=topology.exchange_bindings),
    route("/api/bindings", GET=topology.list_bindings),
    route("/api/bindings/{vhost}", GET=topology.list_bindings),
    route(_B, GET=topology.list_pair_bindings, POST=topology.post_binding),
    route(_B + "/{props}", GET=topology.get_binding, DELETE=topology.delete_binding),
    route("/api/policies", GET=policies.list_policies),
    route("/api/policies/{vhost}", GET=policies.list_policies),
    route(
        "/api/policies/{vhost}/{name}",
        GET=policies.get_policy,
        PUT=policies.put_policy,
        DELETE=policies.delete_policy,
    ),
    route("/api/operator-policies", GET=policies.list_policies),
    route("/api/operator-policies/{vhost}", GET=policies.list_policies),
    route(
        "/api/operator-policies/{vhost}/{name}",
        GET=policies.get_policy,
        PUT=policies.put_policy,
        DELETE=policies.delete_policy,
    ),
    route("/api/connections", GET=admin.list_connections),
    route("/api/connections/{name}", GET=admin.get_connection, DELETE=admin.delete_connection),
    route("/api/connections/{name}/channels", GET=admin.connection_channels),
    route("/api/channels", GET=admin.list_channels),
    route("/api/channels/{name}", GET=admin.get_channel),
    route("/api/consumers", GET=admin.list_consumers),
    route("/api/consumers/{vhost}", GET=admin.list_consumers),
    route("/api/definitions", GET=admin.get_definitions, POST=admin.post_definitions),
    route("/api/definitions/{vhost}", GET=admin.get_definitions, POST=admin.post_definitions),
    route("/api/fakerabbit/clock", GET=admin.get_clock),
    route("/api/fakerabbit/clock/advance", POST=admin.advance_clock),
    route("/api/fakerabbit/reset", POST=admin.reset),
    route("/api/fakerabbit/events", GET=admin.events),
)

_AUTH_HEADERS = {"www-authenticate": 'Basic realm="RabbitMQ Management"'}


class ManagementAPI:
    """Answers management API requests for one :class:`~fakerabbit.FakeRabbit`, on the server's loop."""

    def __init__(self, rabbit: ServedNode) -> None:
        self.rabbit = rabbit

    def _authenticate(self, request: Request) -> str:
        header = request.header("authorization")
        scheme, _, credentials = header.partition(" ")
        if scheme.lower() != "basic" or not credentials:
            raise APIError(401, "not_authorized", "Not_Authorized", _AUTH_HEADERS)
        try:
            user, sep, password = base64.b64decode(credentials.strip(), validate=True).decode("utf-8").partition(":")
        except (binascii.Error, ValueError):
            raise APIError(401, "not_authorized", "Login failed", _AUTH_HEADERS) from None
        if not sep or not self.rabbit.broker.auth.authenticate(user, password):
            # live 4.0.5 and 4.3.6 no longer say why; 3.10.8 says "Login failed"
            if at_least_4(self.rabbit.broker):
                raise APIError(401, "not_authorized", "Not_Authorized")
            raise APIError(401, "not_authorized", "Login failed", _AUTH_HEADERS)
        return user

    def handle(self, request: Request) -> Response:
        """One request: route (404), method (405), credentials (401), then the handler."""
        server = self.rabbit.server
        try:
            for r in ROUTES:
                params = r.match(request.segments)
                if params is not None:
                    break
            else:
                raise not_found()
            allowed = sorted(r.methods)
            allow = ", ".join((["HEAD"] if "GET" in r.methods else []) + allowed + ["OPTIONS"])
            method = "GET" if request.method == "HEAD" else request.method
            if method == "OPTIONS":
                return Response(200, b"", {"allow": allow})
            handler = r.methods.get(method)
            if handler is None:
                raise APIError(405, "Method Not Allowed", f"{request.method} is not allowed here", {"allow": allow})
            user = self._authenticate(request)
            server.drain_inbound()  # see what clients sent before this request
            ctx = Ctx(request, params, user, self.rabbit)
            _authorize(ctx, r, method)
            return handler(ctx)
        except APIError as exc:
            return exc.response()
        except RecursionError:  # a structure nested too deeply for the handler (arguments, headers)
            return APIError(400, "bad_request", "nested_too_deeply").response()
        finally:
            server.flush()


# Paths only administrators may use (any method), as ``rabbit_mgmt_util:is_authorized_admin``.
_ADMIN_ONLY = ("users", "permissions", "topic-permissions", "definitions", "fakerabbit")
_MONITOR_ONLY = ("nodes",)


def _authorize(ctx: Ctx, r: Route, method: str) -> None:
    """RabbitMQ's management authorization: tags, then the vhost in the path (checked live on 3.10.8, 4.0.5 and
    4.3.6 with a restricted user; see tests/management/test_authorization.py)."""
    if not ctx.has_tag("management"):
        raise not_authorised("Not management user")
    top = r.pattern[1] if len(r.pattern) > 1 else ""
    admin = (
        top in _ADMIN_ONLY
        or (top == "vhosts" and (len(r.pattern) == 3 or r.pattern[-1] == "permissions"))
        or (top == "operator-policies" and method != "GET")
        or (top == "feature-flags" and not at_least_4(ctx.broker))  # 3.10.8: administrators only
    )
    if admin and not ctx.has_tag("administrator"):
        raise not_authorised("Not administrator user")
    if top in _MONITOR_ONLY and not ctx.has_tag("monitoring"):
        raise not_authorised("Not monitor user")
    if top == "policies" and method in ("PUT", "DELETE") and not ctx.has_tag("policymaker"):
        raise not_authorised(texts.NOT_AUTHORISED)
    vhost = ctx.params.get("vhost")
    if vhost is not None and vhost in ctx.broker.vhosts and not ctx.can_access(vhost):
        if newer_than_4_0(ctx.broker):
            raise APIError(404, "not_found", "Not Found")
        raise not_authorised("User not authorised to access virtual host")


__all__ = ["ROUTES", "ManagementAPI", "json_response"]
