"""pika's SelectConnection: a callback-driven session on pika's own ioloop, bounded by a timeout."""

from __future__ import annotations

from typing import Any

import pika
import pika.exceptions
from pika.adapters.select_connection import SelectConnection

from tests.clients.conftest import TTL_MS, ClientTarget, not_found

TIMEOUT = 10.0


class Session:
    """Each callback does one step and asks for the next; ``log`` records what the client saw."""

    def __init__(self, broker: ClientTarget) -> None:
        self.broker = broker
        self.hdrs, self.work, self.other = broker.exchange("hdrs"), broker.name("work"), broker.name("other")
        self.ttl, self.dead, self.missing = broker.name("ttl"), broker.name("dead"), broker.name("missing")
        self.log: list[Any] = []
        self.acked: set[int] = set()
        self.published = 0
        self.on_all_confirmed: Any = None
        self.error: BaseException | None = None
        params = pika.URLParameters(broker.url)
        params.client_properties = {"connection_name": "clients-pika-select"}
        self.conn = SelectConnection(
            params,
            on_open_callback=self.on_open,
            on_open_error_callback=lambda _c, exc: self.fail(exc),
            on_close_callback=self.on_closed,
        )
        self.ch: Any = None

    def run(self) -> None:
        timer = self.conn.ioloop.call_later(TIMEOUT, lambda: self.fail(TimeoutError(f"session stuck: {self.log}")))
        self.conn.ioloop.start()
        self.conn.ioloop.remove_timeout(timer)
        if self.error is not None:
            raise self.error

    def fail(self, exc: BaseException) -> None:
        self.error = self.error or exc
        if self.conn.is_open:
            self.conn.close()
        else:
            self.conn.ioloop.stop()

    def step(self, fn: Any) -> Any:
        """Wrap a callback so that an assertion failing inside pika's ioloop ends the session."""

        def wrapped(*args: Any) -> None:
            try:
                fn(*args)
            except BaseException as exc:
                self.fail(exc)

        return wrapped

    # -- open, declare, bind ------------------------------------------------------------------------------
    def on_open(self, conn: SelectConnection) -> None:
        conn.channel(on_open_callback=self.step(self.on_channel))

    def on_channel(self, ch: Any) -> None:
        self.ch = ch
        ch.add_on_close_callback(self.step(self.on_channel_closed))
        ch.confirm_delivery(self.step(self.on_confirm), callback=self.step(self.declare_exchange))

    def declare_exchange(self, _frame: Any) -> None:
        self.ch.exchange_declare(self.hdrs, "headers", callback=self.step(self.declare_queues))

    def declare_queues(self, _frame: Any) -> None:
        dl = {"x-dead-letter-exchange": "", "x-dead-letter-routing-key": self.dead}
        self.ch.queue_declare(self.dead)
        self.ch.queue_declare(self.other)
        self.ch.queue_declare(self.ttl, arguments={**dl, "x-message-ttl": TTL_MS})
        self.ch.queue_declare(self.work, arguments=dl, callback=self.step(self.bind))

    def bind(self, frame: Any) -> None:
        assert frame.method.queue == self.work
        self.ch.queue_bind(self.other, self.hdrs, arguments={"x-match": "any", "kind": "invoice", "vip": True})
        self.ch.queue_bind(
            self.work,
            self.hdrs,
            arguments={"x-match": "all", "kind": "order", "region": "eu"},
            callback=self.step(self.publish),
        )

    # -- publish with confirms -----------------------------------------------------------------------------
    def publish(self, _frame: Any) -> None:
        for headers, body in (
            ({"kind": "order", "region": "eu", "n": 1}, b"order-eu"),
            ({"kind": "invoice"}, b"invoice"),
            ({"kind": "order", "region": "us"}, b"order-us (unroutable, dropped)"),
            ({"kind": "other", "vip": True}, b"vip"),
        ):
            self.basic_publish(self.hdrs, "", body, pika.BasicProperties(headers=headers, message_id=body.decode()))
        self.on_all_confirmed = self.consume

    def basic_publish(self, exchange: str, key: str, body: bytes, props: pika.BasicProperties) -> None:
        self.ch.basic_publish(exchange, key, body, props)
        self.published += 1

    def on_confirm(self, frame: Any) -> None:
        method = frame.method
        assert isinstance(method, pika.spec.Basic.Ack), method
        self.acked.update(range(1, method.delivery_tag + 1) if method.multiple else [method.delivery_tag])
        if self.acked == set(range(1, self.published + 1)) and self.on_all_confirmed is not None:
            then, self.on_all_confirmed = self.on_all_confirmed, None
            self.log.append(("confirmed", self.published))
            then()

    # -- consume with prefetch 1 and manual ack; nack with requeue ----------------------------------------
    def consume(self) -> None:
        self.ch.basic_qos(prefetch_count=1, callback=self.step(self.start_consumer))

    def start_consumer(self, _frame: Any) -> None:
        self.ch.basic_consume(self.work, self.step(self.on_message), consumer_tag="select-1")

    def on_message(self, ch: Any, method: Any, props: pika.BasicProperties, body: bytes) -> None:
        self.log.append(("deliver", method.consumer_tag, body, method.redelivered, props.headers))
        if not method.redelivered:
            ch.basic_nack(method.delivery_tag, requeue=True)
            return
        ch.basic_ack(method.delivery_tag)
        ch.basic_cancel("select-1", callback=self.step(self.get_other))

    def get_other(self, frame: Any) -> None:
        self.log.append(("cancel-ok", frame.method.consumer_tag))
        self.ch.basic_get(self.other, self.step(self.on_get_other))

    def on_get_other(self, ch: Any, method: Any, props: pika.BasicProperties, body: bytes) -> None:
        self.log.append(("get", body, method.message_count))
        ch.basic_ack(method.delivery_tag)
        if method.message_count:
            ch.basic_get(self.other, self.step(self.on_get_other))
        else:
            self.publish_ttl()

    # -- TTL into a dead-letter queue ----------------------------------------------------------------------
    def publish_ttl(self) -> None:
        self.basic_publish("", self.ttl, b"expiring", pika.BasicProperties(headers={"attempt": 1}))
        self.on_all_confirmed = self.let_ttl_pass  # the message is enqueued once confirmed

    def let_ttl_pass(self) -> None:
        if self.broker.fake is not None:
            self.broker.expire()  # runs on the server's thread; the ioloop then reads the effects
            self.get_dead()
        else:
            self.conn.ioloop.call_later(TTL_MS / 1000 + 0.02, self.step(self.get_dead))

    def get_dead(self) -> None:
        self.ch.basic_get(self.dead, self.step(self.on_dead), auto_ack=True)
        self.ch.callbacks.add(self.ch.channel_number, pika.spec.Basic.GetEmpty, self.step(self.on_dead_empty), True)

    def on_dead_empty(self, _frame: Any) -> None:
        assert self.broker.fake is None, "the expired message is not in the DLQ right after the clock moved"
        self.conn.ioloop.call_later(0.02, self.step(self.get_dead))

    def on_dead(self, _ch: Any, method: Any, props: pika.BasicProperties, body: bytes) -> None:
        (death,) = props.headers["x-death"]
        self.log.append(("dead", body, method.routing_key, props.headers["attempt"], death["reason"], death["queue"]))
        self.ch.queue_declare(self.missing, passive=True)  # -> channel.close 404

    # -- channel error, then a clean close -----------------------------------------------------------------
    def on_channel_closed(self, _ch: Any, reason: BaseException) -> None:
        assert isinstance(reason, pika.exceptions.ChannelClosedByBroker), reason
        self.log.append(("channel-closed", reason.reply_code, reason.reply_text))
        self.conn.close()

    def on_closed(self, _conn: Any, reason: BaseException) -> None:
        if self.error is None:
            assert isinstance(reason, pika.exceptions.ConnectionClosedByClient), reason
            self.log.append(("connection-closed", reason.reply_code, reason.reply_text))
        self.conn.ioloop.stop()


def test_pika_select_connection_session(broker: ClientTarget) -> None:
    s = Session(broker)
    s.run()
    assert s.log == [
        ("confirmed", 4),
        ("deliver", "select-1", b"order-eu", False, {"kind": "order", "region": "eu", "n": 1}),
        ("deliver", "select-1", b"order-eu", True, {"kind": "order", "region": "eu", "n": 1}),
        ("cancel-ok", "select-1"),
        ("get", b"invoice", 1),
        ("get", b"vip", 0),
        ("confirmed", 5),
        ("dead", b"expiring", s.dead, 1, "expired", s.ttl),
        ("channel-closed", 404, not_found(s.missing)),
        ("connection-closed", 200, "Normal shutdown"),
    ]
