"""Stream queues (``x-queue-type: stream``) as RabbitMQ exposes them over AMQP 0-9-1 (``rabbit_stream_queue``).

A stream is an append-only log: every message gets an offset (0, 1, 2, …) and stays until retention removes it;
consumers read it from where they asked (``x-stream-offset``: ``first``, ``last``, ``next``, an offset, a
timestamp or an interval such as ``1h``) and their acks only give them credit for more (``basic.qos`` is their
credit, and is required). Nothing is ever requeued or redelivered. Behaviour checked on the live 3.10.8, 4.0.5 and
4.3.6 and in RabbitMQ's and osiris' source: ``notes/rabbitmq-streams-observed.md``.

The log is modelled the way osiris stores it, because clients see its granularity:

* **Chunks.** The osiris writer appends what it has received as one chunk; ``last`` starts at the first message of the
  last chunk, a timestamp finds the first chunk written at or after it, and filtering selects whole chunks.
  The fake makes a chunk of the unconfirmed messages one channel publishes in a row at one instant of the virtual
  clock; it is closed when another writer writes, when the clock has moved, or when a consumer attaches or reads it
  (a reader only sees written chunks). A message published in confirm mode, and one that does not come from a
  channel (dead-lettering, a delayed exchange), is a chunk of its own (RabbitMQ's own tests wait for each confirm
  to get a chunk per message). So a burst shares a chunk, as it usually does on RabbitMQ.
* **Segments.** Chunks go into segment files of ``x-stream-max-segment-size-bytes`` (default 500,000,000 bytes or
  256,000 chunks); a segment is full once it has reached that size. Whenever the writer handles something (a chunk
  to write, a reader registering for new offsets) while the segment is full and a channel has published, it first
  writes a tracking snapshot, which opens a new segment and takes one offset (so offsets are not always
  consecutive). Sizes are estimated: each message counts its body, property block, exchange and routing key plus
  :data:`RECORD_OVERHEAD` bytes for RabbitMQ's AMQP 1.0 encoding, a chunk :data:`CHUNK_HEADER` bytes (and the
  filter size when it has filter values), a segment :data:`SEGMENT_HEADER` bytes (RabbitMQ's real sizes differ by a
  few tens of bytes per message).
* **Retention** (``x-max-length-bytes``, ``x-max-age``; the policies ``max-length-bytes`` and ``max-age`` win over
  them) deletes whole segments, never the newest, and only when it is evaluated: when a new segment is opened,
  when a policy changes the stream's settings, and (3.11+) every hour of the virtual clock while an age limit is
  set and more than one segment remains. A consumer reading a segment that is deleted reads it to its end (RabbitMQ's
  reader has the file open), then goes on from the first segment left.
* **Filtering** (3.13+): a chunk is delivered to a consumer with ``x-stream-filter`` when one of its messages has
  one of the consumer's filter values in ``x-stream-filter-value`` (or, with ``x-stream-match-unfiltered``, has
  none); the whole chunk is delivered, so a client filters again, as with RabbitMQ. The chunk's Bloom filter is
  modelled exactly (RabbitMQ's may also let a chunk through that has none of the values).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from fakerabbit.broker import errors
from fakerabbit.broker.arguments import Atom, check_max_age, erl_pretty, str_value
from fakerabbit.broker.fields import INTEGER_TAGS, Field, Table
from fakerabbit.broker.message import Message, sorted_headers
from fakerabbit.broker.policy import QueueSettings
from fakerabbit.broker.properties import RawProperties
from fakerabbit.broker.queue import Consumer, ConsumerChannel, Entry, Queue, QueueHost
from fakerabbit.clock import TimerHandle

if TYPE_CHECKING:
    from fakerabbit.broker.profile import Profile

__all__ = [
    "CHUNK_HEADER",
    "RECORD_OVERHEAD",
    "SEGMENT_HEADER",
    "StreamConfig",
    "StreamConsumer",
    "StreamEntry",
    "StreamQueue",
    "check_stream_offset",
    "new_stream",
    "stored_properties",
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

#: Message annotations ``mc_amqpl`` never turns back into headers (``is_internal_header/1``).
_INTERNAL_X_HEADERS: Final = ("x-routing-key", "x-exchange", "x-death")


# ======================================================================================================
# what a stream stores: the message converted to AMQP 1.0 and back


def _mc_value(field: Field) -> Field:
    """``mc_amqpl:from_091/2`` then ``to_091``: binary comes back as longstr, decimal has no clause (crash)."""
    tag, value = field
    if tag == "D":
        raise errors.InternalError("")
    if tag == "x":
        return ("S", value)
    if tag == "A":
        return ("A", [_mc_value(f) for f in value])
    if tag == "F":
        return ("F", {k: _mc_value(f) for k, f in value.items()})
    return field


def _mc_headers(headers: Table, keep_x_death: bool) -> Table:
    """4.x (``mc_amqpl`` -> ``mc_amqp`` -> ``mc_amqpl``): ``x-`` headers become message annotations and come back
    (except the internal ones), the ``CC`` array too; other headers become application properties, which hold
    no arrays or tables (dropped)."""
    out: Table = {}
    for key, field in headers.items():
        if key.startswith("x-"):
            if key.startswith("x-basic-") or (key in _INTERNAL_X_HEADERS and not (keep_x_death and key == "x-death")):
                continue
        elif field[0] in ("A", "F") and not (key == "CC" and field[0] == "A"):
            continue
        out[key] = _mc_value(field)
    return out


def _record_headers(headers: Table) -> Table:
    """3.x (``rabbit_msg_record``): array and table headers are dropped, a decimal crashes (no clause)."""
    out: Table = {}
    for key, field in headers.items():
        if field[0] in ("A", "F"):
            continue
        if field[0] == "D":
            raise errors.InternalError("")
        out[key] = field
    return out


def stored_properties(msg: Message, profile: Profile) -> RawProperties:
    """The property block a stream delivers ``msg`` with (before its ``x-stream-offset`` header is added).

    Raises :class:`~fakerabbit.broker.errors.InternalError` (541) where RabbitMQ's conversion crashes (a decimal
    header). See the module docstring of :mod:`fakerabbit.broker.stream` and the notes for what changes."""
    props = msg.props
    headers = props.headers
    mc = profile.message_containers
    new = headers
    try:
        if headers:
            new = _mc_headers(headers, bool(msg.deaths)) if mc else _record_headers(headers)
    except RecursionError:
        raise errors.InternalError("") from None
    changes: dict[str, Any] = {}
    if new is not headers and new != headers:
        changes["headers"] = new or None
    if props.cluster_id is not None:
        changes["cluster_id"] = None
    if mc and props.delivery_mode != 2 and props.delivery_mode != 1:
        changes["delivery_mode"] = 1  # the AMQP 1.0 header's durable=false comes back as 1
    if changes:
        props = props.replace(**changes)
    return props


def _filter_value(msg: Message) -> str:
    """A message's ``x-stream-filter-value`` ("" when unfiltered). 4.x: anything but a UTF-8 longstr without
    NUL crashes ``rabbit_stream_queue:stream_message/1`` (541)."""
    field = msg.header("x-stream-filter-value")
    if field is None:
        return ""
    tag, value = field
    if tag == "S":
        data = value if isinstance(value, bytes) else str(value).encode("utf-8", "surrogateescape")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            text = None
        if text is not None and "\x00" not in text:
            return text
    raise errors.InternalError("")


# ======================================================================================================
# the log


class StreamEntry(Entry):
    """A message in a stream: its offset, chunk, stored properties and index in the log."""

    __slots__ = ("_delivered", "chunk", "index", "offset", "stored")

    def __init__(self, msg: Message, stored: RawProperties, offset: int, index: int, chunk: _Chunk) -> None:
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


class _Chunk:
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


class _Segment:
    __slots__ = ("chunks", "first", "size")

    def __init__(self, first: int) -> None:
        self.first = first
        self.chunks: list[_Chunk] = []
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


# ======================================================================================================
# consumers


class StreamConsumer(Consumer):
    """A stream consumer: its position in the log, the offset it starts from, its filter and its credit (the
    prefetch count it consumed with; every settlement gives one back)."""

    __slots__ = ("broken", "carry", "filters", "listening", "min_offset", "pos")

    def __init__(
        self,
        tag: str,
        queue: StreamQueue,
        session: ConsumerChannel,
        *,
        exclusive: bool,
        prefetch: int,
        arguments: Table,
        pos: int,
        min_offset: int | None,
        filters: frozenset[str] | None,
        broken: bool,
    ) -> None:
        super().__init__(
            tag, queue, session, no_ack=False, exclusive=exclusive, priority=0, prefetch=prefetch, arguments=arguments
        )
        #: the log index of the next message to look at
        self.pos = pos
        #: messages below this offset are skipped (an integer ``x-stream-offset``)
        self.min_offset = min_offset
        #: the filter values a chunk must have one of ("" = unfiltered messages), or None
        self.filters = filters
        #: RabbitMQ's reader crashes on this consumer's arguments once consume-ok is sent (541)
        self.broken = broken
        #: what is left of a segment retention deleted while this consumer was reading it
        self.carry: list[StreamEntry] = []
        #: the next offset the consumer has registered to hear about (osiris offset listener)
        self.listening = 0

    def can_accept(self) -> bool:
        return self.unacked < self.prefetch and self.session.flow_active


def _offset_spec(field: Field | None) -> tuple[str, Any]:
    """``rabbit_stream_queue:parse_offset_arg/1`` after the declare validator: ``(kind, value)``."""
    if field is None:
        return ("next", None)
    tag, value = field
    text = value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else value
    if text in ("first", "last", "next"):
        return (str(text), None)
    if tag == "T":
        return ("timestamp", int(value) * 1000)
    if tag == "S":
        return ("interval", text)
    if tag in INTEGER_TAGS:
        return ("offset", int(value))
    return ("crash", None)


def check_stream_offset(field: Field, rs: str, profile: Profile) -> None:
    """``rabbit_amqqueue:check_stream_offset_arg/2``: an interval string must be a valid max age (406
    ``{invalid_stream_offset_arg,{longstr,<<"1x">>}}``; 541 on ≤4.2 when it has no leading digits)."""
    kind, value = _offset_spec(field)
    if kind != "interval":
        return
    if check_max_age(value, crash_without_digits=profile.max_age_crashes_without_digits) is not None:
        return
    raw = value.encode("utf-8", "surrogateescape")
    term = (Atom("invalid_stream_offset_arg"), (Atom("longstr"), raw))
    prefix = f"invalid arg 'x-stream-offset' for {rs}: "
    raise errors.PreconditionFailed(prefix + erl_pretty(term, len(prefix), 255))


def _filter_spec(arguments: Table, profile: Profile) -> tuple[frozenset[str] | None, bool]:
    """``rabbit_stream_queue:filter_spec/1``: (the filter values, broken); None = no filtering."""
    if not profile.stream_filtering:
        return None, False
    field = arguments.get("x-stream-filter")
    if field is None:
        return None, False
    tag, value = field
    if tag == "A":
        values = [str_value(f) for f in value if f[0] == "S"]
        filters = {v for v in values if v is not None}
    elif tag == "S":
        filters = {str_value(field) or ""}
    else:
        return None, False
    mu = arguments.get("x-stream-match-unfiltered")
    if mu is not None and mu[0] == "t" and mu[1]:
        filters.add("")
    broken = tag == "A" and not any(f[0] == "S" for f in value)  # osiris_bloom:init_matcher needs a value
    return frozenset(filters), broken


# ======================================================================================================
# the queue


class StreamQueue(Queue):
    """A stream: an append-only log of chunks in segments, read by consumers at their own offsets."""

    is_stream = True

    def __init__(
        self,
        vhost: QueueHost,
        name: str,
        *,
        durable: bool,
        arguments: Table,
        settings: QueueSettings,
    ) -> None:
        super().__init__(
            vhost,
            name,
            queue_type="stream",
            durable=durable,
            exclusive_owner=None,
            auto_delete=False,
            arguments=arguments,
            settings=settings,
        )
        self._log: list[StreamEntry] = []
        #: log index of ``_log[0]`` (how many messages retention has removed)
        self._dropped = 0
        self._segments: list[_Segment] = [_Segment(0)]
        self._open: _Chunk | None = None
        self._next_offset = 0
        #: a channel has published (osiris tracks its writer id): new segments start with a tracking chunk
        self._tracked = False
        self._retention_timer: TimerHandle | None = None
        #: a segment was opened for the chunk being written: evaluate retention once its message is in
        self._roll_pending = False
        self.config = self._config()

    # -- configuration ----------------------------------------------------------------------------------------
    def _config(self) -> StreamConfig:
        policy = self.settings.policy_definition
        args = self.arguments

        def lookup(key: str) -> Any:
            value = policy.get(key)  # policy_precedence/2: the policy wins
            if value is not None:
                return value
            field = args.get("x-" + key)
            return None if field is None else field[1]

        age = lookup("max-age")
        age_ms = check_max_age(age, crash_without_digits=False) if isinstance(age, str | bytes) else None
        max_bytes = lookup("max-length-bytes")
        seg = lookup("stream-max-segment-size-bytes")
        fsize = lookup("stream-filter-size-bytes")
        return StreamConfig(
            max_bytes=max_bytes if isinstance(max_bytes, int) and not isinstance(max_bytes, bool) else None,
            max_age_ms=age_ms,
            max_segment_bytes=seg if isinstance(seg, int) and not isinstance(seg, bool) else DEFAULT_MAX_SEGMENT_BYTES,
            filter_size=fsize if isinstance(fsize, int) and 16 <= fsize <= 255 else DEFAULT_FILTER_SIZE,
        )

    def apply_settings(self, settings: QueueSettings) -> None:
        """A policy changed: a new configuration reaches the stream's writer (which rolls over a full segment)
        and retention is evaluated at once (``osiris_log:update_retention/2``)."""
        self.settings = settings
        config = self._config()
        if config == self.config:
            return
        self.config = config
        self._seal()
        if self._segment_full(self._segments[-1]):
            self._roll()
        self._evaluate_retention()

    # -- counts and inspection ----------------------------------------------------------------------------------
    def stat(self) -> tuple[int, int]:
        """declare-ok's counts: RabbitMQ's ``messages`` is the offset span (tracking chunks included; updated by
        a stats tick there, at once here) and the consumer count is always 0 (``rabbit_stream_queue:stat/1``)."""
        first = self._first_chunk_id()
        return (0 if first is None else self._next_offset - first, 0)

    def _first_chunk_id(self) -> int | None:
        for seg in self._segments:
            if seg.chunks:
                return seg.chunks[0].id
        return None

    @property
    def segment_count(self) -> int:
        return len(self._segments)

    @property
    def first_offset(self) -> int | None:
        """The offset of the first message still in the stream."""
        return self._log[0].offset if self._log else None

    @property
    def next_offset(self) -> int:
        """The offset the next message gets."""
        return self._next_offset

    def ready_entries(self) -> list[Entry]:
        """Every message the stream holds, oldest first."""
        return list(self._log)

    def consumer_count(self) -> int:
        return len(self.consumers)

    # -- writing ------------------------------------------------------------------------------------------------
    def write(self, msg: Message, writer: object, confirmed: bool) -> bool:
        """A channel publishes ``msg`` (``writer`` is the channel; ``confirmed``: it is in confirm mode).
        Raises 541 where RabbitMQ's channel crashes on the message."""
        profile = self.ctx.profile
        stored = stored_properties(msg, profile)
        value = _filter_value(msg) if profile.stream_filtering else ""
        self._tracked = True
        self._append(msg, stored, value, writer, seal=confirmed)
        self.dispatch()
        return True

    def publish(self, msg: Message, untracked: bool = False) -> bool:
        """A message that does not come from a channel (dead-lettering, a delayed exchange): its own chunk. 3.10
        drops it; one RabbitMQ could not store is dropped and reported (RabbitMQ's process handling it would
        crash)."""
        profile = self.ctx.profile
        if not profile.stream_stateless_writes:
            self.ctx.events.emit("dropped", msg, queue=self.name, reason="stream-stateless")
            return True
        try:
            stored = stored_properties(msg, profile)
            value = _filter_value(msg) if profile.stream_filtering else ""
        except errors.AMQPError:
            self.ctx.events.emit("dropped", msg, queue=self.name, reason="stream-write")
            self.ctx.report_problem(f"stream {self.name!r}: a message RabbitMQ cannot convert was dropped")
            return True
        self._append(msg, stored, value, None, seal=True)
        self.dispatch()
        return True

    def _append(self, msg: Message, stored: RawProperties, value: str, writer: object, *, seal: bool) -> None:
        now = self.ctx.clock.now_ms()
        chunk = self._open
        if (
            seal  # (a confirmed message, or one from no channel: a chunk of its own)
            or chunk is None
            or not chunk.open
            or chunk.writer is not writer
            or chunk.timestamp != now
        ):
            chunk = self._new_chunk(writer, now)
        index = self._dropped + len(self._log)
        e = StreamEntry(msg, stored, self._next_offset, index, chunk)
        self._next_offset += 1
        chunk.entries.append(e)
        size = 4 + RECORD_OVERHEAD + len(msg.body) + len(stored.raw) + len(msg.exchange) + len(msg.routing_key)
        if value and not any(chunk.values - {""}):
            size += self.config.filter_size
        chunk.values.add(value)
        chunk.size += size
        self._segments[-1].size += size
        self._log.append(e)
        self.ready_count += 1
        self.ready_bytes += len(msg.body)
        if seal:
            chunk.open = False
        if self._roll_pending:
            self._roll_pending = False
            self._evaluate_retention()

    def _new_chunk(self, writer: object, now: int) -> _Chunk:
        self._seal()
        if self._segment_full(self._segments[-1]):
            self._roll()
            self._roll_pending = True  # osiris evaluates retention once the chunk is written
        chunk = _Chunk(self._next_offset, now, writer)
        seg = self._segments[-1]
        seg.chunks.append(chunk)
        seg.size += chunk.size
        self._open = chunk
        return chunk

    def _seal(self) -> None:
        if self._open is not None:
            self._open.open = False
            self._open = None

    def _segment_full(self, seg: _Segment) -> bool:
        return seg.size >= self.config.max_segment_bytes or len(seg.chunks) >= MAX_SEGMENT_CHUNKS

    def _writer_batch(self) -> None:
        """The osiris writer handles a command that writes nothing (a reader registering for new offsets):
        ``evaluate_tracking_snapshot/2`` still writes a tracking snapshot when the segment is full and a channel
        has written, which opens a new segment (and evaluates retention)."""
        if self._tracked and self._segment_full(self._segments[-1]):
            self._seal()
            self._roll()
            self._evaluate_retention()

    def _roll(self) -> None:
        """Open a new segment; it starts with a tracking snapshot once a channel has written."""
        seg = _Segment(self._next_offset)
        self._segments.append(seg)
        if self._tracked:
            chunk = _Chunk(self._next_offset, self.ctx.clock.now_ms(), None, user=False)
            self._next_offset += 1
            seg.chunks.append(chunk)
            seg.size += chunk.size

    # -- retention ----------------------------------------------------------------------------------------------
    def _evaluate_retention(self) -> None:
        """``osiris_log:evaluate_retention/2``: ``max_bytes`` then ``max_age``, whole segments, never the newest."""
        config = self.config
        segments = self._segments
        drop = 0
        if config.max_bytes is not None and len(segments) > 1:
            room = config.max_bytes - segments[-1].size
            keep = 1
            for seg in reversed(segments[:-1]):
                if seg.size > room:
                    break
                room -= seg.size
                keep += 1
            drop = len(segments) - keep
        if config.max_age_ms is not None:
            limit = self.ctx.clock.now_ms() - config.max_age_ms
            while drop < len(segments) - 1:
                ts = segments[drop].last_timestamp
                if ts is None or ts >= limit:
                    break
                drop += 1
        if drop:
            self._delete_segments(drop)
        self._schedule_retention()

    def _delete_segments(self, n: int) -> None:
        gone = self._segments[:n]
        del self._segments[:n]
        count = sum(len(c.entries) for seg in gone for c in seg.chunks)
        removed = self._log[:count]
        # a reader keeps the segment file it has open (deleted or not) and reads it to its end
        start = self._dropped
        for seg in gone:
            entries = [e for chunk in seg.chunks for e in chunk.entries]
            end = start + len(entries)
            for c in self.consumers:
                if isinstance(c, StreamConsumer) and start <= c.pos < end:
                    c.carry.extend(entries[c.pos - start :])
                    c.pos = end
            start = end
        del self._log[:count]
        self._dropped += count
        self.ready_count -= count
        self.ready_bytes -= sum(len(e.msg.body) for e in removed)
        events = self.ctx.events
        if events.enabled:
            for e in removed:
                events.emit("dropped", e.msg, queue=self.name, reason="retention")

    def _schedule_retention(self) -> None:
        """osiris ≥ 1.4 (``osiris_retention:schedule/3``): with an age limit and more than one segment left,
        evaluate again after :data:`RETENTION_EVAL_INTERVAL_MS`."""
        clock = self.ctx.clock
        if self._retention_timer is not None:
            clock.cancel(self._retention_timer)
            self._retention_timer = None
        if (
            self.ctx.profile.stream_hourly_retention
            and self.config.max_age_ms is not None
            and len(self._segments) > 1
            and not self.deleted
        ):
            self._retention_timer = clock.call_at(clock.now_ms() + RETENTION_EVAL_INTERVAL_MS, self._on_retention)

    def _on_retention(self) -> None:
        self._retention_timer = None
        if not self.deleted:
            self._evaluate_retention()

    # -- consumers ------------------------------------------------------------------------------------------
    def new_consumer(
        self,
        tag: str,
        session: ConsumerChannel,
        *,
        no_ack: bool,
        exclusive: bool,
        arguments: Table,
        prefetch: int,
        global_prefetch: int,
    ) -> StreamConsumer:
        """``rabbit_stream_queue:consume/3``: prefetch required, manual acks required, no global qos (3.x, 4.0 -
        4.2); then where the consumer starts (``x-stream-offset``) and its filter."""
        profile = self.ctx.profile
        rs = errors.rs_queue(self.name, self.vhost.name)
        v4 = profile.stream_v4_texts
        if prefetch == 0:
            where = f"stream {rs}" if v4 else f"'{rs}'"
            raise errors.PreconditionFailed(f"consumer prefetch count is not set for {where}")
        if no_ack:
            kind = "stream" if v4 else "stream queues"
            raise errors.NotImplemented_(f"automatic acknowledgement not supported by {kind} {rs}")
        if global_prefetch and profile.global_qos:
            raise errors.NotImplemented_(f"{rs} does not support global qos")
        kind, value = _offset_spec(arguments.get("x-stream-offset"))
        filters, broken = _filter_spec(arguments, profile)
        min_offset: int | None = None
        if kind == "first":
            pos = self._dropped
        elif kind == "last":
            pos = self._last_chunk_start()
        elif kind == "offset":
            min_offset = value
            pos = self._dropped + bisect.bisect_left(self._log, value, key=_offset_of)
        elif kind in ("timestamp", "interval"):
            if kind == "interval":
                age = check_max_age(value, crash_without_digits=False) or 0
                value = self.ctx.clock.now_ms() - age
            pos = self._dropped + bisect.bisect_left(self._log, value, key=_chunk_time)
        else:  # next, or a crash after consume-ok
            pos = self._dropped + len(self._log)
            broken = broken or kind == "crash"
        return StreamConsumer(
            tag,
            self,
            session,
            exclusive=exclusive,
            prefetch=prefetch,
            arguments=arguments,
            pos=pos,
            min_offset=min_offset,
            filters=filters,
            broken=broken,
        )

    def _last_chunk_start(self) -> int:
        if not self._log:
            return self._dropped
        return self._log[-1].chunk.entries[0].index

    def add_consumer(self, c: Consumer) -> None:
        self._seal()  # what was written before is a chunk the new reader can see
        self.consumers.append(c)
        if isinstance(c, StreamConsumer):
            c.listening = self._next_offset
        self._writer_batch()  # the reader registers with the writer for new offsets

    def start_consumer(self, c: Consumer) -> None:
        """After consume-ok: RabbitMQ's reader crashes on an offset of another type or an empty filter (541)."""
        if isinstance(c, StreamConsumer) and c.broken:
            raise errors.InternalError("")
        self.dispatch()

    def remove_consumer(self, c: Consumer) -> None:
        if c in self.consumers:
            self.consumers.remove(c)

    def dispatch(self) -> None:
        """Give every consumer what it has credit for, from its position."""
        if not self.consumers or self.deleted:
            return
        for c in list(self.consumers):
            if isinstance(c, StreamConsumer) and c in self.consumers:
                self._feed(c)

    def _feed(self, c: StreamConsumer) -> None:
        log = self._log
        while c.can_accept():
            if c.carry:
                e = c.carry.pop(0)
                if (c.filters is None or not c.filters.isdisjoint(e.chunk.values)) and (
                    c.min_offset is None or e.offset >= c.min_offset
                ):
                    c.session.deliver(c, self, e)
                continue
            i = c.pos - self._dropped
            if i < 0:
                c.pos = self._dropped
                i = 0
            if i >= len(log):
                if self._next_offset > c.listening:  # read up to the end: registers again for new offsets
                    c.listening = self._next_offset
                    self._writer_batch()
                return
            e = log[i]
            chunk = e.chunk
            if chunk.open:
                chunk.open = False  # a reader has seen it: later messages go into a new chunk
                if self._open is chunk:
                    self._open = None
            if c.filters is not None and c.filters.isdisjoint(chunk.values):
                c.pos = chunk.entries[-1].index + 1  # skip the whole chunk
                continue
            c.pos += 1
            if c.min_offset is not None and e.offset < c.min_offset:
                continue
            c.session.deliver(c, self, e)

    # -- settlement: acks only give credit ----------------------------------------------------------------
    def on_delivered(self, e: Entry, acked: bool) -> None:
        """Nothing to count: RabbitMQ reports no unacknowledged messages for a stream."""

    def ack(self, e: Entry) -> None:
        self.ctx.events.emit("acked", e.msg, queue=self.name)

    def reject(self, entries: list[Entry], *, requeue: bool, explicit_nack: bool = False) -> None:
        """3.13+: a credit like an ack (nothing is requeued or dead-lettered); before, 540."""
        if not self.ctx.profile.stream_settle_any:
            rs = errors.rs_queue(self.name, self.vhost.name)
            raise errors.NotImplemented_(f"basic.nack and basic.reject not supported by stream queues {rs}")
        for e in entries:
            self.ctx.events.emit("rejected", e.msg, queue=self.name, requeue=requeue)

    def release(self, entries: list[Entry], *, failed: bool = True) -> None:
        """The channel closed (nothing to do) or ``basic.recover`` (3.13+ a credit; before, the channel crashes)."""
        if not failed and entries and not self.ctx.profile.stream_settle_any:
            raise errors.InternalError("")

    def requeue(self, entries: Any, *, failed: bool) -> None:
        """Streams never requeue."""

    # -- refused operations ------------------------------------------------------------------------------
    def fetch(self) -> Entry | None:
        rs = errors.rs_queue(self.name, self.vhost.name)
        raise errors.NotImplemented_(f"basic.get not supported by stream queues {rs}")

    def purge(self) -> int:
        rs = errors.rs_queue(self.name, self.vhost.name)
        raise errors.NotImplemented_(f"queue.purge not supported by stream queues {rs}")

    # -- lifecycle ---------------------------------------------------------------------------------------------
    def touch(self) -> None:
        """Streams have no ``x-expires``."""

    def check_limit(self) -> None:
        """Streams never refuse a publish."""

    def on_deleted(self) -> None:
        self.deleted = True
        if self._retention_timer is not None:
            self.ctx.clock.cancel(self._retention_timer)
            self._retention_timer = None
        self._log.clear()
        self._segments = [_Segment(self._next_offset)]
        self._open = None
        self.ready_count = 0
        self.ready_bytes = 0

    def restart(self, survives: Callable[[Entry], bool], why: str) -> None:
        """A node restart: the log survives whole; consumers are gone."""
        self._seal()
        self.consumers.clear()
        self.unacked = 0
        self._schedule_retention()


def _offset_of(e: StreamEntry) -> int:
    return e.offset


def _chunk_time(e: StreamEntry) -> int:
    return e.chunk.timestamp


def new_stream(vhost: QueueHost, name: str, *, durable: bool, arguments: Table) -> StreamQueue:
    """A new stream queue (the vhost applies its policies next)."""
    return StreamQueue(vhost, name, durable=durable, arguments=arguments, settings=QueueSettings(queue_type="stream"))
