"""Load on loopback, bounded: many connections and channels publishing with confirms and consuming with acks,
and consumers killed mid-stream. Checks what AMQP promises: every confirmed message is delivered, nothing is
lost, and a message is only delivered twice when the second delivery is flagged ``redelivered``.

The broker runs on the test's own event loop (``async with FakeRabbit()``) and the clients are aiormq
connections on the same loop, so the figures measure fakerabbit, not thread hand-offs.
Sizes can be raised with FAKERABBIT_LOAD_CONNECTIONS / FAKERABBIT_LOAD_MESSAGES.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections import Counter, defaultdict

import aiormq
import pytest
from aiormq.abc import DeliveredMessage

from fakerabbit import FakeRabbit

CONNECTIONS = int(os.environ.get("FAKERABBIT_LOAD_CONNECTIONS", "200"))
CHANNELS = 10
MESSAGES_PER_CHANNEL = int(os.environ.get("FAKERABBIT_LOAD_MESSAGES", "5"))
QUEUES = 50


async def _open(url: str, attempts: int = 3) -> aiormq.Connection:
    for i in range(attempts):
        try:
            return await aiormq.connect(url)
        except ConnectionError:
            if i == attempts - 1:
                raise
            await asyncio.sleep(0.05)
    raise AssertionError("unreachable")


async def test_many_connections_and_channels_publish_confirm_consume_ack() -> None:
    total = CONNECTIONS * CHANNELS * MESSAGES_PER_CHANNEL
    delivered: Counter[bytes] = Counter()
    redelivered: Counter[bytes] = Counter()
    done = asyncio.Event()
    confirmed: set[bytes] = set()

    async with FakeRabbit(clock="system") as rabbit:
        url = rabbit.url
        setup = await aiormq.connect(url)
        sch = await setup.channel()
        queues = [f"load-{i}" for i in range(QUEUES)]
        for q in queues:
            await sch.queue_declare(q)
        t0 = time.monotonic()
        conns = await asyncio.gather(*(_open(url) for _ in range(CONNECTIONS)))
        t_connected = time.monotonic()

        async def run_channel(conn: aiormq.Connection, ci: int, hi: int) -> None:
            ch = await conn.channel(publisher_confirms=True)
            await ch.basic_qos(prefetch_count=20)
            queue = queues[(ci * CHANNELS + hi) % QUEUES]

            async def on_message(m: DeliveredMessage) -> None:
                body = m.body
                delivered[body] += 1
                if m.delivery.redelivered:
                    redelivered[body] += 1
                await ch.basic_ack(m.delivery.delivery_tag)
                if sum(delivered.values()) >= total:
                    done.set()

            await ch.basic_consume(queue, on_message)
            confirmations = []
            for k in range(MESSAGES_PER_CHANNEL):
                body = f"{ci}-{hi}-{k}".encode()
                confirmations.append((body, ch.basic_publish(body, routing_key=queue)))
            for body, fut in confirmations:
                result = await fut
                assert isinstance(result, aiormq.spec.Basic.Ack), result
                confirmed.add(body)

        await asyncio.gather(*(run_channel(c, ci, hi) for ci, c in enumerate(conns) for hi in range(CHANNELS)))
        t_confirmed = time.monotonic()
        await asyncio.wait_for(done.wait(), timeout=60)
        t_delivered = time.monotonic()
        assert len(confirmed) == total
        assert set(delivered) == confirmed  # every confirmed message delivered, nothing else
        assert all(n == 1 for n in delivered.values())  # no crash here: nothing twice
        assert not redelivered
        stats = await sch.queue_declare(queues[0], passive=True)
        assert stats.message_count == 0
        await asyncio.gather(*(c.close() for c in conns))
        await setup.close()
        print(
            f"\nload: {CONNECTIONS} connections x {CHANNELS} channels, {total} messages: "
            f"connect {t_connected - t0:.2f}s, publish+confirm {t_confirmed - t_connected:.2f}s, "
            f"all delivered+acked {t_delivered - t0:.2f}s ({total / (t_delivered - t_connected):.0f} msg/s)"
        )


@pytest.mark.parametrize("kill", ["reset", "close"])
async def test_killed_consumers_give_their_unacked_messages_back(kill: str) -> None:
    """Half the consumers take messages and never ack; their connections die mid-stream. Survivors get those
    messages again, flagged redelivered; every message ends up acked exactly once by a survivor."""
    n_messages, n_consumers = 2000, 20
    async with FakeRabbit(clock="system") as rabbit:
        url = rabbit.url
        pub = await aiormq.connect(url)
        pch = await pub.channel(publisher_confirms=True)
        q = "victims"
        await pch.queue_declare(q)
        doomed_got: set[bytes] = set()
        survivors_got: dict[bytes, list[bool]] = defaultdict(list)
        all_acked = asyncio.Event()
        doomed_have_enough = asyncio.Event()
        consumers = [await aiormq.connect(url) for _ in range(n_consumers)]
        for i, conn in enumerate(consumers):
            ch = await conn.channel()
            await ch.basic_qos(prefetch_count=25)
            if i % 2:

                async def hold(m: DeliveredMessage) -> None:  # never acks
                    doomed_got.add(m.body)
                    if len(doomed_got) >= 200:
                        doomed_have_enough.set()

                await ch.basic_consume(q, hold)
            else:

                async def work(m: DeliveredMessage, ch: aiormq.Channel = ch) -> None:
                    survivors_got[m.body].append(m.delivery.redelivered)
                    await ch.basic_ack(m.delivery.delivery_tag)
                    if sum(len(v) for v in survivors_got.values()) >= n_messages:
                        all_acked.set()

                await ch.basic_consume(q, work)
        bodies = [f"m{i}".encode() for i in range(n_messages)]
        await asyncio.gather(*(pch.basic_publish(b, routing_key=q) for b in bodies))
        await asyncio.wait_for(doomed_have_enough.wait(), timeout=30)
        for i, conn in enumerate(consumers):
            if i % 2:
                if kill == "reset":  # a crashed client: its socket is reset, no connection.close
                    writer = conn._writer_task.get_coro().cr_frame.f_locals["writer"]
                    writer.transport.abort()
                else:
                    await conn.close()
        await asyncio.wait_for(all_acked.wait(), timeout=30)
        assert set(survivors_got) == set(bodies)  # nothing lost
        for body, flags in survivors_got.items():
            assert len(flags) == 1, (body, flags)  # acked once
            if body in doomed_got:
                assert flags == [True], body  # came back flagged
            else:
                assert flags == [False], body
        assert doomed_got  # the scenario did kill consumers holding messages
        for conn in consumers[::2]:
            await conn.close()
        await pub.close()
