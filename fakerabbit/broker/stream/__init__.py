"""Stream queues (``x-queue-type: stream``) as RabbitMQ exposes them over AMQP 0-9-1 (``rabbit_stream_queue``).

A stream is an append-only log: every message gets an offset (0, 1, 2, …) and stays until retention removes it;
consumers read it from where they asked (``x-stream-offset``: ``first``, ``last``, ``next``, an offset, a
timestamp or an interval such as ``1h``) and their acks only give them credit for more (``basic.qos`` is their
credit, and is required). Nothing is ever requeued or redelivered. Behaviour checked on the live 3.10.8, 4.0.5 and
4.3.6 and in RabbitMQ's and osiris' source: ``notes/rabbitmq-streams-observed.md``.

The log is modelled the way osiris stores it, because clients see its granularity:

* **Chunks.** The osiris writer appends what it has received as one chunk; ``last`` starts at the first message of the
  last chunk, a timestamp finds the first chunk written at or after it, and filtering selects whole chunks.
  The fake makes a chunk of the unconfirmed messages one channel publishes in a row at one instant of the virtual
  clock; it is closed when another writer writes, when the clock has moved, or when a consumer attaches or reads it
  (a reader only sees written chunks). A message published in confirm mode, and one that does not come from a
  channel (dead-lettering, a delayed exchange), is a chunk of its own (RabbitMQ's own tests wait for each confirm
  to get a chunk per message). So a burst shares a chunk, as it usually does on RabbitMQ.
* **Segments.** Chunks go into segment files of ``x-stream-max-segment-size-bytes`` (default 500,000,000 bytes or
  256,000 chunks); a segment is full once it has reached that size. Whenever the writer handles something (a chunk
  to write, a reader registering for new offsets) while the segment is full and a channel has published, it first
  writes a tracking snapshot, which opens a new segment and takes one offset (so offsets are not always
  consecutive). Sizes are estimated: each message counts its body, property block, exchange and routing key plus
  :data:`RECORD_OVERHEAD` bytes for RabbitMQ's AMQP 1.0 encoding, a chunk :data:`CHUNK_HEADER` bytes (and the
  filter size when it has filter values), a segment :data:`SEGMENT_HEADER` bytes (RabbitMQ's real sizes differ by a
  few tens of bytes per message).
* **Retention** (``x-max-length-bytes``, ``x-max-age``; the policies ``max-length-bytes`` and ``max-age`` win over
  them) deletes whole segments, never the newest, and only when it is evaluated: when a new segment is opened,
  when a policy changes the stream's settings, and (3.11+) every hour of the virtual clock while an age limit is
  set and more than one segment remains. A consumer reading a segment that is deleted reads it to its end (RabbitMQ's
  reader has the file open), then goes on from the first segment left.
* **Filtering** (3.13+): a chunk is delivered to a consumer with ``x-stream-filter`` when one of its messages has
  one of the consumer's filter values in ``x-stream-filter-value`` (or, with ``x-stream-match-unfiltered``, has
  none); the whole chunk is delivered, so a client filters again, as with RabbitMQ. The chunk's Bloom filter is
  modelled exactly (RabbitMQ's may also let a chunk through that has none of the values).

The modules are imported by name (``from fakerabbit.broker.stream.queue import StreamQueue``):

- :mod:`~fakerabbit.broker.stream.queue`: :class:`StreamQueue` (a ``Queue``): writing, segments, retention,
  consumers and their credit, the refused operations.
- :mod:`~fakerabbit.broker.stream.log`: a stored message (:class:`StreamEntry`), chunks, segments, the sizes.
- :mod:`~fakerabbit.broker.stream.conversion`: what RabbitMQ's AMQP 1.0 storage does to a message's properties.
- :mod:`~fakerabbit.broker.stream.consumers`: :class:`StreamConsumer` and its arguments (``x-stream-offset``,
  ``x-stream-filter``).

This package's own module imports nothing.
"""
