"""A message as the broker holds it: the client's raw property bytes and body, plus routing and death history."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Final

from fakerabbit.broker import errors, texts
from fakerabbit.broker.fields import Field, FieldError, Table, decode_field, encode_table, type_name
from fakerabbit.broker.properties import PropertiesError, RawProperties


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


#: Blocks up to this size have their sorted form cached (a test suite publishes the same few blocks over and over).
_SORT_CACHE_BLOCK_MAX = 512
_SORT_CACHE_ENTRIES = 4096
#: raw block -> the raw block with its headers sorted and de-duplicated (the same bytes when they already were)
_sorted_blocks: dict[bytes, bytes] = {}


def _key_bytes(key: str) -> bytes:
    return key.encode("utf-8", "surrogateescape")


def _headers_table_at(raw: bytes) -> int:
    """Where the headers table (its 32-bit length) starts in a valid block that has one."""
    pos = 2
    word = (raw[0] << 8) | raw[1]
    flags = word
    while word & 1:  # continuation flags words (always zero beyond bit 0 in a valid block)
        word = (raw[pos] << 8) | raw[pos + 1]
        pos += 2
    if flags & 0x8000:  # content_type
        pos += 1 + raw[pos]
    if flags & 0x4000:  # content_encoding
        pos += 1 + raw[pos]
    return pos


def _wire_entries(raw: bytes, start: int) -> list[tuple[str, Field]]:
    """The headers table at ``start`` as (key, field) pairs in wire order, duplicate keys included."""
    end = start + 4 + int.from_bytes(raw[start : start + 4], "big")
    pos = start + 4
    out: list[tuple[str, Field]] = []
    while pos < end:
        key_end = pos + 1 + raw[pos]
        key = str(raw[pos + 1 : key_end], "utf-8", "surrogateescape")
        field, pos = decode_field(raw, key_end)
        out.append((key, field))
    return out


def _sort_headers_raw(props: RawProperties, headers: Table) -> bytes:
    raw = props.raw
    keys = [_key_bytes(k) for k in headers]
    if all(a < b for a, b in pairwise(keys)):
        # Sorted; unique too unless the wire had duplicates (the decoded dict keeps one of each): the table
        # codec round-trips exactly, so the wire table equals the dict's encoding only without duplicates.
        start = _headers_table_at(raw)
        encoded = encode_table(headers)
        if raw[start : start + len(encoded)] == encoded:  # the length prefix matched too
            return raw
    first: Table = {}
    try:
        for key, field in _wire_entries(raw, _headers_table_at(raw)):
            first.setdefault(key, field)  # lists:usort keeps the first of equal keys
    except FieldError as exc:  # pragma: no cover - the block was validated when it was decoded
        raise PropertiesError(texts.invalid_headers_table(exc)) from None
    ordered = dict(sorted(first.items(), key=lambda kv: _key_bytes(kv[0])))
    return props.replace(headers=ordered).raw


def sorted_headers(props: RawProperties) -> RawProperties:
    """``props`` with its top-level headers sorted by key (byte order) and duplicate keys removed, the first
    kept: what RabbitMQ 3.13+ delivers (``mc_amqpl:protocol_state/2``: ``lists:usort`` on the keys). Nested
    tables are left as they are; a block whose headers already are sorted and unique is returned unchanged
    (the same object), as is one with no or an empty headers table."""
    headers = props.headers
    if not headers:
        return props
    raw = props.raw
    done = _sorted_blocks.get(raw)
    if done is None:
        done = _sort_headers_raw(props, headers)
        if len(raw) <= _SORT_CACHE_BLOCK_MAX:
            if len(_sorted_blocks) >= _SORT_CACHE_ENTRIES:
                _sorted_blocks.clear()
            _sorted_blocks[raw] = done
    return props if done is raw or done == raw else RawProperties(done)


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
        sort_headers: bool = False,
    ) -> Message:
        """Build a message from a ``basic.publish``: read CC/BCC, strip BCC from the headers.

        With ``sort_headers`` (3.13+ profiles) the headers are first sorted and de-duplicated
        (:func:`sorted_headers`), once, so that every delivery, get-ok and return carries them that way."""
        if sort_headers:
            props = sorted_headers(props)
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
