"""tx.select / commit / rollback."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fakerabbit.protocol.codec import commands

if TYPE_CHECKING:
    from fakerabbit.protocol.handlers.context import MethodChannel


def tx_select(ch: MethodChannel, m: commands.Tx.Select, payload: bytes) -> None:
    ch.session.tx_select()
    ch.send(commands.Tx.SelectOk())


def tx_commit(ch: MethodChannel, m: commands.Tx.Commit, payload: bytes) -> None:
    ch.session.tx_commit()
    ch.send(commands.Tx.CommitOk())


def tx_rollback(ch: MethodChannel, m: commands.Tx.Rollback, payload: bytes) -> None:
    ch.session.tx_rollback()
    ch.send(commands.Tx.RollbackOk())


HANDLERS: dict[type, Any] = {
    commands.Tx.Select: tx_select,
    commands.Tx.Commit: tx_commit,
    commands.Tx.Rollback: tx_rollback,
}
