"""The composition root: :class:`FakeRabbit`, the object tests and the CLI start. It wires the broker, the clock,
the AMQP listener (``protocol/listener.py``) and the management API together; nothing below imports it."""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import ssl
import threading
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, TypeVar
from urllib.parse import quote

from fakerabbit.broker import texts
from fakerabbit.broker.broker import Broker
from fakerabbit.broker.delayed import DEFAULT_PLUGINS
from fakerabbit.clock import FollowingClock, SystemClock, VirtualClock, use_real_time
from fakerabbit.errors import ListenError
from fakerabbit.protocol.addresses import url_host
from fakerabbit.protocol.listener import Listener
from fakerabbit.protocol.tls import Certificates, server_context
from fakerabbit.testing.api import TestingAPI

if TYPE_CHECKING:
    from fakerabbit.management import ManagementServer

T = TypeVar("T")


#: What a client is told when the broker is reset under it (RabbitMQ's text when its node stops).
RESET_CLOSE_TEXT = texts.SHUTDOWN


AnyClock = VirtualClock | FollowingClock | SystemClock
"""The clocks :class:`FakeRabbit` accepts."""

_CLOCK_NAMES = {"virtual": VirtualClock, "system": SystemClock, "frozen": FollowingClock, "following": FollowingClock}


def _make_clock(clock: str | AnyClock, start_time: datetime | None) -> AnyClock:
    if isinstance(clock, VirtualClock | FollowingClock | SystemClock):
        if start_time is not None and not isinstance(clock, VirtualClock):
            raise ValueError("start_time only applies to the virtual clock")
        return clock
    if clock == "virtual":
        return VirtualClock(start_time)
    if clock in _CLOCK_NAMES:
        if start_time is not None:
            raise ValueError("start_time only applies to the virtual clock")
        return FollowingClock() if clock in ("frozen", "following") else SystemClock()
    raise ValueError(f"clock must be 'virtual', 'frozen' (alias 'following') or 'system', not {clock!r}")


class FakeRabbit(TestingAPI):
    """A fake RabbitMQ node: an AMQP 0-9-1 server on a TCP port.

    ``with FakeRabbit() as rabbit:`` runs it on a private event loop in a daemon thread (for pika, kombu,
    py-amqp); ``async with FakeRabbit() as rabbit:`` runs it on the running loop (for aio-pika, aiormq).
    ``rabbit.url`` is the AMQP URL to connect to and ``rabbit.clock`` the clock the broker's time comes from.

    Args:
        host: interface to listen on (loopback by default). ``"localhost"`` listens on ``127.0.0.1`` and
            ``::1``, ``"::"`` on every IPv6 and IPv4 interface (dual-stack where the OS allows), ``"::1"`` on IPv6
            loopback only; URLs write IPv6 addresses in brackets (``amqp://guest:guest@[::1]:5672/%2F``).
        port: TCP port; 0 picks a free one.
        users: user name -> password; every user gets full permissions on every vhost.
        vhosts: virtual hosts that exist.
        clock: ``"virtual"`` (default: time moves only with ``rabbit.clock.advance()``), ``"frozen"`` (the
            broker's time follows freezegun / time-machine: :class:`~fakerabbit.clock.FollowingClock`),
            ``"system"`` (real time), or a clock object. See ``docs/clock.md``.
        rabbitmq_version: which RabbitMQ to behave like: "3.10" to "4.3" (``ACCEPTED_VERSIONS``); default the newest.
        start_time: the virtual clock's start (default: now).
        dead_lettering: ``False`` turns dead-lettering off (messages that would be dead-lettered are dropped).
        dead_letter_retry_interval: seconds between the retries of a quorum queue's at-least-once dead-letter
            worker (RabbitMQ's ``dead_letter_worker_publisher_confirm_timeout``, default 180 s). See
            ``docs/dead-lettering.md``.
        management: serve the RabbitMQ-compatible management HTTP API (``rabbit.management_url``).
        management_port: its TCP port; 0 (default) picks a free one.
        tls: also serve AMQP over TLS (amqps, ``rabbit.amqps_url``, like RabbitMQ's 5671 next to 5672) with a
            certificate authority and certificates generated for this node: ``rabbit.ca_file`` is the CA to trust,
            ``rabbit.client_cert`` / ``rabbit.client_key`` a client certificate for mutual TLS (optional, verified
            when presented). See ``docs/tls.md``.
        tls_port: the amqps port; 0 (default) picks a free one.
        management_tls: also serve the management API over HTTPS (``rabbit.management_https_url``, with the same
            certificates); implies ``management=True``.
        management_tls_port: its HTTPS port; 0 (default) picks a free one.
        tls_dir: where the certificate files go (made if missing); default a temporary directory, removed when
            this object is garbage-collected or the interpreter exits.
        memory_high_watermark: bytes of message bodies held (ready + unacknowledged) above which the memory alarm
            goes off: publishing connections are blocked (``connection.blocked``) until usage drops below it.
            ``None`` (default): never.
        plugins: the RabbitMQ plugins that are enabled, by their RabbitMQ names. The default,
            ``("rabbitmq_delayed_message_exchange",)``, gives the ``x-delayed-message`` exchange type;
            ``plugins=()`` turns it off (declaring one is then the unknown-type error). See ``docs/delayed.md``.
        loopback_users: users who may connect only from a loopback address (RabbitMQ's ``loopback_users``,
            ``guest`` by default; it matters only when ``host`` is not a loopback interface). ``()`` lets every
            user in from anywhere, like ``loopback_users = none`` in rabbitmq.conf.
        consumer_timeout: seconds a delivery may stay unacknowledged (RabbitMQ's ``consumer_timeout``, default
            1800 s = 1 800 000 ms); what happens then depends on the version (``docs/consumer-timeout.md``).
            ``None`` is RabbitMQ's ``undefined`` (advanced.config): no node-wide timeout up to 4.2, 24 hours for
            4.3's quorum queues.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        users: dict[str, str] | None = None,
        vhosts: Iterable[str] = ("/",),
        clock: str | AnyClock = "virtual",
        rabbitmq_version: str | None = None,
        start_time: datetime | None = None,
        dead_lettering: bool = True,
        dead_letter_retry_interval: float = 180.0,
        memory_high_watermark: int | None = None,
        management: bool = False,
        management_port: int = 0,
        plugins: Iterable[str] = DEFAULT_PLUGINS,
        loopback_users: Iterable[str] = ("guest",),
        consumer_timeout: float | None = 1800.0,
        tls: bool = False,
        tls_port: int = 0,
        management_tls: bool = False,
        management_tls_port: int = 0,
        tls_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        self.host = host
        self._requested_port = port
        self.port = 0
        self._requested_tls_port = tls_port
        #: The amqps port (``FakeRabbit(tls=True)``; 0 before the start or without TLS).
        self.tls_port = 0
        self._tls = tls
        self._certificates: Certificates | None = None
        self._tls_context: ssl.SSLContext | None = None
        self.clock = _make_clock(clock, start_time)
        self._broker = Broker(
            self.clock,
            rabbitmq_version=rabbitmq_version,
            users=users if users is not None else {"guest": "guest"},
            vhosts=vhosts,
            dead_lettering=dead_lettering,
            plugins=plugins,
        )
        if dead_letter_retry_interval <= 0:
            raise ValueError("dead_letter_retry_interval must be positive")
        self._broker.dead_letter_confirm_timeout_ms = round(dead_letter_retry_interval * 1000)
        if consumer_timeout is not None:
            if (
                isinstance(consumer_timeout, bool)
                or not isinstance(consumer_timeout, int | float)
                or not 0 < consumer_timeout < float("inf")
            ):
                raise ValueError(f"consumer_timeout must be positive seconds or None, not {consumer_timeout!r}")
            self._broker.consumer_timeout_ms = max(1, round(consumer_timeout * 1000))
        else:
            self._broker.consumer_timeout_ms = None
        self._listener = Listener(self._broker)
        self._listener.loopback_users = frozenset(loopback_users)
        self._listener.alarms.memory_high_watermark = memory_high_watermark
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._owns_loop = False
        if tls or management_tls:
            self._certificates = Certificates(host, client_name=self._first_user(), directory=tls_dir)
            self._tls_context = server_context(self._certificates)
        self.management: ManagementServer | None = None
        if management or management_tls:
            from fakerabbit.management import ManagementServer

            self.management = ManagementServer(
                _Served(self),
                host,
                management_port,
                tls=self._tls_context if management_tls else None,
                tls_port=management_tls_port,
            )

    # -- addresses ------------------------------------------------------------------------------------------
    def _first_user(self) -> str:
        return next(iter(self._broker.auth.users), "guest")

    def _amqp_url(self, scheme: str, port: int) -> str:
        user, password = next(iter(self._broker.auth.users.items()))
        vhost = next(iter(self._broker.vhosts))
        credentials = f"{quote(user, safe='')}:{quote(password, safe='')}"
        return f"{scheme}://{credentials}@{url_host(self.host)}:{port}/{quote(vhost, safe='')}"

    @property
    def url(self) -> str:
        """``amqp://USER:PASSWORD@HOST:PORT/%2F`` for the first user and vhost (an IPv6 host in brackets:
        ``amqp://guest:guest@[::1]:5672/%2F``)."""
        return self._amqp_url("amqp", self.port)

    @property
    def amqps_url(self) -> str:
        """``amqps://USER:PASSWORD@HOST:TLS_PORT/%2F``: the TLS listener (``FakeRabbit(tls=True)``). Its
        certificate is signed by :attr:`ca_file` and valid for ``localhost``, ``127.0.0.1``, ``::1`` and the
        listening host."""
        if not self._tls:
            raise RuntimeError("TLS is off: use FakeRabbit(tls=True)")
        return self._amqp_url("amqps", self.tls_port)

    def _certs(self) -> Certificates:
        if self._certificates is None:
            raise RuntimeError("TLS is off: use FakeRabbit(tls=True) (or management_tls=True)")
        return self._certificates

    @property
    def ca_file(self) -> str:
        """Path of the PEM file of the certificate authority that signed the server's (and the client's)
        certificate: what a client trusts (``ssl.create_default_context(cafile=rabbit.ca_file)``)."""
        return self._certs().ca_file

    @property
    def client_cert(self) -> str:
        """Path of a client certificate (PEM) signed by :attr:`ca_file`, common name the first user, for mutual
        TLS; the server asks for a client certificate and verifies it when one is presented."""
        return self._certs().client_cert

    @property
    def client_key(self) -> str:
        """Path of :attr:`client_cert`'s private key (PEM, unencrypted)."""
        return self._certs().client_key

    @property
    def management_url(self) -> str:
        """``http://HOST:PORT`` of the management HTTP API (``FakeRabbit(management=True)``)."""
        if self.management is None:
            raise RuntimeError("the management API is off: use FakeRabbit(management=True)")
        return self.management.url

    @property
    def management_https_url(self) -> str:
        """``https://HOST:PORT`` of the management API over HTTPS (``FakeRabbit(management_tls=True)``), with a
        certificate signed by :attr:`ca_file`."""
        if self.management is None or self.management.tls is None:
            raise RuntimeError("the management API is not served over HTTPS: use FakeRabbit(management_tls=True)")
        return self.management.https_url

    async def _start_servers(self) -> tuple[int, int]:
        port = await self._listen(self._requested_port)
        tls_port = 0
        try:
            if self._tls:
                tls_port = await self._listen(self._requested_tls_port, self._tls_context)
            if self.management is not None:
                await self.management.start()
        except BaseException:
            await self._listener.stop()
            raise
        return port, tls_port

    async def _listen(self, port: int, tls: ssl.SSLContext | None = None) -> int:
        try:
            return await self._listener.start(self.host, port, tls)
        except OSError as exc:
            raise ListenError(exc.errno, exc.strerror, f"{url_host(self.host)}:{port}") from exc

    async def _stop_servers(self) -> None:
        if self.management is not None:
            await self.management.stop()
        await self._listener.stop()

    # -- lifecycle ------------------------------------------------------------------------------------------
    def start(self) -> FakeRabbit:
        """Start serving on a private event loop in a daemon thread; returns once connections are accepted.
        Raises :class:`~fakerabbit.ListenError` (``ManagementListenError`` for the management API) when a port
        cannot be bound."""
        if self._loop is not None:
            raise RuntimeError("FakeRabbit is already running")
        ready: concurrent.futures.Future[tuple[int, int]] = concurrent.futures.Future()
        loop = asyncio.new_event_loop()
        use_real_time(loop)  # our own loop keeps real time while freezegun freezes time.monotonic

        def run() -> None:
            asyncio.set_event_loop(loop)
            try:
                self._attach(loop)
                ports = loop.run_until_complete(self._start_servers())
            except BaseException as exc:
                ready.set_exception(exc)
                loop.close()
                return
            ready.set_result(ports)
            loop.run_forever()
            loop.run_until_complete(self._stop_servers())
            loop.close()

        self._loop = loop
        self._owns_loop = True
        self._thread = threading.Thread(target=run, name="fakerabbit", daemon=True)
        self._thread.start()
        try:
            self.port, self.tls_port = ready.result()
        except BaseException:
            self._loop = None
            self._thread = None
            raise
        return self

    def stop(self) -> None:
        """Stop serving and close every connection."""
        loop, thread = self._loop, self._thread
        if loop is None:
            return
        if self._owns_loop and thread is not None:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=5)
        self._loop = None
        self._thread = None

    async def start_async(self) -> FakeRabbit:
        """Start serving on the running event loop (raises :class:`~fakerabbit.ListenError` like :meth:`start`)."""
        loop = asyncio.get_running_loop()
        self._loop = loop
        self._owns_loop = False
        self._attach(loop)
        self.port, self.tls_port = await self._start_servers()
        return self

    async def stop_async(self) -> None:
        """Stop serving (the counterpart of :meth:`start_async`, on its loop): listeners closed, clients dropped."""
        await self._stop_servers()
        self._loop = None

    def _attach(self, loop: asyncio.AbstractEventLoop) -> None:
        def background(fn: Callable[[], None]) -> None:
            # work the broker goes on with between client commands (an endless dead-letter loop's next turn)
            def run() -> None:
                if self._loop is not loop:
                    return  # stopped since
                try:
                    fn()
                finally:
                    self._listener.flush()

            loop.call_soon_threadsafe(run)

        self._broker.on_background = background
        clock = self.clock
        if isinstance(clock, VirtualClock):
            clock.attach(self._call, self._listener.drain_inbound, self._listener.flush)
            # A timer set for the current time (e.g. a TTL-0 head a basic.get exposed) fires before the next command.
            self._listener.on_inbound = clock.catch_up
        elif isinstance(clock, FollowingClock):
            clock.attach(self._call, self._listener.drain_inbound, self._listener.flush)
            following = clock
            # Timers that fell due while the test moved its time fire before the next client command is handled.
            self._listener.on_inbound = following.catch_up
            interval = following.poll_interval
            if interval is not None:

                def poll() -> None:
                    if self._loop is not loop or loop.is_closed():
                        return
                    if following.catch_up():
                        self._listener.flush()
                    loop.call_later(interval, poll)

                loop.call_soon(poll)
        else:

            def schedule(delay: float, fn: Callable[[], None]) -> asyncio.TimerHandle:
                def fire() -> None:
                    fn()
                    self._listener.flush()

                return loop.call_later(delay, fire)

            def unschedule(handle: object) -> None:
                cancel = getattr(handle, "cancel", None)  # asyncio's or uvloop's TimerHandle
                if cancel is not None:
                    cancel()

            clock.attach_loop(schedule, unschedule)

    def __enter__(self) -> FakeRabbit:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def __aenter__(self) -> FakeRabbit:
        return await self.start_async()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop_async()

    # -- marshalling onto the server's loop ---------------------------------------------------------------
    def _call(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` on the server's loop (blocking until done) and flush what it produced to the sockets."""
        loop = self._loop
        if loop is None:
            return fn()
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop or (self._thread is not None and threading.current_thread() is self._thread):
            try:
                return fn()
            finally:
                self._listener.flush()
        fut: concurrent.futures.Future[T] = concurrent.futures.Future()

        def run() -> None:
            try:
                fut.set_result(fn())
            except BaseException as exc:
                fut.set_exception(exc)
            finally:
                self._listener.flush()

        loop.call_soon_threadsafe(run)
        return fut.result(timeout=30)

    # -- policies -------------------------------------------------------------------------------------------
    def _after_inbound(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` on the loop once what clients already sent is processed, so that a policy change lands
        after a nack or publish the test sent just before it (as with ``rabbitmqctl``)."""

        def run() -> T:
            self._listener.drain_inbound()
            return fn()

        return self._call(run)

    def set_permissions(
        self, user: str, vhost: str = "/", configure: str = ".*", write: str = ".*", read: str = ".*"
    ) -> None:
        """Give ``user`` these configure/write/read patterns on ``vhost`` (``rabbitmqctl set_permissions``; an
        empty pattern allows nothing). Raises ``ValueError`` (``InvalidRegexp``) for a pattern that does not
        compile. :meth:`reset` restores the constructor's permissions (every user, everything, every vhost)."""
        self._after_inbound(lambda: self._broker.auth.set_permissions(user, vhost, configure, write, read))

    def set_alarm(self, resource: Literal["memory", "disk"] = "memory", active: bool = True) -> None:
        """Raise (``active``) or clear a ``memory`` or ``disk`` resource alarm, as RabbitMQ's alarms do:
        publishers are blocked while any alarm is on. :meth:`reset` clears them."""
        self._after_inbound(lambda: self._listener.alarms.set_alarm(resource, active))

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
        """Set a user policy, like ``rabbitmqctl set_policy``; it applies to existing queues at once."""
        self._after_inbound(
            lambda: self._broker.set_policy(
                name, pattern, definition, priority=priority, apply_to=apply_to, vhost=vhost
            )
        )

    def clear_policy(self, name: str, vhost: str = "/") -> None:
        """Remove a user policy."""
        self._after_inbound(lambda: self._broker.clear_policy(name, vhost=vhost))

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
        """Set an operator policy, like ``rabbitmqctl set_operator_policy``."""
        self._after_inbound(
            lambda: self._broker.set_policy(
                name, pattern, definition, priority=priority, apply_to=apply_to, vhost=vhost, operator=True
            )
        )

    def clear_operator_policy(self, name: str, vhost: str = "/") -> None:
        """Remove an operator policy."""
        self._after_inbound(lambda: self._broker.clear_policy(name, vhost=vhost, operator=True))

    def reset(self) -> None:
        """Drop all connections and state (queues, exchanges, bindings, policies, events) and go back to the
        initial definitions: the vhosts, users, tags and permissions the constructor gave, whatever the management
        API created, changed or deleted since."""

        def do() -> None:
            # Everything is wiped below: skip the orderly teardown (requeueing unacked messages, deleting
            # exclusive queues one by one), which costs more than the rest of the reset. Clients are told
            # 320 CONNECTION_FORCED, as RabbitMQ tells them when it stops for a reset.
            self._listener.force_close_all(RESET_CLOSE_TEXT)
            self._listener.flush()
            self._broker.reset()
            self._listener.alarms.reset()  # rabbit.block() and alarms raised by hand do not outlive the test
            if isinstance(self.clock, VirtualClock | FollowingClock):
                self.clock.reset()

        self._call(do)


class _Served:
    """What the management API sees of a :class:`FakeRabbit` (``management.core.ServedNode``)."""

    def __init__(self, rabbit: FakeRabbit) -> None:
        self._rabbit = rabbit

    @property
    def broker(self) -> Broker:
        return self._rabbit._broker

    @property
    def server(self) -> Listener:
        return self._rabbit._listener

    @property
    def clock(self) -> AnyClock:
        return self._rabbit.clock

    @property
    def host(self) -> str:
        return self._rabbit.host

    @property
    def port(self) -> int:
        return self._rabbit.port

    @property
    def management(self) -> ManagementServer | None:
        return self._rabbit.management

    def reset(self) -> None:
        self._rabbit.reset()


if TYPE_CHECKING:
    from fakerabbit.testing.rabbit import Rabbit

    #: mypy checks that FakeRabbit has the shape the pytest plugin's RealRabbit shares with it.
    _FAKE_RABBIT_IS_A_RABBIT: type[Rabbit] = FakeRabbit
