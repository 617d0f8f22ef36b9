"""How an error ends a connection (``rabbit_reader:handle_exception/3``). It depends on the connection state,
exactly as in RabbitMQ 3.10:

* running or opening: ``connection.close`` with the code, text and offending method ids, then wait for
  ``close-ok`` (at most the heartbeat interval, capped at 30 s);
* during the handshake: no frame at all, the socket is closed after RabbitMQ's 3 s "silent close" delay —
  except a refused login by a client with the ``authentication_failure_close`` capability, which is told 403;
* a frame that is too large or has a bad frame-end octet: the close frame (if running), then the socket is
  closed after 3 s whatever the client does;
* a method id the framing does not know, or a malformed field table in method arguments: RabbitMQ's reader
  crashes, so the socket closes at once without a close frame.

The silent-close delay is :data:`fakerabbit.protocol.connection.SILENT_CLOSE_DELAY`.

These functions are :class:`~fakerabbit.protocol.connection.AMQPConnection`'s methods.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from fakerabbit.broker import errors
from fakerabbit.protocol import framing
from fakerabbit.protocol.codec import commands
from fakerabbit.protocol.erlfmt import text_octets

if TYPE_CHECKING:
    from fakerabbit.protocol.connection import AMQPConnection

log = logging.getLogger("fakerabbit")

#: rabbit_reader's ?CLOSING_TIMEOUT: the longest the broker waits for the client to close after a close.
CLOSING_TIMEOUT = 30.0

#: Reply codes recorded as problems: the client broke the protocol (501-505) or asked for something the fake
#: does not do (540 NOT_IMPLEMENTED, 541 INTERNAL_ERROR).
PROBLEM_CODES = frozenset({501, 502, 503, 504, 505, 540, 541})

_HANDSHAKE_STATES = ("starting", "tuning")


def handle_exception(self: AMQPConnection, exc: errors.AMQPError) -> None:
    """``rabbit_reader:handle_exception/3``: what an error does depends on the connection state."""
    if self.state == "closed" or self.closed:
        return
    if self.state in _HANDSHAKE_STATES:
        if self.state == "starting" and isinstance(exc, errors.AccessRefusedHard):
            if self.capabilities.get("authentication_failure_close") is True:
                self._send_close(exc)
            self._silent_close(exc.reply_text, report=False)
        else:
            self._silent_close(exc.reply_text)
        return
    self._send_close(exc)
    self.state = "closed"
    self._teardown()
    timeout = self.heartbeat if 0 < self.heartbeat < CLOSING_TIMEOUT else CLOSING_TIMEOUT
    self._set_timer(timeout, lambda: self.abort(graceful=True))


def _send_close(self: AMQPConnection, exc: errors.AMQPError) -> None:
    class_id, method_id = exc.method_ids
    if exc.code in PROBLEM_CODES:
        method = commands.INDEX_MAPPING.get((class_id << 16) | method_id) if class_id else None
        where = f" (in reply to {getattr(method, 'name', method)})" if method is not None else ""
        self.broker.report_problem(f"connection {self.peer or '?'} closed with {exc.reply_text}{where}")
    self.write(
        framing.encode_close(
            0, exc.code, text_octets(exc.reply_text, unicode=self.rules.unicode_texts), class_id, method_id
        )
    )


def _fatal_frame_error(self: AMQPConnection, text: str) -> None:
    """rabbit_reader:fatal_frame_error/5: report (if opening or running), then close after the silent-close
    delay whatever the client does."""
    if self.state in ("opening", "running"):
        self._send_close(errors.FrameError(text))
        self.state = "closed"
    else:
        self.broker.report_problem(f"connection {self.peer or '?'}: FRAME_ERROR - {text}")
    self._close_later()


def _silent_close(self: AMQPConnection, why: str, *, report: bool = True) -> None:
    """A handshake error: no close frame; the socket goes after the silent-close delay."""
    if report:
        self.broker.report_problem(f"connection {self.peer or '?'} refused during the handshake: {why}")
    self._close_later()


def _crash(self: AMQPConnection, why: str) -> None:
    """What RabbitMQ's reader does when it crashes: the socket closes at once, without a close frame."""
    self.broker.report_problem(f"connection {self.peer or '?'} dropped (RabbitMQ's reader would crash): {why}")
    self.abort(graceful=True)


def close_by_server(self: AMQPConnection, code: int, text: str) -> None:
    """Fault injection / management API: close this connection with connection.close."""
    exc = errors.ConnectionForced(text)
    exc.code = code
    if self.state in ("running", "opening"):
        self.handle_exception(exc)
    else:
        self.abort(graceful=True)
    self.server.flush()


def _internal_error(self: AMQPConnection, exc: Exception) -> None:
    self.log_internal_error("in a connection", exc)
    self.handle_exception(errors.InternalError(""))


def log_internal_error(self: AMQPConnection, what: str, exc: BaseException) -> None:
    """A bug met while serving this connection: recorded as a problem, logged as one line (the traceback at DEBUG
    level), and only the first time for a connection: whatever a client sends costs at most a line of log."""
    self.broker.report_problem(f"fakerabbit internal error: {exc!r}")
    if self._logged_internal_error:
        return
    self._logged_internal_error = True
    log.error("internal error %s from %s: %r (traceback at DEBUG level)", what, self.peer or "?", exc)
    log.debug("internal error %s", what, exc_info=exc)
