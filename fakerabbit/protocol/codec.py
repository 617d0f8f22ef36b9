"""pamqp, adapted for a server.

- pamqp validates names on ``Queue.DeclareOk``, ``Basic.Deliver``, ``Basic.GetOk`` and ``Basic.Return`` as a
  client would (a strict regex, 127-char exchanges); RabbitMQ accepts any UTF-8 name up to 255 bytes, so the
  subclasses here skip that validation.
- Argument tables (``queue.declare``, ``exchange.declare``, bindings, ``basic.consume``) are re-read from the raw
  method payload with fakerabbit's tag-preserving decoder, because RabbitMQ's checks and error texts depend on
  the wire type (``signedint`` vs ``long`` vs ``longstr``) that pamqp's decoder throws away.
"""

from __future__ import annotations

import struct

from pamqp import commands

from fakerabbit.broker import errors
from fakerabbit.broker.fields import FieldError, Table, decode_table


class _NoValidate:
    def validate(self) -> None:
        return None


class DeclareOk(_NoValidate, commands.Queue.DeclareOk):
    pass


class Deliver(_NoValidate, commands.Basic.Deliver):
    pass


class GetOk(_NoValidate, commands.Basic.GetOk):
    pass


class Return(_NoValidate, commands.Basic.Return):
    pass


class ConsumeOk(_NoValidate, commands.Basic.ConsumeOk):
    pass


class Cancel(_NoValidate, commands.Basic.Cancel):
    pass


class CancelOk(_NoValidate, commands.Basic.CancelOk):
    pass


# Layout before the arguments table, per method: s = short, q = shortstr, o = octet (bits).
_LAYOUTS: dict[int, str] = {
    commands.Queue.Declare.index: "sqo",
    commands.Exchange.Declare.index: "sqqo",
    commands.Queue.Bind.index: "sqqqo",
    commands.Queue.Unbind.index: "sqqq",
    commands.Exchange.Bind.index: "sqqqo",
    commands.Exchange.Unbind.index: "sqqqo",
    commands.Basic.Consume.index: "sqqo",
}


def typed_arguments(payload: bytes) -> Table:
    """The ``arguments`` table of a method payload, with wire types kept."""
    index = struct.unpack_from(">I", payload, 0)[0]
    layout = _LAYOUTS[index]
    offset = 4
    try:
        for kind in layout:
            if kind == "s":
                offset += 2
            elif kind == "o":
                offset += 1
            else:
                offset += 1 + payload[offset]
        table, _ = decode_table(payload, offset)
    except (FieldError, IndexError, struct.error) as exc:
        raise errors.FrameError(f"malformed arguments table: {exc}") from exc
    return table


def has_typed_arguments(index: int) -> bool:
    return index in _LAYOUTS


_ERRATA_CLOSE_TEXT_LIMIT = 255


def reply_text(text: str) -> str:
    """Reply texts are shortstrs: cut to 255 bytes without splitting a UTF-8 sequence."""
    # RabbitMQ keeps the first 252 characters and appends "..." (verified on 3.10.8).
    if len(text) > _ERRATA_CLOSE_TEXT_LIMIT:
        text = text[:252] + "..."
    raw = text.encode("utf-8")
    if len(raw) <= _ERRATA_CLOSE_TEXT_LIMIT:
        return text
    return raw[:_ERRATA_CLOSE_TEXT_LIMIT].decode("utf-8", "ignore")
