"""How a quorum queue counts the deliveries of a message (``rabbit_fifo``'s ``delivery_count`` and
``acquired_count``) and shows them to the client (``x-delivery-count``, from 4.3 ``x-acquired-count``).

What the delivery limit counts changed between releases (``Profile.delivery_limit_counter``):
every return up to 3.13 (``"returns"``), every acquisition in 4.0 - 4.2 (``"acquired"``), only failed deliveries
from 4.3 (``"failed"``: a ``basic.reject`` or a lost channel, not a ``basic.nack`` nor a ``basic.recover``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from fakerabbit.broker.fields import Field, sort_field_table

if TYPE_CHECKING:
    from fakerabbit.broker.message import Message
    from fakerabbit.broker.profile import DeliveryLimitCounter, Profile

__all__ = ["Counted", "count_return", "delivery_props"]


class Counted(Protocol):
    """A message's place in a quorum queue (:class:`~fakerabbit.broker.queue.Entry`)."""

    msg: Message
    delivery_count: int
    acquired_count: int


def count_return(e: Counted, counter: DeliveryLimitCounter, *, failed: bool) -> int:
    """A delivery of ``e`` came back (``failed``: rejected or its channel lost, not nacked or recovered): count it.
    Returns the count the queue's delivery limit is compared with."""
    e.acquired_count += 1
    if counter == "returns" or (counter == "failed" and failed) or counter == "acquired":
        e.delivery_count += 1
    return e.acquired_count if counter == "acquired" else e.delivery_count


def delivery_props(e: Counted, profile: Profile, *, get: bool = False) -> bytes:
    """The property block a quorum queue delivers ``e`` with: ``x-delivery-count`` (and from 4.3
    ``x-acquired-count``) added once it was returned.

    Before 3.13 a ``basic.get`` (``get``) carries ``x-delivery-count`` from 0, a consumer's delivery only once the
    message was returned (rabbit_fifo_client: dequeue vs transform_msgs)."""
    counter = profile.delivery_limit_counter
    count = e.acquired_count if counter == "acquired" else e.delivery_count
    props = e.msg.props
    additions: dict[str, Field] = {}
    # rabbit_fifo_client:add_delivery_count_header: a message that arrived with a delivery count and was
    # never returned here has no acquired count; it is patched to the delivery count. (4.3 sends
    # x-acquired-count before x-delivery-count, live 4.3.6.)
    acquired = e.acquired_count or e.delivery_count
    if profile.acquired_count_header and acquired > 0:
        additions["x-acquired-count"] = ("l", acquired)
    if count > 0 or (get and profile.delivery_count_header_from_zero):
        additions["x-delivery-count"] = ("l", count)
    if not additions:
        return props.raw
    headers = dict(props.headers or {})
    headers.update(additions)
    # Sorted on every version: rabbit_basic:add_header (3.x) sorts the table, mc_amqpl:protocol_state/2 (3.13+) too.
    return props.replace(headers=sort_field_table(headers)).raw
