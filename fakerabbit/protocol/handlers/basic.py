"""basic.*: qos, consume, cancel, get, ack, nack, reject, recover (publish is assembled by the channel).

A client's ``basic.cancel-ok`` (RabbitMQ sends its own ``basic.cancel`` with nowait) is 503 up to 4.2; 4.3
takes it as a quiet cancel (see :func:`basic_cancel_ok`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fakerabbit.broker import errors, texts
from fakerabbit.protocol.codec import CancelOk, ConsumeOk, GetOk, arguments_of, commands

if TYPE_CHECKING:
    from fakerabbit.protocol.handlers.context import MethodChannel


def basic_qos(ch: MethodChannel, m: commands.Basic.Qos, payload: bytes) -> None:
    ch.session.qos(m.prefetch_size or 0, m.prefetch_count or 0, bool(m.global_))
    ch.send(commands.Basic.QosOk())


def basic_consume(ch: MethodChannel, m: commands.Basic.Consume, payload: bytes) -> None:
    session = ch.session
    queue = session.expand_queue_name(m.queue or "")
    c = session.consume(queue, m.consumer_tag or "", bool(m.no_ack), bool(m.exclusive), arguments_of(m))
    if not m.nowait:
        ch.send(ConsumeOk(c.tag))
    session.start(c)


def basic_cancel(ch: MethodChannel, m: commands.Basic.Cancel, payload: bytes) -> None:
    ch.session.cancel(m.consumer_tag or "")
    if not m.nowait:
        ch.send(CancelOk(m.consumer_tag or ""))


def basic_cancel_ok(ch: MethodChannel, m: commands.Basic.CancelOk, payload: bytes) -> None:
    """4.3's rabbit_channel takes a client's cancel-ok as a cancel without a reply: the consumer goes quietly,
    and an unknown tag makes the channel send ``undefined`` (it crashes: 541). Before, 503."""
    if not ch.rules.client_cancel_ok:
        raise errors.CommandInvalid(texts.UNIMPLEMENTED_METHOD)
    if not ch.session.cancel(m.consumer_tag or ""):
        raise errors.InternalError("")


def basic_get(ch: MethodChannel, m: commands.Basic.Get, payload: bytes) -> None:
    session = ch.session
    r = session.get(session.expand_queue_name(m.queue or ""), bool(m.no_ack))
    if r is None:
        ch.send(commands.Basic.GetEmpty())
        return
    ch.send_get(GetOk(r.delivery_tag, r.redelivered, r.exchange, r.routing_key, r.message_count), r.props, r.body)


def basic_ack(ch: MethodChannel, m: commands.Basic.Ack, payload: bytes) -> None:
    ch.session.ack(m.delivery_tag or 0, bool(m.multiple))


def basic_nack(ch: MethodChannel, m: commands.Basic.Nack, payload: bytes) -> None:
    ch.session.nack(m.delivery_tag or 0, bool(m.multiple), bool(m.requeue), explicit=True)


def basic_reject(ch: MethodChannel, m: commands.Basic.Reject, payload: bytes) -> None:
    ch.session.nack(m.delivery_tag or 0, False, bool(m.requeue), explicit=False)


def basic_recover(ch: MethodChannel, m: commands.Basic.Recover, payload: bytes) -> None:
    basic_recover_async(ch, m, payload)
    ch.send(commands.Basic.RecoverOk())


def basic_recover_async(
    ch: MethodChannel, m: commands.Basic.Recover | commands.Basic.RecoverAsync, payload: bytes
) -> None:
    if not m.requeue:
        raise errors.NotImplemented_("requeue=false")
    ch.session.recover()


HANDLERS: dict[type, Any] = {
    commands.Basic.Qos: basic_qos,
    commands.Basic.Consume: basic_consume,
    commands.Basic.Cancel: basic_cancel,
    commands.Basic.CancelOk: basic_cancel_ok,
    commands.Basic.Get: basic_get,
    commands.Basic.Ack: basic_ack,
    commands.Basic.Nack: basic_nack,
    commands.Basic.Reject: basic_reject,
    commands.Basic.Recover: basic_recover,
    commands.Basic.RecoverAsync: basic_recover_async,
}
