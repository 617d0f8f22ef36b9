"""``basic.consume`` argument checks (``rabbit_amqqueue:check_consume_arguments/3``).

First the validators of the arguments the queue's type knows (``consume_args/0``: ``x-priority`` must be an
integer on classic and quorum queues, a stream's ``x-stream-offset`` interval must parse), then every key of the
client's table that another queue type knows is refused: ``406 invalid arg 'K' for queue 'q' in vhost '/' of queue
type rabbit_T_queue``. Unknown keys are accepted. Per version (:class:`~fakerabbit.broker.profile.Profile`):
``stream_consumer_arguments`` are refused on classic and quorum queues, ``stream_foreign_consumer_arguments`` on
streams (checked live on 3.10.8, 4.0.5 and 4.3.6).
"""

from __future__ import annotations

from fakerabbit.broker import errors, texts
from fakerabbit.broker.fields import INTEGER_TAGS, Table, type_name
from fakerabbit.broker.profile import Profile
from fakerabbit.broker.stream.consumers import check_stream_offset

__all__ = ["check_consume_arguments"]


def check_consume_arguments(queue: str, vhost: str, queue_type: str, arguments: Table, profile: Profile) -> None:
    """Raise RabbitMQ's error for the first consumer argument ``queue`` (of ``queue_type``) refuses."""
    if not arguments:
        return
    rs = errors.rs_queue(queue, vhost)
    if queue_type == "stream":
        offset = arguments.get("x-stream-offset")
        if offset is not None:
            check_stream_offset(offset, rs, profile)
        foreign = profile.stream_foreign_consumer_arguments
    else:
        prio = arguments.get("x-priority")
        if prio is not None and prio[0] not in INTEGER_TAGS:
            raise errors.PreconditionFailed(
                f"invalid arg 'x-priority' for {rs}: \"expected integer, got {type_name(prio[0])}\""
            )
        foreign = profile.stream_consumer_arguments
    for key in arguments:
        if key in foreign:
            raise errors.PreconditionFailed(texts.foreign_queue_arg(key, rs, queue_type))
