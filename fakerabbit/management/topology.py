"""Management API handlers for queues, exchanges, bindings, publish/get and policies."""

from __future__ import annotations

import base64
import binascii
from typing import Any
from urllib.parse import quote

from fakerabbit.broker import errors, texts
from fakerabbit.broker.exchange import Exchange
from fakerabbit.broker.fields import FieldError
from fakerabbit.broker.properties import PropertiesError, RawProperties, build_properties
from fakerabbit.broker.queue import Queue
from fakerabbit.broker.session import ConnectionInfo, Session
from fakerabbit.broker.vhost import Vhost
from fakerabbit.management.core import (
    APIError,
    Ctx,
    access_refused,
    amqp_error,
    at_least_4,
    bad_request,
    created,
    json_response,
    listing,
    no_content,
    not_found,
)
from fakerabbit.management.http import Response
from fakerabbit.management.render import (
    Connections,
    binding_json,
    default_binding_json,
    exchange_json,
    explicit_bindings,
    json_to_table,
    properties_key,
    queue_json,
    table_json,
    unacked_bytes,
)


def vhosts_of(ctx: Ctx) -> list[Vhost]:
    """The vhost named in the path, or every vhost."""
    if "vhost" in ctx.params:
        return [ctx.vhost()]
    return [ctx.broker.vhosts[n] for n in sorted(ctx.broker.vhosts)]


def _conns(ctx: Ctx) -> Connections:
    return Connections(ctx.rabbit.server)


def _bool(body: dict[str, Any], key: str, default: bool) -> bool:
    value = body.get(key, default)
    if isinstance(value, str) and value in ("true", "false"):
        return value == "true"
    if not isinstance(value, bool):
        raise bad_request(f"{key} must be true or false")
    return value


def _table(body: dict[str, Any], key: str = "arguments") -> Any:
    try:
        return json_to_table(body.get(key) or {})
    except FieldError as exc:
        raise bad_request(str(exc)) from None


# -- queues ----------------------------------------------------------------------------------------------------------
def list_queues(ctx: Ctx) -> Response:
    conns, unacked = _conns(ctx), unacked_bytes(ctx.broker)
    return listing(
        ctx,
        (
            queue_json(q, conns, unacked)
            for v in vhosts_of(ctx)
            for q in sorted(v.queues.values(), key=lambda q: q.name)
        ),
    )


def _queue(ctx: Ctx) -> Queue:
    q = ctx.vhost().queues.get(ctx.params["name"])
    if q is None:
        raise not_found()
    return q


def get_queue(ctx: Ctx) -> Response:
    q = _queue(ctx)
    return json_response(200, queue_json(q, _conns(ctx), unacked_bytes(ctx.broker), details=True))


def put_queue(ctx: Ctx) -> Response:
    v = ctx.vhost(missing="write")
    body = ctx.object_body()
    name = ctx.params["name"]
    ctx.require("configure", "queue", name)
    existed = name in v.queues
    try:
        v.declare_queue(
            None,
            name,
            passive=False,
            durable=_bool(body, "durable", False),
            exclusive=False,
            auto_delete=_bool(body, "auto_delete", False),
            arguments=_table(body),
        )
    except errors.AMQPError as exc:
        raise amqp_error(exc) from None
    return no_content() if existed else created()


def delete_queue(ctx: Ctx) -> Response:
    q = _queue(ctx)
    ctx.require("configure", "queue", q.name)
    try:
        ctx.vhost().delete_queue_cmd(None, q.name, if_unused=ctx.flag("if-unused"), if_empty=ctx.flag("if-empty"))
    except errors.AMQPError as exc:
        raise amqp_error(exc) from None
    return no_content()


def purge_queue(ctx: Ctx) -> Response:
    q = _queue(ctx)
    ctx.require("read", "queue", q.name)
    ctx.vhost().purge_queue(None, q.name)
    return no_content()


def queue_bindings(ctx: Ctx) -> Response:
    q = _queue(ctx)
    rows = [default_binding_json(q)] + [
        binding_json(q.vhost.name, b.source, b.destination, "queue", b.routing_key, b.arguments)
        for b in explicit_bindings(ctx.vhost().exchanges)
        if b.destination_kind == "queue" and b.destination == q.name
    ]
    return listing(ctx, rows)


# -- a pseudo channel for publish and get ------------------------------------------------------------------------------
class _Sink:
    """Receives what a management-API channel would send to a client (only basic.return matters)."""

    def __init__(self) -> None:
        self.returned = False

    def send_deliver(self, *args: Any) -> None:
        pass

    def send_return(self, *args: Any) -> None:
        self.returned = True

    def send_confirm(self, *args: Any) -> None:
        pass

    def send_cancel(self, consumer_tag: str) -> None:
        pass

    def writable(self) -> bool:
        return True


def _session(ctx: Ctx, v: Vhost) -> tuple[Session, _Sink]:
    sink = _Sink()
    conn = ConnectionInfo(0, ctx.user, v.name, "management", {})
    return Session(conn, 1, v, sink), sink


_INT_PROPS = ("delivery_mode", "priority", "timestamp")
_STR_PROPS = (
    "content_type",
    "content_encoding",
    "correlation_id",
    "reply_to",
    "expiration",
    "message_id",
    "type",
    "user_id",
    "app_id",
    "cluster_id",
)


def _properties(props: Any) -> bytes:
    if not isinstance(props, dict):
        raise bad_request(["not_a_table", "properties"])
    kwargs: dict[str, Any] = {}
    for key in _INT_PROPS:
        if key in props:
            value = props[key]
            if isinstance(value, bool) or not isinstance(value, int):
                raise bad_request(["not_int", key])
            kwargs[key] = value
    for key in _STR_PROPS:
        if key in props:
            kwargs[key] = str(props[key])
    if "headers" in props:
        kwargs["headers"] = _table(props, "headers")
    try:
        return build_properties(**kwargs)
    except (PropertiesError, FieldError) as exc:
        raise bad_request(str(exc)) from None


def publish(ctx: Ctx) -> Response:
    v = ctx.vhost()
    body = ctx.object_body(required=("properties", "routing_key", "payload", "payload_encoding"))
    encoding = body["payload_encoding"]
    payload = body["payload"]
    if not isinstance(payload, str):
        raise bad_request(["not_a_string", "payload"])
    if encoding == "string":
        data = payload.encode("utf-8")
    elif encoding == "base64":
        try:
            data = base64.b64decode(payload, validate=True)
        except (binascii.Error, ValueError):
            raise bad_request(["invalid_base64", "payload"]) from None
    else:
        raise bad_request(["unsupported_encoding", encoding])
    props = _properties(body["properties"])
    name = ctx.params["name"]
    exchange = "" if name == "amq.default" else name
    session, sink = _session(ctx, v)
    try:
        session.publish(exchange, str(body["routing_key"]), True, False, props, data)
    except errors.AccessRefused:
        raise access_refused() from None
    except errors.AMQPError as exc:
        if isinstance(exc, errors.NotFound) and at_least_4(ctx.broker):  # live 4.0.5 and 4.3.6
            raise APIError(404, "not_found", "exchange_not_found") from None
        raise bad_request(f"{exc.code} {exc.reply_text}") from None
    finally:
        session.close()
    return json_response(200, {"routed": not sink.returned})


_ACKMODES = ("ack_requeue_true", "ack_requeue_false", "reject_requeue_true", "reject_requeue_false")


def _props_json(raw: bytes) -> Any:
    props = RawProperties(raw)
    out = props.to_dict()
    if "headers" in out:
        out["headers"] = table_json(props.headers or {})
    return out or []  # RabbitMQ renders an empty property list as []


def _int_text(value: Any) -> Any:
    """RabbitMQ accepts integers sent as strings (classic rabbitmqadmin sends ``"count": "1"``)."""
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            raise bad_request(["not_integer", value]) from None  # as live 3.10.8 and 4.3.6
    return value


def get_messages(ctx: Ctx) -> Response:
    v = ctx.vhost()
    body = ctx.object_body(required=("count", "ackmode", "encoding"))
    count, ackmode, encoding = _int_text(body["count"]), body["ackmode"], body["encoding"]
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise bad_request(["not_int", "count"])
    if ackmode not in _ACKMODES:
        raise bad_request(["unsupported_ackmode", ackmode])
    if encoding not in ("auto", "base64"):
        raise bad_request(["unsupported_encoding", encoding])
    truncate = _int_text(body.get("truncate"))
    if truncate is not None and (isinstance(truncate, bool) or not isinstance(truncate, int) or truncate < 0):
        raise bad_request(["not_int", "truncate"])
    session, _ = _session(ctx, v)
    out: list[dict[str, Any]] = []
    try:
        for _ in range(count):
            got = session.get(ctx.params["name"], ackmode == "ack_requeue_false")
            if got is None:
                break
            if ackmode == "reject_requeue_false":
                session.nack(got.delivery_tag, False, False, explicit=False)
            payload = got.body if truncate is None else got.body[:truncate]
            text: str | None = None
            if encoding == "auto":
                try:
                    text = payload.decode("utf-8")
                except UnicodeDecodeError:
                    text = None
            out.append(
                {
                    "payload_bytes": len(got.body),
                    "redelivered": got.redelivered,
                    "exchange": got.exchange,
                    "routing_key": got.routing_key,
                    "message_count": got.message_count,
                    "properties": _props_json(got.props),
                    "payload": text if text is not None else base64.b64encode(payload).decode(),
                    "payload_encoding": "string" if text is not None else "base64",
                }
            )
    except errors.AccessRefused:
        raise access_refused() from None
    except errors.AMQPError as exc:
        if isinstance(exc, errors.NotFound) and at_least_4(ctx.broker):  # live 4.0.5 and 4.3.6
            raise APIError(404, "not_found", "queue_not_found") from None
        if isinstance(exc, errors.NotFound):
            raise APIError(404, "not_found", exc.reply_text) from None
        raise bad_request(exc.reply_text) from None
    finally:
        session.close()  # requeues whatever was fetched with a requeue ack mode
    return json_response(200, out)


# -- exchanges ---------------------------------------------------------------------------------------------------------
def _xname(ctx: Ctx) -> str:
    name = ctx.params["name"]
    return "" if name == "amq.default" else name


def list_exchanges(ctx: Ctx) -> Response:
    return listing(
        ctx,
        (_exchange_json(x, v) for v in vhosts_of(ctx) for x in sorted(v.exchanges.values(), key=lambda x: x.name)),
    )


def get_exchange(ctx: Ctx) -> Response:
    v = ctx.vhost()
    x = v.exchanges.get(_xname(ctx))
    if x is None:
        raise not_found()
    out = _exchange_json(x, v)
    out.update(incoming=[], outgoing=[])
    return json_response(200, out)


def _exchange_json(x: Exchange, v: Vhost) -> dict[str, Any]:
    return exchange_json(x, v.name, v.delayed.info(x))


def put_exchange(ctx: Ctx) -> Response:
    v = ctx.vhost(missing="write")
    body = ctx.object_body()
    name = _xname(ctx)
    type_ = body.get("type", "direct")
    if name == "" or name.startswith("amq."):
        raise access_refused()
    if type_ not in v.broker.exchange_types:
        # rabbit_exchange:check_type/1: "unknown" when no atom of that name exists in the node, "invalid" when one
        # does but names no exchange type - which depends on the node's history; a fresh node says "unknown"
        raise bad_request(texts.unknown_exchange_type(type_))
    ctx.require("configure", "exchange", name)
    existed = name in v.exchanges
    try:
        v.declare_exchange(
            None,
            name,
            type_,
            passive=False,
            durable=_bool(body, "durable", False),
            auto_delete=_bool(body, "auto_delete", False),
            internal=_bool(body, "internal", False),
            arguments=_table(body),
        )
    except errors.AMQPError as exc:
        raise amqp_error(exc) from None
    return no_content() if existed else created()


def delete_exchange(ctx: Ctx) -> Response:
    v = ctx.vhost()
    name = _xname(ctx)
    if name == "" or name.startswith("amq."):
        raise access_refused()
    if name not in v.exchanges:
        raise not_found()
    ctx.require("configure", "exchange", name)
    try:
        v.delete_exchange(None, name, if_unused=ctx.flag("if-unused"))
    except errors.AMQPError as exc:
        raise amqp_error(exc) from None
    return no_content()


def exchange_bindings(ctx: Ctx) -> Response:
    v = ctx.vhost()
    name = _xname(ctx)
    if name not in v.exchanges:
        raise not_found()
    side = ctx.params["side"]
    if side == "source":
        if name == "":
            rows = [default_binding_json(q) for q in sorted(v.queues.values(), key=lambda q: q.name)]
        else:
            rows = [_bjson(v, b) for b in explicit_bindings(v.exchanges) if b.source == name]
    elif side == "destination":
        rows = [
            _bjson(v, b)
            for b in explicit_bindings(v.exchanges)
            if b.destination_kind == "exchange" and b.destination == name
        ]
    else:
        raise not_found()
    return listing(ctx, rows)


# -- bindings ----------------------------------------------------------------------------------------------------------
def _bjson(v: Vhost, b: Any) -> dict[str, Any]:
    return binding_json(v.name, b.source, b.destination, b.destination_kind, b.routing_key, b.arguments)


def list_bindings(ctx: Ctx) -> Response:
    rows: list[dict[str, Any]] = []
    for v in vhosts_of(ctx):
        rows.extend(default_binding_json(q) for q in sorted(v.queues.values(), key=lambda q: q.name))
        rows.extend(_bjson(v, b) for b in explicit_bindings(v.exchanges))
    return listing(ctx, rows)


def _pair(ctx: Ctx) -> tuple[Vhost, str, str, str]:
    v = ctx.vhost()
    source = ctx.params["source"]
    source = "" if source == "amq.default" else source
    kind = {"q": "queue", "e": "exchange"}.get(ctx.params["kind"])
    if kind is None:
        raise not_found()
    dest = ctx.params["dest"]
    if source not in v.exchanges:
        raise not_found()
    if (kind == "queue" and dest not in v.queues) or (kind == "exchange" and dest not in v.exchanges):
        raise not_found()
    return v, source, kind, dest


def _pair_bindings(v: Vhost, source: str, kind: str, dest: str) -> list[dict[str, Any]]:
    return [
        _bjson(v, b)
        for b in explicit_bindings(v.exchanges)
        if b.source == source and b.destination_kind == kind and b.destination == dest
    ]


def list_pair_bindings(ctx: Ctx) -> Response:
    return listing(ctx, _pair_bindings(*_pair(ctx)))


def post_binding(ctx: Ctx) -> Response:
    v = ctx.vhost(missing="write")
    source = ctx.params["source"]
    kind = {"q": "queue", "e": "exchange"}.get(ctx.params["kind"])
    if kind is None:
        raise not_found()
    body = ctx.object_body()
    routing_key = str(body.get("routing_key", ""))
    args = _table(body)
    if source in ("", "amq.default"):
        raise access_refused()
    ctx.require("write", kind, ctx.params["dest"])
    ctx.require("read", "exchange", source)
    try:
        v.bind(None, kind, ctx.params["dest"], source, routing_key, args)
    except errors.AMQPError as exc:
        raise amqp_error(exc) from None
    location = quote(ctx.params["dest"], safe="") + "/" + properties_key(routing_key, args).replace("%", "%25")
    return created({"location": location})


def _find_binding(ctx: Ctx) -> tuple[Vhost, dict[str, Any], Any]:
    v, source, kind, dest = _pair(ctx)
    props = ctx.params["props"]
    for b in explicit_bindings(v.exchanges):
        same = b.source == source and b.destination_kind == kind and b.destination == dest
        if same and properties_key(b.routing_key, b.arguments) == props:
            return v, _bjson(v, b), b
    raise not_found()


def get_binding(ctx: Ctx) -> Response:
    return json_response(200, _find_binding(ctx)[1])


def delete_binding(ctx: Ctx) -> Response:
    v, _, b = _find_binding(ctx)
    ctx.require("write", b.destination_kind, b.destination)
    ctx.require("read", "exchange", b.source)
    try:
        v.bind(None, b.destination_kind, b.destination, b.source, b.routing_key, b.arguments, unbind=True)
    except errors.AMQPError as exc:
        raise amqp_error(exc) from None
    return no_content()
