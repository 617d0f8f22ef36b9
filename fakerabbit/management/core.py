"""The management API's plumbing: request context, errors in RabbitMQ's JSON, routing, list queries."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from fakerabbit.broker import errors
from fakerabbit.management.http import Request, Response

if TYPE_CHECKING:
    from fakerabbit.broker.broker import Broker
    from fakerabbit.broker.vhost import Vhost
    from fakerabbit.clock import FollowingClock, SystemClock, VirtualClock
    from fakerabbit.protocol.listener import BoundAddress, Listener

JSON_HEADERS = {"content-type": "application/json"}


class Listening(Protocol):
    """A listener with an address (the management listener itself, as the node reports it)."""

    @property
    def host(self) -> str: ...

    @property
    def port(self) -> int: ...

    @property
    def bound(self) -> Sequence[BoundAddress]: ...


class ServedNode(Protocol):
    """What the management API needs of the node it serves (:class:`~fakerabbit.FakeRabbit` implements it):
    the broker, the AMQP listener, the clock, the addresses, and a reset. It never names ``FakeRabbit``."""

    @property
    def broker(self) -> Broker: ...

    @property
    def server(self) -> Listener: ...

    @property
    def clock(self) -> VirtualClock | FollowingClock | SystemClock: ...

    @property
    def host(self) -> str: ...

    @property
    def port(self) -> int: ...

    @property
    def management(self) -> Listening | None: ...

    def reset(self) -> None:
        """Back to the initial definitions (``POST /api/fakerabbit/reset``)."""
        ...


class APIError(Exception):
    """An error answer: ``{"error": error, "reason": reason}`` with ``status``."""

    def __init__(self, status: int, error: str, reason: Any, headers: dict[str, str] | None = None) -> None:
        super().__init__(f"{status} {error}: {reason}")
        self.status = status
        self.error = error
        self.reason = reason
        self.headers = headers or {}

    def response(self) -> Response:
        return json_response(self.status, {"error": self.error, "reason": self.reason}, self.headers)


def not_found() -> APIError:
    """RabbitMQ's generic 404."""
    return APIError(404, "Object Not Found", "Not Found")


def bad_request(reason: Any) -> APIError:
    """RabbitMQ's 400."""
    return APIError(400, "bad_request", reason)


def access_refused() -> APIError:
    """What RabbitMQ answers when the operation is refused on a reserved name (``amq.*``) or the user lacks the
    configure/write/read permission it needs."""
    return APIError(401, "not_authorised", "Access refused.")


def not_authorised(reason: str) -> APIError:
    """A 401 for a user who may log in but not do this (``Not administrator user``, ...)."""
    return APIError(401, "not_authorised", reason)


def at_least_4(broker: Broker) -> bool:
    """RabbitMQ 4.x (PCRE2 regexp error texts, ``{not_base64,<<"x">>}`` reasons rendered as Erlang text)."""
    return broker.profile.release >= (4, 0)


def newer_than_4_0(broker: Broker) -> bool:
    """RabbitMQ 4.1+ management API: a vhost the user cannot access is a 404, not a 401 (checked live: 4.0.5
    answers 401 ``User not authorised to access virtual host``, 4.3.6 404 ``not_found``)."""
    return broker.profile.release > (4, 0)


def amqp_error(exc: errors.AMQPError) -> APIError:
    """A broker error from a declare/delete/bind path: 401 for refused access, 404 for not found, else 400."""
    if isinstance(exc, errors.AccessRefused):
        return access_refused()
    if isinstance(exc, errors.NotFound):
        return APIError(404, "not_found", exc.explanation)
    return bad_request(exc.explanation)


def json_response(status: int, obj: Any, headers: dict[str, str] | None = None) -> Response:
    """``obj`` as compact JSON."""
    try:
        text = json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
    except RecursionError:  # a client's table nested deeper than json's C encoder goes
        text = deep_dumps(obj)
    return Response(status, text.encode("utf-8"), {**JSON_HEADERS, **(headers or {})})


class _Raw(str):
    """JSON text already encoded (a bracket, a comma, a key)."""


def deep_dumps(obj: Any) -> str:
    """Compact JSON of dicts, lists and scalars nested to any depth, without recursion."""
    out: list[str] = []
    stack: list[Any] = [obj]
    while stack:
        item = stack.pop()
        if isinstance(item, _Raw):
            out.append(item)
        elif isinstance(item, dict):
            out.append("{")
            stack.append(_Raw("}"))
            entries = list(item.items())
            for i in range(len(entries) - 1, -1, -1):
                k, v = entries[i]
                stack.append(v)
                stack.append(_Raw(json.dumps(str(k), ensure_ascii=False) + ":"))
                if i:
                    stack.append(_Raw(","))
        elif isinstance(item, list | tuple):
            out.append("[")
            stack.append(_Raw("]"))
            for i in range(len(item) - 1, -1, -1):
                stack.append(item[i])
                if i:
                    stack.append(_Raw(","))
        else:
            out.append(json.dumps(item, ensure_ascii=False))
    return "".join(out)


def no_content() -> Response:
    return Response(204)


def created(headers: dict[str, str] | None = None) -> Response:
    return Response(201, b"", headers or {})


@dataclass(slots=True)
class Ctx:
    """One request being handled: the request, the path parameters and the authenticated user."""

    request: Request
    params: dict[str, str]
    user: str
    rabbit: ServedNode
    _body: Any = field(default=None)
    _parsed: bool = False

    @property
    def broker(self) -> Broker:
        return self.rabbit.broker

    def body(self, *, empty: Any = None, error: str = "not_json") -> Any:
        """The request body parsed as JSON (``empty`` when there is none)."""
        if not self._parsed:
            raw = self.request.body
            if not raw.strip():
                self._body = empty
            else:
                try:
                    self._body = json.loads(raw)
                except (ValueError, UnicodeDecodeError, RecursionError):  # deeply nested JSON included
                    raise bad_request(error) from None
            self._parsed = True
        return self._body

    def object_body(self, *, required: Sequence[str] = ()) -> dict[str, Any]:
        """The body as a JSON object; missing ``required`` keys give RabbitMQ's ``key_missing`` 400."""
        body = self.body(empty={})
        if not isinstance(body, dict):
            raise bad_request("not_json")
        missing = [k for k in required if k not in body]
        if missing:
            raise bad_request("[" + ",".join(f"{{key_missing,{k}}}" for k in missing) + "]")
        return body

    def vhost(self, name: str | None = None, *, missing: str = "object") -> Vhost:
        """The vhost named in the path; a 404 (generic, or ``vhost_not_found`` for writes) if it is absent."""
        vname = self.params["vhost"] if name is None else name
        v = self.broker.vhosts.get(vname)
        if v is None:
            raise not_found() if missing == "object" else APIError(404, "not_found", "vhost_not_found")
        return v

    # -- authorization (rabbit_mgmt_util) -------------------------------------------------------------------------
    def has_tag(self, tag: str) -> bool:
        """Does the requesting user have ``tag`` (or one that includes it: administrator includes all)?"""
        return self.broker.auth.has_tag(self.user, tag)

    @property
    def sees_all(self) -> bool:
        """Monitoring and administrator users see every vhost's objects and every user's connections."""
        return self.has_tag("monitoring")

    def can_access(self, vhost: str) -> bool:
        """May the user see objects of ``vhost`` (administrators always; others need permissions on it)?"""
        return self.has_tag("administrator") or self.broker.auth.can_access_vhost(self.user, vhost)

    def require(self, perm: str, resource: str, name: str) -> None:
        """401 ``Access refused.`` unless the user has ``perm`` (configure/write/read) on the resource."""
        v = self.params.get("vhost", "/")
        if not self.broker.auth.allows(self.user, v, perm, resource, name):
            raise access_refused()

    def visible(self, row: dict[str, Any]) -> bool:
        """Is a list row (queue, exchange, connection, vhost, ...) visible to the user?"""
        if self.sees_all:
            return True
        if "user" in row and "vhost" in row and row["user"] != self.user and "configure" not in row:
            return False  # connections and channels: a management user sees their own
        vhost = row.get("vhost")
        queue = row.get("queue")
        if vhost is None and isinstance(queue, dict):  # consumers
            vhost = queue.get("vhost")
        if isinstance(vhost, str):
            return self.broker.auth.can_access_vhost(self.user, vhost)
        name = row.get("name")
        if self.request.segments[:2] == ["api", "vhosts"] and isinstance(name, str):
            return self.broker.auth.can_access_vhost(self.user, name)
        return True

    def flag(self, name: str) -> bool:
        """A boolean query parameter (``?if-empty=true``)."""
        return self.request.query.get(name, "").lower() == "true"


Handler = Callable[[Ctx], Response]


@dataclass(frozen=True, slots=True)
class Route:
    """A path pattern: literal segments, ``{name}`` parameters, and a final ``*`` for any remainder."""

    pattern: tuple[str, ...]
    methods: dict[str, Handler]

    def match(self, segments: list[str]) -> dict[str, str] | None:
        pat = self.pattern
        if pat and pat[-1] == "*":
            if len(segments) < len(pat) - 1:
                return None
            pat = pat[:-1]
            segments = segments[: len(pat)]
        elif len(segments) != len(pat):
            return None
        params: dict[str, str] = {}
        for p, s in zip(pat, segments, strict=True):
            if p.startswith("{"):
                params[p[1:-1]] = s
            elif p != s:
                return None
        return params


def route(path: str, **methods: Handler) -> Route:
    """``route("/api/queues/{vhost}", GET=list_queues)``."""
    return Route(tuple(s for s in path.split("/") if s), methods)


# -- list queries (?name=&use_regex=&sort=&sort_reverse=&columns=&page=&page_size=) ---------------------------------
def _get_path(item: Any, path: str) -> Any:
    for part in path.split("."):
        if not isinstance(item, dict) or part not in item:
            return None
        item = item[part]
    return item


def _select_columns(item: dict[str, Any], columns: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for col in columns:
        parts = col.split(".")
        value = _get_path(item, col)
        if value is None and not _has_path(item, parts):
            continue
        target = out
        for part in parts[:-1]:
            target = target.setdefault(part, {})
        target[parts[-1]] = value
    return out


def _has_path(item: Any, parts: list[str]) -> bool:
    for part in parts:
        if not isinstance(item, dict) or part not in item:
            return False
        item = item[part]
    return True


def _sort_key(value: Any) -> tuple[int, Any]:
    if value is None:
        return (0, "")
    if isinstance(value, bool | int | float):
        return (1, value)
    return (2, str(value))


def listing(ctx: Ctx, items: Iterable[dict[str, Any]]) -> Response:
    """A list answer with RabbitMQ's query parameters applied, paginated when ``page`` is given."""
    q = ctx.request.query
    rows = [r for r in items if ctx.visible(r)]
    total = len(rows)
    name = q.get("name")
    if name:
        if q.get("use_regex", "").lower() == "true":
            try:
                rx = re.compile(name)
            except re.error:
                raise bad_request(f"invalid regular expression: {name}") from None
            rows = [r for r in rows if rx.search(str(r.get("name", "")))]
        else:
            rows = [r for r in rows if name in str(r.get("name", ""))]
    sort = q.get("sort")
    if sort:
        rows.sort(key=lambda r: _sort_key(_get_path(r, sort)), reverse=q.get("sort_reverse", "").lower() == "true")
    elif q.get("sort_reverse", "").lower() == "true":
        rows.reverse()
    columns = [c for c in q.get("columns", "").split(",") if c]
    if columns:
        rows = [_select_columns(r, columns) for r in rows]
    if "page" not in q:
        return json_response(200, rows)
    try:
        page = int(q["page"])
        page_size = int(q.get("page_size", "100"))
    except ValueError:
        raise bad_request("page and page_size must be integers") from None
    if page < 1 or not 1 <= page_size <= 500:
        raise bad_request("page must be >= 1 and page_size between 1 and 500")
    filtered = len(rows)
    page_count = math.ceil(filtered / page_size)
    if filtered and page > page_count:
        raise bad_request("page_out_of_range")
    chunk = rows[(page - 1) * page_size : page * page_size]
    return json_response(
        200,
        {
            "filtered_count": filtered,
            "item_count": len(chunk),
            "items": chunk,
            "page": page,
            "page_count": page_count,
            "page_size": page_size,
            "total_count": total,
        },
    )
