"""The stream queue: :class:`StreamQueue` (see :mod:`fakerabbit.broker.stream` for the model)."""

from __future__ import annotations

import bisect
from collections.abc import Callable
from typing import Any

from fakerabbit.broker import errors
from fakerabbit.broker.arguments import check_max_age
from fakerabbit.broker.fields import Table
from fakerabbit.broker.message import Message
from fakerabbit.broker.policy import QueueSettings
from fakerabbit.broker.properties import RawProperties
from fakerabbit.broker.queue import Consumer, ConsumerChannel, Entry, Queue, QueueHost
from fakerabbit.broker.stream.consumers import StreamConsumer, filter_spec, offset_spec
from fakerabbit.broker.stream.conversion import filter_value, stored_properties
from fakerabbit.broker.stream.log import (
    DEFAULT_FILTER_SIZE,
    DEFAULT_MAX_SEGMENT_BYTES,
    MAX_SEGMENT_CHUNKS,
    RECORD_OVERHEAD,
    RETENTION_EVAL_INTERVAL_MS,
    Chunk,
    Segment,
    StreamConfig,
    StreamEntry,
)
from fakerabbit.clock import TimerHandle

__all__ = ["StreamQueue", "new_stream"]


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
        self._segments: list[Segment] = [Segment(0)]
        self._open: Chunk | None = None
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
        value = filter_value(msg) if profile.stream_filtering else ""
        self._tracked = True
        self._append(msg, stored, value, writer, seal=confirmed)
        self.dispatch()
        return True

    def publish(self, msg: Message, untracked: bool = False, enqueuer: object = None) -> bool:
        """A message that does not come from a channel (dead-lettering, a delayed exchange): its own chunk. 3.10
        drops it; one RabbitMQ could not store is dropped and reported (RabbitMQ's process handling it would
        crash)."""
        profile = self.ctx.profile
        if not profile.stream_stateless_writes:
            self.ctx.events.emit("dropped", msg, queue=self.name, reason="stream-stateless")
            return True
        try:
            stored = stored_properties(msg, profile)
            value = filter_value(msg) if profile.stream_filtering else ""
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

    def _new_chunk(self, writer: object, now: int) -> Chunk:
        self._seal()
        if self._segment_full(self._segments[-1]):
            self._roll()
            self._roll_pending = True  # osiris evaluates retention once the chunk is written
        chunk = Chunk(self._next_offset, now, writer)
        seg = self._segments[-1]
        seg.chunks.append(chunk)
        seg.size += chunk.size
        self._open = chunk
        return chunk

    def _seal(self) -> None:
        if self._open is not None:
            self._open.open = False
            self._open = None

    def _segment_full(self, seg: Segment) -> bool:
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
        seg = Segment(self._next_offset)
        self._segments.append(seg)
        if self._tracked:
            chunk = Chunk(self._next_offset, self.ctx.clock.now_ms(), None, user=False)
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
        kind, value = offset_spec(arguments.get("x-stream-offset"))
        filters, broken = filter_spec(arguments, profile)
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
    def fetch(self, settled: bool = False) -> Entry | None:
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
        self._segments = [Segment(self._next_offset)]
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
