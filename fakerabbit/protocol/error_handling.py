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

The silent-close delay is :data:`fakerabbit.protocol.connection.SILENT_CLOSE_DELAY`: the connection owns the
socket and its timers; :class:`ErrorHandler` decides, through :class:`FailingConnection`, what to do with them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Protocol

from fakerabbit.broker import errors
from fakerabbit.broker.erlterm import text_octets
from fakerabbit.protocol import framing
from fakerabbit.protocol.codec import commands

__all__ = ["CLOSING_TIMEOUT", "PROBLEM_CODES", "ErrorHandler", "FailingConnection"]

log = logging.getLogger("fakerabbit")

#: rabbit_reader's ?CLOSING_TIMEOUT: the longest the broker waits for the client to close after a close.
CLOSING_TIMEOUT = 30.0

#: Reply codes recorded as problems: the client broke the protocol (501-505) or asked for something the fake
#: does not do (540 NOT_IMPLEMENTED, 541 INTERNAL_ERROR).
PROBLEM_CODES = frozenset({501, 502, 503, 504, 505, 540, 541})

_HANDSHAKE_STATES = ("starting", "tuning")


class FailingConnection(Protocol):
    """What error handling needs of its connection: its state and the ways it can end."""

    @property
    def state(self) -> str: ...

    @property
    def closed(self) -> bool: ...

    @property
    def peer(self) -> str: ...

    @property
    def capabilities(self) -> Mapping[str, object]: ...

    def await_close_ok(self) -> None:
        """A close was sent: release the broker side and wait for the client's close-ok (or a timeout)."""
        ...

    def close_later(self, *, close_sent: bool = False) -> None:
        """Stop reading and close the socket after the silent-close delay."""
        ...

    def abort(self, *, graceful: bool = False) -> None: ...


class _Writer(Protocol):
    def write(self, data: bytes) -> None: ...


class ErrorHandler:
    """One connection's error handling; it remembers whether it has logged an internal error already."""

    __slots__ = ("_conn", "_logged_internal_error", "_report", "_unicode", "_write")

    def __init__(
        self, conn: FailingConnection, output: _Writer, report_problem: Callable[[str], object], *, unicode: bool
    ) -> None:
        """``unicode``: reply texts go out as 3.12+ sends them (see :func:`~fakerabbit.broker.erlterm.text_octets`)."""
        self._conn = conn
        self._write = output.write
        self._report = report_problem
        self._unicode = unicode
        self._logged_internal_error = False

    def handle_exception(self, exc: errors.AMQPError) -> None:
        """``rabbit_reader:handle_exception/3``: what an error does depends on the connection state."""
        conn = self._conn
        state = conn.state
        if state == "closed" or conn.closed:
            return
        if state in _HANDSHAKE_STATES:
            if state == "starting" and isinstance(exc, errors.AccessRefusedHard):
                if conn.capabilities.get("authentication_failure_close") is True:
                    self.send_close(exc)
                self.silent_close(exc.reply_text, report=False)
            else:
                self.silent_close(exc.reply_text)
            return
        self.send_close(exc)
        conn.await_close_ok()

    def send_close(self, exc: errors.AMQPError) -> None:
        class_id, method_id = exc.method_ids
        if exc.code in PROBLEM_CODES:
            method = commands.INDEX_MAPPING.get((class_id << 16) | method_id) if class_id else None
            where = f" (in reply to {getattr(method, 'name', method)})" if method is not None else ""
            self._report(f"connection {self._conn.peer or '?'} closed with {exc.reply_text}{where}")
        text = text_octets(exc.reply_text, unicode=self._unicode)
        self._write(framing.encode_close(0, exc.code, text, class_id, method_id))

    def fatal_frame_error(self, text: str) -> None:
        """``rabbit_reader:fatal_frame_error/5``: report (if opening or running), then close after the
        silent-close delay whatever the client does."""
        conn = self._conn
        if conn.state in ("opening", "running"):
            self.send_close(errors.FrameError(text))
            conn.close_later(close_sent=True)
        else:
            self._report(f"connection {conn.peer or '?'}: FRAME_ERROR - {text}")
            conn.close_later()

    def silent_close(self, why: str, *, report: bool = True) -> None:
        """A handshake error: no close frame; the socket goes after the silent-close delay."""
        if report:
            self._report(f"connection {self._conn.peer or '?'} refused during the handshake: {why}")
        self._conn.close_later()

    def crash(self, why: str) -> None:
        """What RabbitMQ's reader does when it crashes: the socket closes at once, without a close frame."""
        self._report(f"connection {self._conn.peer or '?'} dropped (RabbitMQ's reader would crash): {why}")
        self._conn.abort(graceful=True)

    def internal_error(self, exc: Exception) -> None:
        """A bug met outside frame handling: logged, and the connection is closed with 541."""
        self.log_internal_error("in a connection", exc)
        self.handle_exception(errors.InternalError(""))

    def log_internal_error(self, what: str, exc: BaseException) -> None:
        """A bug met while serving this connection: recorded as a problem, logged as one line (the traceback at
        DEBUG level), and only the first time for a connection: whatever a client sends costs at most a line of
        log."""
        self._report(f"fakerabbit internal error: {exc!r}")
        if self._logged_internal_error:
            return
        self._logged_internal_error = True
        log.error("internal error %s from %s: %r (traceback at DEBUG level)", what, self._conn.peer or "?", exc)
        log.debug("internal error %s", what, exc_info=exc)
