"""The SQLite store's leaves and index of open interrupts (see :mod:`interlock.stores._sql.index_rows`).

A session's leaves are the rows whose ``leaf`` flag is set, found through the snapshot table's
session index :data:`~._schema.TREE` ``(session, leaf, parent_id)``, which also finds a
snapshot's children. (Until version 7 they were rows of a table of their own,
``interlock_leaves``: a page more written per paused turn and per resume; see
:mod:`._schema`'s pages per interrupt cycle.)

``interlock_open_interrupts`` holds one row per waiting call; its ids are TEXT (not the snapshot
table's compact BLOBs) so that SQL orders them as Python orders strings, which paging by cursor
needs. It is ``WITHOUT ROWID``: a row lives in its primary key's b-tree, so adding or deleting
one writes that page only (a rowid table would write a second, its separate primary-key index:
measured, one interrupt cycle's WAL frames went from 25 to 23). It is keyed in its listing's
order, ``(tenant, created_us, snapshot_id, position)``, so it needs no secondary index either:
a pause, a claim and a resume write one page of it each (23 frames per cycle to 21). So every
statement that finds one snapshot's entries names their ``created_us`` too, the snapshot's
``created_at`` (the row a write replaces, the row a delete returns, or the snapshot row in the
same statement: see :mod:`._rows`), else it would read every entry of the tenant. The price of
``WITHOUT ROWID``: such a row over about 1 KB spills its tail into an overflow page, and a claim
that rewrites it (its claim columns change its size) then writes the overflow page again. An open
interrupt's row is about 200 bytes beside its tool request (``part``), so only a call whose
input and interrupt payload pass about 800 bytes pays it.

Every function runs in the caller's write transaction, after the snapshot row was written.
"""

from __future__ import annotations

import sqlite3
from datetime import datetime
from typing import cast

from ...records._interrupt_index import InterruptQuery, OpenInterrupt
from .._sql.index_rows import entry_of, page_sql, rest_args, rest_sql
from .._sql.row_codec import from_us
from ._codec import DbId, id_in, id_out
from ._schema import OPEN, TABLE

OPEN_DDL = f"""CREATE TABLE IF NOT EXISTS {OPEN} (
        tenant         TEXT    NOT NULL,
        snapshot_id    TEXT    NOT NULL,
        position       INTEGER NOT NULL,
        session_id     TEXT    NOT NULL,
        agent          TEXT,
        tool           TEXT    NOT NULL,
        ref            TEXT,
        created_us     INTEGER NOT NULL,
        deadline_us    INTEGER,
        in_doubt       INTEGER NOT NULL,
        claimed_by     TEXT,
        claim_until_us INTEGER,
        part           TEXT    NOT NULL,
        PRIMARY KEY (tenant, created_us, snapshot_id, position)
    ) WITHOUT ROWID"""

_SELECT_LEAVES = f"SELECT snapshot_id, created_us FROM {TABLE} WHERE session = :session AND leaf = 1"


def leaves(con: sqlite3.Connection, session: int) -> list[tuple[datetime, str]]:
    """A session's leaves as ``(created_at, snapshot_id)``."""
    found = cast(list[tuple[DbId, int]], con.execute(_SELECT_LEAVES, {"session": session}).fetchall())
    return [(from_us(us), id_out(raw)) for raw, us in found]


def page(con: sqlite3.Connection, tenant: str, query: InterruptQuery) -> list[OpenInterrupt]:
    """One page of open interrupts (see :meth:`~interlock.stores.InterruptIndex.open_interrupts`)."""
    if query.empty:
        return []
    sql, args = page_sql(OPEN, query, _mark, created_of=(TABLE, id_in))
    found = [entry_of(r) for r in con.execute(sql, args | {"tenant": tenant})]
    if query.limit is not None and len(found) == query.limit:
        found += [entry_of(r) for r in con.execute(rest_sql(OPEN, _mark), rest_args(tenant, found[-1], args["now"]))]
    return found


def _mark(name: str) -> str:
    return ":" + name
