"""The broker root: vhosts, users, connections, the clock and the version profile."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from fakerabbit.broker import errors, texts
from fakerabbit.broker.auth import Auth
from fakerabbit.broker.consumer_timeout import DEFAULT_CONSUMER_TIMEOUT_MS
from fakerabbit.broker.deadletter.publisher import DeadLetters
from fakerabbit.broker.delayed import DEFAULT_PLUGINS, check_plugins
from fakerabbit.broker.delayed import PLUGIN as DELAYED_PLUGIN
from fakerabbit.broker.delayed import TYPE as DELAYED_TYPE
from fakerabbit.broker.events import EventLog
from fakerabbit.broker.policy import Policy, PolicyError, validate_policy
from fakerabbit.broker.profile import Profile, get_profile
from fakerabbit.broker.session import ConnectionInfo
from fakerabbit.broker.vhost import Vhost
from fakerabbit.clock import Clock

if TYPE_CHECKING:
    from fakerabbit.broker.session import Session

__all__ = ["MAX_PROBLEMS", "Broker", "ConnectionInfo"]


#: How many problem lines :attr:`Broker.problems` keeps (older ones are counted, not kept).
MAX_PROBLEMS = 1000


class Broker:
    """Everything a fake RabbitMQ node holds. Single-threaded: call it from the server's loop only."""

    def __init__(
        self,
        clock: Clock,
        *,
        rabbitmq_version: str | None = None,
        users: dict[str, str] | None = None,
        vhosts: Iterable[str] = ("/",),
        dead_lettering: bool = True,
        plugins: Iterable[str] = DEFAULT_PLUGINS,
    ) -> None:
        self.clock = clock
        self.profile: Profile = get_profile(rabbitmq_version)
        #: The enabled plugins that add broker behaviour (``rabbitmq_delayed_message_exchange``).
        self.plugins: frozenset[str] = check_plugins(plugins)
        #: The exchange types a declare accepts: the profile's, and those of the enabled plugins.
        self.exchange_types: tuple[str, ...] = self.profile.exchange_types + (
            (DELAYED_TYPE,) if DELAYED_PLUGIN in self.plugins else ()
        )
        self.dead_lettering = dead_lettering
        #: ``dead_letter_worker_publisher_confirm_timeout``: how often a quorum queue's at-least-once
        #: dead-letter worker retries the messages it could not deliver (180 s, as RabbitMQ).
        self.dead_letter_confirm_timeout_ms = 180_000
        #: ``consumer_timeout``: how long a delivery may stay unacknowledged (1 800 000 ms, as RabbitMQ);
        #: ``None`` is RabbitMQ's ``undefined`` (see :mod:`fakerabbit.broker.consumer_timeout`).
        self.consumer_timeout_ms: int | None = DEFAULT_CONSUMER_TIMEOUT_MS
        self.auth = Auth(
            dict(users) if users is not None else {"guest": "guest"},
            names_permission=self.profile.access_refused_names_permission,
        )
        self._initial_vhosts = tuple(vhosts)
        self.vhosts: dict[str, Vhost] = {}
        self.events = EventLog(clock.now_ms)
        #: What the fake does not support or a client did wrong (540/541, protocol errors 501-505), as
        #: readable lines; the pytest plugin fails the test with them at teardown.
        self.problems: list[str] = []
        self._problems_folded = 0
        self._fold_line = ""
        #: how work that goes on between client commands is scheduled (the server sets it: its loop's
        #: ``call_soon``); without it the work waits for :meth:`run_pending`
        self.on_background: Callable[[Callable[[], None]], None] | None = None
        self._pending: list[Callable[[], None]] = []
        self.dead_letters = DeadLetters(self)
        self.reply_sessions: dict[str, Session] = {}
        #: the channel-pid halves of every direct reply-to token this node issued: a 4.3 node routes a reply
        #: to any of them (its pid decodes and names this node), whether or not the channel still lives
        self.reply_pids: set[str] = set()
        self.connections: dict[int, ConnectionInfo] = {}
        self._conn_ids = itertools.count(1)
        self._msg_ids = itertools.count(1)
        for name in self._initial_vhosts:
            self.add_vhost(name)
        self._initial_auth = self.auth.snapshot()

    def next_msg_id(self) -> int:
        return next(self._msg_ids)

    def run_soon(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` after the work in hand, between client commands: RabbitMQ's queue processes go on working
        while clients are served (an endless dead-letter loop, for one)."""
        hook = self.on_background
        if hook is None:
            self._pending.append(fn)
        else:
            hook(fn)

    def run_pending(self) -> int:
        """Run the work :meth:`run_soon` kept for lack of a server (once each); how many ran."""
        pending, self._pending = self._pending, []
        for fn in pending:
            fn()
        return len(pending)

    # -- vhosts and users -----------------------------------------------------------------------------------
    def add_vhost(self, name: str, *, owner: str | None = None) -> Vhost:
        """The vhost ``name``, created if it does not exist. A new vhost gives full permissions to ``owner`` only
        (RabbitMQ: its creator), or to every user when there is no owner (the constructor, definitions)."""
        v = self.vhosts.get(name)
        if v is None:
            v = self.vhosts[name] = Vhost(self, name)
            for user in [owner] if owner is not None else list(self.auth.users):
                self.auth.set_permissions(user, name)
        return v

    def delete_vhost(self, name: str) -> None:
        """Delete vhost ``name``: its connections are closed (320), its contents and permissions go."""
        v = self.vhost(name)
        for info in [c for c in self.connections.values() if c.vhost == name]:
            if info.close is not None:
                info.close(320, f"vhost '{name}' is deleted")
        v.reset()
        del self.vhosts[name]
        self.auth.forget_vhost(name)

    def keep_definitions(self) -> None:
        """What :meth:`reset` restores becomes the vhosts, users, tags and permissions as they are now (``fakerabbit
        serve --definitions`` calls it after the import)."""
        self._initial_vhosts = tuple(self.vhosts)
        self._initial_auth = self.auth.snapshot()

    def vhost(self, name: str) -> Vhost:
        v = self.vhosts.get(name)
        if v is None:
            raise KeyError(f"no vhost '{name}'")
        return v

    # -- connections ----------------------------------------------------------------------------------------
    def open_connection(
        self, user: str, vhost: str, *, peer: str = "", client_properties: dict[str, Any]
    ) -> ConnectionInfo:
        if vhost not in self.vhosts:
            raise errors.NotAllowed(f"vhost {vhost} not found")
        if not self.auth.can_access_vhost(user, vhost):
            raise errors.NotAllowed(f"access to vhost '{vhost}' refused for user '{user}'")
        conn = ConnectionInfo(next(self._conn_ids), user, vhost, peer, client_properties)
        self.connections[conn.id] = conn
        self.events.emit("connection-opened", None, connection=conn.id, user=user, vhost=vhost)
        return conn

    def close_connection(self, conn: ConnectionInfo) -> None:
        """The connection is gone: close its channels (requeueing unacked), drop its exclusive queues."""
        if self.connections.pop(conn.id, None) is None:
            return
        for s in list(conn.sessions.values()):
            s.close()
        conn.sessions.clear()
        v = self.vhosts.get(conn.vhost)
        if v is not None:
            for name in list(conn.exclusive_queues):
                q = v.queues.get(name)
                if q is not None and q.exclusive_owner == conn.id:
                    v.delete_queue(q)
        conn.exclusive_queues.clear()
        self.events.emit("connection-closed", None, connection=conn.id)

    # -- policies -------------------------------------------------------------------------------------------
    def set_policy(
        self,
        name: str,
        pattern: str,
        definition: dict[str, Any],
        *,
        priority: int | float = 0,
        apply_to: str = "all",
        vhost: str = "/",
        operator: bool = False,
    ) -> Policy:
        v = self.vhost(vhost)
        validate_policy(definition, operator=operator, apply_to=apply_to, profile=self.profile)
        policy = Policy(name, vhost, pattern, dict(definition), priority, apply_to)
        (v.operator_policies if operator else v.policies)[name] = policy
        v.reapply_policies()
        return policy

    def clear_policy(self, name: str, *, vhost: str = "/", operator: bool = False) -> None:
        v = self.vhost(vhost)
        table = v.operator_policies if operator else v.policies
        if table.pop(name, None) is None:
            raise PolicyError(texts.PARAMETER_DOES_NOT_EXIST)
        v.reapply_policies()

    # -- test support ---------------------------------------------------------------------------------------
    def report_problem(self, text: str) -> None:
        """Record something unsupported or a client's protocol violation (see :attr:`problems`).

        A standalone server nobody reads the problems of must not grow without bound: past
        :data:`MAX_PROBLEMS` the oldest are folded into one line that counts them.
        """
        problems = self.problems
        problems.append(text)
        if len(problems) > MAX_PROBLEMS:
            folded = 0
            if problems[0] is self._fold_line:  # (the list may have been cleared since)
                folded = self._problems_folded
                del problems[0]
            while len(problems) >= MAX_PROBLEMS:
                del problems[0]
                folded += 1
            self._problems_folded = folded
            self._fold_line = f"... {folded} earlier problem(s) not kept"
            problems.insert(0, self._fold_line)

    def reset(self) -> None:
        """Back to a fresh node: the initial vhosts (emptied, with their predeclared exchanges), users, tags and
        permissions, whatever was created, changed or deleted since (through the management API included)."""
        for v in self.vhosts.values():
            v.reset()
        old = dict(self.vhosts)
        self.vhosts.clear()
        for name in self._initial_vhosts:
            self.vhosts[name] = old.get(name) or Vhost(self, name)
        self.auth.restore(self._initial_auth)
        self.connections.clear()
        self.events.clear()
        self.problems.clear()
        self.reply_sessions.clear()
        self.reply_pids.clear()
        self.dead_letters.reset()
        self._pending.clear()
