"""Dead-lettering, in one place (RabbitMQ's ``rabbit_dead_letter``, ``rabbit_fifo_dlx`` and
``rabbit_fifo_dlx_worker``).

- :mod:`~fakerabbit.broker.deadletter.publisher`: :class:`DeadLetters`, the node's publisher. A queue hands it the
  messages that died (``expired``, ``maxlen``, ``rejected``, ``delivery_limit``); it copies them, routes them
  through the queue's dead-letter exchange, drops cycles, and publishes, iteratively (never on the Python stack).
- :mod:`~fakerabbit.broker.deadletter.xdeath`: how a copy records its death (``x-death``, ``x-first-death-*``,
  ``x-last-death-*``), per version profile, and the cycle test that reads it.
- :mod:`~fakerabbit.broker.deadletter.at_least_once`: a quorum queue's ``at-least-once`` strategy: the discards
  buffer and the worker that publishes through the same publisher until every target queue accepted a message.

The modules are imported by name (``from fakerabbit.broker.deadletter.publisher import DeadLetters``): this
package's own module imports nothing, so that importing one of them does not import the others.
"""
