"""Channel 0 (``rabbit_reader:handle_method0/3``): the connection class's methods and the state machine they
drive, ``starting`` (start sent) -> ``tuning`` (tune sent) -> ``opening`` (tune-ok received) -> ``running``
(open-ok sent), then ``closed`` after a client's ``connection.close``. The pieces that need no connection
(server-properties, SASL responses, tune-ok limits) are in :mod:`fakerabbit.protocol.handshake`.

These functions are :class:`~fakerabbit.protocol.connection.AMQPConnection`'s methods.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from fakerabbit.broker import errors, texts
from fakerabbit.protocol import framing
from fakerabbit.protocol.codec import MethodDecodeError, base, commands, decode_args
from fakerabbit.protocol.error_handling import CLOSING_TIMEOUT
from fakerabbit.protocol.handshake import check_tune_ok, is_loopback, parse_amqplain, parse_plain

if TYPE_CHECKING:
    from fakerabbit.protocol.connection import AMQPConnection

log = logging.getLogger("fakerabbit")

#: What the server offers in connection.tune.
CHANNEL_MAX = 2047
FRAME_MAX = 131072
HEARTBEAT = 60


def _method0(self: AMQPConnection, payload: bytes) -> None:
    """``rabbit_reader:handle_method0/3``: decode failures are internal errors here (541, ids 0 0)."""
    cls = framing.method_class(payload)
    index = framing.method_index(payload)
    ids = (index >> 16, index & 0xFFFF)
    try:
        method = decode_args(cls, payload[4:])
    except MethodDecodeError as exc:
        # handle_method0 catches what decoding throws: a field table that does not parse is a crash inside
        # its try (541 below), unlike on other channels where it kills the reader
        if exc.kind == "utf8":
            raise errors.FrameError(texts.MALFORMED_SHORTSTR).at(ids) from None
        raise errors.InternalError("") from None
    self._flush_pending()  # the channels get through what they were sent before this
    if self._channel_failure is not None and isinstance(method, commands.Connection.Close):
        # the reader shuts the channels down and waits for them: a channel's hard error is what the client gets,
        # not close-ok (any other channel-0 method is handled first: its own error wins)
        failure, self._channel_failure = self._channel_failure, None
        raise failure
    try:
        self._connection_method(method)
    except errors.AMQPError as exc:
        if exc.method_ids == (0, 0) and not isinstance(exc, errors.AccessRefusedHard):
            exc.at(ids)
        raise


def _connection_method(self: AMQPConnection, method: base.Frame) -> None:
    state = self.state
    if isinstance(method, commands.Connection.StartOk) and state == "starting":
        self._start_ok(method)
    elif isinstance(method, commands.Connection.TuneOk) and state == "tuning":
        self._tune_ok(method)
    elif isinstance(method, commands.Connection.Open) and state == "opening":
        self._open(method)
    elif isinstance(method, commands.Connection.Close) and state == "running":
        self._teardown()
        self.send(0, commands.Connection.CloseOk())
        self.state = "closed"
        self._set_timer(CLOSING_TIMEOUT, lambda: self.abort(graceful=True))
    elif isinstance(method, commands.Connection.UpdateSecret) and state == "running":
        self.send(0, commands.Connection.UpdateSecretOk())
    else:
        raise errors.ChannelError(f"unexpected method in connection state {state}")


def _start_ok(self: AMQPConnection, m: commands.Connection.StartOk) -> None:
    props = m.client_properties if isinstance(m.client_properties, dict) else {}
    self.client_properties = dict(props)
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
    if password is None or not self.broker.auth.authenticate(user, password):
        raise errors.AccessRefusedHard(texts.login_refused(mechanism))
    if user in self.server.loopback_users and not is_loopback(self.peer_ip):
        # rabbit_access_control:check_user_loopback: refused like a bad password (the log would say "user
        # 'guest' can only connect via localhost")
        log.warning("connection %s: user '%s' can only connect via localhost", self.peer, user)
        raise errors.AccessRefusedHard(texts.login_refused(mechanism))
    self.user = user
    self.send(0, commands.Connection.Tune(channel_max=CHANNEL_MAX, frame_max=FRAME_MAX, heartbeat=HEARTBEAT))
    self.state = "tuning"


def _tune_ok(self: AMQPConnection, m: commands.Connection.TuneOk) -> None:
    frame_max, channel_max, heartbeat = m.frame_max or 0, m.channel_max or 0, m.heartbeat or 0
    check_tune_ok(frame_max, channel_max, CHANNEL_MAX, FRAME_MAX, self.rules.frame_min_size)
    self.frame_max, self.channel_max, self.heartbeat = frame_max, channel_max, heartbeat
    self.reader.frame_max = frame_max
    self.state = "opening"
    if heartbeat:
        self._schedule_heartbeat()


def _open(self: AMQPConnection, m: commands.Connection.Open) -> None:
    vhost = m.virtual_host or ""
    self.info = self.broker.open_connection(self.user, vhost, peer=self.peer, client_properties=self.client_properties)
    self.vhost = vhost
    self.info.close = self.close_by_server
    self.info.drop = self.abort
    self.send(0, commands.Connection.OpenOk())
    self.state = "running"
    if self._timer is not None:
        self._timer.cancel()
        self._timer = None
