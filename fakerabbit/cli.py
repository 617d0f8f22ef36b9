"""``fakerabbit serve``: run a fake RabbitMQ as a process (also ``python -m fakerabbit serve``)."""

from __future__ import annotations

import argparse
import asyncio
import errno
import signal
import sys

from fakerabbit.server import FakeRabbit


def _user(value: str) -> tuple[str, str]:
    name, sep, password = value.partition(":")
    if not sep or not name:
        raise argparse.ArgumentTypeError("expected NAME:PASSWORD")
    return name, password


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fakerabbit", description="A fake RabbitMQ for test suites.")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run an AMQP 0-9-1 server")
    serve.add_argument("--host", default="127.0.0.1", help="interface to listen on (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=5672, help="TCP port (default 5672; 0 picks a free one)")
    serve.add_argument("--clock", choices=("system", "virtual"), default="system", help="time source (default system)")
    serve.add_argument("--rabbitmq-version", default=None, help="behave like this RabbitMQ (3.12, 3.13, 4.0, 4.3)")
    serve.add_argument(
        "--user",
        action="append",
        type=_user,
        default=None,
        metavar="NAME:PASSWORD",
        help="a user (repeatable)",
    )
    serve.add_argument("--vhost", action="append", default=None, metavar="NAME", help="a vhost (repeatable)")
    return parser


async def _serve(args: argparse.Namespace) -> int:
    users = dict(args.user) if args.user else {"guest": "guest"}
    rabbit = FakeRabbit(
        args.host,
        args.port,
        users=users,
        vhosts=args.vhost or ["/"],
        clock=args.clock,
        rabbitmq_version=args.rabbitmq_version,
    )
    try:
        await rabbit.start_async()
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            print(f"fakerabbit: {args.host}:{args.port} is already in use", file=sys.stderr)
        else:
            print(f"fakerabbit: cannot listen on {args.host}:{args.port}: {exc.strerror}", file=sys.stderr)
        return 1
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    print(f"fakerabbit: accepting AMQP connections on {rabbit.url}", flush=True)
    await stop.wait()
    await rabbit.stop_async()
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "serve":
        try:
            return asyncio.run(_serve(args))
        except ValueError as exc:
            print(f"fakerabbit: {exc}", file=sys.stderr)
            return 2
    return 2


if __name__ == "__main__":
    sys.exit(main())
