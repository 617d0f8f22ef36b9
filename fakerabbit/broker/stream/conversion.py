"""What RabbitMQ's stream storage does to a message: it converts it to AMQP 1.0 to write it and back to deliver it
(3.x ``rabbit_msg_record``, 3.13+ ``mc_amqpl`` / ``mc_amqp``), and reads its ``x-stream-filter-value``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from fakerabbit.broker import errors
from fakerabbit.broker.fields import Field, Table
from fakerabbit.broker.message import Message
from fakerabbit.broker.properties import RawProperties

if TYPE_CHECKING:
    from fakerabbit.broker.profile import Profile

__all__ = ["filter_value", "stored_properties"]

#: Message annotations ``mc_amqpl`` never turns back into headers (``is_internal_header/1``).
_INTERNAL_X_HEADERS: Final = ("x-routing-key", "x-exchange", "x-death")


def _mc_value(field: Field) -> Field:
    """``mc_amqpl:from_091/2`` then ``to_091``: binary comes back as longstr, decimal has no clause (crash)."""
    tag, value = field
    if tag == "D":
        raise errors.InternalError("")
    if tag == "x":
        return ("S", value)
    if tag == "A":
        return ("A", [_mc_value(f) for f in value])
    if tag == "F":
        return ("F", {k: _mc_value(f) for k, f in value.items()})
    return field


def _mc_headers(headers: Table, keep_x_death: bool) -> Table:
    """4.x (``mc_amqpl`` -> ``mc_amqp`` -> ``mc_amqpl``): ``x-`` headers become message annotations and come back
    (except the internal ones), the ``CC`` array too; other headers become application properties, which hold
    no arrays or tables (dropped)."""
    out: Table = {}
    for key, field in headers.items():
        if key.startswith("x-"):
            if key.startswith("x-basic-") or (key in _INTERNAL_X_HEADERS and not (keep_x_death and key == "x-death")):
                continue
        elif field[0] in ("A", "F") and not (key == "CC" and field[0] == "A"):
            continue
        out[key] = _mc_value(field)
    return out


def _record_headers(headers: Table) -> Table:
    """3.x (``rabbit_msg_record``): array and table headers are dropped, a decimal crashes (no clause)."""
    out: Table = {}
    for key, field in headers.items():
        if field[0] in ("A", "F"):
            continue
        if field[0] == "D":
            raise errors.InternalError("")
        out[key] = field
    return out


def stored_properties(msg: Message, profile: Profile) -> RawProperties:
    """The property block a stream delivers ``msg`` with (before its ``x-stream-offset`` header is added).

    Raises :class:`~fakerabbit.broker.errors.InternalError` (541) where RabbitMQ's conversion crashes (a decimal
    header). See the module docstring of :mod:`fakerabbit.broker.stream` and the notes for what changes."""
    props = msg.props
    headers = props.headers
    mc = profile.message_containers
    new = headers
    try:
        if headers:
            new = _mc_headers(headers, bool(msg.deaths)) if mc else _record_headers(headers)
    except RecursionError:
        raise errors.InternalError("") from None
    changes: dict[str, Any] = {}
    if new is not headers and new != headers:
        changes["headers"] = new or None
    if props.cluster_id is not None:
        changes["cluster_id"] = None
    if mc and props.delivery_mode != 2 and props.delivery_mode != 1:
        changes["delivery_mode"] = 1  # the AMQP 1.0 header's durable=false comes back as 1
    if changes:
        props = props.replace(**changes)
    return props


def filter_value(msg: Message) -> str:
    """A message's ``x-stream-filter-value`` ("" when unfiltered). 4.x: anything but a UTF-8 longstr without
    NUL crashes ``rabbit_stream_queue:stream_message/1`` (541)."""
    field = msg.header("x-stream-filter-value")
    if field is None:
        return ""
    tag, value = field
    if tag == "S":
        data = value if isinstance(value, bytes) else str(value).encode("utf-8", "surrogateescape")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            text = None
        if text is not None and "\x00" not in text:
            return text
    raise errors.InternalError("")
