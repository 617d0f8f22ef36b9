"""basic.*: qos, consume, cancel, publish, get, ack, nack, reject, recover."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pamqp import commands

from fakerabbit.protocol.codec import CancelOk, ConsumeOk, GetOk, typed_arguments

if TYPE_CHECKING:
    from fakerabbit.protocol.channel import ChannelHandler


def basic_qos(ch: ChannelHandler, m: commands.Basic.Qos, payload: bytes) -> None:
    ch.session.qos(m.prefetch_size or 0, m.prefetch_count or 0, bool(m.global_))
    ch.send(commands.Basic.QosOk())


def basic_consume(ch: ChannelHandler, m: commands.Basic.Consume, payload: bytes) -> None:
    c = ch.session.consume(
        m.queue or "", m.consumer_tag or "", bool(m.no_ack), bool(m.exclusive), typed_arguments(payload)
    )
    if not m.nowait:
        ch.send(ConsumeOk(c.tag))
    ch.session.start(c)


def basic_cancel(ch: ChannelHandler, m: commands.Basic.Cancel, payload: bytes) -> None:
    ch.session.cancel(m.consumer_tag or "")
    if not m.nowait:
        ch.send(CancelOk(m.consumer_tag or ""))


def basic_cancel_ok(ch: ChannelHandler, m: commands.Basic.CancelOk, payload: bytes) -> None:
    return None  # the client confirms a server-sent basic.cancel


def basic_publish(ch: ChannelHandler, m: commands.Basic.Publish, payload: bytes) -> None:
    ch.start_publish(m)


def basic_get(ch: ChannelHandler, m: commands.Basic.Get, payload: bytes) -> None:
    r = ch.session.get(m.queue or "", bool(m.no_ack))
    if r is None:
        ch.send(commands.Basic.GetEmpty())
        return
    ch.send_get(GetOk(r.delivery_tag, r.redelivered, r.exchange, r.routing_key, r.message_count), r.props, r.body)


def basic_ack(ch: ChannelHandler, m: commands.Basic.Ack, payload: bytes) -> None:
    ch.session.ack(m.delivery_tag or 0, bool(m.multiple))


def basic_nack(ch: ChannelHandler, m: commands.Basic.Nack, payload: bytes) -> None:
    ch.session.nack(m.delivery_tag or 0, bool(m.multiple), bool(m.requeue), explicit=True)


def basic_reject(ch: ChannelHandler, m: commands.Basic.Reject, payload: bytes) -> None:
    ch.session.nack(m.delivery_tag or 0, False, bool(m.requeue), explicit=False)


def basic_recover(ch: ChannelHandler, m: commands.Basic.Recover, payload: bytes) -> None:
    ch.session.recover(bool(m.requeue))
    ch.send(commands.Basic.RecoverOk())


def basic_recover_async(ch: ChannelHandler, m: commands.Basic.RecoverAsync, payload: bytes) -> None:
    ch.session.recover(bool(m.requeue))


HANDLERS: dict[type, Any] = {
    commands.Basic.Qos: basic_qos,
    commands.Basic.Consume: basic_consume,
    commands.Basic.Cancel: basic_cancel,
    commands.Basic.CancelOk: basic_cancel_ok,
    commands.Basic.Publish: basic_publish,
    commands.Basic.Get: basic_get,
    commands.Basic.Ack: basic_ack,
    commands.Basic.Nack: basic_nack,
    commands.Basic.Reject: basic_reject,
    commands.Basic.Recover: basic_recover,
    commands.Basic.RecoverAsync: basic_recover_async,
}
