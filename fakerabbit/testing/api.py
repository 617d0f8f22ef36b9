"""The test-facing part of :class:`fakerabbit.FakeRabbit`: inspection, events and fault injection.

A mixin so that it lives apart from the server's lifecycle code; every method marshals onto the server's loop
through ``self._call`` and returns immutable snapshots. Looking never consumes a message or changes state.
"""

from __future__ import annotations

from collections.abc import Callable
from types import MappingProxyType
from typing import TYPE_CHECKING, TypeVar

from fakerabbit.broker import texts
from fakerabbit.testing.events import Events
from fakerabbit.testing.snapshots import (
    BindingSnapshot,
    ConnectionSnapshot,
    DelayedMessageSnapshot,
    ExchangeSnapshot,
    QueueSnapshot,
)

if TYPE_CHECKING:
    from fakerabbit.broker.broker import Broker
    from fakerabbit.broker.session import ConnectionInfo
    from fakerabbit.broker.vhost import Vhost
    from fakerabbit.protocol.listener import Listener

T = TypeVar("T")

#: What RabbitMQ says when the management UI / HTTP API closes a connection.
MANAGEMENT_CLOSE_TEXT = texts.MANAGEMENT_CLOSE
#: What RabbitMQ says to every client when the node shuts down.
SHUTDOWN_TEXT = texts.SHUTDOWN

ConnectionFilter = Callable[[ConnectionSnapshot], bool]


class TestingAPI:
    """Inspection, events and fault injection (mixed into :class:`~fakerabbit.FakeRabbit`)."""

    __test__ = False  # not a pytest test class

    _broker: Broker
    _listener: Listener

    def _call(self, fn: Callable[[], T]) -> T:  # implemented by FakeRabbit
        raise NotImplementedError

    def _look(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` on the server's loop after taking in what clients already sent (a publish that
        returned before this call is in its queue when ``fn`` looks)."""

        def run() -> T:
            self._listener.drain_inbound()
            return fn()

        return self._call(run)

    # -- inspection -----------------------------------------------------------------------------------------
    def queue(self, name: str, vhost: str = "/") -> QueueSnapshot:
        """A snapshot of queue ``name``: ``.messages`` (ready, head first), ``.message_count``,
        ``.unacked_count``, ``.consumer_count``, ``.arguments``, ``.effective_policy``, ...

        Raises :class:`LookupError` (listing the queues that do exist) if there is no such queue.
        """

        def snap() -> QueueSnapshot:
            v = self._vhost(vhost)
            q = v.queues.get(name)
            if q is None:
                existing = ", ".join(repr(n) for n in sorted(v.queues)) or "none"
                raise LookupError(f"no queue {name!r} in vhost {vhost!r} (queues: {existing})")
            return QueueSnapshot.of(q)

        return self._look(snap)

    def queues(self, vhost: str | None = "/") -> list[QueueSnapshot]:
        """Snapshots of every queue in ``vhost`` (every vhost if ``None``), sorted by vhost and name."""
        return self._look(
            lambda: [QueueSnapshot.of(v.queues[n]) for v in self._vhosts(vhost) for n in sorted(v.queues)]
        )

    def exchanges(self, vhost: str | None = "/", *, predeclared: bool = True) -> list[ExchangeSnapshot]:
        """Snapshots of the exchanges of ``vhost`` (every vhost if ``None``), sorted by vhost and name.

        ``predeclared=False`` leaves out the default exchange and the ``amq.*`` exchanges every vhost has.
        """

        def snap() -> list[ExchangeSnapshot]:
            return [
                ExchangeSnapshot.of(v.exchanges[n], v.name, v.delayed.info(v.exchanges[n]) or 0)
                for v in self._vhosts(vhost)
                for n in sorted(v.exchanges)
                if predeclared or not (n == "" or n.startswith("amq."))
            ]

        return self._look(snap)

    def delayed_messages(self, exchange: str | None = None, vhost: str | None = "/") -> list[DelayedMessageSnapshot]:
        """The messages ``x-delayed-message`` exchanges hold (of ``exchange``, or all; in ``vhost``, or every
        vhost if ``None``), in the order they will be released. See ``docs/delayed.md``."""

        def snap() -> list[DelayedMessageSnapshot]:
            of = DelayedMessageSnapshot.of
            return [of(p, v.name) for v in self._vhosts(vhost) for p in v.delayed.pending(exchange)]

        return self._look(snap)

    def bindings(
        self,
        vhost: str | None = "/",
        *,
        source: str | None = None,
        destination: str | None = None,
        include_default: bool = False,
    ) -> list[BindingSnapshot]:
        """Snapshots of the bindings of ``vhost`` (every vhost if ``None``), optionally only those from exchange
        ``source`` or to queue/exchange ``destination``.

        The default exchange's implicit binding to every queue is listed only with ``include_default=True``.
        """

        def snap() -> list[BindingSnapshot]:
            out: list[BindingSnapshot] = []
            for v in self._vhosts(vhost):
                if include_default and source in (None, ""):
                    out.extend(
                        BindingSnapshot(v.name, "", q, "queue", q, MappingProxyType({}))
                        for q in sorted(v.queues)
                        if destination in (None, q)
                    )
                for xname in sorted(v.exchanges):
                    if source is not None and xname != source:
                        continue
                    out.extend(
                        BindingSnapshot.of(b, v.name)
                        for b in v.exchanges[xname].bindings
                        if destination is None or b.destination == destination
                    )
            return out

        return self._look(snap)

    def connections(self) -> list[ConnectionSnapshot]:
        """Snapshots of the open client connections, oldest first."""
        return self._look(lambda: [ConnectionSnapshot.of(c) for c in self._broker.connections.values()])

    @property
    def events(self) -> Events:
        """What happened so far (a snapshot, oldest first): ``rabbit.events.for_message(id)``,
        ``.of_kind("dead-lettered")``, ``.for_queue("work")``, ... See :mod:`fakerabbit.testing.events`."""
        return Events(self._look(self._broker.events.snapshot))

    @property
    def problems(self) -> list[str]:
        """Unsupported features the clients ran into and protocol violations they made, oldest first.

        The pytest plugin fails the test with these at teardown; :meth:`clear_problems` forgets them (for a
        test that provokes one on purpose).
        """
        return self._look(lambda: list(self._broker.problems))

    def clear_problems(self) -> list[str]:
        """Forget the recorded problems; returns them."""

        def take() -> list[str]:
            out = list(self._broker.problems)
            self._broker.problems.clear()
            return out

        return self._look(take)

    # -- fault injection ----------------------------------------------------------------------------------------
    def close_connections(
        self,
        reply_code: int = 320,
        reply_text: str = MANAGEMENT_CLOSE_TEXT,
        *,
        where: ConnectionFilter | None = None,
    ) -> int:
        """Close client connections with ``connection.close`` (like the management UI's "Force Close").

        The client is told ``reply_code`` and ``"CONNECTION_FORCED - " + reply_text``; unacknowledged messages
        are requeued and exclusive queues deleted at once. ``where`` picks connections by their snapshot
        (``where=lambda c: c.connection_name == "worker"``). Returns how many were closed.
        """
        prefix = "CONNECTION_FORCED - "
        text = reply_text[len(prefix) :] if reply_text.startswith(prefix) else reply_text

        def do() -> int:
            targets = self._select(where)
            for info in targets:
                if info.close is not None:
                    info.close(reply_code, text)
                elif info.drop is not None:
                    info.drop()
            return len(targets)

        return self._look(do)

    def drop_connections(self, *, where: ConnectionFilter | None = None) -> int:
        """Reset client sockets without a close frame (a network failure or a killed node).

        Without ``where`` this also drops connections still in their handshake. Returns how many were dropped.
        """

        def do() -> int:
            if where is None:
                return self._listener.abort_all()
            targets = self._select(where)
            for info in targets:
                if info.drop is not None:
                    info.drop()
            return len(targets)

        return self._look(do)

    def restart(self, *, graceful: bool = True) -> None:
        """Restart the node: every client connection goes, and only what RabbitMQ keeps on disk survives.

        Durable exchanges and queues and the bindings between them survive; so do persistent messages
        (``delivery_mode=2``) in durable classic queues and every message of a quorum queue, unacknowledged
        ones requeued as redelivered. Transient and exclusive queues, transient exchanges and transient messages
        are gone. Policies, users and vhosts stay. With ``graceful`` (a clean shutdown) clients are sent
        ``connection.close`` 320 first, otherwise their sockets are reset. Clients must reconnect.
        """
        from fakerabbit.broker.restart import restart_broker

        def do() -> None:
            if graceful:
                self._listener.close_all(SHUTDOWN_TEXT)
            else:
                self._listener.abort_all()
            restart_broker(self._broker)

        self._look(do)

    def block(self, reason: str = "low on memory") -> None:
        """Raise a resource alarm (as a memory or disk alarm does) until :meth:`unblock`.

        Open connections that announced the ``connection.blocked`` capability get ``connection.blocked`` with
        ``reason`` at once. Any connection that publishes while the alarm is on, including one opened after this
        call, is blocked as RabbitMQ blocks publishers: it gets ``connection.blocked`` (if it announced the
        capability and was not told yet) and the broker stops reading it, so what it sends next waits.
        :meth:`reset` lifts the alarm too."""
        self._look(lambda: self._listener.alarms.block(reason))

    def unblock(self) -> None:
        """Clear the alarm :meth:`block` raised: blocked connections get ``connection.unblocked`` (those that
        announced the capability) and are read again; what they sent meanwhile is handled in order."""
        self._look(self._listener.alarms.unblock)

    # -- helpers --------------------------------------------------------------------------------------------
    def _select(self, where: ConnectionFilter | None) -> list[ConnectionInfo]:
        infos = list(self._broker.connections.values())
        if where is None:
            return infos
        return [i for i in infos if where(ConnectionSnapshot.of(i))]

    def _vhost(self, name: str) -> Vhost:
        v = self._broker.vhosts.get(name)
        if v is None:
            raise LookupError(f"no vhost {name!r} (vhosts: {', '.join(repr(n) for n in self._broker.vhosts)})")
        return v

    def _vhosts(self, name: str | None) -> list[Vhost]:
        if name is None:
            return [self._broker.vhosts[n] for n in sorted(self._broker.vhosts)]
        return [self._vhost(name)]
