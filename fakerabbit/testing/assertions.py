"""Assertion helpers whose failure messages show a readable diff of expected and actual broker state.

They work on snapshots (``rabbit.queue("q")``) and on messages from any client (for :func:`assert_headers` and
:func:`assert_x_death`), and raise :class:`AssertionError`::

    from fakerabbit.testing import assert_bodies, assert_x_death

    assert_bodies(rabbit.queue("orders.dlq"), [b'{"id": 1}'])
    assert_x_death(rabbit.queue("orders.dlq").messages[0], [{"queue": "orders", "reason": "rejected", "count": 3}])

:func:`assert_bodies`, :func:`assert_empty` and :func:`assert_message_count` also take what the pytest plugin's
dual mode returns for a real RabbitMQ (``rabbit.queue("q")`` with counts, no messages): they check the counts,
and skip the test (as ``.messages`` does) only where they need the bodies.
"""

from __future__ import annotations

import difflib
import pprint
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from fakerabbit.testing.events import Events
from fakerabbit.testing.snapshots import MessageSnapshot, QueueSnapshot
from fakerabbit.testing.xdeath import message_headers, x_death

__all__ = [
    "assert_bodies",
    "assert_empty",
    "assert_event_kinds",
    "assert_headers",
    "assert_message_count",
    "assert_x_death",
    "diff",
]


class QueueCounts(Protocol):
    """A queue as the count-based helpers need it: a :class:`QueueSnapshot`, or a real broker's queue in dual
    mode (whose ``messages`` skips the test)."""

    @property
    def name(self) -> str: ...
    @property
    def message_count(self) -> int: ...
    @property
    def unacked_count(self) -> int: ...
    @property
    def messages(self) -> Sequence[MessageSnapshot]: ...


def _lines(value: Any) -> list[str]:
    if isinstance(value, list | tuple):
        items = [f"  {line}" for item in value for line in _lines(item)]
        return ["[", *items, "]"] if isinstance(value, list) else ["(", *items, ")"]
    return [line + "," for line in pprint.pformat(value, width=96, sort_dicts=False).splitlines()]


def diff(expected: Any, actual: Any) -> str:
    """A ``difflib`` diff of the pretty-printed values, one list item per line: ``-`` expected, ``+`` actual."""
    e = _lines(expected)
    a = _lines(actual)
    lines = difflib.unified_diff(e, a, "expected", "actual", lineterm="", n=3)
    return "\n".join(lines)


def _fail(title: str, expected: Any, actual: Any, extra: str = "") -> AssertionError:
    parts = [title, diff(expected, actual)]
    if extra:
        parts.append(extra)
    return AssertionError("\n".join(parts))


def _is_queue(source: object) -> bool:
    return isinstance(source, QueueSnapshot) or (hasattr(source, "message_count") and hasattr(source, "name"))


def _messages(source: QueueCounts | Iterable[MessageSnapshot]) -> tuple[MessageSnapshot, ...]:
    return tuple(source.messages) if _is_queue(source) else tuple(source)  # type: ignore[union-attr,arg-type]


def _label(source: QueueCounts | Iterable[MessageSnapshot]) -> str:
    return f"queue {source.name!r}" if _is_queue(source) else "messages"  # type: ignore[union-attr]


def _ready_bodies(source: QueueCounts) -> str:
    if not isinstance(source, QueueSnapshot):  # a real broker's queue: its bodies cannot be read without taking
        return ""
    return pprint.pformat([m.body for m in source.messages], width=100)


def _comparable(body: bytes, like: Any) -> Any:
    if isinstance(like, str):
        return body.decode("utf-8", "backslashreplace")
    return body


def assert_bodies(source: QueueCounts | Iterable[MessageSnapshot], expected: Sequence[bytes | str]) -> None:
    """The ready messages' bodies are exactly ``expected``, in order (``str`` items compare to UTF-8 text).

    On a real broker's queue (dual mode) the ready count is checked first; comparing bodies then skips the test.
    """
    if _is_queue(source) and not isinstance(source, QueueSnapshot):
        count = source.message_count  # type: ignore[union-attr]
        if count != len(expected):
            raise _fail(f"{_label(source)}: message counts differ", {"ready": len(expected)}, {"ready": count})
        if not expected:
            return
    msgs = _messages(source)
    actual = [_comparable(m.body, expected[i] if i < len(expected) else b"") for i, m in enumerate(msgs)]
    if actual != list(expected):
        raise _fail(f"{_label(source)}: bodies differ", list(expected), actual)


def assert_empty(source: QueueCounts) -> None:
    """The queue has no ready and no unacknowledged messages (on a real broker: from its counts)."""
    if source.message_count or source.unacked_count:
        raise AssertionError(
            f"queue {source.name!r} is not empty: {source.message_count} ready, {source.unacked_count} unacked\n"
            + _ready_bodies(source)
        )


def assert_message_count(source: QueueCounts, ready: int, *, unacked: int | None = None) -> None:
    """The queue holds ``ready`` ready messages (and ``unacked`` unacknowledged ones, if given)."""
    want: dict[str, int] = {"ready": ready}
    have: dict[str, int] = {"ready": source.message_count}
    if unacked is not None:
        want["unacked"] = unacked
        have["unacked"] = source.unacked_count
    if want != have:
        raise _fail(
            f"queue {source.name!r}: message counts differ",
            want,
            have,
            "ready bodies: " + _ready_bodies(source) if isinstance(source, QueueSnapshot) else "",
        )


def assert_headers(message: Any, expected: Mapping[str, Any], *, exact: bool = False) -> None:
    """``message``'s headers include ``expected`` (equal it, with ``exact``).

    ``message`` may be a snapshot, a client's message or properties object, or a headers dict.
    """
    headers = dict(message_headers(message) or {})
    actual = headers if exact else {k: headers[k] for k in expected if k in headers}
    if actual != dict(expected):
        missing = [k for k in expected if k not in headers]
        extra = f"missing headers: {missing}" if missing else ""
        raise _fail("headers differ" + (" (exact)" if exact else ""), dict(expected), actual, extra)


def assert_x_death(message: Any, expected: Sequence[Mapping[str, Any]]) -> None:
    """``message``'s ``x-death`` entries match ``expected``, in order (most recent death first).

    Each expected entry lists only the keys to check, with the wire's names: ``queue``, ``reason``, ``count``,
    ``exchange``, ``routing-keys`` (a list), ``original-expiration``, ``time`` (an aware datetime).
    """
    actual_full = x_death(message).as_dicts()
    actual = []
    for i, entry in enumerate(actual_full):
        keys = expected[i].keys() if i < len(expected) else entry.keys()
        actual.append({k: entry.get(k) for k in keys})
    want = [dict(e) for e in expected]
    if actual != want:
        raise _fail("x-death differs", want, actual, "full x-death:\n" + pprint.pformat(actual_full, width=100))


def assert_event_kinds(events: Events, expected: Sequence[str], *, message_id: int | None = None) -> None:
    """The events (of message ``message_id``, if given) have exactly the kinds ``expected``, in order."""
    selected = events.for_message(message_id) if message_id is not None else events
    actual = selected.kinds()
    if actual != list(expected):
        raise _fail("event kinds differ", list(expected), actual, "events:\n" + selected.format())
