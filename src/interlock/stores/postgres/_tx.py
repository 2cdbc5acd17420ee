"""A save's transaction: how it starts (the rows it reads ``FOR UPDATE``, or guesses) and what it leaves known.

:func:`begin` opens a save on the rows and journal entries it will update: guessed from
:class:`~._known.Known` and checked by :func:`~._known.guard` in the same round trip as the
writes when every one can be guessed, else read ``FOR UPDATE`` in one statement (the
locking read: a round trip before the writes). :func:`settle` records, once the save has
committed, what it read and wrote, with the ``xmin`` each row now has.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any, LiteralString, NamedTuple

from .._sql.history import ChainCache
from .._sql.row_codec import Row
from . import _journal as journal
from ._known import XID, Guess, Known, guard, locking, one_or_all, row_of
from ._schema import COLUMNS, TABLE
from ._wire import Answer
from ._wire import Wire as Conn

WIDTH = len(COLUMNS.split(", ")) + 1
"""A locked row's columns: :data:`~._schema.COLUMNS`, then ``xmin``."""
_NULLS: list[LiteralString] = ["NULL"] * WIDTH


@cache
def _lock_rows(ids: int) -> LiteralString:
    """Read the rows of ``ids`` ids (arguments ``tenant``, ``ids``: see :func:`~._known.locking`) ``FOR UPDATE``."""
    return locking(f"{COLUMNS}, xmin::text", TABLE, "snapshot_id", "ids", ids)


@cache
def _lock_both(ids: int, keys: int) -> LiteralString:
    """A save's rows and journal entries read ``FOR UPDATE`` in one statement.

    The rows first, then the entries, each in id order as alone: a row's columns and ``xmin``
    then three ``NULL``, or ``NULL`` columns then an entry's key, text and ``xmin``.
    """
    return f"""WITH locked_rows AS ({_lock_rows(ids)}), locked_entries AS ({journal.lock_sql(keys)})
    SELECT *, NULL, NULL, NULL FROM locked_rows
    UNION ALL SELECT {", ".join(_NULLS)}, key, entry, xmin FROM locked_entries"""


class Parent(NamedTuple):
    """What a new row needs of its parent's row: its messages' revision, whether it has none, its session."""

    mrev: int
    stateless: bool
    session_id: str


class Tx:
    """A save's transaction: the rows and journal entries it read ``FOR UPDATE`` up front (or guessed), and more.

    ``rows`` and ``entries`` are consumed by the first write of each; ``held`` is every snapshot
    row the transaction holds locked, as it stands now (a new row's parent among them is not
    read again). ``guessed``: they were guessed (see :mod:`._known`). ``read`` and
    ``read_entries`` are what was read with its ``xmin``; ``wrote`` and ``wrote_entries`` what was
    written (an entry's ``None``: written under another key, forget it); ``xid`` the answer
    that carries the transaction's id; ``status_changed`` the rows whose status the save changed.
    """

    __slots__ = (
        "con",
        "tenant",
        "rows",
        "held",
        "entries",
        "guessed",
        "xid",
        "read",
        "read_entries",
        "wrote",
        "wrote_entries",
        "status_changed",
    )

    def __init__(
        self,
        con: Conn,
        tenant: str,
        rows: dict[str, Row | None],
        held: dict[str, Parent],
        entries: journal.Locked,
        guessed: bool = False,
    ) -> None:
        self.con = con
        self.tenant = tenant
        self.rows = rows
        self.held = held
        self.entries = entries
        self.guessed = guessed
        self.xid: Answer | None = None
        self.read: dict[str, tuple[str, Row]] = {}
        self.read_entries: dict[str, tuple[str, str]] = {}
        self.wrote: dict[str, Row] = {}
        self.wrote_entries: dict[str, str | None] = {}
        self.status_changed: list[str] = []


async def begin(
    con: Conn, tenant: str, ids: Sequence[str], keys: Sequence[str], known: Known, cache: ChainCache, guess: Guess
) -> Tx:
    """Open a save of the rows of ``ids`` and the journal entries of ``keys``: guessed if it may and can, else read."""
    unique = list(dict.fromkeys(ids))
    keys = list(dict.fromkeys(keys))
    if not unique and not keys:  # nothing to read or lock (outbox events alone)
        return Tx(con, tenant, {}, {}, {})
    if guess.on:
        tx = _guessed(con, tenant, unique, keys, known, cache)
        if tx is not None:
            rows = [f"{sid} {xmin}" for sid, (xmin, _) in tx.read.items()]
            entries = [f"{key} {xmin}" for key, (xmin, _) in tx.read_entries.items()]
            args = {"tenant": tenant, "ids": one_or_all(unique), "keys": one_or_all(keys), "rows": rows}
            args["entries"] = entries
            sql = guard(len(unique), len(keys))
            tx.xid = await con.execute(sql, args)  # answered with the commit: no round trip of its own
            tx.read.clear()
            tx.read_entries.clear()
            return tx
        guess.on = False
    return await _locked(con, tenant, unique, keys)


def _guessed(con: Conn, tenant: str, ids: list[str], keys: list[str], known: Known, cache: ChainCache) -> Tx | None:
    """The save's rows and entries as known (an unknown row absent), or ``None`` if one cannot be guessed.

    An unknown journal entry is not guessed (a call's entry is usually there); nor is a known
    row whose history the chain cache no longer holds (the known row keeps no tail to read it from).
    """
    tx = Tx(con, tenant, dict.fromkeys(ids), {}, {}, guessed=True)
    for sid in ids:
        found = known.row(tenant, sid)
        if found is None:
            continue
        row = found[1]
        if row.tail is not None and cache.entry(tenant, sid, row.mrev) is None:
            return None
        tx.rows[sid] = row
        tx.read[sid] = found
        tx.held[sid] = Parent(row.mrev, row.tail is None, row.session_id)
    for key in keys:
        seen = known.entry(tenant, key)
        if seen is None:
            return None
        tx.entries[key] = seen[1]
        tx.read_entries[key] = seen
    return tx


async def _locked(con: Conn, tenant: str, ids: list[str], keys: list[str]) -> Tx:
    """Read the rows of ``ids`` and the journal entries of ``keys`` ``FOR UPDATE``: one round trip for both."""
    tx = Tx(con, tenant, dict.fromkeys(ids), {}, dict.fromkeys(keys))
    if ids or keys:
        tx.xid = await con.execute(XID)
    if ids and keys:
        args = {"tenant": tenant, "ids": one_or_all(ids), "keys": one_or_all(keys)}
        cur = await con.execute(_lock_both(len(ids), len(keys)), args)
        for found in await cur.fetchall():
            if found[0] is None:
                key, raw, xmin = found[WIDTH:]
                tx.entries[key] = raw
                tx.read_entries[key] = (xmin, raw)
            else:
                _read_row(tx, found)
    elif ids:
        args = {"tenant": tenant, "ids": one_or_all(ids)}
        for found in await (await con.execute(_lock_rows(len(ids)), args)).fetchall():
            _read_row(tx, found)
    elif keys:
        tx.entries, versions = await journal.locked(await journal.lock(con, tenant, keys), keys)
        tx.read_entries = {key: (xmin, str(tx.entries[key])) for key, xmin in versions.items()}
    return tx


def _read_row(tx: Tx, found: tuple[Any, ...]) -> None:
    row = row_of(found)
    tx.rows[row.snapshot_id] = row
    tx.read[row.snapshot_id] = (found[WIDTH - 1], row)
    tx.held[row.snapshot_id] = Parent(row.mrev, row.tail is None, row.session_id)


def settle(tx: Tx, known: Known) -> None:
    """Remember what the committed save ``tx`` read and wrote, with each row's ``xmin`` now."""
    tenant = tx.tenant
    result = None if tx.xid is None else tx.xid.pgresult
    value = None if result is None or result.ntuples != 1 else result.get_value(0, 0)
    xid = None if value is None else bytes(value).decode()
    for sid, (xmin, row) in tx.read.items():
        if sid not in tx.wrote:
            known.saw_row(tenant, row, xmin)
    for key, (xmin, text) in tx.read_entries.items():
        if key not in tx.wrote_entries:
            known.saw_entry(tenant, key, text, xmin)
    for sid, row in tx.wrote.items():
        if xid is None:
            known.forget(tenant, [sid])
        else:
            known.saw_row(tenant, row, xid)
    for key, text in tx.wrote_entries.items():
        if xid is None or text is None:
            known.forget(tenant, keys=[key])
        else:
            known.saw_entry(tenant, key, text, xid)
