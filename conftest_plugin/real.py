"""Dual mode: what the ``fakerabbit`` fixture gives a test when ``--fakerabbit-url`` points at a real RabbitMQ.

:class:`RealRabbit` has the same shape as :class:`fakerabbit.FakeRabbit` where a real broker allows it:
``url`` (through the recording proxy), ``clock`` (waits in real time, or skips the test), message, unacked and
consumer counts, policies (through the broker's management API), connections and fault injection at the proxy.
What only the fake can do (looking at messages without consuming them, the event log, restarting the node)
skips the test with a reason.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, NoReturn
from urllib.parse import quote

import pytest

from fakerabbit.testing.api import MANAGEMENT_CLOSE_TEXT, ConnectionFilter
from fakerabbit.testing.snapshots import ConnectionSnapshot

from .management import ManagementClient, ManagementError
from .proxy import Link, RecordingProxy
from .wire import AMQPClosed, AmqpUrl, MiniClient

CLOCK_SKIP = (
    "needs fakerabbit's virtual clock (clock.advance); against a real RabbitMQ run with --fakerabbit-real-wait "
    "to wait in real time"
)
ASYNC_CLOCK_SKIP = (
    "clock.advance() inside a running event loop would block it for the whole wait against a real RabbitMQ "
    "(--fakerabbit-real-wait): use `await clock.advance_async(seconds)`, which works on the fake too"
)


TLS_SKIP = "needs amqps (TLS); the real RabbitMQ is reached over amqp:// (pass --fakerabbit-url amqps://...)"


def skip_here(reason: str) -> NoReturn:
    """Skip the running test, reported at the test's location rather than inside the plugin."""
    raise pytest.skip.Exception(reason, _use_item_location=True)


def skip_fake_only(what: str) -> NoReturn:
    skip_here(f"{what} needs fakerabbit; this run uses a real RabbitMQ (--fakerabbit-url)")


def _seconds(seconds: float | timedelta) -> float:
    s = seconds.total_seconds() if isinstance(seconds, timedelta) else float(seconds)
    if s < 0:
        raise ValueError("cannot move a clock backwards")
    return s


class RealClock:
    """The real broker's clock: :meth:`advance` sleeps exactly the time asked (opt-in) or skips the test."""

    def __init__(self, wait: bool) -> None:
        self.wait = wait

    def now(self) -> datetime:
        """The current real time (UTC)."""
        return datetime.now(UTC)

    def advance(self, seconds: float | timedelta) -> int:
        """Sleep ``seconds`` with ``--fakerabbit-real-wait``; otherwise skip the test. Returns 0.

        In a running event loop (an async test) a blocking sleep would stall the clients on that loop: the test
        is skipped with a pointer to :meth:`advance_async`.
        """
        s = _seconds(seconds)
        if not self.wait:
            skip_here(CLOCK_SKIP)
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            time.sleep(s)
            return 0
        skip_here(ASYNC_CLOCK_SKIP)

    async def advance_async(self, seconds: float | timedelta) -> int:
        """``await asyncio.sleep(seconds)`` with ``--fakerabbit-real-wait`` (the loop keeps running); otherwise
        skip the test. Returns 0."""
        s = _seconds(seconds)
        if not self.wait:
            skip_here(CLOCK_SKIP)
        await asyncio.sleep(s)
        return 0

    def advance_to(self, when: datetime) -> int:
        """Wait until ``when`` (naive means UTC)."""
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        return self.advance(max(0.0, (when - self.now()).total_seconds()))

    def set(self, when: datetime) -> int:
        """Alias of :meth:`advance_to`."""
        return self.advance_to(when)


@dataclass(frozen=True, slots=True)
class RealQueue:
    """A queue on a real broker: ready and consumer counts from a passive ``queue.declare``; ``unacked_count``
    counts the deliveries the test's clients (through the proxy) hold unsettled."""

    name: str
    vhost: str
    message_count: int
    consumer_count: int
    unacked_count: int

    @property
    def messages(self) -> NoReturn:
        """Looking at messages without consuming them is fakerabbit-only: skips the test."""
        skip_fake_only("rabbit.queue(...).messages")


class RealRabbit:
    """The ``fakerabbit`` fixture's value in dual mode (see the module docstring)."""

    is_fake = False

    def __init__(
        self,
        target: AmqpUrl,
        proxy: RecordingProxy | None,
        *,
        wait: bool,
        server_version: str,
        management: ManagementClient | None = None,
        management_problem: str = "",
    ) -> None:
        self.target = target
        self.proxy = proxy
        self.clock = RealClock(wait)
        self.rabbitmq_version = server_version
        self.management = management
        self.management_problem = management_problem
        self._policies: list[tuple[str, str, bool]] = []

    @property
    def url(self) -> str:
        """Where tests connect: the recording proxy (or the real broker itself for ``amqps``)."""
        t = self.target
        host, port = ("127.0.0.1", self.proxy.port) if self.proxy is not None else (t.url_host, t.port)
        scheme = "amqps" if t.tls else "amqp"
        return (
            f"{scheme}://{quote(t.user, safe='')}:{quote(t.password, safe='')}@{host}:{port}/{quote(t.vhost, safe='')}"
        )

    @property
    def amqps_url(self) -> str:
        """The real broker's ``amqps://`` URL (``--fakerabbit-url amqps://...``); skips the test for an
        ``amqp://`` broker."""
        if not self.target.tls:
            skip_here(TLS_SKIP)
        return self.url

    @property
    def ca_file(self) -> str:
        """The CA file given with ``--fakerabbit-ca-file`` (skips the test without one)."""
        if not self.target.tls:
            skip_here(TLS_SKIP)
        if self.target.ca_file is None:
            skip_here("needs the real broker's CA certificate: pass --fakerabbit-ca-file (or fakerabbit_ca_file)")
        return self.target.ca_file

    @property
    def client_cert(self) -> NoReturn:
        """A client certificate for the real broker is not known to fakerabbit: skips the test."""
        skip_here("rabbit.client_cert is the fake's own client certificate; a real broker's is not known")

    @property
    def client_key(self) -> NoReturn:
        """See :attr:`client_cert`: skips the test."""
        skip_here("rabbit.client_key is the fake's own client key; a real broker's is not known")

    @property
    def vhost(self) -> str:
        """The vhost the tests use: the URL's, or under pytest-xdist this worker's own."""
        return self.target.vhost

    @property
    def management_url(self) -> str:
        """``http://HOST:PORT`` of the real broker's management API (skips the test if it is unreachable)."""
        return self._management("the management API").base_url

    @property
    def management_https_url(self) -> str:
        """``https://HOST:PORT`` of the real broker's management API when it is served over HTTPS (skips the
        test otherwise)."""
        url = self.management_url
        if not url.startswith("https:"):
            skip_here(f"needs the management API over HTTPS; the real broker's is {url}")
        return url

    def _management(self, what: str) -> ManagementClient:
        if self.management is None:
            skip_here(
                f"{what} against a real RabbitMQ: its management API (--fakerabbit-management-url) "
                f"{self.management_problem}"
            )
        return self.management

    # -- inspection -----------------------------------------------------------------------------------------
    def queue(self, name: str, vhost: str | None = None) -> RealQueue:
        """Ready and consumer counts from a passive declare, unacked from the proxy (``.messages`` skips)."""
        vhost = self.vhost if vhost is None else vhost
        with MiniClient(self.target, vhost=vhost) as c:
            try:
                messages, consumers = c.queue_declare_passive(c.open_channel(), name)
            except AMQPClosed as exc:
                raise LookupError(f"no queue {name!r} in vhost {vhost!r} ({exc.text})") from None
        unacked = self.proxy.unacked_count(vhost, name) if self.proxy is not None else 0
        return RealQueue(name, vhost, messages, consumers, unacked)

    def queues(self, *args: Any, **kwargs: Any) -> NoReturn:
        skip_fake_only("rabbit.queues()")

    def exchanges(self, *args: Any, **kwargs: Any) -> NoReturn:
        skip_fake_only("rabbit.exchanges()")

    def bindings(self, *args: Any, **kwargs: Any) -> NoReturn:
        skip_fake_only("rabbit.bindings()")

    def delayed_messages(self, *args: Any, **kwargs: Any) -> NoReturn:
        skip_fake_only("rabbit.delayed_messages()")

    def connections(self) -> list[ConnectionSnapshot]:
        """The test's open connections, as the proxy saw their ``connection.start-ok`` and ``open``."""
        return self._links("rabbit.connections()").connections()

    @property
    def events(self) -> NoReturn:
        skip_fake_only("rabbit.events")

    @property
    def problems(self) -> list[str]:
        """Always empty: a real broker's problems are the real broker's answers."""
        return []

    def clear_problems(self) -> list[str]:
        return []

    # -- policies (through the real broker's management API) --------------------------------------------------
    def set_policy(
        self,
        name: str,
        pattern: str,
        definition: dict[str, Any],
        *,
        priority: int = 0,
        apply_to: str = "queues",
        vhost: str | None = None,
    ) -> None:
        """Set a policy on the real broker (its management API); cleared after the test."""
        self._set(name, pattern, definition, priority, apply_to, vhost, operator=False)

    def clear_policy(self, name: str, vhost: str | None = None) -> None:
        self._clear(name, vhost, operator=False)

    def set_operator_policy(
        self,
        name: str,
        pattern: str,
        definition: dict[str, Any],
        *,
        priority: int = 0,
        apply_to: str = "queues",
        vhost: str | None = None,
    ) -> None:
        """Set an operator policy on the real broker (its management API); cleared after the test."""
        self._set(name, pattern, definition, priority, apply_to, vhost, operator=True)

    def clear_operator_policy(self, name: str, vhost: str | None = None) -> None:
        self._clear(name, vhost, operator=True)

    def _set(
        self,
        name: str,
        pattern: str,
        definition: dict[str, Any],
        priority: int,
        apply_to: str,
        vhost: str | None,
        *,
        operator: bool,
    ) -> None:
        api = self._management("policies")
        v = self.vhost if vhost is None else vhost
        api.set_policy(v, name, pattern, definition, priority=priority, apply_to=apply_to, operator=operator)
        self._policies.append((name, v, operator))

    def _clear(self, name: str, vhost: str | None, *, operator: bool) -> None:
        v = self.vhost if vhost is None else vhost
        self._management("policies").clear_policy(v, name, operator=operator)
        self._policies = [p for p in self._policies if p != (name, v, operator)]

    # -- fault injection (at the proxy) ---------------------------------------------------------------------
    def _links(self, what: str) -> RecordingProxy:
        if self.proxy is None:
            skip_here(f"{what} on a real RabbitMQ needs the recording proxy (not available for amqps)")
        return self.proxy

    def close_connections(
        self, reply_code: int = 320, reply_text: str = MANAGEMENT_CLOSE_TEXT, *, where: ConnectionFilter | None = None
    ) -> int:
        """Send ``connection.close`` to the client connections (injected by the proxy); ``where`` picks them by
        their snapshot, as on the fake (``client_properties`` from ``connection.start-ok``)."""
        prefix = "CONNECTION_FORCED - "
        text = reply_text if reply_text.startswith(prefix) else prefix + reply_text
        return self._links("close_connections()").for_each_link(lambda link: link.inject_close(reply_code, text), where)

    def drop_connections(self, *, where: ConnectionFilter | None = None) -> int:
        """Reset the client connections' sockets at the proxy (``where`` picks them, as on the fake)."""
        return self._links("drop_connections()").for_each_link(Link.drop, where)

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
            if self.management is not None:
                try:
                    self.management.clear_policy(vhost, name, operator=operator)
                except ManagementError as exc:
                    if exc.status != 404:
                        failures.append(f"policy {name!r} in vhost {vhost!r}: {exc}")
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


if TYPE_CHECKING:
    from fakerabbit.testing.rabbit import Rabbit

    #: mypy checks that RealRabbit has the shape FakeRabbit shares with it (``fakerabbit.testing.rabbit``).
    _REAL_RABBIT_IS_A_RABBIT: type[Rabbit] = RealRabbit
