"""``fakerabbit ctl``: rabbitmqctl's common commands, spoken over the management HTTP API (stdlib only).

``fakerabbit ctl set_policy DLX ".*" '{"dead-letter-exchange":"my-dlx"}' --apply-to queues`` works as RabbitMQ's
documentation writes it for ``rabbitmqctl``. Output follows rabbitmqctl: an informational line (hidden by
``-q``), then tab-separated tables with a header row (hidden by ``--no-table-headers``). Errors go to stderr as
``Error:`` and a reason; exit status 69 when the broker refuses, 64 for bad usage, 0 otherwise.

The API is found at ``--management-url`` (default ``$FAKERABBIT_MANAGEMENT_URL``, else
``http://guest:guest@127.0.0.1:15672``; an IPv6 host in brackets, ``http://[::1]:15672``); credentials come from the
URL or ``--username`` / ``--password``; an ``https://`` URL is verified against ``--cacert``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any, NoReturn
from urllib.parse import quote

from fakerabbit.broker import texts
from fakerabbit.management.client import (
    EX_OK,
    EX_USAGE,
    Client,
    CtlError,
    HTTPFailure,
    Output,
)
from fakerabbit.management.client import quote_segment as _q

DEFAULT_URL = "http://guest:guest@127.0.0.1:15672"


# -- commands ---------------------------------------------------------------------------------------------------------
QUEUE_COLUMNS = (
    "name",
    "durable",
    "auto_delete",
    "exclusive",
    "arguments",
    "policy",
    "operator_policy",
    "effective_policy_definition",
    "messages",
    "messages_ready",
    "messages_unacknowledged",
    "message_bytes",
    "message_bytes_ready",
    "message_bytes_unacknowledged",
    "consumers",
    "exclusive_consumer_tag",
    "single_active_consumer_tag",
    "type",
    "state",
    "vhost",
)
EXCHANGE_COLUMNS = ("name", "type", "durable", "auto_delete", "internal", "arguments", "vhost")
BINDING_COLUMNS = (
    "source_name",
    "source_kind",
    "destination_name",
    "destination_kind",
    "routing_key",
    "arguments",
    "vhost",
)
CONNECTION_COLUMNS = (
    "name",
    "user",
    "vhost",
    "peer_host",
    "peer_port",
    "host",
    "port",
    "state",
    "channels",
    "protocol",
    "timeout",
    "frame_max",
    "channel_max",
    "client_properties",
    "user_provided_name",
    "auth_mechanism",
    "ssl",
    "ssl_protocol",
    "ssl_key_exchange",
    "ssl_cipher",
    "ssl_hash",
    "peer_cert_subject",
    "peer_cert_issuer",
    "peer_cert_validity",
)
CONSUMER_COLUMNS = (
    "queue_name",
    "channel_pid",
    "consumer_tag",
    "ack_required",
    "prefetch_count",
    "active",
    "arguments",
)


def _columns(given: list[str], allowed: Sequence[str], default: Sequence[str]) -> list[str]:
    cols = [c for arg in given for c in arg.split(",") if c] or list(default)
    unknown = [c for c in cols if c not in allowed]
    if unknown:
        raise CtlError(f"Info key(s) {','.join(unknown)} are not supported; supported: {', '.join(allowed)}", EX_USAGE)
    return cols


def _binding_value(b: dict[str, Any], col: str) -> Any:
    return {
        "source_name": b.get("source"),
        "source_kind": "exchange",
        "destination_name": b.get("destination"),
        "destination_kind": b.get("destination_type"),
    }.get(col, b.get(col))


def _consumer_value(c: dict[str, Any], col: str) -> Any:
    if col == "queue_name":
        return c["queue"]["name"]
    if col == "channel_pid":
        return c["channel_details"]["name"]
    return c.get(col)


Command = Callable[[Client, argparse.Namespace, Output], int]


def _policy_args(a: argparse.Namespace) -> dict[str, Any]:
    try:
        definition = json.loads(a.definition)
    except ValueError as exc:
        raise CtlError(f"JSON decoding error. Reason: {exc}") from None
    try:
        priority: int | float = int(a.priority)
    except ValueError:
        try:
            priority = float(a.priority)
        except ValueError:
            raise CtlError(f"priority should be a number, actually was {a.priority!r}") from None
    return {"pattern": a.pattern, "definition": definition, "priority": priority, "apply-to": a.apply_to}


def cmd_set_policy(c: Client, a: argparse.Namespace, out: Output) -> int:
    body = _policy_args(a)
    kind = "operator-policies" if a.ctl_command == "set_operator_policy" else "policies"
    what = "operator policy override" if kind == "operator-policies" else "policy"
    out.info(
        f'Setting {what} "{a.name}" for pattern "{a.pattern}" to "{a.definition}" with priority '
        f'"{a.priority}" for vhost "{a.vhost}" ...'
    )
    c.request("PUT", f"/api/{kind}/{_q(a.vhost)}/{_q(a.name)}", body)
    return EX_OK


def cmd_clear_policy(c: Client, a: argparse.Namespace, out: Output) -> int:
    operator = a.ctl_command == "clear_operator_policy"
    kind = "operator-policies" if operator else "policies"
    out.info(f'Clearing {"operator policy" if operator else "policy"} "{a.name}" on vhost "{a.vhost}" ...')
    try:
        c.request("DELETE", f"/api/{kind}/{_q(a.vhost)}/{_q(a.name)}")
    except HTTPFailure as exc:
        if exc.code == 404:
            raise CtlError(texts.PARAMETER_DOES_NOT_EXIST) from None
        raise
    return EX_OK


def cmd_list_policies(c: Client, a: argparse.Namespace, out: Output) -> int:
    operator = a.ctl_command == "list_operator_policies"
    kind = "operator-policies" if operator else "policies"
    out.info(f'Listing {"operator policy overrides" if operator else "policies"} for vhost "{a.vhost}" ...')
    rows = c.request("GET", f"/api/{kind}/{_q(a.vhost)}") or []
    cols = ["vhost", "name", "pattern", "apply-to", "definition", "priority"]
    out.table(cols, [[p.get(k) for k in cols] for p in rows])
    return EX_OK


def cmd_list_queues(c: Client, a: argparse.Namespace, out: Output) -> int:
    cols = _columns(a.columns, QUEUE_COLUMNS, ("name", "messages"))
    out.info(f"Timeout: {a.timeout:.1f} seconds ...\nListing queues for vhost {a.vhost} ...")
    rows = c.request("GET", f"/api/queues/{_q(a.vhost)}") or []
    out.table(cols, [[q.get(k) for k in cols] for q in rows])
    return EX_OK


def cmd_list_exchanges(c: Client, a: argparse.Namespace, out: Output) -> int:
    cols = _columns(a.columns, EXCHANGE_COLUMNS, ("name", "type"))
    out.info(f"Listing exchanges for vhost {a.vhost} ...")
    rows = c.request("GET", f"/api/exchanges/{_q(a.vhost)}") or []
    out.table(cols, [[x.get(k) for k in cols] for x in rows])
    return EX_OK


def cmd_list_bindings(c: Client, a: argparse.Namespace, out: Output) -> int:
    cols = _columns(a.columns, BINDING_COLUMNS, BINDING_COLUMNS[:-1])
    out.info(f"Listing bindings for vhost {a.vhost}...")
    rows = c.request("GET", f"/api/bindings/{_q(a.vhost)}") or []
    out.table(cols, [[_binding_value(b, k) for k in cols] for b in rows])
    return EX_OK


def cmd_list_connections(c: Client, a: argparse.Namespace, out: Output) -> int:
    cols = _columns(a.columns, CONNECTION_COLUMNS, ("user", "peer_host", "peer_port", "state"))
    out.info("Listing connections ...")
    rows = c.request("GET", "/api/connections") or []
    out.table(cols, [[x.get(k) for k in cols] for x in rows])
    return EX_OK


def cmd_list_consumers(c: Client, a: argparse.Namespace, out: Output) -> int:
    cols = _columns(a.columns, CONSUMER_COLUMNS, CONSUMER_COLUMNS)
    out.info(f"Listing consumers in vhost {a.vhost} ...")
    rows = c.request("GET", f"/api/consumers/{_q(a.vhost)}") or []
    out.table(cols, [[_consumer_value(x, k) for k in cols] for x in rows])
    return EX_OK


def cmd_list_vhosts(c: Client, a: argparse.Namespace, out: Output) -> int:
    out.info("Listing vhosts ...")
    out.table(["name"], [[v["name"]] for v in c.request("GET", "/api/vhosts") or []])
    return EX_OK


def cmd_list_users(c: Client, a: argparse.Namespace, out: Output) -> int:
    out.info("Listing users ...")
    rows = c.request("GET", "/api/users") or []
    out.table(["user", "tags"], [[u["name"], "[" + ", ".join(u.get("tags", [])) + "]"] for u in rows])
    return EX_OK


def cmd_add_vhost(c: Client, a: argparse.Namespace, out: Output) -> int:
    out.info(f'Adding vhost "{a.name}" ...')
    c.request("PUT", f"/api/vhosts/{_q(a.name)}", {})
    return EX_OK


def cmd_delete_vhost(c: Client, a: argparse.Namespace, out: Output) -> int:
    out.info(f'Deleting vhost "{a.name}" ...')
    c.request("DELETE", f"/api/vhosts/{_q(a.name)}")
    return EX_OK


def cmd_add_user(c: Client, a: argparse.Namespace, out: Output) -> int:
    out.info(f'Adding user "{a.name}" ...')
    c.request("PUT", f"/api/users/{_q(a.name)}", {"password": a.new_password, "tags": ""})
    return EX_OK


def cmd_delete_user(c: Client, a: argparse.Namespace, out: Output) -> int:
    out.info(f'Deleting user "{a.name}" ...')
    c.request("DELETE", f"/api/users/{_q(a.name)}")
    return EX_OK


def cmd_set_permissions(c: Client, a: argparse.Namespace, out: Output) -> int:
    out.info(f'Setting permissions for user "{a.user}" in vhost "{a.vhost}" ...')
    body = {"configure": a.conf, "write": a.write, "read": a.read}
    c.request("PUT", f"/api/permissions/{_q(a.vhost)}/{_q(a.user)}", body)
    return EX_OK


def cmd_purge_queue(c: Client, a: argparse.Namespace, out: Output) -> int:
    out.info(f"Purging queue '{a.queue}' in vhost '{a.vhost}' ...")
    try:
        c.request("DELETE", f"/api/queues/{_q(a.vhost)}/{_q(a.queue)}/contents")
    except HTTPFailure as exc:
        if exc.code == 404:
            raise CtlError("not_found") from None
        raise
    return EX_OK


def cmd_delete_queue(c: Client, a: argparse.Namespace, out: Output) -> int:
    out.info(f"Deleting queue '{a.queue}' on vhost '{a.vhost}' ...")
    path = f"/api/queues/{_q(a.vhost)}/{_q(a.queue)}"
    try:
        q = c.request("GET", path)
        flags = [f for f, on in (("if-empty=true", a.if_empty), ("if-unused=true", a.if_unused)) if on]
        c.request("DELETE", path + ("?" + "&".join(flags) if flags else ""))
    except HTTPFailure as exc:
        if exc.code == 404:
            raise CtlError("Queue not found", EX_USAGE) from None
        raise
    print(f"Queue was successfully deleted with {q.get('messages_ready', 0)} ready messages")
    return EX_OK


def cmd_close_all_connections(c: Client, a: argparse.Namespace, out: Output) -> int:
    where = "on all vhosts" if a.global_ else f"in vhost {a.vhost}"
    out.info(f"Closing all connections {where}, reason: {a.explanation}...")
    conns = c.request("GET", "/api/connections") or []
    targets = [x for x in conns if a.global_ or x.get("vhost") == a.vhost]
    if a.limit is not None:
        targets = targets[: a.limit]
    closed = 0
    for x in targets:
        try:
            c.request("DELETE", f"/api/connections/{_q(x['name'])}", headers={"X-Reason": a.explanation})
            closed += 1
        except HTTPFailure as exc:
            if exc.code != 404:  # already gone
                raise
    print(f"Closed {closed} connections")
    return EX_OK


def cmd_close_connection(c: Client, a: argparse.Namespace, out: Output) -> int:
    out.info(f'Closing connection "{a.connection}", reason: {a.explanation}...')
    c.request("DELETE", f"/api/connections/{_q(a.connection)}", headers={"X-Reason": a.explanation})
    return EX_OK


def cmd_export_definitions(c: Client, a: argparse.Namespace, out: Output) -> int:
    defs = c.request("GET", "/api/definitions")
    text = json.dumps(defs, indent=2, sort_keys=True)
    if a.path == "-":
        print(text)
    else:
        out.info(f'Exporting definitions in JSON to a file at "{a.path}" ...')
        with open(a.path, "w", encoding="utf-8") as f:
            f.write(text + "\n")
    return EX_OK


def cmd_import_definitions(c: Client, a: argparse.Namespace, out: Output) -> int:
    try:
        if a.path == "-":
            raw = sys.stdin.read()
        else:
            out.info(f'Importing definitions in JSON from a file at "{a.path}" ...')
            with open(a.path, encoding="utf-8") as f:
                raw = f.read()
    except OSError as exc:
        raise CtlError(f"cannot read {a.path}: {exc.strerror}") from None
    try:
        defs = json.loads(raw)
    except ValueError as exc:
        raise CtlError(f"JSON decoding error. Reason: {exc}") from None
    c.request("POST", "/api/definitions", defs)
    out.info("Successfully imported definitions")
    return EX_OK


def cmd_advance(c: Client, a: argparse.Namespace, out: Output) -> int:
    try:
        seconds = float(a.seconds)
    except ValueError:
        raise CtlError(f"SECONDS must be a number, not {a.seconds!r}", EX_USAGE) from None
    body: dict[str, Any] = {"seconds": int(seconds) if seconds.is_integer() else seconds}
    clock = c.request("POST", "/api/fakerabbit/clock/advance", body)
    out.info(f"Advanced the clock by {a.seconds} s")
    print(clock["now"])
    return EX_OK


def cmd_clock(c: Client, a: argparse.Namespace, out: Output) -> int:
    clock = c.request("GET", "/api/fakerabbit/clock")
    print(clock["now"])
    return EX_OK


def cmd_reset(c: Client, a: argparse.Namespace, out: Output) -> int:
    out.info("Resetting fakerabbit (connections, queues, exchanges, bindings, policies, events) ...")
    c.request("POST", "/api/fakerabbit/reset")
    return EX_OK


def cmd_events(c: Client, a: argparse.Namespace, out: Output) -> int:
    params = [f"{k}={quote(v, safe=',')}" for k, v in (("kind", a.kind), ("queue", a.queue)) if v]
    rows = c.request("GET", "/api/fakerabbit/events" + ("?" + "&".join(params) if params else "")) or []
    for e in rows:
        details = " ".join(f"{k}={json.dumps(v)}" for k, v in e["details"].items())
        msg = f" #{e['message_id']}" if e["message_id"] is not None else ""
        print(f"{e['time']}{msg} {e['kind']} {details}".rstrip())
    return EX_OK


def cmd_await_startup(c: Client, a: argparse.Namespace, out: Output) -> int:
    deadline = time.monotonic() + a.timeout
    while True:
        try:
            overview = c.request("GET", "/api/overview")
            _check_fakerabbit(c, overview)
            return EX_OK
        except (HTTPFailure, _NotFakerabbit):
            raise
        except CtlError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.1)


class _NotFakerabbit(CtlError):
    """Another broker answers on the management port: no point in waiting."""


def _check_fakerabbit(c: Client, overview: Any) -> None:
    """Fail unless the API is fakerabbit's: a real RabbitMQ holding the port answers /api/overview too."""
    fake = isinstance(overview, dict) and isinstance(overview.get("fakerabbit"), dict)
    if fake:
        try:
            c.request("GET", "/api/fakerabbit/clock")
        except HTTPFailure as exc:
            fake = exc.code != 404
    if not fake:
        version = overview.get("rabbitmq_version", "?") if isinstance(overview, dict) else "?"
        raise _NotFakerabbit(
            f"the management API at {c.base} is not fakerabbit's (it says RabbitMQ {version}): another broker "
            "holds that port; stop it or start fakerabbit on another port"
        )


# -- argument parsing -------------------------------------------------------------------------------------------------
class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EX_USAGE, f"Error (argument validation): {message}\n")


def _common(suppress: bool) -> _Parser:
    """Options rabbitmqctl accepts before or after the command."""
    d: Any = argparse.SUPPRESS

    def default(value: Any) -> Any:
        return d if suppress else value

    p = _Parser(add_help=False)
    p.add_argument(
        "--management-url",
        default=default(os.environ.get("FAKERABBIT_MANAGEMENT_URL", DEFAULT_URL)),
        metavar="URL",
        help="the management API (default $FAKERABBIT_MANAGEMENT_URL or http://guest:guest@127.0.0.1:15672)",
    )
    p.add_argument(
        "--cacert",
        default=default(os.environ.get("FAKERABBIT_CA_FILE") or None),
        metavar="FILE",
        help="CA certificate (PEM) to trust for an https:// management URL, e.g. the one `fakerabbit serve "
        "--management-tls-port` prints (default $FAKERABBIT_CA_FILE, else the system's CAs)",
    )
    p.add_argument("--username", default=default(None), help="user (default: from the URL, else guest)")
    p.add_argument("--password", default=default(None), help="password (default: from the URL, else guest)")
    p.add_argument("-p", "--vhost", default=default("/"), help="virtual host (default /)")
    p.add_argument("-q", "--quiet", "-s", "--silent", action="store_true", default=default(False))
    p.add_argument("--no-table-headers", action="store_true", default=default(False))
    p.add_argument("-t", "--timeout", type=float, default=default(60.0), help="seconds to wait for the API")
    p.add_argument("-n", "--node", default=default(None), help="ignored (accepted for rabbitmqctl compatibility)")
    p.add_argument("-l", "--longnames", action="store_true", default=default(False), help="ignored")
    return p


def add_ctl_parser(sub: Any) -> argparse.ArgumentParser:
    """Add the ``ctl`` subcommand (with its own subcommands) to the ``fakerabbit`` parser."""
    ctl: argparse.ArgumentParser = sub.add_parser(
        "ctl",
        parents=[_common(False)],
        help="rabbitmqctl-style commands over the management API",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = ctl.add_subparsers(dest="ctl_command", required=True, metavar="COMMAND", parser_class=_Parser)
    common = _common(True)

    def cmd(name: str, fn: Command, help_: str) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = commands.add_parser(name, parents=[common], help=help_, description=help_)
        p.set_defaults(func=fn)
        return p

    for name, operator in (("set_policy", False), ("set_operator_policy", True)):
        p = cmd(name, cmd_set_policy, f"set {'an operator' if operator else 'a'} policy")
        p.add_argument("--priority", default="0")
        p.add_argument("--apply-to", default="all", help="queues, exchanges or all (default all)")
        p.add_argument("name")
        p.add_argument("pattern")
        p.add_argument("definition", help="JSON object")
    cmd("clear_policy", cmd_clear_policy, "remove a policy").add_argument("name")
    cmd("clear_operator_policy", cmd_clear_policy, "remove an operator policy").add_argument("name")
    cmd("list_policies", cmd_list_policies, "list the vhost's policies")
    cmd("list_operator_policies", cmd_list_policies, "list the vhost's operator policies")
    for name, fn, what in (
        ("list_queues", cmd_list_queues, "queues"),
        ("list_exchanges", cmd_list_exchanges, "exchanges"),
        ("list_bindings", cmd_list_bindings, "bindings"),
        ("list_connections", cmd_list_connections, "connections"),
        ("list_consumers", cmd_list_consumers, "consumers"),
    ):
        cmd(name, fn, f"list {what} [columns ...]").add_argument("columns", nargs="*")
    cmd("list_vhosts", cmd_list_vhosts, "list virtual hosts")
    cmd("list_users", cmd_list_users, "list users")
    cmd("add_vhost", cmd_add_vhost, "create a virtual host").add_argument("name")
    cmd("delete_vhost", cmd_delete_vhost, "delete a virtual host").add_argument("name")
    p = cmd("add_user", cmd_add_user, "create a user")
    p.add_argument("name")
    p.add_argument("new_password", metavar="password")
    cmd("delete_user", cmd_delete_user, "delete a user").add_argument("name")
    p = cmd("set_permissions", cmd_set_permissions, "set a user's permissions on the vhost")
    for arg in ("user", "conf", "write", "read"):
        p.add_argument(arg)
    cmd("purge_queue", cmd_purge_queue, "drop a queue's ready messages").add_argument("queue")
    p = cmd("delete_queue", cmd_delete_queue, "delete a queue")
    p.add_argument("queue")
    p.add_argument("-e", "--if-empty", action="store_true")
    p.add_argument("-u", "--if-unused", action="store_true")
    p = cmd("close_all_connections", cmd_close_all_connections, "close every client connection of the vhost")
    p.add_argument("--global", dest="global_", action="store_true", help="every vhost")
    p.add_argument("--limit", type=int, default=None)
    p.add_argument("--per-connection-delay", type=int, default=0, help="ignored")
    p.add_argument("explanation")
    p = cmd("close_connection", cmd_close_connection, "close one connection (its name as list_connections name)")
    p.add_argument("connection")
    p.add_argument("explanation")
    cmd("export_definitions", cmd_export_definitions, "write definitions to PATH (- for stdout)").add_argument("path")
    cmd("import_definitions", cmd_import_definitions, "load definitions from PATH (- for stdin)").add_argument("path")
    cmd("advance", cmd_advance, "move the virtual clock forward SECONDS").add_argument("seconds")
    cmd("clock", cmd_clock, "print the broker's time")
    cmd("reset", cmd_reset, "drop every connection, queue, exchange, binding, policy and event")
    p = cmd("events", cmd_events, "print what happened to messages")
    p.add_argument("--kind", default="", help="comma-separated event kinds")
    p.add_argument("--queue", default="")
    cmd("await_startup", cmd_await_startup, "wait until the management API answers (up to --timeout seconds)")
    return ctl


def run(args: argparse.Namespace) -> int:
    """Run a parsed ``fakerabbit ctl`` command."""
    out = Output(args.quiet, not args.no_table_headers)
    func: Command = args.func
    try:
        client = Client(
            args.management_url, args.username, args.password, timeout=max(args.timeout, 1.0), cafile=args.cacert
        )
        status = func(client, args, out)
        sys.stdout.flush()  # a closed pipe shows here, not at interpreter exit
        return status
    except CtlError as exc:
        print(f"Error:\n{exc.message}", file=sys.stderr)
        return exc.status
    except BrokenPipeError:
        # the reader went away (``fakerabbit ctl list_queues | head``): stop quietly, as Unix tools do, and keep
        # Python from complaining again when it flushes stdout at exit
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EX_OK
