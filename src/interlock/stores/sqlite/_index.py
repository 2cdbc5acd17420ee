"""The SQLite store's leaf rows and index of open interrupts (see :mod:`interlock.stores._sql.index_rows`).

``interlock_leaves`` holds ``(session, snapshot_id, created_us)`` of each session's leaves
(``session`` is the interned key, so it implies the tenant). ``interlock_open_interrupts``
holds one row per waiting call; its ids are TEXT (not the snapshot table's compact
BLOBs) so that SQL orders them as Python orders strings, which paging by cursor needs.
Children are found through the snapshot table's ``(session, parent_id)`` index.

Every function runs in the caller's write transaction, after the snapshot row was written.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from datetime import datetime
from typing import cast

from ...records._interrupt_index import InterruptQuery, OpenInterrupt, entries_of
from ...records._sessions import Snapshot
from .._sql.index_rows import ENTRY_COLUMNS, entry_of, entry_values, page_sql, plan, rest_sql
from .._sql.row_codec import from_us, to_us
from ._codec import DbId, id_in, id_out, word_in
from ._schema import TABLE

LEAVES = "interlock_leaves"
OPEN = "interlock_open_interrupts"

DDL = (
    f"""CREATE TABLE IF NOT EXISTS {LEAVES} (
        session     INTEGER NOT NULL,  -- interlock_sessions.id
        snapshot_id BLOB    NOT NULL,
        created_us  INTEGER NOT NULL,
        PRIMARY KEY (session, snapshot_id)
    ) WITHOUT ROWID""",
    f"""CREATE TABLE IF NOT EXISTS {OPEN} (
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
        PRIMARY KEY (tenant, snapshot_id, position)
    )""",
    f"CREATE INDEX IF NOT EXISTS {OPEN}_created ON {OPEN} (tenant, created_us, snapshot_id, position)",
)

_DROP_LEAF = f"DELETE FROM {LEAVES} WHERE session = :session AND snapshot_id = :snapshot_id"
_ADD_LEAF = f"""INSERT OR REPLACE INTO {LEAVES} (session, snapshot_id, created_us)
    SELECT :session, :snapshot_id, :created_us
    WHERE NOT EXISTS (SELECT 1 FROM {TABLE} WHERE session = :session AND parent_id = :snapshot_id)"""
_SELECT_LEAVES = f"SELECT snapshot_id, created_us FROM {LEAVES} WHERE session = :session"
_DROP_ENTRIES = f"DELETE FROM {OPEN} WHERE tenant = :tenant AND snapshot_id = :snapshot_id"
_DROP_ENTRIES_IN = _DROP_ENTRIES + " AND session_id = :session_id"
_WENT_ON = f"""SELECT 1 FROM {TABLE} WHERE session = :session AND parent_id = :snapshot_id AND status = :completed
    LIMIT 1"""
_INSERT_ENTRY = (
    f"INSERT INTO {OPEN} (tenant, {', '.join(ENTRY_COLUMNS)}) "
    f"VALUES (:tenant, {', '.join(':' + c for c in ENTRY_COLUMNS)})"
)
_COMPLETED = word_in("completed")

Reader = Callable[[str], Snapshot | None]
"""Reads a snapshot (full state) in the caller's transaction."""


def written(
    con: sqlite3.Connection,
    tenant: str,
    session: int,
    before: tuple[str | None, str, str | None] | None,
    new: Snapshot,
    read: Reader,
) -> None:
    """Bring the leaves and the index in line after ``new`` was written (``before``: see :func:`plan`)."""
    p = plan(before, new)
    sid = id_in(new.snapshot_id)
    if p.unlink is not None:
        refresh(con, tenant, session, p.unlink, read)
    if p.drop_parent_leaf is not None:
        con.execute(_DROP_LEAF, {"session": session, "snapshot_id": id_in(p.drop_parent_leaf)})
    if p.add_leaf:
        con.execute(_ADD_LEAF, {"session": session, "snapshot_id": sid, "created_us": to_us(new.created_at)})
    if p.drop_parent_entries is not None:
        con.execute(
            _DROP_ENTRIES_IN,
            {"tenant": tenant, "snapshot_id": p.drop_parent_entries, "session_id": new.session_id},
        )
    if p.own_entries:
        _put_entries(con, tenant, session, new)


def refresh(con: sqlite3.Connection, tenant: str, session: int, snapshot_id: str, read: Reader) -> None:
    """Recompute one snapshot's leaf row and entries from the rows (a child of it in ``session`` went away).

    A snapshot of another session (the child forked a session from it) is left alone: its own
    session's rows decide its leaf and whether its calls wait.
    """
    raw = id_in(snapshot_id)
    found = con.execute(
        f"SELECT created_us, finish_reason FROM {TABLE} WHERE tenant = :tenant AND snapshot_id = :snapshot_id "
        "AND session = :session",
        {"tenant": tenant, "snapshot_id": raw, "session": session},
    ).fetchone()
    if found is None:
        return
    con.execute(_DROP_LEAF, {"session": session, "snapshot_id": raw})
    con.execute(_ADD_LEAF, {"session": session, "snapshot_id": raw, "created_us": found[0]})
    if found[1] == word_in("interrupted"):
        snap = read(snapshot_id)
        if snap is not None:
            _put_entries(con, tenant, session, snap)


def _put_entries(con: sqlite3.Connection, tenant: str, session: int, snap: Snapshot) -> None:
    con.execute(_DROP_ENTRIES, {"tenant": tenant, "snapshot_id": snap.snapshot_id})
    entries = entries_of(snap)
    if not entries:
        return
    went_on = {"session": session, "snapshot_id": id_in(snap.snapshot_id), "completed": _COMPLETED}
    if con.execute(_WENT_ON, went_on).fetchone() is None:
        con.executemany(_INSERT_ENTRY, [entry_values(tenant, e) for e in entries])


def forget(con: sqlite3.Connection, tenant: str, session: int, snapshot_id: str) -> None:
    """Drop a deleted snapshot's leaf row and entries."""
    con.execute(_DROP_LEAF, {"session": session, "snapshot_id": id_in(snapshot_id)})
    con.execute(_DROP_ENTRIES, {"tenant": tenant, "snapshot_id": snapshot_id})


def leaves(con: sqlite3.Connection, session: int) -> list[tuple[datetime, str]]:
    """A session's leaves as ``(created_at, snapshot_id)``."""
    found = cast(list[tuple[DbId, int]], con.execute(_SELECT_LEAVES, {"session": session}).fetchall())
    return [(from_us(us), id_out(raw)) for raw, us in found]


def page(con: sqlite3.Connection, tenant: str, query: InterruptQuery) -> list[OpenInterrupt]:
    """One page of open interrupts (see :meth:`~interlock.stores.InterruptIndex.open_interrupts`)."""
    if query.empty:
        return []
    sql, args = page_sql(OPEN, query, lambda name: ":" + name)
    found = [entry_of(r) for r in con.execute(sql, args | {"tenant": tenant})]
    if query.limit is not None and len(found) == query.limit:
        last = found[-1]
        more = {"tenant": tenant, "snapshot_id": last.snapshot_id, "position": last.position, "now": args["now"]}
        found += [entry_of(r) for r in con.execute(rest_sql(OPEN, lambda name: ":" + name), more)]
    return found


def backfill(con: sqlite3.Connection, read: Callable[[str, str], Snapshot | None]) -> None:
    """Fill both tables from the snapshot rows (a migration: every file written before them)."""
    con.execute(
        f"""INSERT OR REPLACE INTO {LEAVES} (session, snapshot_id, created_us)
        SELECT s.session, s.snapshot_id, s.created_us FROM {TABLE} AS s
        WHERE NOT EXISTS (SELECT 1 FROM {TABLE} AS c WHERE c.session = s.session AND c.parent_id = s.snapshot_id)"""
    )
    paused = con.execute(
        f"SELECT tenant, snapshot_id, session FROM {TABLE} WHERE status = :completed AND finish_reason = :paused",
        {"completed": _COMPLETED, "paused": word_in("interrupted")},
    ).fetchall()
    for tenant, raw, session in paused:
        snap = read(tenant, id_out(raw))
        if snap is not None:
            _put_entries(con, tenant, session, snap)
