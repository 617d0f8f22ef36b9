"""What survives a node restart: durable exchanges, durable queues, their bindings, persistent messages.

RabbitMQ keeps on disk the durable exchanges and queues and the bindings between them, every message of a
quorum queue (with the dead letters an at-least-once quorum queue holds), and the persistent
(``delivery_mode=2``) messages of a durable classic queue. Everything else is gone after a restart: transient and
exclusive queues with their messages, transient exchanges, transient messages, consumers, channels and
connections. Policies, users and vhosts survive (they live in the metadata store).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fakerabbit.broker.broker import Broker
    from fakerabbit.broker.queue import Entry
    from fakerabbit.broker.vhost import Vhost

__all__ = ["restart_broker"]

_WHY = "not persistent: lost in the node restart"


def restart_broker(broker: Broker) -> None:
    """Turn ``broker`` into what a restarted node would hold.

    The protocol layer must already have closed every client connection (so unacknowledged messages were
    requeued, as RabbitMQ does before it stops); any connection still registered is closed here.
    """
    for conn in list(broker.connections.values()):
        broker.close_connection(conn)
    broker.reply_sessions.clear()
    for v in broker.vhosts.values():
        _restart_vhost(v)
    broker.events.emit("restarted", None)


def _restart_vhost(v: Vhost) -> None:
    events = v.broker.events
    for q in list(v.queues.values()):
        if q.durable and q.exclusive_owner is None:
            continue
        for e in q.ready_entries():
            events.emit("dropped", e.msg, queue=q.name, reason="restart", why=_WHY)
        v.delete_queue(q)
    for x in list(v.exchanges.values()):
        if not x.durable and x.name in v.exchanges:
            v.remove_exchange(x)
    v.clear_pseudo_queues()
    for q in v.queues.values():
        q.restart(_persistent if q.queue_type == "classic" else _every, _WHY)
    for q in list(v.queues.values()):
        if q.dlx_worker is not None:  # quorum at-least-once: the discards survive; a new worker takes them
            q.dlx_worker.restart()


def _persistent(e: Entry) -> bool:
    """What survives in a classic queue: persistent messages."""
    return e.msg.persistent


def _every(e: Entry) -> bool:
    """What survives in a quorum (or stream) queue: every message."""
    return True
