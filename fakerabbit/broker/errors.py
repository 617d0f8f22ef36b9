"""AMQP errors raised by the broker, with RabbitMQ's reply codes and texts.

The broker raises these; only the protocol layer turns them into ``channel.close`` (soft errors) or
``connection.close`` (hard errors), filling in the class and method ids of the offending frame.
The reply text is always ``"<NAME> - <explanation>"`` as RabbitMQ formats it; the protocol layer truncates it
to 255 bytes.
"""

from __future__ import annotations


class AMQPError(Exception):
    """Base class: ``code`` and ``name`` are RabbitMQ's reply code and constant name."""

    code: int = 541
    name: str = "INTERNAL_ERROR"
    hard: bool = True

    def __init__(self, explanation: str) -> None:
        super().__init__(explanation)
        self.explanation = explanation
        self.method_ids: tuple[int, int] = (0, 0)

    def at(self, method_ids: tuple[int, int]) -> AMQPError:
        """Record the class and method ids of the frame that caused the error (for the close frame)."""
        self.method_ids = method_ids
        return self

    @property
    def reply_text(self) -> str:
        """``NAME - explanation``; just ``NAME`` without one (RabbitMQ's ``INTERNAL_ERROR`` after a crash)."""
        return f"{self.name} - {self.explanation}" if self.explanation else self.name


class SoftError(AMQPError):
    """A channel error: closes the channel."""

    hard = False


class HardError(AMQPError):
    """A connection error: closes the connection."""

    hard = True


class AccessRefused(SoftError):
    code, name = 403, "ACCESS_REFUSED"


class NotFound(SoftError):
    code, name = 404, "NOT_FOUND"


class ResourceLocked(SoftError):
    code, name = 405, "RESOURCE_LOCKED"


class PreconditionFailed(SoftError):
    code, name = 406, "PRECONDITION_FAILED"


class ConnectionForced(HardError):
    code, name = 320, "CONNECTION_FORCED"


class InvalidPath(HardError):
    code, name = 402, "INVALID_PATH"


class FrameError(HardError):
    code, name = 501, "FRAME_ERROR"


class SyntaxError_(HardError):
    code, name = 502, "SYNTAX_ERROR"


class CommandInvalid(HardError):
    code, name = 503, "COMMAND_INVALID"


class ChannelError(HardError):
    code, name = 504, "CHANNEL_ERROR"


class UnexpectedFrame(HardError):
    code, name = 505, "UNEXPECTED_FRAME"


class ResourceError(HardError):
    code, name = 506, "RESOURCE_ERROR"


class NotAllowed(HardError):
    code, name = 530, "NOT_ALLOWED"


class NotImplemented_(HardError):
    code, name = 540, "NOT_IMPLEMENTED"


class InternalError(HardError):
    code, name = 541, "INTERNAL_ERROR"


class AccessRefusedHard(HardError):
    """403 as a connection error (authentication failure, vhost access refused)."""

    code, name = 403, "ACCESS_REFUSED"


def rs_queue(name: str, vhost: str) -> str:
    """RabbitMQ's ``rabbit_misc:rs/1`` rendering of a queue resource."""
    return f"queue '{name}' in vhost '{vhost}'"


def rs_exchange(name: str, vhost: str) -> str:
    """RabbitMQ's ``rabbit_misc:rs/1`` rendering of an exchange resource."""
    return f"exchange '{name}' in vhost '{vhost}'"


def locked_queue(name: str, vhost: str) -> str:
    """Text of the 405 RESOURCE_LOCKED error for another connection's exclusive queue."""
    return (
        f"cannot obtain exclusive access to locked {rs_queue(name, vhost)}. It could be originally declared "
        "on another connection or the exclusive property value does not match that of the original declaration."
    )
