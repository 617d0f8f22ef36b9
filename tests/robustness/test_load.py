"""Load: 200 connections x 10 channels on one asyncio loop (aiormq) against a FakeRabbit in a thread.

Every connection has 5 publisher channels (publisher confirms) and 5 consumer channels (manual acks) spread over
20 queues. Phase 1 publishes 10,000 messages: every confirmed message must be delivered and acked exactly once.
Phase 2 switches the consumers of 40 connections (20 %) to "hold": they keep what they get unacked until each of
their channels holds its full prefetch. Half of phase 2 is published, those 40 connections die — 20 crash
(transport abort: a TCP reset, no connection.close), 20 close politely with their messages still unacked — then
the other half is published. The messages the dead consumers held must come back to the survivors exactly once
each with redelivered=True; every other message must reach a survivor exactly once with redelivered=False; at the
end no queue holds a message, ready or unacked.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import aiormq
import pytest
from aiormq.abc import DeliveredMessage
from aiormq.connection import TCPTransportFactory

from fakerabbit import FakeRabbit

CONNECTIONS = 200
PUB_CHANNELS = 5  # + CONSUMER_CHANNELS = 10 channels per connection
CONSUMER_CHANNELS = 5
QUEUES = 20
PHASE1_PER_CHANNEL = 10  # 200 * 5 * 10 = 10,000 messages
PHASE2_PER_CHANNEL = 12  # 160 * 5 * 12 = 9,600 messages (the doomed connections no longer publish)
PREFETCH = 10
DOOMED_PREFETCH = 3
DOOMED_EVERY = 5  # connections 0, 5, 10, ... are killed: 40 of 200
CONNECT_BATCH = 25
TIMEOUT = 40.0

pytestmark = pytest.mark.timeout(120)


class RecordingTransport(TCPTransportFactory):
    """aiormq keeps its StreamWriter private; remember it so that the test can abort the TCP connection."""

    def __init__(self) -> None:
        self.writer: asyncio.StreamWriter | None = None

    async def create(self, url: Any, **kwargs: Any) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        reader, writer = await super().create(url, **kwargs)
        self.writer = writer
        return reader, writer


@dataclass
class Client:
    index: int
    doomed: bool
    transport: RecordingTransport
    conn: Any = None
    publishers: list[Any] = field(default_factory=list)
    consumers: list[Any] = field(default_factory=list)
    #: per consumer channel: bodies this client holds unacked (phase 2, doomed only)
    held: list[set[bytes]] = field(default_factory=list)


@dataclass
class Ledger:
    holding: bool = False  # phase 2: doomed consumers stop acking
    confirmed: set[bytes] = field(default_factory=set)
    #: (body, redelivered) for every delivery a surviving consumer acked
    survivor_acks: list[tuple[bytes, bool]] = field(default_factory=list)
    #: (body, redelivered) for every delivery a doomed consumer received
    doomed_seen: list[tuple[bytes, bool]] = field(default_factory=list)
    nacked: int = 0

    def delivered(self) -> int:
        return len(self.survivor_acks) + len(self.doomed_seen)


def queue_for(client: int, channel: int, seq: int = 0) -> str:
    return f"load.q{(client * CONSUMER_CHANNELS + channel + seq) % QUEUES}"


async def open_client(url: str, index: int, ledger: Ledger) -> Client:
    c = Client(index, index % DOOMED_EVERY == 0, RecordingTransport())
    c.conn = aiormq.Connection(url, transport_factory=c.transport)
    await c.conn.connect()
    for _ in range(PUB_CHANNELS):
        c.publishers.append(await c.conn.channel(publisher_confirms=True))
    for k in range(CONSUMER_CHANNELS):
        ch = await c.conn.channel(publisher_confirms=False)
        await ch.basic_qos(prefetch_count=DOOMED_PREFETCH if c.doomed else PREFETCH)
        held: set[bytes] = set()
        c.held.append(held)

        async def on_message(m: DeliveredMessage, ch: Any = ch, held: set[bytes] = held) -> None:
            redelivered = bool(m.delivery.redelivered)
            if c.doomed and ledger.holding:
                ledger.doomed_seen.append((m.body, redelivered))
                held.add(m.body)
                return
            if c.doomed:
                ledger.doomed_seen.append((m.body, redelivered))
            await ch.basic_ack(m.delivery.delivery_tag)
            if not c.doomed:
                ledger.survivor_acks.append((m.body, redelivered))

        await ch.basic_consume(queue_for(index, k), on_message, no_ack=False)
        c.consumers.append(ch)
    return c


async def publish(client: Client, phase: int, seqs: range, ledger: Ledger) -> None:
    async def one_channel(j: int, ch: Any) -> None:
        for seq in seqs:
            body = f"p{phase}:{client.index}:{j}:{seq}".encode()
            confirm = await ch.basic_publish(body, routing_key=queue_for(client.index, j, seq))
            if confirm.name == "Basic.Ack":
                ledger.confirmed.add(body)
            else:
                ledger.nacked += 1

    await asyncio.gather(*(one_channel(j, ch) for j, ch in enumerate(client.publishers)))


async def wait_for(predicate: Any, what: str, timeout: float = TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


def unacked_bodies(rabbit: FakeRabbit, clients: list[Client]) -> set[bytes]:
    """What the broker has delivered to ``clients`` and not seen settled (read on the broker's loop)."""
    ports = {c.transport.writer.get_extra_info("sockname")[1] for c in clients if c.transport.writer is not None}

    def collect() -> set[bytes]:
        out: set[bytes] = set()
        for conn in rabbit._listener.connections:
            if conn.info is not None and int(conn.peer.rsplit(":", 1)[1]) in ports:
                for session in conn.info.sessions.values():
                    out.update(u.entry.msg.body for u in session.unacked.values())
        return out

    return rabbit._call(collect)


def kill(client: Client) -> None:
    assert client.transport.writer is not None
    client.transport.writer.transport.abort()  # RST: the broker sees the socket die, no connection.close


@pytest.fixture
def rabbit_without_events(rabbit: FakeRabbit) -> FakeRabbit:
    rabbit._broker.events.enabled = False  # 30,000 messages x 4 events would only measure the event log
    return rabbit


async def test_200_connections_x_10_channels_confirms_acks_and_kills(rabbit_without_events: FakeRabbit) -> None:
    rabbit = rabbit_without_events
    figures: dict[str, Any] = {}
    t0 = time.monotonic()
    ledger = Ledger()

    admin = await aiormq.connect(rabbit.url)
    admin_ch = await admin.channel()
    for q in range(QUEUES):
        await admin_ch.queue_declare(f"load.q{q}")

    clients: list[Client] = []
    for start in range(0, CONNECTIONS, CONNECT_BATCH):
        batch = range(start, min(start + CONNECT_BATCH, CONNECTIONS))
        clients += await asyncio.gather(*(open_client(rabbit.url, i, ledger) for i in batch))
    assert len(rabbit.connections()) == CONNECTIONS + 1
    figures["connect s"] = round(time.monotonic() - t0, 1)

    # -- phase 1: everyone publishes and acks ----------------------------------------------------------------
    t1 = time.monotonic()
    await asyncio.gather(*(publish(c, 1, range(PHASE1_PER_CHANNEL), ledger) for c in clients))
    phase1_total = CONNECTIONS * PUB_CHANNELS * PHASE1_PER_CHANNEL
    assert ledger.nacked == 0
    assert len(ledger.confirmed) == phase1_total
    await wait_for(lambda: ledger.delivered() == phase1_total, "phase 1 deliveries")
    await asyncio.sleep(0.2)  # anything extra (a duplicate) would arrive now
    phase1 = [b for b, _ in ledger.survivor_acks] + [b for b, _ in ledger.doomed_seen]
    duplicates = [b for b, n in Counter(phase1).items() if n > 1]
    assert duplicates == []
    assert set(phase1) == ledger.confirmed
    assert not any(r for _, r in ledger.survivor_acks + ledger.doomed_seen)
    figures["phase 1 s"] = round(time.monotonic() - t1, 1)
    figures["phase 1 msg/s"] = round(phase1_total / (time.monotonic() - t1))

    # -- phase 2: doomed consumers hold their prefetch, get killed mid-stream ------------------------------------
    ledger.survivor_acks.clear()
    ledger.doomed_seen.clear()
    ledger.confirmed.clear()
    ledger.holding = True
    survivors = [c for c in clients if not c.doomed]
    doomed = [c for c in clients if c.doomed]
    half = PHASE2_PER_CHANNEL // 2
    t2 = time.monotonic()
    await asyncio.gather(*(publish(c, 2, range(half), ledger) for c in survivors))

    def doomed_full() -> bool:
        return all(len(h) == DOOMED_PREFETCH for c in doomed for h in c.held)

    await wait_for(doomed_full, "every doomed consumer channel to hold its prefetch")
    # Once a channel holds its whole prefetch the broker cannot have sent it anything more: the broker's
    # unacked set for these connections is exactly what the clients recorded.
    held = {b for c in doomed for h in c.held for b in h}
    assert len(held) == len(doomed) * CONSUMER_CHANNELS * DOOMED_PREFETCH
    assert unacked_bodies(rabbit, doomed) == held
    crashed, closed = doomed[::2], doomed[1::2]
    for c in crashed:
        kill(c)
    await asyncio.gather(*(c.conn.close() for c in closed))  # connection.close with messages unacked
    await wait_for(lambda: len(rabbit.connections()) == 1 + len(survivors), "the broker to notice the kills")
    await asyncio.gather(*(publish(c, 2, range(half, PHASE2_PER_CHANNEL), ledger) for c in survivors))
    phase2_total = len(survivors) * PUB_CHANNELS * PHASE2_PER_CHANNEL
    assert ledger.nacked == 0
    assert len(ledger.confirmed) == phase2_total
    await wait_for(lambda: len(ledger.survivor_acks) == phase2_total, "phase 2 deliveries to survivors")
    await asyncio.sleep(0.2)
    figures["phase 2 s"] = round(time.monotonic() - t2, 1)

    acked = Counter(b for b, _ in ledger.survivor_acks)
    assert [b for b, n in acked.items() if n > 1] == []  # survivors ack everything: no message twice
    assert set(acked) == ledger.confirmed  # nothing lost
    redelivered = {b for b, r in ledger.survivor_acks if r}
    assert redelivered == held  # exactly the dead consumers' unacked messages, marked redelivered
    assert len(ledger.doomed_seen) == len(held)  # the dead got nothing they did not hold
    assert not any(r for _, r in ledger.doomed_seen)

    snapshot = rabbit.queues()
    assert [(q.name, q.message_count, q.unacked_count) for q in snapshot if q.message_count or q.unacked_count] == []

    for c in survivors:
        await c.conn.close()
    for c in doomed:
        with contextlib.suppress(Exception):
            await c.conn.close()
    await admin.close()
    await wait_for(lambda: rabbit.connections() == [], "every connection to close")
    figures.update(
        messages=phase1_total + phase2_total,
        redelivered=len(redelivered),
        killed=len(doomed),
        total_s=round(time.monotonic() - t0, 1),
    )
    print("\nload figures:", figures)
