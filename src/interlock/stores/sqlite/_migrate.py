"""The SQLite store's schema versions and forward migrations (the rule is :mod:`interlock.stores._sql.versions`').

Versions:

1. the layout before versions were recorded (interlock up to commit 831404f): the
   snapshot, session and journal tables, no ``interlock_schema`` table. A file whose
   snapshot table exists without that table is version 1.
2. ``interlock_schema`` records the version; the journal table is created if a file from
   before the journal lacks it.
3. the webhook and deadline outbox (:mod:`interlock.records._outbox`).
4. each session's leaves and the index of open interrupts (:mod:`._index`),
   filled from the rows; the session index becomes ``(session, parent_id)``, which finds
   a snapshot's children.
5. the index of open interrupts as a ``WITHOUT ROWID`` table (see :mod:`._index`): one page
   fewer written per interrupt added or answered; its rows are copied over.
6. the index of open interrupts keyed by ``(tenant, created_us, snapshot_id, position)``, the
   listing's order, without its ``created`` index: one page fewer written per interrupt added,
   claimed or answered; its rows are copied over.
7. a session's leaves as a ``leaf`` flag in their rows, found through the session index
   ``(session, leaf, parent_id)`` (:data:`~._schema.TREE`), in place of the table of leaves
   and the ``(session, parent_id)`` index: a page fewer written per paused turn and per resume.

A migration runs inside the write transaction (``BEGIN IMMEDIATE``) that read the version,
so two processes cannot both migrate a file, and a failed migration leaves it unchanged.
To change the layout, append a version to :data:`MIGRATIONS` and bump nothing else.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from ...errors import FailedPreconditionError
from .._sql.index_rows import ENTRY_COLUMNS
from .._sql.versions import COMPONENT, SCHEMA_TABLE, plan_upgrade
from . import _index as index
from ._codec import id_out, word_in
from ._journal import create_journal
from ._outbox import create_outbox
from ._rows import SnapshotRows, put_entries
from ._schema import LEAVES, OPEN, SCHEMA, TABLE, TREE


def _record_versions(con: sqlite3.Connection) -> None:
    con.execute(
        f"CREATE TABLE IF NOT EXISTS {SCHEMA_TABLE} (component TEXT PRIMARY KEY, version INTEGER NOT NULL) "
        "WITHOUT ROWID"  # one page: no separate index
    )
    create_journal(con)


_CHILDREN_V4 = f"CREATE INDEX IF NOT EXISTS {TABLE}_children ON {TABLE} (session, parent_id)"
_LEAVES_V4 = f"""CREATE TABLE IF NOT EXISTS {LEAVES} (
        session     INTEGER NOT NULL,  -- interlock_sessions.id
        snapshot_id BLOB    NOT NULL,
        created_us  INTEGER NOT NULL,
        PRIMARY KEY (session, snapshot_id)
    ) WITHOUT ROWID"""
"""Versions 4 to 6's session index and table of leaves (version 7 replaces both)."""


def _index(con: sqlite3.Connection) -> None:
    con.execute(f"DROP INDEX IF EXISTS {TABLE}_session")  # (session): (session, parent_id) replaces it
    for statement in (_CHILDREN_V4, _LEAVES_V4, index.OPEN_DDL):
        con.execute(statement)
    con.execute(
        f"""INSERT OR REPLACE INTO {LEAVES} (session, snapshot_id, created_us)
        SELECT s.session, s.snapshot_id, s.created_us FROM {TABLE} AS s
        WHERE NOT EXISTS (SELECT 1 FROM {TABLE} AS c WHERE c.session = s.session AND c.parent_id = s.snapshot_id)"""
    )  # (the index of open interrupts is filled by version 7, with the statements of the current layout)


def _rebuild_open(con: sqlite3.Connection) -> None:
    """Rebuild the index of open interrupts in its current layout (:data:`._index.OPEN_DDL`), rows copied over.

    Versions 5 and 6 both change the layout, so a file upgraded across both rebuilds it twice
    (the second time in the same layout; the table is small).
    """
    columns = ", ".join(("tenant", *ENTRY_COLUMNS))
    con.execute(f"DROP INDEX IF EXISTS {OPEN}_created")  # versions 4 and 5 had it; the table's key replaces it
    con.execute(f"ALTER TABLE {OPEN} RENAME TO {OPEN}_old")
    con.execute(index.OPEN_DDL)
    con.execute(f"INSERT INTO {OPEN} ({columns}) SELECT {columns} FROM {OPEN}_old")
    con.execute(f"DROP TABLE {OPEN}_old")


def _leaf_flags(con: sqlite3.Connection) -> None:
    """The table of leaves folded into a flag of the rows it named, and the session index that finds it."""
    con.execute(f"ALTER TABLE {TABLE} ADD COLUMN leaf INTEGER NOT NULL DEFAULT 0")
    con.execute(
        f"UPDATE {TABLE} SET leaf = 1 WHERE EXISTS "
        f"(SELECT 1 FROM {LEAVES} AS l WHERE l.session = {TABLE}.session AND l.snapshot_id = {TABLE}.snapshot_id)"
    )
    con.execute(f"DROP INDEX IF EXISTS {TABLE}_children")
    con.execute(TREE)
    con.execute(f"DROP TABLE {LEAVES}")
    _fill_open(con)


MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {
    2: _record_versions,
    3: create_outbox,
    4: _index,
    5: _rebuild_open,
    6: _rebuild_open,
    7: _leaf_flags,
}
"""Version → what brings the previous version to it. Append only."""
CURRENT = max(MIGRATIONS)


def _found_version(con: sqlite3.Connection, path: str) -> int:
    """The file's version: 0 for a file without interlock's tables."""
    tables = {name for (name,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if SCHEMA_TABLE in tables:
        row = con.execute(f"SELECT version FROM {SCHEMA_TABLE} WHERE component = ?", (COMPONENT,)).fetchone()
        if row is None or not isinstance(row[0], int):
            raise FailedPreconditionError(
                f"the SQLite store at {path!r} has a {SCHEMA_TABLE!r} table without interlock's version row; "
                "use a separate file for the store"
            )
        return row[0]
    if TABLE not in tables:
        return 0
    columns = {row[1] for row in con.execute(f"PRAGMA table_info({TABLE})")}
    if "session" not in columns:
        raise FailedPreconditionError(
            f"the SQLite store at {path!r} was written by an earlier interlock whose layout of {TABLE!r} "
            "(a text session_id column) this version does not read"
        )
    return 1


def prepare(con: sqlite3.Connection, path: str, *, upgrade: bool) -> int | None:
    """Create, check or migrate the file's tables in the caller's write transaction.

    Returns the version migrated from, or ``None`` when nothing was migrated.
    """
    found = _found_version(con, path)
    if found == 0:
        for statement in SCHEMA:
            con.execute(statement)
        for version in sorted(MIGRATIONS):
            MIGRATIONS[version](con)
        _stamp(con)
        return None
    url = "sqlite:///" + path
    todo = plan_upgrade(found, CURRENT, where=f"the SQLite store at {path!r}", url=url, upgrade=upgrade)
    for version in todo:
        MIGRATIONS[version](con)
    if todo:
        _stamp(con)
        return found
    return None


def _stamp(con: sqlite3.Connection) -> None:
    con.execute(
        f"INSERT INTO {SCHEMA_TABLE} (component, version) VALUES (?, ?) "
        "ON CONFLICT (component) DO UPDATE SET version = excluded.version",
        (COMPONENT, CURRENT),
    )


def _fill_open(con: sqlite3.Connection) -> None:
    """Fill the index of open interrupts from the snapshot rows, afresh (the rows are what it derives from)."""
    con.execute(f"DELETE FROM {OPEN}")
    rows = SnapshotRows(cache_bytes=4 << 20)
    paused = con.execute(
        f"SELECT tenant, snapshot_id, session FROM {TABLE} WHERE status = :completed AND finish_reason = :paused",
        {"completed": word_in("completed"), "paused": word_in("interrupted")},
    ).fetchall()
    for tenant, raw, session in paused:
        snap = rows.read(con, tenant, id_out(raw))
        if snap is not None:
            put_entries(con, tenant, session, snap)
