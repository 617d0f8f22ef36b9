"""A stream's log as osiris stores it: messages (:class:`StreamEntry`) in chunks in segments, and the sizes the
fake estimates for them (see :mod:`fakerabbit.broker.stream`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from fakerabbit.broker.message import Message, sorted_headers
from fakerabbit.broker.properties import RawProperties
from fakerabbit.broker.queue import Entry

__all__ = [
    "CHUNK_HEADER",
    "DEFAULT_FILTER_SIZE",
    "DEFAULT_MAX_SEGMENT_BYTES",
    "MAX_SEGMENT_CHUNKS",
    "RECORD_OVERHEAD",
    "RETENTION_EVAL_INTERVAL_MS",
    "SEGMENT_HEADER",
    "TRACKING_CHUNK",
    "Chunk",
    "Segment",
    "StreamConfig",
    "StreamEntry",
]

#: osiris' segment file header.
SEGMENT_HEADER: Final = 8
#: osiris' chunk header.
CHUNK_HEADER: Final = 56
#: A message's share of a chunk beyond its body, property block, exchange and routing key: the record header
#: and RabbitMQ's AMQP 1.0 encoding (measured: ~100 bytes on 4.x, ~90 on 3.10.8).
RECORD_OVERHEAD: Final = 100
#: The tracking-snapshot chunk a new segment starts with (measured: ~107 bytes on 4.3.6, ~105 on 3.10.8).
TRACKING_CHUNK: Final = 100
#: osiris' defaults: ``max_segment_size_bytes`` and ``max_segment_size_chunks``.
DEFAULT_MAX_SEGMENT_BYTES: Final = 500_000_000
MAX_SEGMENT_CHUNKS: Final = 256_000
#: osiris' default Bloom filter size (bytes) of a chunk with filter values.
DEFAULT_FILTER_SIZE: Final = 16
#: ``retention_eval_interval``: how often osiris re-evaluates an age limit (1 hour).
RETENTION_EVAL_INTERVAL_MS: Final = 3_600_000


class StreamEntry(Entry):
    """A message in a stream: its offset, chunk, stored properties and index in the log."""

    __slots__ = ("_delivered", "chunk", "index", "offset", "stored")

    def __init__(self, msg: Message, stored: RawProperties, offset: int, index: int, chunk: Chunk) -> None:
        super().__init__(msg, None, 0)
        self.stored = stored
        self.offset = offset
        self.index = index
        self.chunk = chunk
        self._delivered: bytes | None = None

    def delivery_props(self) -> bytes:
        """The stored properties with ``x-stream-offset`` (long) added among the sorted headers."""
        raw = self._delivered
        if raw is None:
            headers = dict(self.stored.headers or {})
            headers.pop("x-stream-offset", None)
            headers["x-stream-offset"] = ("l", self.offset)
            props = sorted_headers(self.stored.replace(headers=headers))
            raw = self._delivered = props.raw
        return raw


class Chunk:
    __slots__ = ("entries", "id", "open", "size", "timestamp", "user", "values", "writer")

    def __init__(self, chunk_id: int, timestamp: int, writer: object, *, user: bool = True) -> None:
        self.id = chunk_id
        self.timestamp = timestamp
        self.writer = writer
        self.user = user
        self.open = user
        self.entries: list[StreamEntry] = []
        #: filter values of its messages ("" for a message without one)
        self.values: set[str] = set()
        self.size = CHUNK_HEADER if user else TRACKING_CHUNK


class Segment:
    __slots__ = ("chunks", "first", "size")

    def __init__(self, first: int) -> None:
        self.first = first
        self.chunks: list[Chunk] = []
        self.size = SEGMENT_HEADER

    @property
    def last_timestamp(self) -> int | None:
        return self.chunks[-1].timestamp if self.chunks else None


@dataclass(frozen=True, slots=True)
class StreamConfig:
    """A stream's osiris configuration: retention and segment size (policy over argument, as
    ``rabbit_stream_queue:update_stream_conf/2``)."""

    max_bytes: int | None = None
    max_age_ms: int | None = None
    max_segment_bytes: int = DEFAULT_MAX_SEGMENT_BYTES
    filter_size: int = DEFAULT_FILTER_SIZE
