"""Management API handlers for policies and operator policies (``/api/policies``, ``/api/operator-policies``)."""

from __future__ import annotations

from typing import Any

from fakerabbit.broker import texts
from fakerabbit.broker.policy import PolicyError, validate_policy
from fakerabbit.broker.vhost import Vhost
from fakerabbit.management.core import (
    APIError,
    Ctx,
    bad_request,
    created,
    json_response,
    listing,
    no_content,
    not_found,
)
from fakerabbit.management.http import Response
from fakerabbit.management.render import policy_json
from fakerabbit.management.topology import vhosts_of as _vhosts


def _operator(ctx: Ctx) -> bool:
    return ctx.request.segments[1] == "operator-policies"


def _policy_table(ctx: Ctx, v: Vhost) -> dict[str, Any]:
    return v.operator_policies if _operator(ctx) else v.policies


def list_policies(ctx: Ctx) -> Response:
    return listing(
        ctx,
        (policy_json(p) for v in _vhosts(ctx) for p in sorted(_policy_table(ctx, v).values(), key=lambda p: p.name)),
    )


def get_policy(ctx: Ctx) -> Response:
    p = _policy_table(ctx, ctx.vhost()).get(ctx.params["name"])
    if p is None:
        raise not_found()
    return json_response(200, policy_json(p))


def _validation(message: str) -> APIError:
    return bad_request(f"Validation failed\n\n{message}\n")


def put_policy(ctx: Ctx) -> Response:
    v = ctx.vhost(missing="write")
    body = ctx.object_body(required=("pattern", "definition"))
    pattern, definition = body["pattern"], body["definition"]
    priority = body.get("priority", 0)
    apply_to = body.get("apply-to", "all")
    if not isinstance(pattern, str):
        raise _validation(f"pattern should be a string, actually was {pattern!r}")
    if isinstance(priority, bool) or not isinstance(priority, int | float):
        raise _validation(f'priority should be a number, actually was <<"{priority}">>')
    if not isinstance(definition, dict):
        raise _validation("definition should be a JSON object")
    if not isinstance(apply_to, str):
        raise _validation(texts.apply_to_unrecognised(apply_to))
    operator = _operator(ctx)
    name = ctx.params["name"]
    existed = name in _policy_table(ctx, v)
    try:
        validate_policy(definition, operator=operator, apply_to=apply_to, profile=ctx.broker.profile, pattern=pattern)
        ctx.broker.set_policy(
            name, pattern, definition, priority=priority, apply_to=apply_to, vhost=v.name, operator=operator
        )
    except PolicyError as exc:
        raise _validation(str(exc)) from None
    return no_content() if existed else created()


def delete_policy(ctx: Ctx) -> Response:
    v = ctx.vhost()
    name = ctx.params["name"]
    if name not in _policy_table(ctx, v):
        raise not_found()
    ctx.broker.clear_policy(name, vhost=v.name, operator=_operator(ctx))
    return no_content()
