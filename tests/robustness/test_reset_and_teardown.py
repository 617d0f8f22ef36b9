"""What clients see when the broker is reset under them, and what a dropped connection leaves behind (issue 11)."""

from __future__ import annotations

import gc
import logging
import socket
import struct
import threading
import time

import pika
import pika.exceptions
import pytest
from pamqp import commands
from pika import spec

from fakerabbit import FakeRabbit
from fakerabbit.protocol.connection import AMQPConnection
from tests.rawamqp import RawAMQP, frame, method_frame


def test_reset_tells_clients_connection_forced() -> None:
    with FakeRabbit() as rabbit:
        conn = pika.BlockingConnection(pika.URLParameters(rabbit.url))
        ch = conn.channel()
        ch.queue_declare("q")
        ch.confirm_delivery()
        ch.basic_publish("", "q", b"x")
        rabbit.reset()
        with pytest.raises(pika.exceptions.ConnectionClosedByBroker) as closed:
            for _ in range(40):
                conn.process_data_events(time_limit=0.05)
        assert closed.value.reply_code == 320
        assert closed.value.reply_text == "CONNECTION_FORCED - broker forced connection closure with reason 'shutdown'"


def test_reset_during_traffic_closes_every_client_with_320() -> None:
    """Publishers and a consumer busy in threads; reset() in the middle: each sees a 320 close, none a reset."""
    with FakeRabbit() as rabbit:
        results: list[object] = []
        started = threading.Barrier(4)

        def publisher() -> None:
            conn = pika.BlockingConnection(pika.URLParameters(rabbit.url))
            ch = conn.channel()
            ch.queue_declare("busy")
            started.wait()
            try:
                while True:
                    ch.basic_publish("", "busy", b"x" * 1000)
                    conn.process_data_events(time_limit=0)
            except pika.exceptions.ConnectionClosedByBroker as exc:
                results.append(exc.reply_code)
            except Exception as exc:  # anything else is what this test is about
                results.append(repr(exc))

        def consumer() -> None:
            conn = pika.BlockingConnection(pika.URLParameters(rabbit.url))
            ch = conn.channel()
            ch.queue_declare("busy")
            ch.basic_consume("busy", lambda c, m, p, b: None, auto_ack=True)
            started.wait()
            try:
                while True:
                    conn.process_data_events(time_limit=0.05)
            except pika.exceptions.ConnectionClosedByBroker as exc:
                results.append(exc.reply_code)
            except Exception as exc:
                results.append(repr(exc))

        threads = [threading.Thread(target=publisher) for _ in range(2)] + [threading.Thread(target=consumer)]
        for t in threads:
            t.start()
        started.wait()
        time.sleep(0.05)
        rabbit.reset()
        for t in threads:
            t.join(10)
        assert results == [320, 320, 320]


def test_a_dropped_connection_frees_its_unfinished_bodies_at_once() -> None:
    """A client that announces a big body, sends part of it and goes: nothing of it stays referenced."""
    with FakeRabbit() as rabbit:
        c = RawAMQP.connect(rabbit.url)
        c.open_channel(1)
        size = 4 * 1024 * 1024
        c.send(
            method_frame(1, spec.Basic.Publish(exchange="", routing_key="q"))
            + frame(2, 1, struct.pack(">HHQ", 60, 0, size) + b"\x00\x00")
        )
        chunk = b"z" * 131000
        for _ in range(16):
            c.send(frame(3, 1, chunk))
        c.send(frame(3, 1, chunk)[:1000])  # and a frame cut short, waiting in the reader's buffer
        deadline = time.monotonic() + 5
        conns = list(rabbit._listener.connections)
        assert len(conns) == 1
        amqp: AMQPConnection = conns[0]

        def held() -> int:
            return sum(len(b) for ch in list(amqp.channels.values()) for b in ch._body)

        while (held() < 16 * 131000 or amqp.reader.pending() < 900) and time.monotonic() < deadline:
            time.sleep(0.01)
        handlers = list(amqp.channels.values())
        assert handlers and held() >= 16 * 131000 and amqp.reader.pending() >= 900
        gc.disable()  # what is freed must be freed without a collection
        try:
            c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            c.sock.close()
            while rabbit._listener.connections and time.monotonic() < deadline:
                time.sleep(0.01)
            assert not rabbit._listener.connections
            assert amqp.reader.pending() == 0
            assert all(ch._body == [] for ch in handlers)
            assert amqp.channels == {}
        finally:
            gc.enable()


def test_an_internal_error_costs_one_log_line_per_connection(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever a client sends, a connection costs at most one line of log at INFO and above (issue 11)."""
    from fakerabbit.protocol.handlers import HANDLERS

    def broken(ch: object, m: object, payload: bytes) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setitem(HANDLERS, commands.Basic.Qos, broken)
    caplog.set_level(logging.INFO, logger="fakerabbit")
    with FakeRabbit() as rabbit:
        for _ in range(3):
            c = RawAMQP.connect(rabbit.url)
            c.open_channel(1)
            c.send(method_frame(1, spec.Basic.Qos(0, 1, False)) * 5)
            close = c.expect_close()
            assert (close.reply_code, close.reply_text) == (541, "INTERNAL_ERROR")
            c.sock.close()
        rabbit.clear_problems()
    lines = [r for r in caplog.records if r.levelno >= logging.INFO]
    assert len(lines) == 3 and all("\n" not in r.getMessage() and r.exc_info is None for r in lines)
