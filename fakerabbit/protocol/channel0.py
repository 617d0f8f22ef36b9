"""Channel 0 (``rabbit_reader:handle_method0/3``): the connection class's methods and the state machine they
drive, ``starting`` (start sent) -> ``tuning`` (tune sent) -> ``opening`` (tune-ok received) -> ``running``
(open-ok sent), then ``closed`` after a client's ``connection.close``. The pieces that need no connection
(server-properties, SASL responses, tune-ok limits) are in :mod:`fakerabbit.protocol.handshake`.

:class:`Channel0` owns what the client said in the handshake (its properties, capabilities and user); the
connection (:class:`HandshakeConnection`) owns the state it drives, the negotiated limits and the timers.
"""

from __future__ import annotations

import logging
from collections.abc import Set
from typing import Any, Protocol

from fakerabbit.broker import errors, texts
from fakerabbit.broker.broker import Broker
from fakerabbit.broker.fields import table_to_python
from fakerabbit.broker.session import ConnectionInfo
from fakerabbit.protocol.codec import arguments_of, base, commands
from fakerabbit.protocol.handshake import check_tune_ok, is_loopback, parse_amqplain, parse_plain

__all__ = ["CHANNEL_MAX", "FRAME_MAX", "HEARTBEAT", "Channel0", "HandshakeConnection"]

log = logging.getLogger("fakerabbit")

#: What the server offers in connection.tune.
CHANNEL_MAX = 2047
FRAME_MAX = 131072
HEARTBEAT = 60


class HandshakeConnection(Protocol):
    """What channel 0 needs of its connection."""

    #: ``header``, ``starting``, ``tuning``, ``opening``, ``running`` or ``closed``.
    state: str

    @property
    def peer(self) -> str: ...

    @property
    def peer_ip(self) -> str: ...

    def tuned(self, channel_max: int, frame_max: int, heartbeat: int) -> None:
        """Tune-ok's limits apply from now on (heartbeats start if ``heartbeat``)."""
        ...

    def opened(self, info: ConnectionInfo, vhost: str) -> None:
        """The broker accepted ``connection.open``: ``info`` is the connection's broker side."""
        ...

    def teardown(self) -> None:
        """Release the broker side (channels closed, exclusive queues dropped)."""
        ...

    def await_socket_close(self) -> None:
        """Close-ok was sent: the client closes the socket (or the closing timeout does)."""
        ...


class _Sender(Protocol):
    def send(self, channel: int, method: base.Frame) -> None: ...


class Channel0:
    """The connection class's methods for one connection."""

    __slots__ = ("_broker", "_conn", "_loopback_users", "_rules", "_send", "capabilities", "client_properties", "user")

    def __init__(self, conn: HandshakeConnection, output: _Sender, broker: Broker, loopback_users: Set[str]) -> None:
        """``loopback_users`` may log in only from a loopback address (RabbitMQ's ``loopback_users``)."""
        self._conn = conn
        self._send = output.send
        self._broker = broker
        self._loopback_users = loopback_users
        self._rules = broker.profile.amqp
        #: ``connection.start-ok``'s client-properties, and the capabilities table in them.
        self.client_properties: dict[str, Any] = {}
        self.capabilities: dict[str, Any] = {}
        #: The authenticated user ("" until start-ok is accepted).
        self.user = ""

    def handle(self, method: base.Frame, ids: tuple[int, int]) -> None:
        """A decoded method on channel 0; errors without method ids get ``ids``."""
        try:
            self._connection_method(method)
        except errors.AMQPError as exc:
            if exc.method_ids == (0, 0) and not isinstance(exc, errors.AccessRefusedHard):
                exc.at(ids)
            raise

    def _connection_method(self, method: base.Frame) -> None:
        conn = self._conn
        state = conn.state
        if isinstance(method, commands.Connection.StartOk) and state == "starting":
            self._start_ok(method)
        elif isinstance(method, commands.Connection.TuneOk) and state == "tuning":
            self._tune_ok(method)
        elif isinstance(method, commands.Connection.Open) and state == "opening":
            self._open(method)
        elif isinstance(method, commands.Connection.Close) and state == "running":
            conn.teardown()
            self._send(0, commands.Connection.CloseOk())
            conn.state = "closed"
            conn.await_socket_close()
        elif isinstance(method, commands.Connection.UpdateSecret) and state == "running":
            self._send(0, commands.Connection.UpdateSecretOk())
        else:
            raise errors.ChannelError(f"unexpected method in connection state {state}")

    def _start_ok(self, m: commands.Connection.StartOk) -> None:
        self.client_properties = table_to_python(arguments_of(m, "client_properties"))
        caps = self.client_properties.get("capabilities")
        self.capabilities = dict(caps) if isinstance(caps, dict) else {}
        mechanism = m.mechanism or ""
        response = m.response if isinstance(m.response, bytes) else str(m.response or "").encode()
        creds: tuple[str, str | None] | None
        if mechanism == "PLAIN":
            creds = parse_plain(response)
        elif mechanism == "AMQPLAIN":
            creds = parse_amqplain(response)
        else:
            raise errors.CommandInvalid(f"unknown authentication mechanism '{mechanism}'")
        if creds is None:
            raise errors.SyntaxError_(f"{mechanism} response invalid")
        user, password = creds
        if password is None or not self._broker.auth.authenticate(user, password):
            raise errors.AccessRefusedHard(texts.login_refused(mechanism))
        conn = self._conn
        if user in self._loopback_users and not is_loopback(conn.peer_ip):
            # rabbit_access_control:check_user_loopback: refused like a bad password (the log would say "user
            # 'guest' can only connect via localhost")
            log.warning("connection %s: user '%s' can only connect via localhost", conn.peer, user)
            raise errors.AccessRefusedHard(texts.login_refused(mechanism))
        self.user = user
        self._send(0, commands.Connection.Tune(channel_max=CHANNEL_MAX, frame_max=FRAME_MAX, heartbeat=HEARTBEAT))
        conn.state = "tuning"

    def _tune_ok(self, m: commands.Connection.TuneOk) -> None:
        frame_max, channel_max, heartbeat = m.frame_max or 0, m.channel_max or 0, m.heartbeat or 0
        check_tune_ok(frame_max, channel_max, CHANNEL_MAX, FRAME_MAX, self._rules.frame_min_size)
        self._conn.state = "opening"
        self._conn.tuned(channel_max, frame_max, heartbeat)

    def _open(self, m: commands.Connection.Open) -> None:
        vhost = m.virtual_host or ""
        conn = self._conn
        info = self._broker.open_connection(self.user, vhost, peer=conn.peer, client_properties=self.client_properties)
        conn.opened(info, vhost)
        self._send(0, commands.Connection.OpenOk())
        conn.state = "running"
