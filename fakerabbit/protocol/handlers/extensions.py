"""Methods RabbitMQ knows beyond AMQP 0-9-1 proper: the deprecated access.request, and basic.credit (its
credit-flow extension). A client's basic.credit-ok / credit-drained have no handler: 503, as in RabbitMQ."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fakerabbit.broker import errors, texts
from fakerabbit.protocol import framing

if TYPE_CHECKING:
    from fakerabbit.protocol.channel import ChannelHandler


def access_request(ch: ChannelHandler, m: framing.AccessRequest, payload: bytes) -> None:
    ch.conn.write(
        framing.encode_raw_method(ch.number, framing.ACCESS_REQUEST_OK)  # ticket 1, whatever was asked
    )


def basic_credit(ch: ChannelHandler, m: framing.BasicCredit, payload: bytes) -> None:
    if not ch.conn.broker.profile.amqp.basic_credit:  # gone from rabbit_channel in 4.0 (native AMQP 1.0)
        raise errors.CommandInvalid(texts.UNIMPLEMENTED_METHOD)
    tag = str(getattr(m, "consumer_tag", ""))
    if tag not in ch.session.consumers:
        raise errors.PreconditionFailed(f"unknown consumer tag '{tag}'")
    raise errors.NotImplemented_("basic.credit is not supported by fakerabbit")


HANDLERS: dict[type, Any] = {
    framing.AccessRequest: access_request,
    framing.BasicCredit: basic_credit,
}
