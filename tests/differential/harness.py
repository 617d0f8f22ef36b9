"""Drive one scenario against one broker and record everything a client observes.

A :class:`Side` is one broker (fakerabbit or a live RabbitMQ) seen through a raw AMQP connection
(:class:`tests.rawamqp.RawAMQP`, framing done here, methods coded by ``pika.spec``): three channels in
confirm mode plus a harness channel (9) for passive declares. :meth:`Side.run` executes one operation and returns
its observation: the synchronous reply (or the close it caused), every asynchronous frame that arrived on each
channel (deliveries, returns, confirms, consumer cancels, channel and connection closes) and, after the broker has
settled, every queue's message and consumer count.

Waiting out RabbitMQ's asynchrony honestly:

* every publish waits for its own publisher confirm (channels are in confirm mode), so routing, enqueueing and
  returns are complete before the next operation;
* after each operation, a round trip on each open channel (a passive declare of ``amq.direct``) flushes whatever
  the broker had already queued on that channel (deliveries, cancels);
* then the queues' counts are read (passive declares on channel 9) and the round trips and reads are repeated until
  two consecutive rounds, ``settle`` seconds apart on the live broker, see the same counts and no new frame. This
  waits for the things RabbitMQ does after replying: dead-lettering, requeues after a channel or connection close,
  quorum queue deliveries. Both brokers get exactly the same requests; only the live broker gets the pauses.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pika import spec

from tests.differential import ops as O
from tests.differential.wire import typed_headers
from tests.rawamqp import Frame, RawAMQP, body_frame, header_frame, method_frame

HARNESS_CHANNEL = 9
RPC_TIMEOUT = 5.0


def _method_fields(method: Any) -> dict[str, Any]:
    return {k: v for k, v in sorted(vars(method).items()) if k not in ("ticket", "nowait")}


def _normalise_headers(table: list[tuple[str, Any]] | None) -> Any:
    """Typed headers with each x-death entry's ``time`` replaced by ``<time>`` (the clocks differ)."""
    if table is None:
        return None
    out: list[tuple[str, Any]] = []
    for key, (tag, value) in table:
        if key == "x-death" and tag == "A":
            deaths = []
            for etag, entry in value:
                if etag == "F":
                    entry = [(k, ("T", "<time>") if k == "time" and v[0] == "T" else v) for k, v in entry]
                deaths.append((etag, entry))
            value = deaths
        out.append((key, (tag, value)))
    return out


def _properties(head: Frame) -> dict[str, Any]:
    assert head.properties is not None
    props = {k: v for k, v in sorted(vars(head.properties).items()) if v is not None and k != "headers"}
    headers = typed_headers(head.payload)
    if headers is not None:
        props["headers"] = _normalise_headers(headers)
    return props


@dataclass
class ChannelState:
    number: int
    open: bool = False
    next_seq: int = 1
    outstanding: set[int] = field(default_factory=set)
    unacked: list[int] = field(default_factory=list)
    consumer: tuple[str, bool] | None = None  # (consumer tag, no_ack)
    replies: list[Any] = field(default_factory=list)
    pending: list[Any] | None = None  # [kind, method, header frame, body, size, extra]
    max_tag: int = 0


class Side:
    """One broker under test: a connection, channels 1..3 and the record of what arrived."""

    def __init__(self, label: str, url: str, prefix: str, *, live: bool, settle: float = 0.01) -> None:
        self.label = label
        self.url = url
        self.prefix = prefix
        self.live = live
        self.settle_interval = settle
        self.conn: RawAMQP | None = None
        self.channels: dict[int, ChannelState] = {}
        self.events: list[tuple[int, str, Any]] = []
        self.harness_events: list[Any] = []
        self.slow = False  # the scenario has quorum queues or streams: wait longer on the live broker
        #: the type each queue was last declared with: a stream's message count is RabbitMQ's statistics tick's,
        #: seconds late, so it is not compared (nor is it a declare-ok's)
        self.kinds: dict[str, str] = {}
        self._pub_counter = 0

    # -- names -------------------------------------------------------------------------------------------------
    def res(self, name: str) -> str:
        return self.prefix + name if name in O.VOCABULARY else name

    def res_value(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.res(value)
        if isinstance(value, list):
            return [self.res_value(v) for v in value]
        return value

    # -- connection --------------------------------------------------------------------------------------------
    def connect(self) -> None:
        self.conn = RawAMQP.connect(self.url)
        self.channels = {n: ChannelState(n) for n in O.CHANNELS}
        for n in O.CHANNELS:
            self._open_channel(n)
        self._open_harness()

    def _open_channel(self, n: int) -> None:
        st = ChannelState(n)
        self.channels[n] = st
        self._rpc(n, spec.Channel.Open())
        self._rpc(n, spec.Confirm.Select())
        st.open = True

    def _open_harness(self) -> None:
        assert self.conn is not None
        self.conn.send_method(HARNESS_CHANNEL, spec.Channel.Open())
        self.harness = ChannelState(HARNESS_CHANNEL)
        self._pump(lambda: bool(self.harness.replies) or self.conn is None)
        self.harness.replies.clear()
        self.harness.open = True

    def close(self) -> None:
        if self.conn is not None:
            with contextlib.suppress(Exception):
                self.conn.close()
            self.conn = None

    @property
    def alive(self) -> bool:
        return self.conn is not None and not self.conn.eof

    # -- input -------------------------------------------------------------------------------------------------
    def _state(self, channel: int) -> ChannelState | None:
        if channel == HARNESS_CHANNEL:
            return self.harness
        return self.channels.get(channel)

    def _pump(self, until: Callable[[], bool], timeout: float = RPC_TIMEOUT) -> bool:
        deadline = time.monotonic() + timeout
        while not until():
            if self.conn is None or self.conn.eof:
                return until()
            f = self.conn.read_frame(max(deadline - time.monotonic(), 0.0005))
            if f is None:
                if self.conn.eof:
                    self.events.append((0, "eof", None))
                    self._dead()
                return until()
            self._dispatch(f)
        return True

    def _drain(self) -> None:
        """Dispatch whatever has already arrived (without waiting)."""
        while self.conn is not None and not self.conn.eof:
            f = self.conn.read_frame(0.0005)
            if f is None:
                return
            self._dispatch(f)

    def _dead(self) -> None:
        if self.conn is not None:
            with contextlib.suppress(Exception):
                self.conn.sock.close()
        self.conn = None
        for st in self.channels.values():
            st.open = False

    def _dispatch(self, f: Frame) -> None:
        if f.type == 8:
            return
        st = self._state(f.channel)
        if f.type in (2, 3):
            assert st is not None and st.pending is not None, f"content frame without a method: {f!r}"
            if f.type == 2:
                st.pending[2] = f
                st.pending[4] = f.body_size
            else:
                st.pending[3] += f.payload
            if st.pending[2] is not None and len(st.pending[3]) >= st.pending[4]:
                self._content_done(st)
            return
        name = f.name
        m = f.method
        if name == "Connection.Close":
            self.events.append((0, "connection.close", (m.reply_code, m.reply_text, m.class_id, m.method_id)))
            assert self.conn is not None
            with contextlib.suppress(OSError):
                self.conn.send_method(0, spec.Connection.CloseOk())
            self._dead()
            return
        if st is None:
            self.events.append((f.channel, "unexpected", repr(f)))
            return
        if name == "Channel.Close":
            close = (m.reply_code, m.reply_text, m.class_id, m.method_id)
            if f.channel == HARNESS_CHANNEL:
                self.harness_events.append(close)
            else:
                self.events.append((f.channel, "channel.close", close))
            assert self.conn is not None
            self.conn.send_method(f.channel, spec.Channel.CloseOk())
            st.open = False
            st.consumer = None
            st.unacked.clear()
            st.outstanding.clear()
            return
        if name in ("Basic.Deliver", "Basic.GetOk", "Basic.Return"):
            st.pending = [name, m, None, b"", 0]
            return
        if name in ("Basic.Ack", "Basic.Nack"):
            kind = "ack" if name == "Basic.Ack" else "nack"
            tags = sorted(t for t in st.outstanding if t == m.delivery_tag or (m.multiple and t <= m.delivery_tag))
            if not tags:
                self.events.append((f.channel, "confirm-unknown", (kind, m.delivery_tag, m.multiple)))
            for t in tags:
                st.outstanding.discard(t)
                self.events.append((f.channel, "confirm", (kind, t)))
            return
        if name == "Basic.Cancel":
            self.events.append((f.channel, "cancelled", _method_fields(m)))
            st.consumer = None
            return
        st.replies.append(m)

    def _content_done(self, st: ChannelState) -> None:
        assert st.pending is not None
        name, m, head, body, _size = st.pending
        st.pending = None
        msg = {"method": name, **_method_fields(m), "properties": _properties(head), "body": bytes(body)}
        if name == "Basic.Return":
            self.events.append((st.number, "return", msg))
        elif name == "Basic.Deliver":
            self.events.append((st.number, "deliver", msg))
            if st.consumer is not None and not st.consumer[1]:
                st.unacked.append(m.delivery_tag)
            st.max_tag = max(st.max_tag, m.delivery_tag)
        else:  # get-ok: a reply; the caller knows whether it needs acking
            st.replies.append(msg)
            st.max_tag = max(st.max_tag, m.delivery_tag)

    # -- output ------------------------------------------------------------------------------------------------
    def _rpc(self, n: int, method: Any) -> Any:
        """Send a synchronous method on a channel being opened; its reply's fields or a failure."""
        st = self._state(n)
        if self.conn is None or st is None:
            return ("not-connected",)
        st.replies.clear()
        self.conn.send_method(n, method)
        ok = self._pump(lambda: bool(st.replies) or not self.alive)
        if st.replies:
            reply = st.replies.pop(0)
            return {"method": reply.NAME, **_method_fields(reply)}
        return ("connection-closed",) if not self.alive else ("timeout",) if not ok else ("?",)

    def _rpc_or_close(self, n: int, method: Any) -> Any:
        """Send a synchronous method; its reply's fields, or how it failed (the close itself is an event)."""
        st = self._state(n)
        assert st is not None
        if self.conn is None:
            return ("not-connected",)
        st.replies.clear()
        self.conn.send_method(n, method)
        ok = self._pump(lambda: bool(st.replies) or not st.open or not self.alive)
        if st.replies:
            reply = st.replies.pop(0)
            if isinstance(reply, dict):
                return reply
            return {"method": reply.NAME, **_method_fields(reply)}
        if not self.alive:
            return ("connection-closed",)
        if not st.open:
            return ("channel-closed",)
        return ("timeout",) if not ok else ("?",)

    # -- operations --------------------------------------------------------------------------------------------
    def run(self, op: O.Op) -> dict[str, Any]:
        """Execute one operation, settle, and return the observation."""
        self.events = []
        if not self.alive:
            self.connect()
        reply = self._execute(op)
        self._reopen()
        snapshot = self.settle()
        self._reopen()
        return {"reply": reply, "events": self._grouped(), "counts": snapshot}

    def _reopen(self) -> None:
        if not self.alive:
            self.connect()
            return
        for n, st in list(self.channels.items()):
            if not st.open:
                self._open_channel(n)
        if not self.harness.open:
            self._open_harness()

    def _grouped(self) -> dict[str, list[Any]]:
        out: dict[str, list[Any]] = {}
        for ch, kind, data in self.events:
            out.setdefault(f"ch{ch}.{kind}", []).append(data)
        for key in out:
            if key.endswith(".confirm"):
                out[key].sort()
        return out

    def _execute(self, op: O.Op) -> Any:
        r = self.res
        if isinstance(op, O.DeclareQueue):
            args = {k: self.res_value(v) for k, v in op.args.items()}
            if op.kind in ("quorum", "stream"):
                args = {"x-queue-type": op.kind, **args}
                self.slow = True
            reply = self._rpc_or_close(
                op.ch,
                spec.Queue.Declare(queue=r(op.queue), passive=op.passive, durable=op.durable, arguments=args or None),
            )
            if isinstance(reply, dict) and reply.get("method") == "Queue.DeclareOk":
                if not op.passive:
                    self.kinds[op.queue] = op.kind
                if self.kinds.get(op.queue) == "stream":
                    reply = {**reply, "message_count": "<stream>"}
            return reply
        if isinstance(op, O.DeleteQueue):
            reply = self._rpc_or_close(
                op.ch, spec.Queue.Delete(queue=r(op.queue), if_unused=op.if_unused, if_empty=op.if_empty)
            )
            if isinstance(reply, dict) and reply.get("method") == "Queue.DeleteOk":
                self.kinds.pop(op.queue, None)
            return reply
        if isinstance(op, O.PurgeQueue):
            return self._rpc_or_close(op.ch, spec.Queue.Purge(queue=r(op.queue)))
        if isinstance(op, O.DeclareExchange):
            xargs = {"alternate-exchange": r(op.alternate)} if op.alternate is not None else None
            return self._rpc_or_close(
                op.ch,
                spec.Exchange.Declare(exchange=r(op.exchange), type=op.type, passive=op.passive, arguments=xargs),
            )
        if isinstance(op, O.DeleteExchange):
            return self._rpc_or_close(op.ch, spec.Exchange.Delete(exchange=r(op.exchange), if_unused=op.if_unused))
        if isinstance(op, O.Bind):
            cls = spec.Queue.Unbind if op.unbind else spec.Queue.Bind
            return self._rpc_or_close(
                op.ch,
                cls(queue=r(op.queue), exchange=r(op.exchange), routing_key=r(op.key), arguments=op.args or None),
            )
        if isinstance(op, O.BindExchange):
            cls2 = spec.Exchange.Unbind if op.unbind else spec.Exchange.Bind
            return self._rpc_or_close(
                op.ch, cls2(destination=r(op.destination), source=r(op.source), routing_key=r(op.key))
            )
        if isinstance(op, O.Publish):
            return self._publish(op)
        if isinstance(op, O.Get):
            st = self.channels[op.ch]
            reply = self._rpc_or_close(op.ch, spec.Basic.Get(queue=r(op.queue), no_ack=op.no_ack))
            if isinstance(reply, dict) and reply.get("method") == "Basic.GetOk" and not op.no_ack:
                st.unacked.append(reply["delivery_tag"])
            return reply
        if isinstance(op, O.Consume):
            st = self.channels[op.ch]
            tag = f"c{op.ch}"
            previous = st.consumer
            st.consumer = (tag, op.no_ack)  # deliveries may follow consume-ok at once
            cargs = {"x-stream-offset": op.offset} if op.offset is not None else None
            reply = self._rpc_or_close(
                op.ch,
                spec.Basic.Consume(
                    queue=r(op.queue), consumer_tag=tag, no_ack=op.no_ack, exclusive=op.exclusive, arguments=cargs
                ),
            )
            if not (isinstance(reply, dict) and reply.get("method") == "Basic.ConsumeOk"):
                st.consumer = previous if st.open else None
            return reply
        if isinstance(op, O.Cancel):
            st = self.channels[op.ch]
            reply = self._rpc_or_close(op.ch, spec.Basic.Cancel(consumer_tag=f"c{op.ch}"))
            if isinstance(reply, dict) and reply.get("method") == "Basic.CancelOk":
                st.consumer = None
            return reply
        if isinstance(op, O.Qos):
            return self._rpc_or_close(op.ch, spec.Basic.Qos(prefetch_count=op.prefetch))
        if isinstance(op, (O.Ack, O.Nack, O.Reject)):
            st = self.channels[op.ch]
            if not st.unacked:
                return ("nothing-unacked",)
            tags = sorted(st.unacked)
            tag = tags[op.index % len(tags)]
            multiple = getattr(op, "multiple", False)
            if isinstance(op, O.Ack):
                method: Any = spec.Basic.Ack(delivery_tag=tag, multiple=multiple)
            elif isinstance(op, O.Nack):
                method = spec.Basic.Nack(delivery_tag=tag, multiple=multiple, requeue=op.requeue)
            else:
                method = spec.Basic.Reject(delivery_tag=tag, requeue=op.requeue)
            st.unacked = [t for t in st.unacked if not (t == tag or (multiple and t <= tag))]
            assert self.conn is not None
            self.conn.send_method(op.ch, method)
            return ("sent", tag)
        if isinstance(op, O.AckUnknown):
            st = self.channels[op.ch]
            assert self.conn is not None
            self.conn.send_method(op.ch, spec.Basic.Ack(delivery_tag=st.max_tag + 100))
            return ("sent",)
        if isinstance(op, O.Recover):
            st = self.channels[op.ch]
            reply = self._rpc_or_close(op.ch, spec.Basic.Recover(requeue=op.requeue))
            if op.requeue:
                st.unacked.clear()
            return reply
        if isinstance(op, O.SettleAll):
            st = self.channels[op.ch]
            assert self.conn is not None
            m = spec.Basic.Nack(0, True, op.requeue) if op.nack else spec.Basic.Ack(0, True)
            self.conn.send_method(op.ch, m)
            st.unacked.clear()
            return ("sent",)
        if isinstance(op, O.CloseChannel):
            reply = self._rpc_or_close(
                op.ch, spec.Channel.Close(reply_code=200, reply_text="bye", class_id=0, method_id=0)
            )
            st = self.channels[op.ch]
            st.open = False
            st.consumer = None
            st.unacked.clear()
            return reply
        if isinstance(op, O.CloseConnection):
            assert self.conn is not None
            self.conn.send_method(0, spec.Connection.Close(200, "bye", 0, 0))
            reply = self._await_close_ok()
            self._dead()
            return reply
        raise TypeError(op)

    def _await_close_ok(self) -> Any:
        """Read until ``connection.close-ok`` (dispatching anything before it)."""
        deadline = time.monotonic() + RPC_TIMEOUT
        while self.conn is not None and not self.conn.eof and time.monotonic() < deadline:
            f = self.conn.read_frame(max(deadline - time.monotonic(), 0.0005))
            if f is None:
                break
            if f.name == "Connection.CloseOk":
                return {"method": "Connection.CloseOk"}
            self._dispatch(f)
        return ("no-close-ok",)

    def _publish(self, op: O.Publish) -> Any:
        st = self.channels[op.ch]
        assert self.conn is not None
        self._pub_counter += 1
        headers = {k: self.res_value(v) for k, v in op.headers.items()} if op.headers else None
        props = spec.BasicProperties(
            priority=op.priority,
            expiration=op.expiration,
            delivery_mode=2 if op.persistent else None,
            headers=headers,
            message_id=f"m{self._pub_counter}",
        )
        body = f"m{self._pub_counter}".encode()
        seq = st.next_seq
        st.next_seq += 1
        st.outstanding.add(seq)
        self.conn.send(
            method_frame(
                op.ch,
                spec.Basic.Publish(
                    exchange=self.res(op.exchange),
                    routing_key=self.res(op.key),
                    mandatory=op.mandatory,
                    immediate=op.immediate,
                ),
            )
            + header_frame(op.ch, len(body), props)
            + body_frame(op.ch, body)
        )
        ok = self._pump(lambda: seq not in st.outstanding or not st.open or not self.alive)
        return ("published", seq) if ok else ("no-confirm", seq)

    # -- settling ----------------------------------------------------------------------------------------------
    def _sync_channels(self) -> None:
        for n, st in self.channels.items():
            if st.open and self.alive:
                self._rpc_or_close(n, spec.Exchange.Declare(exchange="amq.direct", type="direct", passive=True))

    def snapshot(self) -> list[Any]:
        out: list[Any] = []
        for q in O.QUEUES:
            if not self.alive:
                out.append(("connection-closed",))
                continue
            if not self.harness.open:
                self._open_harness()
            reply = self._rpc_or_close(HARNESS_CHANNEL, spec.Queue.Declare(queue=self.res(q), passive=True))
            if isinstance(reply, dict):
                count = "<stream>" if self.kinds.get(q) == "stream" else reply["message_count"]
                out.append((count, reply["consumer_count"]))
            else:
                close = self.harness_events[-1] if self.harness_events else reply
                out.append(("absent", close[0]) if isinstance(close, tuple) else close)
                self.harness.open = False
        return out

    def settle(self, max_rounds: int = 60) -> list[Any]:
        """Flush each channel and read the counts until two consecutive rounds agree (see the module docstring)."""
        previous: list[Any] | None = None
        for _ in range(max_rounds):
            before = len(self.events)
            self._sync_channels()
            self._drain()
            snap = self.snapshot()
            if previous is not None and snap == previous and len(self.events) == before:
                return snap
            previous = snap
            if self.live:
                time.sleep(self.settle_interval * (5 if self.slow else 1))
        return previous or []

    def cleanup(self) -> None:
        """Delete every queue and exchange of this scenario's vocabulary (the prefix makes them ours)."""
        try:
            conn = RawAMQP.connect(self.url)
        except Exception:
            return
        try:
            for i, name in enumerate(O.QUEUES + O.EXCHANGES):
                n = i + 1
                conn.send_method(n, spec.Channel.Open())
                conn.wait("Channel.OpenOk")
                if name in O.QUEUES:
                    conn.send_method(n, spec.Queue.Delete(queue=self.prefix + name))
                    conn.wait("Queue.DeleteOk")
                else:
                    conn.send_method(n, spec.Exchange.Delete(exchange=self.prefix + name))
                    conn.wait("Exchange.DeleteOk")
        except Exception:
            pass
        finally:
            conn.close()
