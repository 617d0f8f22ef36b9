"""Fuzzing the wire: random and mutated input after a valid handshake (hypothesis, raw sockets).

Every example opens a raw connection (``rawamqp``), opens channels 1 and 2, takes two messages from ``fuzz.keep``
with ``basic.get`` (so the connection holds two unacknowledged messages), then sends its input — in up to four
chunks, each processed by the broker before the next is sent, so frames are also split at arbitrary points. The
properties checked after every example:

(a) the broker answers in bounded time and only with well-formed frames: a ``connection.close`` whose code is in
    RabbitMQ's set for that input (an exact code, text fragment and method ids for the targeted categories), a
    dropped TCP connection where RabbitMQ drops it (unknown method ids, malformed tables in method arguments), or
    — for input that may be harmless or incomplete — nothing, in which case the connection must still answer a
    ``channel.open``; whatever happened, the broker lets go of the connection once the socket is closed;
(b) no Python exception escaped a handler: no ``fakerabbit internal error`` problem (the connection code turns
    one into a 541) and no ERROR record from the ``fakerabbit`` or ``asyncio`` loggers;
(c) a separate, healthy pika connection does a publish/get round trip;
(d) ``fuzz.keep`` still holds its five messages, none unacked: the two taken are back (redelivered) once the
    bad connection is gone; and a message whose body does not add up to its header's size is never published.

The targeted categories' expectations come from RabbitMQ 3.10.8 (notes/rabbitmq-3.10-observed.md, section 2, and
probes against the local broker). ``test_explicit_case`` runs a few of them, with exact texts, against a real
RabbitMQ too when FAKERABBIT_REAL_URL is set.

Hypothesis runs derandomized (the same examples every run); set FAKERABBIT_FUZZ_RANDOM=1 to explore, and
FAKERABBIT_FUZZ_SCALE=N for N times as many examples.
"""

from __future__ import annotations

import contextlib
import logging
import os
import struct
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pika
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pika import spec

from fakerabbit import FakeRabbit
from fakerabbit.protocol import connection as fake_connection_module
from tests.rawamqp import Close, Frame, RawAMQP, body_frame, frame, header_frame, method_frame
from tests.robustness.conftest import REAL_URL, ErrorLog, fake_connection

KEEP, KEEP_COUNT = "fuzz.keep", 5
SINK = "fuzz.sink"
HEALTH = "fuzz.health"
PROBE_CHANNEL = 3000

#: Connection-level codes RabbitMQ uses after the handshake (notes, section 2 and 11.7): frame errors, syntax,
#: command invalid, channel error, unexpected frame, not allowed, not implemented, internal error (a channel
#: that crashed decoding a property block).
CONNECTION_CODES = frozenset({501, 502, 503, 504, 505, 530, 540, 541})
#: Channel-level codes a mutated (but decodable) method can legitimately earn.
CHANNEL_CODES = frozenset({403, 404, 405, 406})
#: Methods RabbitMQ 3.10 knows: pika's table plus basic.credit / credit-ok / credit-drained (notes, section 2).
KNOWN_METHODS = frozenset(spec.methods) | {(60 << 16) | m for m in (200, 201, 202)}
SERVER_INITIATED = frozenset(
    {"Connection.Close", "Connection.Blocked", "Connection.Unblocked", "Channel.Close", "Channel.Flow"}
    | {"Basic.Deliver", "Basic.Return", "Basic.GetEmpty", "Basic.Ack", "Basic.Nack", "Basic.Cancel"}
)

END_TIMEOUT = 3.0  # a close or EOF that must come, must come within this
IDLE = 0.01  # after the broker has processed the input, how long to wait for stragglers

FUZZ_SETTINGS = settings(
    deadline=None,
    derandomize=not os.environ.get("FAKERABBIT_FUZZ_RANDOM"),
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def fuzz(max_examples: int) -> settings:
    return settings(FUZZ_SETTINGS, max_examples=max_examples * int(os.environ.get("FAKERABBIT_FUZZ_SCALE", "1")))


pytestmark = pytest.mark.timeout(180)


# -- frames -------------------------------------------------------------------------------------------------------
def m(method: Any, channel: int = 1) -> bytes:
    return method_frame(channel, method)


def raw_method(channel: int, class_id: int, method_id: int, args: bytes = b"") -> bytes:
    return frame(1, channel, struct.pack(">HH", class_id, method_id) + args)


PROPS = spec.BasicProperties(
    content_type="text/plain",
    headers={"k": "v", "n": 1, "list": [1, "a"], "t": {"x": True}},
    delivery_mode=2,
    priority=3,
    expiration="60000",
    message_id="m1",
    timestamp=1700000000,
)

#: Single frames (or one method with its content) that are valid on an open channel 1 and raise no error once the
#: first two (the declares) have run. They never name fuzz.keep / fuzz.sink and never settle a delivery, so no
#: mutation of them can take a message away.
SAFE: list[list[bytes]] = [
    [m(spec.Queue.Declare(queue="fuzz.t", arguments={"x-max-length": 100, "x-message-ttl": 60000}))],
    [m(spec.Exchange.Declare(exchange="fuzz.x", type="topic", arguments={"alternate-exchange": "fuzz.ae"}))],
    [m(spec.Queue.Bind(queue="fuzz.t", exchange="fuzz.x", routing_key="a.#", arguments={"x-note": "b"}))],
    [
        m(spec.Basic.Publish(exchange="fuzz.x", routing_key="a.b")),
        header_frame(1, 11, PROPS),
        body_frame(1, b"hello world"),
    ],
    [m(spec.Basic.Qos(0, 10, False))],
    [m(spec.Basic.Get(queue="fuzz.t", no_ack=True))],
    [m(spec.Channel.Flow(True))],
    [m(spec.Queue.Unbind(queue="fuzz.t", exchange="fuzz.x", routing_key="zzz"))],
]
#: More methods for mutation: valid, but some close channel 1 or conflict with each other (channel errors).
EXTRA: list[list[bytes]] = [
    [m(spec.Basic.Consume(queue="fuzz.t", no_ack=True))],
    [m(spec.Basic.Cancel(consumer_tag="fuzz-none"))],
    [m(spec.Confirm.Select())],
    [m(spec.Tx.Select())],
    [m(spec.Tx.Commit())],
    [m(spec.Basic.Recover(requeue=True))],
    [m(spec.Queue.Purge(queue="fuzz.t"))],
    [m(spec.Queue.Delete(queue="fuzz.t2"))],
    [m(spec.Exchange.Declare(exchange="amq.direct", passive=True))],
    [m(spec.Channel.Open(), channel=4)],
    [m(spec.Channel.Close(200, "bye", 0, 0))],
    [m(spec.Basic.Publish(exchange="", routing_key="fuzz.t")), header_frame(1, 0)],
    [frame(8, 0, b"")],
]
TEMPLATES = SAFE + EXTRA
#: Methods (no content) for the unopened-channel category, each with its class and method ids.
UNOPENED_METHODS: list[Any] = [
    spec.Queue.Declare(queue="fuzz.t"),
    spec.Exchange.Declare(exchange="fuzz.x", type="topic"),
    spec.Basic.Qos(0, 10, False),
    spec.Basic.Get(queue="fuzz.t"),
    spec.Basic.Consume(queue="fuzz.t"),
    spec.Basic.Ack(1, False),
    spec.Basic.Reject(1, False),
    spec.Confirm.Select(),
    spec.Tx.Select(),
    spec.Channel.Flow(True),
    spec.Channel.Close(200, "", 0, 0),
    spec.Channel.CloseOk(),
    spec.Access.Request(realm="/data"),
]


# -- expectations and outcomes --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Expect:
    """What RabbitMQ does with an input. ``kind``: "close" (connection.close with ``code``, ``text`` as a fragment
    of the reply text, ``ids``; ``exact`` for the whole text), "drop" (TCP closed, no close frame), "reply" (the
    connection stays up and answers ``reply``), "alive" (no error at all), or "any" (any close code of
    RabbitMQ's, a drop, or nothing)."""

    kind: str
    code: int | None = None
    text: str | None = None
    ids: tuple[int, int] | None = None
    exact: bool = False
    reply: str | None = None
    published: int | None = None  # messages that must have reached fuzz.sink

    @property
    def label(self) -> str:
        return f"{self.kind} {self.code or ''}".strip()


ANY = Expect("any")


@dataclass
class Outcome:
    frames: list[Frame] = field(default_factory=list)
    close: Close | None = None
    eof: bool = False

    @property
    def label(self) -> str:
        if self.close is not None:
            return f"close {self.close.reply_code}"
        return "drop" if self.eof else "alive"


def check_frame(f: Frame) -> None:
    """Only well-formed frames, and only methods a server sends (rawamqp already checked the frame-end octet)."""
    assert f.type in (1, 2, 3, 8), f
    if f.type == 1:
        assert f.method is not None, f"undecodable method frame from the broker: {f.raw!r}"
        assert f.name in SERVER_INITIATED or f.name.endswith("Ok"), f
        assert (f.channel == 0) == f.name.startswith("Connection."), f
    if f.type == 8:
        assert f.channel == 0 and f.payload == b"", f


def as_close(f: Frame) -> Close:
    mm = f.method
    text = mm.reply_text if isinstance(mm.reply_text, str) else mm.reply_text.decode("utf-8", "surrogateescape")
    return Close(f.channel, mm.reply_code, text, mm.class_id, mm.method_id)


def read_outcome(c: RawAMQP, must_end: bool, sync: Callable[[], None] | None) -> Outcome:
    """Frames until a connection.close or EOF; stops after IDLE seconds of silence unless ``must_end``."""
    if sync is not None:
        sync()  # the broker has handled everything sent: what it answered is already on its way
    out = Outcome()
    deadline = time.monotonic() + (END_TIMEOUT if must_end else 0.0)
    idle = IDLE if sync is not None else 0.3
    while True:
        f = c.read_frame(max(deadline - time.monotonic(), idle))
        if f is None:
            if c.eof or time.monotonic() >= deadline:
                break
            continue
        check_frame(f)
        if f.type == 8:
            continue
        out.frames.append(f)
        if f.name == "Connection.Close":
            out.close = as_close(f)
            break
    out.eof = c.eof
    return out


def check_expectation(expect: Expect, out: Outcome) -> None:
    for f in out.frames:
        if f.name == "Channel.Close":
            assert as_close(f).reply_code in CHANNEL_CODES, f
    if expect.kind == "any":
        if out.close is not None:
            assert out.close.reply_code in CONNECTION_CODES, out.close
        return
    if expect.kind == "drop":
        assert out.close is None and out.eof, (
            f"expected the TCP connection to drop, got {out.frames[-3:]} eof={out.eof}"
        )
        return
    if expect.kind == "alive":
        assert out.close is None and not out.eof, out.frames[-3:]
        assert "Channel.Close" not in [f.name for f in out.frames], out.frames[-3:]
        return
    if expect.kind == "reply":
        assert out.close is None and not out.eof, out.frames[-3:]
        assert expect.reply in [f.name for f in out.frames], out.frames[-3:]
        return
    assert out.close is not None, f"expected connection.close {expect.code}; got {out.frames[-3:]} eof={out.eof}"
    got = out.close
    assert (got.channel, got.reply_code) == (0, expect.code), got
    if expect.text is not None:
        assert (got.reply_text == expect.text) if expect.exact else (expect.text in got.reply_text), got
    if expect.ids is not None:
        assert (got.class_id, got.method_id) == expect.ids, got


# -- the environment ---------------------------------------------------------------------------------------------
class Env:
    """One FakeRabbit for the whole module, a healthy pika connection, and the bookkeeping of every example."""

    def __init__(self, rabbit: FakeRabbit, errors: ErrorLog) -> None:
        self.rabbit = rabbit
        self.errors = errors
        self.health = pika.BlockingConnection(pika.URLParameters(rabbit.url + "?heartbeat=0"))
        self.ch = self.health.channel()
        for q in (KEEP, SINK, HEALTH):
            self.ch.queue_declare(q)
        for i in range(KEEP_COUNT):
            self.ch.basic_publish("", KEEP, f"keep-{i}".encode())
        self.keep_bodies = {f"keep-{i}".encode() for i in range(KEEP_COUNT)}
        self.taken: list[bytes] = []  # what the current example's connection holds unacked
        self.outcomes: Counter[str] = Counter()
        self.examples = 0

    def sync(self) -> None:
        self.rabbit._call(self.rabbit._listener.drain_inbound)

    def open(self, frame_max: int = 131072) -> tuple[RawAMQP, Any]:
        c = RawAMQP.connect(self.rabbit.url, frame_max=frame_max)
        c.open_channel(1)
        c.open_channel(2)
        self.taken = []
        for _ in range(2):
            ok = c.rpc(2, spec.Basic.Get(queue=KEEP, no_ack=False), "Basic.GetOk")
            assert ok.name == "Basic.GetOk", ok
            self.taken.append(c.get_message(2).body)
        assert set(self.taken) <= self.keep_bodies
        return c, fake_connection(self.rabbit, c.sock.getsockname()[1])

    def run(
        self,
        category: str,
        chunks: list[bytes],
        expect: Expect,
        *,
        frame_max: int = 131072,
        prelude: Callable[[RawAMQP], None] | None = None,
    ) -> Outcome:
        self.examples += 1
        self.rabbit.clear_problems()  # what a failed example left must not fail this one
        self.errors.records.clear()
        c, conn = self.open(frame_max)
        try:
            if prelude is not None:
                prelude(c)
            sink_before = self.rabbit.queue(SINK).message_count
            try:
                for chunk in chunks:
                    c.send(chunk)
                    self.sync()
            except OSError:
                pass  # the broker already closed the socket (a drop or a fatal frame error); read what it said
            out = read_outcome(c, expect.kind in ("close", "drop"), self.sync)
            self.outcomes[f"{category}: {out.label}"] += 1
            check_expectation(expect, out)
            self.finish(c, conn, out)
        finally:
            c.sock.close()
        deadline = time.monotonic() + END_TIMEOUT
        while self.rabbit._call(lambda: conn in self.rabbit._listener.connections):
            assert time.monotonic() < deadline, "the broker kept a connection whose socket was closed"
            time.sleep(0.002)
        if expect.published is not None:
            assert self.rabbit.queue(SINK).message_count - sink_before == expect.published
        self.check_invariants()
        return out

    def finish(self, c: RawAMQP, conn: Any, out: Outcome) -> None:
        """End the connection as a client would; where the broker must close the socket, it does so in time."""
        if out.close is not None:
            with contextlib.suppress(OSError):
                c.close_ok(0)  # after a fatal frame error the broker ignores it and closes by itself
            self.sync()
            # If a frame is still half-read, the close-ok only adds to its payload: RabbitMQ too waits for more
            # (and closes after its 30 s closing timeout). Otherwise the socket must close now.
            reading = self.rabbit._call(lambda: not conn.closed and not conn.stopped and conn.reader.pending() > 0)
            if not reading:
                assert c.wait_eof(END_TIMEOUT), f"no EOF after {out.close} and close-ok"
        elif not out.eof:
            alive = self.rabbit._call(
                lambda: conn.state == "running" and not conn.stopped and not conn.reader.pending()
            )
            if alive:  # nothing half-sent is pending: the connection must still answer
                probe = c.rpc(PROBE_CHANNEL, spec.Channel.Open(), "Channel.OpenOk", timeout=END_TIMEOUT)
                check_frame(probe)
                if probe.name == "Connection.Close":
                    assert as_close(probe).reply_code in CONNECTION_CODES, probe
                else:
                    assert probe.name == "Channel.OpenOk", probe

    def check_invariants(self) -> None:
        problems = self.rabbit.clear_problems()
        logged = self.errors.messages()
        self.errors.records.clear()
        assert [p for p in problems if "internal error" in p] == []
        assert logged == []
        keep = self.rabbit.queue(KEEP)
        assert (keep.message_count, keep.unacked_count) == (KEEP_COUNT, 0)
        assert {msg.body for msg in keep.messages} == self.keep_bodies
        assert {msg.body for msg in keep.messages if msg.redelivered} >= set(self.taken)
        body = f"health-{self.examples}".encode()
        self.ch.basic_publish("", HEALTH, body)
        method, _props, got = self.ch.basic_get(HEALTH, auto_ack=True)
        assert method is not None and got == body
        sink = self.rabbit.queue(SINK).message_count
        if sink:
            self.ch.queue_purge(SINK)
        # A mutated declare may have left fuzz.t / fuzz.x with other arguments: the next example's valid prefix
        # would then get a 406 instead of an ok.
        self.ch.queue_delete("fuzz.t")
        self.ch.exchange_delete("fuzz.x")


@pytest.fixture(scope="module")
def env() -> Iterator[Env]:
    errors = ErrorLog()
    root = logging.getLogger()
    root.addHandler(errors)
    try:
        with pytest.MonkeyPatch.context() as mp:
            # RabbitMQ closes 3 s after a fatal frame error; the fake's delay is a module constant.
            mp.setattr(fake_connection_module, "SILENT_CLOSE_DELAY", 0.002)
            with FakeRabbit() as rabbit:
                e = Env(rabbit, errors)
                yield e
                print(f"\nfuzz: {e.examples} examples; outcomes:")
                for key, n in sorted(e.outcomes.items()):
                    print(f"  {key}: {n}")
                e.health.close()
    finally:
        root.removeHandler(errors)


# -- strategies -----------------------------------------------------------------------------------------------------
def split(draw: Any, data: bytes) -> list[bytes]:
    """``data`` in 1-4 chunks cut at arbitrary points."""
    if len(data) < 2:
        return [data]
    cuts = sorted(set(draw(st.lists(st.integers(1, len(data) - 1), max_size=3))))
    return [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]


def safe_prefix(draw: Any) -> bytes:
    """Nothing, or the two declares and up to two more valid methods (the declares first: the others use them)."""
    if not draw(st.booleans()):
        return b""
    more = draw(st.lists(st.sampled_from(SAFE[2:]), max_size=2))
    return b"".join(b"".join(t) for t in SAFE[:2] + more)


@st.composite
def random_input(draw: Any) -> list[bytes]:
    data = draw(st.binary(min_size=1, max_size=400))
    return split(draw, data)


KNOWN_INDEXES = sorted(spec.methods)


@st.composite
def random_frames(draw: Any) -> list[bytes]:
    """Well-framed nonsense: known method ids with random arguments, random content headers and bodies,
    heartbeats, on channels 0, 1, 2 or others."""
    frames = []
    for _ in range(draw(st.integers(1, 4))):
        channel = draw(st.one_of(st.sampled_from([0, 1, 1, 2]), st.integers(0, 65535)))
        kind = draw(st.sampled_from([1, 1, 1, 2, 3, 8]))
        if kind == 1:
            payload = struct.pack(">I", draw(st.sampled_from(KNOWN_INDEXES))) + draw(st.binary(max_size=40))
        elif kind == 2:
            payload = struct.pack(">HHQ", 60, 0, draw(st.integers(0, 64))) + draw(st.binary(max_size=30))
        else:
            payload = draw(st.binary(max_size=16 if kind == 8 else 64))
        frames.append(frame(kind, channel, payload))
    return split(draw, b"".join(frames))


def mutate(draw: Any, data: bytearray) -> bytearray:
    """1-3 byte-level mutations: bit flips, overwritten octets, truncation, deletion, insertion, duplication."""
    for _ in range(draw(st.integers(1, 3))):
        if not data:
            data = bytearray(b"\x01")
        op = draw(st.sampled_from(["flip", "flip", "byte", "truncate", "delete", "insert", "duplicate"]))
        pos = draw(st.integers(0, len(data) - 1))
        if op == "flip":
            data[pos] ^= 1 << draw(st.integers(0, 7))
        elif op == "byte":
            data[pos] = draw(st.integers(0, 255))
        elif op == "truncate":
            del data[pos:]
        elif op == "delete":
            del data[pos : pos + draw(st.integers(1, 8))]
        elif op == "insert":
            data[pos:pos] = draw(st.binary(min_size=1, max_size=8))
        else:
            data[pos:pos] = data[pos : pos + draw(st.integers(1, 16))]
    return data


@st.composite
def mutated_input(draw: Any) -> list[bytes]:
    """A session of valid frames, mutated anywhere (frame headers and frame-end octets included)."""
    data = bytearray(b"".join(b"".join(t) for t in draw(st.lists(st.sampled_from(TEMPLATES), min_size=1, max_size=4))))
    data = mutate(draw, data) or bytearray(b"\x01")
    return split(draw, bytes(data))


@st.composite
def mutated_payloads(draw: Any) -> list[bytes]:
    """A session of valid frames in which one frame's payload is mutated and the frame rebuilt around it (right
    size, right frame end), so that the input gets past the framing into the decoders and the handlers."""
    frames = [f for t in draw(st.lists(st.sampled_from(TEMPLATES), min_size=1, max_size=5)) for f in t]
    i = draw(st.integers(0, len(frames) - 1))
    ftype, channel = struct.unpack_from(">BH", frames[i])
    frames[i] = frame(ftype, channel, bytes(mutate(draw, bytearray(frames[i][7:-1]))))
    return split(draw, b"".join(frames))


@st.composite
def truncated_session(draw: Any) -> list[bytes]:
    """A valid session cut at an arbitrary point: the broker waits for the rest, nothing is an error."""
    data = b"".join(b"".join(t) for t in SAFE[:2] + draw(st.lists(st.sampled_from(SAFE[2:]), min_size=1, max_size=4)))
    return split(draw, data[: draw(st.integers(1, len(data) - 1))])


@st.composite
def bad_frame_end(draw: Any) -> tuple[list[bytes], Expect]:
    if draw(st.booleans()):
        template = draw(st.sampled_from(TEMPLATES))
        good = draw(st.sampled_from(template))
    else:
        good = frame(draw(st.integers(0, 255)), draw(st.integers(0, 65535)), draw(st.binary(max_size=100)))
    end = draw(st.integers(0, 255).filter(lambda b: b != 0xCE))
    data = safe_prefix(draw) + good[:-1] + bytes([end])
    return split(draw, data), Expect("close", 501, "{invalid_frame_end_marker,", (0, 0))


@st.composite
def oversize(draw: Any) -> tuple[list[bytes], Expect, int]:
    frame_max = draw(st.sampled_from([8192, 131072]))  # (8192: the lowest from 4.1, the fake's profile is 4.3)
    size = draw(st.one_of(st.integers(frame_max + 1, frame_max + 16), st.integers(frame_max + 1, 2**32 - 1)))
    head = struct.pack(">BHI", draw(st.integers(0, 255)), draw(st.integers(0, 65535)), size)
    data = safe_prefix(draw) + head + draw(st.binary(max_size=64))
    text = f"{{frame_too_large,{size},{frame_max - 8}}}"
    return split(draw, data), Expect("close", 501, text, (0, 0)), frame_max


@st.composite
def body_size_mismatch(draw: Any) -> tuple[list[bytes], Expect]:
    """A publish to fuzz.sink whose body frames do not add up to the header's size (or do, part way)."""
    announced = draw(st.integers(1, 300))
    sizes = draw(st.lists(st.integers(0, 200), min_size=1, max_size=5))
    # rabbit_command_assembler (4.3, the fake's default profile): each body frame subtracts its size; exactly 0
    # completes the message, a frame longer than what remains is a 501 (up to 4.2 it left the assembler waiting).
    remaining, state, published, expect = announced, "body", 0, None
    for size in sizes:
        if state != "body":
            expect = Expect(
                "close", 505, "UNEXPECTED_FRAME - expected method frame, got non method frame instead", (0, 0)
            )
            break
        if size > remaining:
            text = "FRAME_ERROR - content body frame exceeds remaining content size"
            expect = Expect("close", 501, text, (60, 40), exact=True)
            break
        remaining -= size
        if remaining == 0:
            state, published = "method", 1
    if expect is None:
        if state == "body":
            text = "UNEXPECTED_FRAME - expected content body, got non content body frame instead"
            expect = Expect("close", 505, text, (60, 40), exact=True)
        else:
            expect = Expect("reply", reply="Basic.QosOk")
    expect = Expect(expect.kind, expect.code, expect.text, expect.ids, expect.exact, expect.reply, published)
    payload = b"".join(body_frame(1, b"b" * s) for s in sizes)
    data = (
        safe_prefix(draw)
        + m(spec.Basic.Publish(exchange="", routing_key=SINK))
        + header_frame(1, announced)
        + payload
        + m(spec.Basic.Qos(0, 5, False))
    )
    return split(draw, data), expect


@st.composite
def content_on_channel_0(draw: Any) -> tuple[list[bytes], Expect]:
    kind = draw(st.sampled_from(["header", "short header", "body"]))
    if kind == "header":
        payload = struct.pack(
            ">HHQ", draw(st.sampled_from([60, 50, 99])), draw(st.integers(0, 3)), draw(st.integers(0, 10**6))
        )
        payload += draw(st.binary(max_size=24))
        bad, expect = frame(2, 0, payload), Expect("close", 505, "UNEXPECTED_FRAME - type 2, ", (0, 0))
    elif kind == "short header":
        bad = frame(2, 0, draw(st.binary(max_size=11)))
        expect = Expect("close", 501, "FRAME_ERROR - type 2, ", (0, 0))
    else:
        bad, expect = (
            frame(3, 0, draw(st.binary(max_size=40))),
            Expect("close", 505, "UNEXPECTED_FRAME - type 3, ", (0, 0)),
        )
    # A publish waiting for its content on channel 1 makes no difference: channel 0 is checked on its own.
    waiting = m(spec.Basic.Publish(exchange="", routing_key=SINK)) if draw(st.booleans()) else b""
    data = safe_prefix(draw) + waiting + bad
    return split(draw, data), expect


@st.composite
def unopened_channel(draw: Any) -> tuple[list[bytes], Expect, int, bool]:
    """A method (or stray content) on a channel that was never opened, or was opened and closed again."""
    channel = draw(st.integers(5, 65535))
    closed_before = draw(st.booleans())
    kind = draw(st.sampled_from(["method", "method", "publish", "content"]))
    expected_text = "CHANNEL_ERROR - expected 'channel.open'"
    if kind == "method":
        method = draw(st.sampled_from(UNOPENED_METHODS))
        bad = method_frame(channel, method)
        expect = Expect("close", 504, expected_text, (method.INDEX >> 16, method.INDEX & 0xFFFF), exact=True)
    elif kind == "publish":
        bad = method_frame(channel, spec.Basic.Publish(exchange="", routing_key=SINK))
        bad += header_frame(channel, 3) + body_frame(channel, b"abc")
        expect = Expect("close", 504, expected_text, (60, 40), exact=True, published=0)
    else:
        bad = draw(st.sampled_from([header_frame(channel, 3), body_frame(channel, b"abc")]))
        text = "UNEXPECTED_FRAME - expected method frame, got non method frame instead"
        expect = Expect("close", 505, text, (0, 0), exact=True)
    return split(draw, safe_prefix(draw) + bad), expect, channel, closed_before


@st.composite
def unknown_method(draw: Any) -> list[bytes]:
    class_id = draw(st.one_of(st.sampled_from([10, 20, 30, 40, 50, 60, 85, 90]), st.integers(0, 65535)))
    method_id = draw(st.one_of(st.integers(0, 255), st.integers(0, 65535)))
    index = (class_id << 16) | method_id
    if index in KNOWN_METHODS:
        method_id = 0xFFFF if class_id != 0xFFFF else 0xFFFE
    channel = draw(st.one_of(st.sampled_from([0, 1, 2]), st.integers(3, 65535)))
    data = safe_prefix(draw) + raw_method(channel, class_id, method_id, draw(st.binary(max_size=24)))
    return split(draw, data)


FIELD_NAME = b"\x01a"
NOT_A_TYPE = st.integers(0, 255).filter(lambda b: not (0x41 <= b <= 0x5A or 0x61 <= b <= 0x7A))


@st.composite
def malformed_declare_table(draw: Any) -> tuple[list[bytes], Expect]:
    """queue.declare arguments that RabbitMQ's table parser refuses: inside the table the reader crashes (the
    TCP connection drops); a table longer than the arguments is a 501 "cannot decode"."""
    kind = draw(st.sampled_from(["bad type", "fixed value cut", "length overrun", "name overrun", "nested", "table"]))
    if kind == "bad type":
        table = FIELD_NAME + bytes([draw(NOT_A_TYPE)]) + draw(st.binary(max_size=8))
    elif kind == "fixed value cut":  # I: 4 octets, l / T / d: 8
        tag, size = draw(st.sampled_from([(b"I", 4), (b"l", 8), (b"T", 8), (b"d", 8)]))
        table = FIELD_NAME + tag + bytes(draw(st.integers(0, size - 1)))
    elif kind == "length overrun":  # a longstr / binary / table / array longer than what is left
        length = draw(st.integers(1, 1000))
        table = FIELD_NAME + draw(st.sampled_from([b"S", b"x", b"F", b"A"])) + struct.pack(">I", length)
        table += bytes(draw(st.integers(0, min(length - 1, 8))))
    elif kind == "name overrun":
        table = bytes([draw(st.integers(2, 255))]) + b"a"
    elif kind == "nested":
        inner = FIELD_NAME + bytes([draw(NOT_A_TYPE)])
        if draw(st.booleans()):
            table = FIELD_NAME + b"F" + struct.pack(">I", len(inner)) + inner
        else:
            table = FIELD_NAME + b"A" + struct.pack(">I", 1) + inner[-1:]
    else:
        table = b""
    args = b"\x00\x00" + b"\x07fuzz.tt" + b"\x08"  # ticket, queue, bits (auto_delete)
    if kind == "table":
        body = draw(st.binary(max_size=8))
        args += struct.pack(">I", len(body) + draw(st.integers(1, 1000))) + body
        expect = Expect("close", 501, "FRAME_ERROR - cannot decode <<", (50, 10))
    else:
        args += struct.pack(">I", len(table)) + table
        expect = Expect("drop")
    data = safe_prefix(draw) + raw_method(1, 50, 10, args)
    return split(draw, data), expect


@st.composite
def malformed_properties(draw: Any) -> tuple[list[bytes], Expect]:
    """A publish to fuzz.sink whose property block does not decode: RabbitMQ's channel crashes decoding it (541,
    ids 0 0) and nothing is published."""
    kind = draw(
        st.sampled_from(["headers overrun", "headers bad type", "value cut", "trailing", "no flags", "one octet"])
    )
    if kind == "headers overrun":
        inner = draw(st.binary(max_size=8))
        props = b"\x20\x00" + struct.pack(">I", len(inner) + draw(st.integers(1, 500))) + inner
    elif kind == "headers bad type":
        table = FIELD_NAME + bytes([draw(NOT_A_TYPE)]) + draw(st.binary(max_size=6))
        props = b"\x20\x00" + struct.pack(">I", len(table)) + table
    elif kind == "value cut":  # content-type (shortstr), priority (octet), timestamp (8 octets), delivery-mode
        flags, value = draw(
            st.sampled_from(
                [
                    (b"\x80\x00", b"\x05ab"),
                    (b"\x08\x00", b""),
                    (b"\x00\x40", bytes(draw(st.integers(0, 7)))),
                    (b"\x10\x00", b""),
                ]
            )
        )
        props = flags + value
    elif kind == "trailing":  # priority 5, then octets no flag announced
        props = b"\x08\x00\x05" + draw(st.binary(min_size=1, max_size=4))
    elif kind == "no flags":
        props = b""
    else:
        props = bytes([draw(st.integers(0, 255))])
    data = (
        safe_prefix(draw)
        + m(spec.Basic.Publish(exchange="", routing_key=SINK))
        + frame(2, 1, struct.pack(">HHQ", 60, 0, 3) + props)
        + body_frame(1, b"abc")
    )
    return split(draw, data), Expect("close", 541, "INTERNAL_ERROR", (0, 0), exact=True, published=0)


# -- the properties -------------------------------------------------------------------------------------------------
@fuzz(150)
@given(chunks=random_input())
def test_random_bytes(env: Env, chunks: list[bytes]) -> None:
    env.run("random bytes", chunks, ANY)


@fuzz(200)
@given(chunks=random_frames())
def test_random_frames(env: Env, chunks: list[bytes]) -> None:
    env.run("random frames", chunks, ANY)


@fuzz(300)
@given(chunks=mutated_payloads())
def test_mutated_payloads(env: Env, chunks: list[bytes]) -> None:
    env.run("mutated payloads", chunks, ANY)


@fuzz(200)
@given(chunks=mutated_input())
def test_mutated_frames(env: Env, chunks: list[bytes]) -> None:
    env.run("mutated frames", chunks, ANY)


@fuzz(40)
@given(chunks=truncated_session())
def test_truncated_session(env: Env, chunks: list[bytes]) -> None:
    env.run("truncated session", chunks, Expect("alive"))


@fuzz(40)
@given(case=bad_frame_end())
def test_wrong_frame_end(env: Env, case: tuple[list[bytes], Expect]) -> None:
    env.run("wrong frame end", *case)


@fuzz(40)
@given(case=oversize())
def test_frame_over_frame_max(env: Env, case: tuple[list[bytes], Expect, int]) -> None:
    chunks, expect, frame_max = case
    env.run("over frame_max", chunks, expect, frame_max=frame_max)


@fuzz(60)
@given(case=body_size_mismatch())
def test_body_size_mismatch(env: Env, case: tuple[list[bytes], Expect]) -> None:
    env.run("body size mismatch", *case)


@fuzz(40)
@given(case=content_on_channel_0())
def test_content_on_channel_0(env: Env, case: tuple[list[bytes], Expect]) -> None:
    env.run("content on channel 0", *case)


@fuzz(50)
@given(case=unopened_channel())
def test_unopened_or_closed_channel(env: Env, case: tuple[list[bytes], Expect, int, bool]) -> None:
    chunks, expect, channel, closed_before = case

    def open_and_close(c: RawAMQP) -> None:
        c.open_channel(channel)
        assert c.rpc(channel, spec.Channel.Close(200, "", 0, 0), "Channel.CloseOk").name == "Channel.CloseOk"

    env.run("unopened channel", chunks, expect, prelude=open_and_close if closed_before else None)


@fuzz(40)
@given(chunks=unknown_method())
def test_unknown_class_or_method_id(env: Env, chunks: list[bytes]) -> None:
    env.run("unknown method id", chunks, Expect("drop"))


@fuzz(40)
@given(case=malformed_declare_table())
def test_malformed_arguments_table(env: Env, case: tuple[list[bytes], Expect]) -> None:
    env.run("malformed arguments table", *case)


@fuzz(30)
@given(case=malformed_properties())
def test_malformed_property_block(env: Env, case: tuple[list[bytes], Expect]) -> None:
    env.run("malformed properties", *case)


# -- explicit cases, on the fake and on a real RabbitMQ -----------------------------------------------------------
@dataclass(frozen=True)
class Explicit:
    id: str
    data: bytes
    expect: Expect
    frame_max: int = 131072
    fatal: bool = False  # RabbitMQ closes the socket 3 s after the close frame, whatever the client does


EXPLICIT = [
    Explicit(
        "bad frame end",
        m(spec.Basic.Qos(0, 1, False))[:-1] + b"\x00",
        Expect(
            "close",
            501,
            "FRAME_ERROR - type 1, all octets = <<0,60,0,10,0,0,0,0,0,1,0>>: {invalid_frame_end_marker,0}",
            (0, 0),
            exact=True,
        ),
        fatal=True,
    ),
    Explicit(
        "frame over frame_max",
        body_frame(1, b"x" * 8193),
        Expect(
            "close", 501, "FRAME_ERROR - type 3, all octets = <<>>: {frame_too_large,8193,8184}", (0, 0), exact=True
        ),
        frame_max=8192,  # the lowest frame_max from 4.1 (the fake's profile is 4.3)
        fatal=True,
    ),
    Explicit(
        "content header on channel 0",
        header_frame(0, 5),
        Expect(
            "close", 505, "UNEXPECTED_FRAME - type 2, all octets = <<0,60,0,0,0,0,0,0,0,0,0,5,0,0>>", (0, 0), exact=True
        ),
    ),
    Explicit(
        "body on channel 0",
        body_frame(0, b"hello"),
        Expect("close", 505, 'UNEXPECTED_FRAME - type 3, all octets = <<"hello">>', (0, 0), exact=True),
    ),
    Explicit(
        "method on an unopened channel",
        m(spec.Queue.Declare(queue="fuzz.t"), channel=9),
        Expect("close", 504, "CHANNEL_ERROR - expected 'channel.open'", (50, 10), exact=True),
    ),
    Explicit(
        "deprecated access.request is answered",
        m(spec.Access.Request(realm="/data")),
        Expect("reply", reply="Access.RequestOk"),
    ),
    Explicit("unknown method of a known class", raw_method(1, 60, 99), Expect("drop")),
    Explicit("unknown class", raw_method(1, 99, 1, b"\x00\x01"), Expect("drop")),
    Explicit("unknown method on channel 0", raw_method(0, 10, 99), Expect("drop")),
]


@pytest.fixture(params=["fake", "real"])
def target(request: pytest.FixtureRequest) -> str:
    if request.param == "real" and not REAL_URL:
        pytest.skip("FAKERABBIT_REAL_URL is not set")
    return request.param


@pytest.mark.parametrize("case", EXPLICIT, ids=[c.id for c in EXPLICIT])
def test_explicit_case(target: str, case: Explicit, request: pytest.FixtureRequest) -> None:
    if target == "fake":
        env: Env = request.getfixturevalue("env")
        env.run(f"explicit: {case.id}", [case.data], case.expect, frame_max=case.frame_max)
        return
    assert REAL_URL
    c = RawAMQP.connect(REAL_URL, frame_max=case.frame_max)
    try:
        c.open_channel(1)
        c.send(case.data)
        out = read_outcome(c, True, None)
        check_expectation(case.expect, out)
        if out.close is not None:
            if not case.fatal:
                c.close_ok(0)
            assert c.wait_eof(4.5 if case.fatal else 2.0)
    finally:
        c.sock.close()


def test_a_channel_closed_by_the_broker_is_reusable_right_after_close_ok(
    target: str, request: pytest.FixtureRequest
) -> None:
    """After the broker closes a channel (a soft error) it ignores that channel's methods and content until the
    client's close-ok; the reader forgets the channel the moment the close-ok arrives, so a channel.open in the
    same packet opens it again (the fake used to drop that channel.open: the client hung)."""
    env: Env | None = request.getfixturevalue("env") if target == "fake" else None
    url = env.rabbit.url if env is not None else REAL_URL
    assert url
    c = RawAMQP.connect(url)
    try:
        c.open_channel(7)
        close = c.rpc(7, spec.Queue.Declare(queue="fuzz.missing", passive=True), "Queue.DeclareOk")
        assert (close.name, close.method.reply_code) == ("Channel.Close", 404)
        publish = m(spec.Basic.Publish(exchange="", routing_key=SINK), channel=7) + header_frame(7, 1)
        c.send(m(spec.Basic.Qos(0, 1, False), channel=7) + publish + body_frame(7, b"x"))
        assert c.quiet(0.3) == []
        c.send(m(spec.Channel.CloseOk(), channel=7) + m(spec.Channel.Open(), channel=7))
        assert c.wait("Channel.OpenOk", timeout=END_TIMEOUT).name == "Channel.OpenOk"
        assert c.rpc(7, spec.Basic.Qos(0, 1, False), "Basic.QosOk").name == "Basic.QosOk"
    finally:
        c.close()
    if env is not None:
        assert env.rabbit.queue(SINK).message_count == 0
        env.check_invariants()
