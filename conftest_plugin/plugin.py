"""The fakerabbit pytest plugin, registered through the ``pytest11`` entry point: installing is enough.

Fixtures: ``fakerabbit`` (a running :class:`~fakerabbit.FakeRabbit`, reset before each test), ``fakerabbit_url``,
``fakerabbit_clock``, ``fakerabbit_management_url`` (asking for it turns the management API on) and
``fakerabbit_amqps_url`` (asking for it turns the amqps listener on; the CA is ``fakerabbit.ca_file``).
One server is started per session (per pytest-xdist worker) the first time a test
asks for it; a test whose ``@pytest.mark.fakerabbit(...)`` needs another RabbitMQ version, other users, vhosts
or clock gets a server of its own, kept for later tests with the same settings.

With ``--fakerabbit-url amqp://...`` the same tests run against a real RabbitMQ (see :mod:`fakerabbit_pytest.real`);
under pytest-xdist each worker then gets a vhost of its own on that broker, made through its management API.
See ``docs/pytest.md``.
"""

from __future__ import annotations

import uuid
import warnings
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest

from fakerabbit.broker.delayed import DEFAULT_PLUGINS, check_plugins
from fakerabbit.broker.profile import get_profile
from fakerabbit.clock import VirtualClock
from fakerabbit.server import AnyClock, FakeRabbit

__all__ = ["FakeRabbitSession", "FakeRabbitSettings"]

MARKER = "fakerabbit"
MARKER_HELP = (
    "fakerabbit(rabbitmq_version=None, users=None, vhosts=None, start_time=None, clock=None, "
    "dead_lettering=True, dead_letter_retry_interval=None, memory_high_watermark=None, management=False, "
    "check_problems=None, fake_only=False, plugins=None, tls=False, management_tls=False, consumer_timeout=1800): "
    "configure the fakerabbit fixture for one test"
)
_MARKER_KEYS = frozenset(
    {
        "rabbitmq_version",
        "users",
        "vhosts",
        "start_time",
        "clock",
        "dead_lettering",
        "dead_letter_retry_interval",
        "memory_high_watermark",
        "management",
        "check_problems",
        "fake_only",
        "plugins",
        "consumer_timeout",
        "tls",
        "management_tls",
    }
)
_STASH = pytest.StashKey["FakeRabbitSession"]()
#: Clock names FakeRabbit accepts: "frozen" / "following" follow freezegun / time-machine (see docs/clock.md).
CLOCKS = ("virtual", "system", "frozen", "following")


class MarkerError(ValueError):
    """A ``@pytest.mark.fakerabbit(...)`` the plugin cannot use."""


# ======================================================================================================
# options


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("fakerabbit", "fakerabbit: a fake RabbitMQ for tests")
    group.addoption(
        "--fakerabbit-url",
        default=None,
        metavar="URL",
        help="run the tests against this real RabbitMQ (amqp://user:pass@host:port/vhost) instead of the fake",
    )
    group.addoption(
        "--fakerabbit-real-wait",
        action="store_true",
        default=None,
        help="against a real RabbitMQ, let clock.advance(s) sleep s seconds instead of skipping the test",
    )
    group.addoption(
        "--fakerabbit-management-url",
        default=None,
        metavar="URL",
        help="the real RabbitMQ's management API (default: http://HOST:AMQP_PORT+10000 of --fakerabbit-url); "
        "used for policies and, under pytest-xdist, one vhost per worker",
    )
    group.addoption("--fakerabbit-version", default=None, metavar="X.Y", help="RabbitMQ version the fake behaves like")
    group.addoption(
        "--fakerabbit-start-time",
        default=None,
        metavar="ISO8601",
        help="where the virtual clock starts for every test (default: the real time when the test starts)",
    )
    group.addoption(
        "--fakerabbit-ignore-problems",
        action="store_true",
        default=None,
        help="do not fail tests in which a client hit an unsupported feature or broke the protocol",
    )
    group.addoption(
        "--fakerabbit-ca-file",
        default=None,
        metavar="PEM",
        help="with an amqps:// --fakerabbit-url: the CA certificate the real broker's certificate is checked against "
        "(rabbit.ca_file in tests)",
    )
    parser.addini("fakerabbit_url", "like --fakerabbit-url", default="")
    parser.addini("fakerabbit_ca_file", "like --fakerabbit-ca-file", default="")
    parser.addini(
        "fakerabbit_tls",
        "serve amqps (rabbit.amqps_url, rabbit.ca_file) in every test's fake",
        type="bool",
        default=False,
    )
    parser.addini("fakerabbit_management_url", "like --fakerabbit-management-url", default="")
    parser.addini(
        "fakerabbit_management", "serve the management HTTP API in every test's fake", type="bool", default=False
    )
    parser.addini("fakerabbit_real_wait", "like --fakerabbit-real-wait", type="bool", default=False)
    parser.addini("fakerabbit_rabbitmq_version", "like --fakerabbit-version", default="")
    parser.addini("fakerabbit_start_time", "like --fakerabbit-start-time", default="")
    parser.addini(
        "fakerabbit_users", "users of the fake, one 'name:password' per line (default guest:guest)", type="linelist"
    )
    parser.addini("fakerabbit_vhosts", "vhosts of the fake, one per line (default /)", type="linelist")
    parser.addini(
        "fakerabbit_clock",
        "'virtual' (default), 'system' or 'frozen' (follows freezegun/time-machine)",
        default="virtual",
    )
    parser.addini(
        "fakerabbit_check_problems",
        "fail tests in which a client hit an unsupported feature or broke the protocol",
        type="bool",
        default=True,
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER_HELP)
    settings = FakeRabbitSettings.from_config(config)
    config.stash[_STASH] = FakeRabbitSession(settings, worker_id=_worker_id(config))
    if settings.real_url is not None and _xdist_controller(config):
        _check_management_for_xdist(settings)


def _xdist_controller(config: pytest.Config) -> bool:
    """True in the process that starts pytest-xdist workers (``-n N`` with N > 0 or ``auto``)."""
    if hasattr(config, "workerinput") or not config.pluginmanager.hasplugin("xdist"):
        return False
    n = config.getoption("numprocesses", None)
    return bool(n) and config.getoption("dist", "no") != "no"


def _worker_id(config: pytest.Config) -> str | None:
    workerinput = getattr(config, "workerinput", None)
    return None if workerinput is None else str(workerinput.get("workerid", "gw"))


def _check_management_for_xdist(settings: FakeRabbitSettings) -> None:
    from .management import ManagementError

    api = settings.management_client()
    try:
        api.rabbitmq_version()
    except ManagementError as exc:
        raise pytest.UsageError(
            "fakerabbit: --fakerabbit-url with pytest-xdist gives every worker a vhost of its own on the real "
            f"RabbitMQ, made through its management API, which does not answer at {api.base_url} ({exc}). "
            "Enable the rabbitmq_management plugin, pass --fakerabbit-management-url, or run without -n."
        ) from None


def pytest_unconfigure(config: pytest.Config) -> None:
    session = config.stash.get(_STASH, None)
    if session is not None:
        session.close()


# ======================================================================================================
# settings


def _parse_time(value: datetime | str | None) -> datetime | None:
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    text = value.strip()
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    parsed = datetime.fromisoformat(text)
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def _parse_users(lines: Iterable[str]) -> dict[str, str] | None:
    users: dict[str, str] = {}
    for line in lines:
        name, sep, password = line.partition(":")
        if not sep:
            raise pytest.UsageError(f"fakerabbit_users: expected 'name:password', got {line!r}")
        users[name] = password
    return users or None


@dataclass(frozen=True, slots=True)
class FakeRabbitSettings:
    """How one test's ``fakerabbit`` is set up: the session defaults, overridden by the test's marker."""

    rabbitmq_version: str | None = None
    users: tuple[tuple[str, str], ...] = (("guest", "guest"),)
    vhosts: tuple[str, ...] = ("/",)
    clock: str = "virtual"
    dead_lettering: bool = True
    start_time: datetime | None = None
    dead_letter_retry_interval: float = 180.0
    memory_high_watermark: int | None = None
    management: bool = False
    check_problems: bool = True
    fake_only: bool = False
    plugins: tuple[str, ...] = DEFAULT_PLUGINS
    consumer_timeout: float | None = 1800.0
    tls: bool = False
    management_tls: bool = False
    real_url: str | None = None
    real_wait: bool = False
    management_url: str | None = None
    ca_file: str | None = None

    def management_client(self) -> Any:
        """A :class:`fakerabbit_pytest.management.ManagementClient` for the real broker of ``real_url``."""
        from .management import ManagementClient, default_management_url

        assert self.real_url is not None
        target = self.real_target()
        return ManagementClient(
            self.management_url or default_management_url(target), target.user, target.password, ca_file=self.ca_file
        )

    def real_target(self) -> Any:
        """The :class:`fakerabbit_pytest.wire.AmqpUrl` of ``real_url`` (with the ``--fakerabbit-ca-file``)."""
        from dataclasses import replace

        from .wire import AmqpUrl

        assert self.real_url is not None
        return replace(AmqpUrl.parse(self.real_url), ca_file=self.ca_file)

    @classmethod
    def from_config(cls, config: pytest.Config) -> FakeRabbitSettings:
        def opt(name: str, ini: str) -> Any:
            value = config.getoption(name)
            return value if value is not None else config.getini(ini)

        users = _parse_users(config.getini("fakerabbit_users"))
        vhosts = tuple(config.getini("fakerabbit_vhosts")) or ("/",)
        clock = str(config.getini("fakerabbit_clock") or "virtual")
        if clock not in CLOCKS:
            raise pytest.UsageError(f"fakerabbit_clock must be one of {CLOCKS}, not {clock!r}")
        ignore = config.getoption("fakerabbit_ignore_problems")
        version = opt("fakerabbit_version", "fakerabbit_rabbitmq_version") or None
        if version is not None:
            try:  # refused once, at session start (not in every test)
                get_profile(str(version))
            except ValueError as exc:
                raise pytest.UsageError(f"--fakerabbit-version / fakerabbit_rabbitmq_version: {exc}") from None
        try:
            start_time = _parse_time(opt("fakerabbit_start_time", "fakerabbit_start_time"))
        except ValueError as exc:
            raise pytest.UsageError(f"--fakerabbit-start-time / fakerabbit_start_time: {exc}") from None
        return cls(
            rabbitmq_version=version,
            users=tuple(users.items()) if users else (("guest", "guest"),),
            vhosts=vhosts,
            clock=clock,
            start_time=start_time,
            check_problems=False if ignore else bool(config.getini("fakerabbit_check_problems")),
            real_url=opt("fakerabbit_url", "fakerabbit_url") or None,
            real_wait=bool(opt("fakerabbit_real_wait", "fakerabbit_real_wait")),
            management=bool(config.getini("fakerabbit_management")),
            tls=bool(config.getini("fakerabbit_tls")),
            management_url=opt("fakerabbit_management_url", "fakerabbit_management_url") or None,
            ca_file=opt("fakerabbit_ca_file", "fakerabbit_ca_file") or None,
        )

    def with_marker(self, kwargs: Mapping[str, Any]) -> FakeRabbitSettings:
        """These settings, overridden by a ``@pytest.mark.fakerabbit(...)``'s keyword arguments."""
        unknown = set(kwargs) - _MARKER_KEYS
        if unknown:
            raise MarkerError(
                f"@pytest.mark.fakerabbit: unknown argument(s) {sorted(unknown)}; expected {sorted(_MARKER_KEYS)}"
            )
        changes: dict[str, Any] = {}
        for key, value in kwargs.items():
            if key == "consumer_timeout" and value == "none":
                changes[key] = None  # RabbitMQ's undefined (None means "not set" for the other keys)
                continue
            if value is None:
                continue
            if key == "users":
                changes[key] = tuple(dict(value).items())
            elif key == "vhosts":
                changes[key] = (value,) if isinstance(value, str) else tuple(value)
            elif key == "start_time":
                try:
                    changes[key] = _parse_time(value)
                except ValueError as exc:
                    raise MarkerError(f"@pytest.mark.fakerabbit: start_time {value!r}: {exc}") from None
            elif key == "clock":
                if value not in CLOCKS:
                    raise MarkerError(f"@pytest.mark.fakerabbit: clock must be one of {CLOCKS}, not {value!r}")
                changes[key] = value
            elif key == "dead_letter_retry_interval":
                if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                    raise MarkerError(f"@pytest.mark.fakerabbit: dead_letter_retry_interval must be > 0, not {value!r}")
                changes[key] = float(value)
            elif key == "consumer_timeout":
                if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < float("inf"):
                    raise MarkerError(
                        f"@pytest.mark.fakerabbit: consumer_timeout must be seconds > 0 or 'none', not {value!r}"
                    )
                changes[key] = float(value)
            elif key == "memory_high_watermark":
                if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                    raise MarkerError(
                        f"@pytest.mark.fakerabbit: memory_high_watermark must be bytes (an int >= 0), not {value!r}"
                    )
                changes[key] = value
            elif key == "plugins":
                names = (value,) if isinstance(value, str) else tuple(value)
                try:
                    check_plugins(names)
                except ValueError as exc:
                    raise MarkerError(f"@pytest.mark.fakerabbit: {exc}") from None
                changes[key] = names
            elif key == "rabbitmq_version":
                try:
                    get_profile(str(value))
                except ValueError as exc:
                    raise MarkerError(f"@pytest.mark.fakerabbit: {exc}") from None
                changes[key] = str(value)
            else:
                changes[key] = bool(value)
        return _replace(self, changes)

    @property
    def server_key(self) -> tuple[Any, ...]:
        """Tests with equal keys can share a server (start time and problem checks are per test)."""
        return (
            self.rabbitmq_version,
            self.users,
            self.vhosts,
            self.clock,
            self.dead_lettering,
            self.dead_letter_retry_interval,
            self.memory_high_watermark,
            self.management,
            self.plugins,
            self.consumer_timeout,
            self.tls,
            self.management_tls,
        )


def _replace(s: FakeRabbitSettings, changes: dict[str, Any]) -> FakeRabbitSettings:
    values = {name: getattr(s, name) for name in FakeRabbitSettings.__slots__}
    values.update(changes)
    return FakeRabbitSettings(**values)


def settings_for(item: pytest.Item) -> FakeRabbitSettings:
    """The effective settings of ``item``: session defaults, then markers from the outermost to the closest."""
    base = item.config.stash[_STASH].defaults
    for mark in reversed(list(item.iter_markers(MARKER))):
        if mark.args:
            raise MarkerError("@pytest.mark.fakerabbit takes keyword arguments only")
        base = base.with_marker(mark.kwargs)
    return base


# ======================================================================================================
# servers


@dataclass
class FakeRabbitSession:
    """The servers of one pytest session (or xdist worker), started on first use, stopped at the end."""

    defaults: FakeRabbitSettings
    servers: dict[tuple[Any, ...], FakeRabbit] = field(default_factory=dict)
    real: Any = None  # fakerabbit_pytest.real.RealRabbit, created on first use
    worker_id: str | None = None  # the pytest-xdist worker ("gw0"), None outside xdist
    worker_vhost: str | None = None  # this worker's vhost on the real broker, deleted at the end

    def server(self, settings: FakeRabbitSettings) -> FakeRabbit:
        """A running server for ``settings`` (shared by tests with the same :attr:`~FakeRabbitSettings.server_key`)."""
        key = settings.server_key
        rabbit = self.servers.get(key)
        if rabbit is None:
            rabbit = FakeRabbit(
                users=dict(settings.users),
                vhosts=settings.vhosts,
                clock=settings.clock,
                rabbitmq_version=settings.rabbitmq_version,
                dead_lettering=settings.dead_lettering,
                dead_letter_retry_interval=settings.dead_letter_retry_interval,
                memory_high_watermark=settings.memory_high_watermark,
                management=settings.management,
                plugins=settings.plugins,
                consumer_timeout=settings.consumer_timeout,
                tls=settings.tls,
                management_tls=settings.management_tls,
            ).start()
            self.servers[key] = rabbit
        return rabbit

    def real_rabbit(self) -> Any:
        """The :class:`~fakerabbit_pytest.real.RealRabbit` for ``--fakerabbit-url`` (under xdist: in this worker's
        own vhost, created on first use)."""
        if self.real is None:
            from dataclasses import replace

            from .management import ManagementError
            from .proxy import RecordingProxy
            from .real import RealRabbit
            from .wire import MiniClient

            target = self.defaults.real_target()
            api = self.defaults.management_client()
            problem = ""
            try:
                api.rabbitmq_version()
            except ManagementError as exc:
                problem = f"does not answer at {api.base_url} ({exc})"
                api = None
            if self.worker_id is not None:
                if api is None:  # the controller checked it at session start; it went away since
                    raise RuntimeError(f"fakerabbit: cannot make this xdist worker's vhost: management API {problem}")
                vhost = f"fakerabbit-{self.worker_id}-{uuid.uuid4().hex[:8]}"
                api.create_vhost(vhost)
                self.worker_vhost = vhost
                target = replace(target, vhost=vhost)
            with MiniClient(target) as c:
                version = c.server_version
            proxy = None if target.tls else RecordingProxy(target.host, target.port, user=target.user).start()
            self.real = RealRabbit(
                target,
                proxy,
                wait=self.defaults.real_wait,
                server_version=version,
                management=api,
                management_problem=problem,
            )
        return self.real

    def close(self) -> None:
        for rabbit in self.servers.values():
            rabbit.stop()
        self.servers.clear()
        if self.real is not None:
            if self.real.proxy is not None:
                self.real.proxy.stop()
            if self.worker_vhost is not None and self.real.management is not None:
                from .management import ManagementError

                try:
                    self.real.management.delete_vhost(self.worker_vhost)
                except ManagementError as exc:
                    warnings.warn(f"fakerabbit: could not delete vhost {self.worker_vhost!r}: {exc}", stacklevel=1)
                self.worker_vhost = None
        self.real = None


def reset_for_test(rabbit: FakeRabbit, start_time: datetime | None) -> None:
    """Everything back to a fresh node (connections, topology, messages, policies, events, problems, clock)."""
    rabbit.reset()
    if start_time is not None and isinstance(rabbit.clock, VirtualClock):
        rabbit.clock.reset(start_time)


def _problems_message(problems: list[str]) -> str:
    lines = "\n".join(f"  - {p}" for p in problems)
    return (
        f"fakerabbit: {len(problems)} problem(s) during the test (a feature fakerabbit does not support, or a "
        f"client protocol violation):\n{lines}\n"
        "Opt out for one test with @pytest.mark.fakerabbit(check_problems=False), for the run with "
        "--fakerabbit-ignore-problems, or call fakerabbit.clear_problems() after provoking one on purpose."
    )


# ======================================================================================================
# fixtures


@pytest.fixture
def fakerabbit(request: pytest.FixtureRequest) -> Iterator[FakeRabbit]:
    """A running :class:`~fakerabbit.FakeRabbit`, fresh for this test (function scope).

    The server itself lives for the whole session (per xdist worker); before each test every connection is
    dropped and all state is reset. Configure with ``@pytest.mark.fakerabbit(...)``. With ``--fakerabbit-url``
    this is a :class:`fakerabbit_pytest.real.RealRabbit` for a real broker instead.
    """
    try:
        settings = settings_for(request.node)
    except MarkerError as exc:
        problem = str(exc)
    else:
        problem = ""
    if problem:
        pytest.fail(problem, pytrace=False)
    if "fakerabbit_management_url" in request.fixturenames and not settings.management:
        settings = _replace(settings, {"management": True})
    if "fakerabbit_amqps_url" in request.fixturenames and not settings.tls:
        settings = _replace(settings, {"tls": True})
    session = request.config.stash[_STASH]
    if settings.real_url is not None:
        yield from _real(session, settings)
        return
    rabbit = session.server(settings)
    reset_for_test(rabbit, settings.start_time)
    yield rabbit
    if settings.check_problems:
        problems = rabbit.clear_problems()
        if problems:
            pytest.fail(_problems_message(problems), pytrace=False)


def _real(session: FakeRabbitSession, settings: FakeRabbitSettings) -> Iterator[Any]:
    if settings.fake_only:
        pytest.skip("marked fake_only: needs fakerabbit; this run uses a real RabbitMQ (--fakerabbit-url)")
    defaults = session.defaults
    if settings.users != defaults.users or settings.vhosts != defaults.vhosts:
        pytest.skip("needs users or vhosts of its own (@pytest.mark.fakerabbit); not set up on a real RabbitMQ")
    if settings.clock != defaults.clock:
        pytest.skip("asks for a specific clock (@pytest.mark.fakerabbit(clock=...)); a real RabbitMQ has its own")
    if settings.start_time is not None:
        pytest.skip(
            f"sets the broker's start time ({settings.start_time.isoformat()}: start_time / --fakerabbit-start-time); "
            "a real RabbitMQ runs on its own clock"
        )
    if settings.memory_high_watermark is not None:
        pytest.skip("sets memory_high_watermark (@pytest.mark.fakerabbit); a real RabbitMQ's is node-wide")
    real = session.real_rabbit()
    wanted = settings.rabbitmq_version
    if wanted is not None and not _same_minor(wanted, real.rabbitmq_version):
        pytest.skip(f"expects RabbitMQ {wanted} behaviour; the real broker is {real.rabbitmq_version}")
    if real.proxy is not None:
        real.proxy.take_declared()  # forget anything declared between tests
    try:
        yield real
    finally:
        failures = real.cleanup()
        if failures:
            pytest.fail("fakerabbit could not clean up on the real RabbitMQ:\n  - " + "\n  - ".join(failures))


def _same_minor(a: str, b: str) -> bool:
    return a.split(".")[:2] == b.split(".")[:2]


@pytest.fixture
def fakerabbit_url(fakerabbit: FakeRabbit) -> str:
    """``fakerabbit.url``: the AMQP URL to connect to (``amqp://guest:guest@127.0.0.1:<port>/%2F``)."""
    return fakerabbit.url


@pytest.fixture
def fakerabbit_management_url(fakerabbit: FakeRabbit) -> str:
    """``fakerabbit.management_url``: ``http://HOST:PORT`` of the RabbitMQ-compatible management HTTP API
    (asking for this fixture serves it; with ``--fakerabbit-url``: the real broker's management API)."""
    return fakerabbit.management_url


@pytest.fixture
def fakerabbit_amqps_url(fakerabbit: FakeRabbit) -> str:
    """``fakerabbit.amqps_url``: the ``amqps://`` URL of the fake's TLS listener (asking for this fixture serves
    it); trust ``fakerabbit.ca_file``. With ``--fakerabbit-url amqps://...``: that URL (the test is skipped for an
    ``amqp://`` real broker)."""
    return fakerabbit.amqps_url


@pytest.fixture
def fakerabbit_clock(fakerabbit: FakeRabbit) -> AnyClock:
    """``fakerabbit.clock``: the :class:`~fakerabbit.VirtualClock` the broker's time comes from (another clock
    with ``@pytest.mark.fakerabbit(clock=...)``)."""
    return fakerabbit.clock
