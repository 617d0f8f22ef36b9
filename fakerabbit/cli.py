"""``fakerabbit serve``: run a fake RabbitMQ as a process (also ``python -m fakerabbit serve``), with the
management HTTP API on port 15672; ``fakerabbit ctl``: rabbitmqctl-style commands against that API."""

from __future__ import annotations

import argparse
import asyncio
import errno
import gc
import json
import signal
import sys
from collections.abc import Coroutine
from dataclasses import replace
from typing import Any

from fakerabbit.broker.delayed import DEFAULT_PLUGINS, KNOWN_PLUGINS, check_plugins
from fakerabbit.broker.errors import AMQPError
from fakerabbit.broker.policy import PolicyError
from fakerabbit.broker.profile import ACCEPTED_VERSIONS, get_profile
from fakerabbit.errors import ListenError
from fakerabbit.management.ctl import add_ctl_parser
from fakerabbit.management.ctl import run as run_ctl
from fakerabbit.management.definitions import DefinitionsError, describe_error, import_definitions
from fakerabbit.protocol.addresses import url_host
from fakerabbit.server import FakeRabbit


def _user(value: str) -> tuple[str, str]:
    name, sep, password = value.partition(":")
    if not sep or not name:
        raise argparse.ArgumentTypeError("expected NAME:PASSWORD")
    return name, password


def version_families() -> list[list[str]]:
    """The accepted ``--rabbitmq-version`` values, grouped by the behaviour they share (oldest first)."""
    families: dict[object, list[str]] = {}
    for version in ACCEPTED_VERSIONS:
        families.setdefault(replace(get_profile(version), name="", server_version=""), []).append(version)
    return list(families.values())


def versions_help() -> str:
    """``serve --help``'s text for ``--rabbitmq-version``: which versions exist and which to pick."""
    groups = "; ".join(" = ".join(f) for f in version_families())
    return (
        f"behave like this RabbitMQ: pick the major.minor your production broker runs (a patch number is ignored). "
        f"Accepted: {', '.join(ACCEPTED_VERSIONS)} (any older 3.x behaves as 3.10); versions joined by = behave "
        f"alike: {groups}. Default: the newest, {ACCEPTED_VERSIONS[-1]}"
    )


def _version(value: str) -> str:
    try:
        get_profile(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return value


def _plugins(value: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in value.split(",") if n.strip())
    try:
        check_plugins(names)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return names


def _consumer_timeout(value: str) -> float | None:
    if value.strip().lower() == "none":
        return None
    try:
        seconds = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds or 'none', not {value!r}") from None
    if not seconds > 0:
        raise argparse.ArgumentTypeError(f"must be positive, not {value!r}")
    return seconds


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fakerabbit", description="A fake RabbitMQ for test suites.")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run an AMQP 0-9-1 server")
    serve.add_argument(
        "--host",
        default="127.0.0.1",
        help="interface to listen on (default 127.0.0.1); 'localhost' listens on 127.0.0.1 and ::1, '::' on every "
        "IPv6 and IPv4 interface, '::1' on IPv6 loopback",
    )
    serve.add_argument("--port", type=int, default=5672, help="TCP port (default 5672; 0 picks a free one)")
    serve.add_argument("--clock", choices=("system", "virtual"), default="system", help="time source (default system)")
    serve.add_argument(
        "--rabbitmq-version", type=_version, default=None, metavar="X.Y", help=versions_help().replace("%", "%%")
    )
    serve.add_argument(
        "--user",
        action="append",
        type=_user,
        default=None,
        metavar="NAME:PASSWORD",
        help="a user (repeatable)",
    )
    serve.add_argument("--vhost", action="append", default=None, metavar="NAME", help="a vhost (repeatable)")
    serve.add_argument(
        "--loopback-users",
        default="guest",
        metavar="NAME,...|none",
        help="users who may connect only from a loopback address, like RabbitMQ's loopback_users (default guest; "
        "'none' lets every user in from anywhere)",
    )
    serve.add_argument(
        "--management-port",
        type=int,
        default=15672,
        metavar="PORT",
        help="port of the RabbitMQ-compatible management HTTP API (default 15672; 0 picks a free one)",
    )
    serve.add_argument("--no-management", action="store_true", help="do not serve the management HTTP API")
    serve.add_argument(
        "--tls-port",
        type=int,
        default=None,
        metavar="PORT",
        help="also serve AMQP over TLS (amqps) on this port (RabbitMQ's is 5671; 0 picks a free one), with a "
        "certificate authority and certificates generated at start (the CA file's path is printed)",
    )
    serve.add_argument(
        "--management-tls-port",
        type=int,
        default=None,
        metavar="PORT",
        help="also serve the management API over HTTPS on this port (RabbitMQ's is 15671; 0 picks a free one)",
    )
    serve.add_argument(
        "--tls-dir",
        default=None,
        metavar="DIR",
        help="write the generated CA, server and client certificates here (ca_certificate.pem, "
        "client_certificate.pem, client_key.pem, ...) instead of a temporary directory",
    )
    serve.add_argument(
        "--plugins",
        type=_plugins,
        default=DEFAULT_PLUGINS,
        metavar="NAME,...",
        help=f"the RabbitMQ plugins enabled, comma-separated ('' for none); known: {', '.join(KNOWN_PLUGINS)} "
        f"(the x-delayed-message exchange type). Default: {','.join(DEFAULT_PLUGINS)}",
    )
    serve.add_argument(
        "--definitions",
        default=None,
        metavar="FILE.json",
        help="import RabbitMQ definitions (exported JSON) at start, like RabbitMQ's load_definitions",
    )
    serve.add_argument(
        "--dead-letter-retry-interval",
        type=float,
        default=180.0,
        metavar="SECONDS",
        help="how often a quorum queue's at-least-once dead-letter worker retries what it could not deliver "
        "(RabbitMQ's dead_letter_worker_publisher_confirm_timeout; default 180)",
    )
    serve.add_argument(
        "--consumer-timeout",
        type=_consumer_timeout,
        default=1800.0,
        metavar="SECONDS|none",
        help="how long a delivery may stay unacknowledged (RabbitMQ's consumer_timeout; default 1800; 'none' is "
        "RabbitMQ's undefined: no node-wide timeout up to 4.2, 24 h for 4.3's quorum queues)",
    )
    serve.add_argument(
        "--no-events",
        action="store_true",
        help="do not record the event log (rabbit.events, `fakerabbit ctl events`): a little faster per message",
    )
    serve.add_argument(
        "--loop",
        choices=("auto", "asyncio", "uvloop"),
        default="auto",
        help="event loop: uvloop when it is installed (pip install 'pytest-fakerabbit[uvloop]'), else asyncio",
    )
    add_ctl_parser(sub)
    return parser


#: gen-0 threshold of the garbage collector in ``fakerabbit serve`` (CPython's default is 700). Queued messages
#: are long-lived objects: with the default, the collector runs every 700 allocations and keeps promoting and
#: re-scanning them. Only the serve process is tuned; in-process servers never touch the test's GC settings.
GC_GEN0_THRESHOLD = 50_000


def tune_gc() -> None:
    """After start-up: move everything allocated so far out of the collector's sight (``gc.freeze``) and
    collect young objects less often."""
    gc.collect()
    gc.freeze()
    _, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(GC_GEN0_THRESHOLD, gen1, gen2)


def run_loop(main: Coroutine[Any, Any, int], loop: str = "auto") -> int:
    """Run ``main`` on uvloop (``loop="uvloop"``, or ``"auto"`` when uvloop is importable) or asyncio's loop."""
    if loop != "asyncio":
        try:
            import uvloop
        except ImportError:
            if loop == "uvloop":
                main.close()
                raise ValueError("--loop uvloop: uvloop is not installed") from None
        else:
            with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
                return runner.run(main)
    return asyncio.run(main)


def _load_definitions(path: str) -> object:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


async def _serve(args: argparse.Namespace) -> int:
    users = dict(args.user) if args.user else {"guest": "guest"}
    definitions = None
    if args.definitions is not None:
        try:
            definitions = _load_definitions(args.definitions)
        except (OSError, ValueError) as exc:
            print(f"fakerabbit: cannot read definitions from {args.definitions}: {exc}", file=sys.stderr)
            return 1
    rabbit = FakeRabbit(
        args.host,
        args.port,
        users=users,
        vhosts=args.vhost or ["/"],
        clock=args.clock,
        rabbitmq_version=args.rabbitmq_version,
        management=not args.no_management,
        management_port=args.management_port,
        dead_letter_retry_interval=args.dead_letter_retry_interval,
        consumer_timeout=args.consumer_timeout,
        plugins=args.plugins,
        loopback_users=[] if args.loopback_users == "none" else [u for u in args.loopback_users.split(",") if u],
        tls=args.tls_port is not None,
        tls_port=args.tls_port or 0,
        management_tls=args.management_tls_port is not None and not args.no_management,
        management_tls_port=args.management_tls_port or 0,
        tls_dir=args.tls_dir,
    )
    try:
        await rabbit.start_async()
    except OSError as exc:
        address = exc.address if isinstance(exc, ListenError) else f"{url_host(args.host)}:{args.port}"
        if exc.errno == errno.EADDRINUSE:
            print(f"fakerabbit: {address} is already in use", file=sys.stderr)
        else:
            print(f"fakerabbit: cannot listen on {address}: {exc.strerror}", file=sys.stderr)
        return 1
    if definitions is not None:
        try:
            import_definitions(rabbit._broker, definitions)
            rabbit._broker.keep_definitions()  # what `ctl reset` restores, as RabbitMQ's load_definitions at boot
        except (DefinitionsError, PolicyError, AMQPError) as exc:
            reason = describe_error(exc).strip().replace("\n\n", ": ")
            print(f"fakerabbit: cannot load definitions from {args.definitions}: {reason}", file=sys.stderr)
            await rabbit.stop_async()
            return 1
    if args.no_events:
        rabbit._broker.events.enabled = False
    tune_gc()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    if rabbit.management is not None:
        print(f"fakerabbit: management API on {rabbit.management_url}/api/", flush=True)
        if rabbit.management.tls is not None:
            print(f"fakerabbit: management API over HTTPS on {rabbit.management_https_url}/api/", flush=True)
    if args.tls_port is not None or (rabbit.management is not None and rabbit.management.tls is not None):
        print(f"fakerabbit: TLS certificate authority (trust it in clients): {rabbit.ca_file}", flush=True)
        print(f"fakerabbit: client certificate {rabbit.client_cert}, key {rabbit.client_key}", flush=True)
    if args.tls_port is not None:
        print(f"fakerabbit: accepting AMQPS connections on {rabbit.amqps_url}", flush=True)
    print(f"fakerabbit: accepting AMQP connections on {rabbit.url}", flush=True)
    await stop.wait()
    await rabbit.stop_async()
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "serve":
        try:
            return run_loop(_serve(args), args.loop)
        except ValueError as exc:
            print(f"fakerabbit: {exc}", file=sys.stderr)
            return 2
    if args.command == "ctl":
        return run_ctl(args)
    return 2


if __name__ == "__main__":
    sys.exit(main())
