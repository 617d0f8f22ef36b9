"""Dual mode: what the ``fakerabbit`` fixture gives a test when ``--fakerabbit-url`` points at a real RabbitMQ.

:class:`RealRabbit` has the same shape as :class:`fakerabbit.FakeRabbit` where a real broker allows it:
``url`` (through the recording proxy), ``clock`` (waits in real time, or skips the test), message and consumer
counts, policies (through ``rabbitmqctl``), and fault injection at the proxy. What only the fake can do
(looking at messages without consuming them, the event log, restarting the node) skips the test with a reason.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, NoReturn
from urllib.parse import quote

import pytest

from fakerabbit.testing.api import MANAGEMENT_CLOSE_TEXT, ConnectionFilter
from fakerabbit_pytest.proxy import Link, RecordingProxy
from fakerabbit_pytest.wire import AMQPClosed, AmqpUrl, MiniClient

#: Extra real time :meth:`RealClock.advance` waits so the broker has acted on what fell due.
REAL_WAIT_GRACE = 0.1

CLOCK_SKIP = (
    "needs fakerabbit's virtual clock (clock.advance); against a real RabbitMQ run with --fakerabbit-real-wait "
    "to wait in real time"
)


def skip_here(reason: str) -> NoReturn:
    """Skip the running test, reported at the test's location rather than inside the plugin."""
    raise pytest.skip.Exception(reason, _use_item_location=True)


def skip_fake_only(what: str) -> NoReturn:
    skip_here(f"{what} needs fakerabbit; this run uses a real RabbitMQ (--fakerabbit-url)")


class RealClock:
    """The real broker's clock: :meth:`advance` sleeps (opt-in) or skips the test."""

    def __init__(self, wait: bool) -> None:
        self.wait = wait

    def now(self) -> datetime:
        """The current real time (UTC)."""
        return datetime.now(UTC)

    def advance(self, seconds: float | timedelta) -> None:
        """Sleep ``seconds`` (plus a short grace) with ``--fakerabbit-real-wait``; otherwise skip the test."""
        s = seconds.total_seconds() if isinstance(seconds, timedelta) else float(seconds)
        if s < 0:
            raise ValueError("cannot move a clock backwards")
        if not self.wait:
            skip_here(CLOCK_SKIP)
        time.sleep(s + REAL_WAIT_GRACE)

    def advance_to(self, when: datetime) -> None:
        """Wait until ``when`` (naive means UTC)."""
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        self.advance(max(0.0, (when - self.now()).total_seconds()))

    def set(self, when: datetime) -> None:
        """Alias of :meth:`advance_to`."""
        self.advance_to(when)


@dataclass(frozen=True, slots=True)
class RealQueue:
    """What a passive ``queue.declare`` tells about a queue on a real broker."""

    name: str
    vhost: str
    message_count: int
    consumer_count: int

    @property
    def messages(self) -> NoReturn:
        """Looking at messages without consuming them is fakerabbit-only: skips the test."""
        skip_fake_only("rabbit.queue(...).messages")


class RealRabbit:
    """The ``fakerabbit`` fixture's value in dual mode (see the module docstring)."""

    is_fake = False

    def __init__(self, target: AmqpUrl, proxy: RecordingProxy | None, *, wait: bool, server_version: str) -> None:
        self.target = target
        self.proxy = proxy
        self.clock = RealClock(wait)
        self.rabbitmq_version = server_version
        self._policies: list[tuple[str, str, bool]] = []

    @property
    def url(self) -> str:
        """Where tests connect: the recording proxy (or the real broker itself for ``amqps``)."""
        t = self.target
        host, port = ("127.0.0.1", self.proxy.port) if self.proxy is not None else (t.host, t.port)
        scheme = "amqps" if t.tls else "amqp"
        return (
            f"{scheme}://{quote(t.user, safe='')}:{quote(t.password, safe='')}@{host}:{port}/{quote(t.vhost, safe='')}"
        )

    # -- inspection -----------------------------------------------------------------------------------------
    def queue(self, name: str, vhost: str = "/") -> RealQueue:
        """Message and consumer counts from a passive declare (``.messages`` skips the test)."""
        with MiniClient(self.target, vhost=vhost) as c:
            try:
                messages, consumers = c.queue_declare_passive(c.open_channel(), name)
            except AMQPClosed as exc:
                raise LookupError(f"no queue {name!r} in vhost {vhost!r} ({exc.text})") from None
        return RealQueue(name, vhost, messages, consumers)

    def queues(self, *args: Any, **kwargs: Any) -> NoReturn:
        skip_fake_only("rabbit.queues()")

    def exchanges(self, *args: Any, **kwargs: Any) -> NoReturn:
        skip_fake_only("rabbit.exchanges()")

    def bindings(self, *args: Any, **kwargs: Any) -> NoReturn:
        skip_fake_only("rabbit.bindings()")

    def connections(self) -> NoReturn:
        skip_fake_only("rabbit.connections()")

    @property
    def events(self) -> NoReturn:
        skip_fake_only("rabbit.events")

    @property
    def problems(self) -> list[str]:
        """Always empty: a real broker's problems are the real broker's answers."""
        return []

    def clear_problems(self) -> list[str]:
        return []

    # -- policies -------------------------------------------------------------------------------------------
    def set_policy(
        self,
        name: str,
        pattern: str,
        definition: dict[str, Any],
        *,
        priority: int = 0,
        apply_to: str = "queues",
        vhost: str = "/",
    ) -> None:
        """``rabbitmqctl set_policy`` (skips the test if ``rabbitmqctl`` is not on PATH); cleared after the test."""
        self._policy("set_policy", name, vhost, False, pattern, definition, priority, apply_to)

    def clear_policy(self, name: str, vhost: str = "/") -> None:
        self._policy("clear_policy", name, vhost, False)

    def set_operator_policy(
        self,
        name: str,
        pattern: str,
        definition: dict[str, Any],
        *,
        priority: int = 0,
        apply_to: str = "queues",
        vhost: str = "/",
    ) -> None:
        self._policy("set_operator_policy", name, vhost, True, pattern, definition, priority, apply_to)

    def clear_operator_policy(self, name: str, vhost: str = "/") -> None:
        self._policy("clear_operator_policy", name, vhost, True)

    def _policy(
        self,
        cmd: str,
        name: str,
        vhost: str,
        operator: bool,
        pattern: str | None = None,
        definition: dict[str, Any] | None = None,
        priority: int = 0,
        apply_to: str = "queues",
    ) -> None:
        ctl = shutil.which("rabbitmqctl")
        if ctl is None:
            skip_here("policies on a real RabbitMQ need rabbitmqctl on PATH")
        args = [ctl, "-q", cmd, "-p", vhost, name]
        if pattern is not None:
            args += [pattern, json.dumps(definition), "--priority", str(priority), "--apply-to", apply_to]
            self._policies.append((name, vhost, operator))
        result = subprocess.run(args, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise RuntimeError(f"rabbitmqctl {cmd} failed: {result.stderr.strip() or result.stdout.strip()}")

    # -- fault injection (at the proxy) ---------------------------------------------------------------------
    def _links(self, what: str) -> RecordingProxy:
        if self.proxy is None:
            skip_here(f"{what} on a real RabbitMQ needs the recording proxy (not available for amqps)")
        return self.proxy

    def close_connections(
        self, reply_code: int = 320, reply_text: str = MANAGEMENT_CLOSE_TEXT, *, where: ConnectionFilter | None = None
    ) -> int:
        """Send ``connection.close`` to every client connection (injected by the proxy; ``where`` unsupported)."""
        if where is not None:
            skip_fake_only("close_connections(where=...)")
        prefix = "CONNECTION_FORCED - "
        text = reply_text if reply_text.startswith(prefix) else prefix + reply_text
        return self._links("close_connections()").for_each_link(lambda link: link.inject_close(reply_code, text))

    def drop_connections(self, *, where: ConnectionFilter | None = None) -> int:
        """Reset every client connection's socket (at the proxy)."""
        if where is not None:
            skip_fake_only("drop_connections(where=...)")
        return self._links("drop_connections()").for_each_link(Link.drop)

    def block(self, reason: str = "low on memory") -> None:
        """Send ``connection.blocked`` to the clients (injected by the proxy; the broker does not block)."""
        self._links("block()").for_each_link(lambda link: link.notify_blocked(True, reason))

    def unblock(self) -> None:
        """Send ``connection.unblocked`` to the clients."""
        self._links("unblock()").for_each_link(lambda link: link.notify_blocked(False, ""))

    def restart(self, *, graceful: bool = True) -> NoReturn:
        skip_fake_only("rabbit.restart()")

    def reset(self) -> None:
        """Nothing to do: the plugin cleans up after each test."""

    # -- cleanup --------------------------------------------------------------------------------------------
    def cleanup(self) -> list[str]:
        """Drop the test's connections, delete what it declared, clear its policies. Returns what failed."""
        failures: list[str] = []
        if self.proxy is not None:
            self.proxy.for_each_link(Link.drop)
            queues, exchanges = self.proxy.take_declared()
            by_vhost: dict[str, tuple[list[str], list[str]]] = {}
            for v, q in queues:
                by_vhost.setdefault(v, ([], []))[0].append(q)
            for v, x in exchanges:
                by_vhost.setdefault(v, ([], []))[1].append(x)
            for v, (qs, xs) in sorted(by_vhost.items()):
                failures += _delete(self.target, v, sorted(qs), sorted(xs))
        for name, vhost, operator in self._policies:
            ctl = shutil.which("rabbitmqctl")
            if ctl is not None:
                cmd = "clear_operator_policy" if operator else "clear_policy"
                subprocess.run([ctl, "-q", cmd, "-p", vhost, name], capture_output=True, check=False)
        self._policies.clear()
        return failures


def _delete(target: AmqpUrl, vhost: str, queues: list[str], exchanges: list[str]) -> list[str]:
    failures: list[str] = []
    try:
        client = MiniClient(target, vhost=vhost)
    except (OSError, AMQPClosed) as exc:
        return [f"cannot connect to vhost {vhost!r} to clean up: {exc}"]
    with client:
        channel = client.open_channel()
        for kind, names in (("queue", queues), ("exchange", exchanges)):
            for name in names:
                for attempt in range(20):
                    try:
                        if kind == "queue":
                            client.queue_delete(channel, name)
                        else:
                            client.exchange_delete(channel, name)
                        break
                    except AMQPClosed as exc:
                        channel = client.open_channel()
                        # 405: an exclusive queue whose (dropped) owner the broker has not buried yet.
                        if exc.code == 405 and attempt < 19:
                            time.sleep(0.05)
                            continue
                        failures.append(f"{kind} {name!r} in vhost {vhost!r}: {exc}")
                        break
    return failures
