"""Methods RabbitMQ knows beyond AMQP 0-9-1 proper: the deprecated access.request, and basic.credit (its
credit-flow extension). A client's basic.credit-ok / credit-drained have no handler: 503, as in RabbitMQ."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fakerabbit.broker import errors, texts
from fakerabbit.protocol import framing

if TYPE_CHECKING:
    from fakerabbit.protocol.handlers.context import MethodChannel


def access_request(ch: MethodChannel, m: framing.AccessRequest, payload: bytes) -> None:
    ch.write(
        framing.encode_raw_method(ch.number, framing.ACCESS_REQUEST_OK)  # ticket 1, whatever was asked
    )


def basic_credit(ch: MethodChannel, m: framing.BasicCredit, payload: bytes) -> None:
    if not ch.rules.basic_credit:  # gone from rabbit_channel in 4.0 (native AMQP 1.0)
        raise errors.CommandInvalid(texts.UNIMPLEMENTED_METHOD)
    tag = str(getattr(m, "consumer_tag", ""))
    if tag not in ch.session.consumers:
        raise errors.PreconditionFailed(f"unknown consumer tag '{tag}'")
    raise errors.NotImplemented_("basic.credit is not supported by fakerabbit")


HANDLERS: dict[type, Any] = {
    framing.AccessRequest: access_request,
    framing.BasicCredit: basic_credit,
}
