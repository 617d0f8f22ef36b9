"""A message as the broker holds it: the client's raw property bytes and body, plus routing and death history."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from fakerabbit.broker import errors
from fakerabbit.broker.fields import Field, Table, type_name
from fakerabbit.broker.properties import RawProperties


@dataclass(slots=True)
class Death:
    """One (queue, reason) entry of a message's death history (rendered as an ``x-death`` table)."""

    queue: str
    reason: str
    count: int
    time_s: int
    exchange: str
    routing_keys: list[str]
    original_expiration: str | None = None


#: What ``bcc`` and ``deaths`` hold until a message has BCC keys or a death history: one shared empty tuple, so
#: a plain message carries no empty containers (fewer objects for the memory and the garbage collector).
_NONE: Final[tuple[()]] = ()


def _header_routes(headers: Table | None, name: str) -> list[str]:
    if not headers or name not in headers:
        return []
    tag, value = headers[name]
    if tag != "A":
        raise errors.PreconditionFailed(f'invalid message: {{unacceptable_type_in_header,"{name}",{type_name(tag)}}}')
    return [v for (t, v) in value if t == "S"]


class Message:
    """A published message.

    ``exchange`` and ``routing_keys`` are what the message was last published or dead-lettered with:
    ``routing_keys[0]`` is the routing key; CC and BCC keys follow. ``bcc`` remembers the BCC keys (stripped from
    the headers at publish) so that x-death ``routing-keys`` can leave them out.

    ``routing_keys`` is a tuple, and ``bcc`` and ``deaths`` are sequences that are replaced, never changed in
    place: a message is on the hot path of every publish, and a million of them may be queued at once.
    """

    __slots__ = (
        "bcc",
        "body",
        "deaths",
        "delivery_count",
        "exchange",
        "first_death",
        "id",
        "props",
        "routing_keys",
        "ttl_ms",
    )

    def __init__(
        self,
        exchange: str,
        routing_keys: Sequence[str],
        props: RawProperties,
        body: bytes,
        *,
        bcc: Sequence[str] | None = None,
        ttl_ms: int | None = None,
        msg_id: int = 0,
    ) -> None:
        self.exchange = exchange
        self.routing_keys: tuple[str, ...] = tuple(routing_keys)  # no copy when it is a tuple already
        self.bcc: Sequence[str] = bcc or _NONE
        self.props = props
        self.body = body
        self.deaths: Sequence[Death] = _NONE
        self.first_death: tuple[str, str, str] | None = None  # (reason, queue, exchange)
        self.ttl_ms = ttl_ms
        self.id = msg_id
        #: the ``delivery_count`` annotation a 4.3 dead-lettered copy carries (failed deliveries where it died;
        #: 0: none). The queue it lands in counts on from it and delivers it as redelivered.
        self.delivery_count = 0

    @classmethod
    def from_publish(
        cls,
        exchange: str,
        routing_key: str,
        props: RawProperties,
        body: bytes,
        *,
        ttl_ms: int | None,
        msg_id: int,
    ) -> Message:
        """Build a message from a ``basic.publish``: read CC/BCC, strip BCC from the headers."""
        headers = props.headers
        if not headers:
            return cls(exchange, (routing_key,), props, body, ttl_ms=ttl_ms, msg_id=msg_id)
        cc = _header_routes(headers, "CC")
        bcc = _header_routes(headers, "BCC")
        if "BCC" in headers:
            stripped = {k: v for k, v in headers.items() if k != "BCC"}
            props = props.replace(headers=stripped)
        return cls(exchange, (routing_key, *cc, *bcc), props, body, bcc=bcc, ttl_ms=ttl_ms, msg_id=msg_id)

    @property
    def routing_key(self) -> str:
        return self.routing_keys[0]

    @property
    def size(self) -> int:
        return len(self.body)

    @property
    def priority(self) -> int:
        return self.props.priority or 0

    @property
    def persistent(self) -> bool:
        return self.props.delivery_mode == 2

    def headers(self) -> Table:
        return self.props.headers or {}

    def header(self, name: str) -> Field | None:
        h = self.props.headers
        return None if h is None else h.get(name)
