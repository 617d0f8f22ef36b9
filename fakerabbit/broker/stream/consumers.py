"""Stream consumers: where they start (``x-stream-offset``), what they filter (``x-stream-filter``), their credit."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fakerabbit.broker import errors
from fakerabbit.broker.arguments import check_max_age, str_value
from fakerabbit.broker.erlterm import Atom, pretty
from fakerabbit.broker.fields import INTEGER_TAGS, Field, Table
from fakerabbit.broker.queue import Consumer, ConsumerChannel, Queue
from fakerabbit.broker.stream.log import StreamEntry

if TYPE_CHECKING:
    from fakerabbit.broker.profile import Profile

__all__ = ["StreamConsumer", "check_stream_offset", "filter_spec", "offset_spec"]


class StreamConsumer(Consumer):
    """A stream consumer: its position in the log, the offset it starts from, its filter and its credit (the
    prefetch count it consumed with; every settlement gives one back)."""

    __slots__ = ("broken", "carry", "filters", "listening", "min_offset", "pos")

    def __init__(
        self,
        tag: str,
        queue: Queue,
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


def offset_spec(field: Field | None) -> tuple[str, Any]:
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
    kind, value = offset_spec(field)
    if kind != "interval":
        return
    if check_max_age(value, crash_without_digits=profile.max_age_crashes_without_digits) is not None:
        return
    raw = value.encode("utf-8", "surrogateescape")
    term = (Atom("invalid_stream_offset_arg"), (Atom("longstr"), raw))
    prefix = f"invalid arg 'x-stream-offset' for {rs}: "
    raise errors.PreconditionFailed(prefix + pretty(term, len(prefix), line_length=255))


def filter_spec(arguments: Table, profile: Profile) -> tuple[frozenset[str] | None, bool]:
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
