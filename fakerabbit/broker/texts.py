"""The texts fakerabbit says in more than one place, each written once: RabbitMQ's words, byte for byte (reply
texts of channel and connection errors, management answers), and fakerabbit's own where two modules say the same.

A text used in one place stays there, next to the check that raises it; one that a second place needs moves here.
A leaf: every layer may import it.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "DEFAULT_EXCHANGE",
    "MALFORMED_SHORTSTR",
    "MANAGEMENT_CLOSE",
    "NOT_AUTHORISED",
    "NOT_TRANSACTIONAL",
    "NO_PREVIOUS_QUEUE",
    "PARAMETER_DOES_NOT_EXIST",
    "SHUTDOWN",
    "UNIMPLEMENTED_METHOD",
    "apply_to_unrecognised",
    "channel_max_reached",
    "dead_letter_exchange_missing",
    "foreign_queue_arg",
    "invalid_dlx_type",
    "invalid_headers_table",
    "login_refused",
    "unknown_exchange_type",
]

# -- AMQP reply texts ---------------------------------------------------------------------------------------------
#: 403: a declare, delete or binding of the default exchange (``rabbit_channel:check_not_default_exchange/1``).
DEFAULT_EXCHANGE: Final = "operation not permitted on the default exchange"
#: 503: a method RabbitMQ does not implement, or not in that state (``rabbit_channel``).
UNIMPLEMENTED_METHOD: Final = "unimplemented method"
#: 404: an empty queue name on a channel that declared no queue yet (``rabbit_channel:expand_queue_name_shortcut``).
NO_PREVIOUS_QUEUE: Final = "no previously declared queue"
#: 406: ``tx.commit`` / ``tx.rollback`` without ``tx.select``.
NOT_TRANSACTIONAL: Final = "channel is not transactional"
#: 501: a short string that is not UTF-8 (``rabbit_binary_parser``).
MALFORMED_SHORTSTR: Final = "Malformed UTF-8 in shortstr"
#: 320: what a client is told when the node stops (fakerabbit: when the broker is reset under it).
SHUTDOWN: Final = "broker forced connection closure with reason 'shutdown'"
#: 320: a connection closed through the management API without an ``X-Reason`` header.
MANAGEMENT_CLOSE: Final = "Closed via management plugin"


def login_refused(mechanism: str) -> str:
    """403 (connection): wrong password, unknown user, or a loopback-only user from afar."""
    return f"Login was refused using authentication mechanism {mechanism}. For details see the broker logfile."


def channel_max_reached(opened: int, channel_max: int) -> str:
    """530: a ``channel.open`` beyond the negotiated ``channel_max``."""
    return f"number of channels opened ({opened}) has reached the negotiated channel_max ({channel_max})"


def unknown_exchange_type(name: str) -> str:
    """``rabbit_exchange:check_type/1`` for a name that is no atom of the node (the AMQP and the HTTP answer)."""
    return f"unknown exchange type '{name}'"


def invalid_dlx_type(type_name: str, resource: str) -> str:
    """406: ``x-dead-letter-exchange`` that is not a string (``resource``: ``rabbit_misc:rs/1`` of the queue)."""
    return f"invalid type '{type_name}' for arg 'x-dead-letter-exchange' in {resource}"


def foreign_queue_arg(key: str, resource: str, queue_type: str) -> str:
    """406: an argument of another queue type (a declare's, or a consume's ``x-stream-offset``)."""
    return f"invalid arg '{key}' for {resource} of queue type rabbit_{queue_type}_queue"


# -- management API -------------------------------------------------------------------------------------------
#: 401: the user may not see or change that object.
NOT_AUTHORISED: Final = "User not authorised to access object"
#: 404 (``rabbitmqctl clear_policy``): no such policy.
PARAMETER_DOES_NOT_EXIST: Final = "Parameter does not exist"


def apply_to_unrecognised(apply_to: object) -> str:
    """A policy's ``apply-to`` that is none of the values before queue-type policies (3.x)."""
    return f"apply-to '{apply_to}' unrecognised; should be 'queues', 'exchanges' or 'all'"


# -- fakerabbit's own ---------------------------------------------------------------------------------------------
def dead_letter_exchange_missing(name: str) -> str:
    """Why a dead letter was dropped (at-most-once) or held (at-least-once): the queue's DLX does not exist."""
    return f"dead-letter exchange '{name}' missing"


def invalid_headers_table(problem: object) -> str:
    """A property block whose ``headers`` table does not decode."""
    return f"invalid headers table: {problem}"
