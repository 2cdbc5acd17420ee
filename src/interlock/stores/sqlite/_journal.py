"""The SQLite store's effect journal table (see :mod:`interlock.records._journal`), run on its worker thread.

One row per ``(tenant, key)``: the entry as JSON, plus the columns it is found and
pruned by. Writes are conditional on the stored attempt, in the caller's write
transaction, so a runner whose attempt was superseded cannot record over it.

A new entry writes four pages: its row and an entry in each of three indexes, one per way
it is found: by key (the call's own lookup), by session (the session's journal, entries of a
turn that never saved its snapshot included) and by snapshot (entries go with their snapshot
when it is deleted, whatever session they name). It keeps its rowid: an entry's JSON is
often near 1 KB after a call (output and attempts), and a ``WITHOUT ROWID`` row past about
1 KB spills into an overflow page, which each of the entry's later writes (three per
interrupt cycle) would write again.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from ...records._journal import JournalEntry
from ._rows import stored_entry
from ._schema import JOURNAL, batches

JOURNAL_SCHEMA = (
    f"""CREATE TABLE IF NOT EXISTS {JOURNAL} (
        tenant      TEXT    NOT NULL,
        key         TEXT    NOT NULL,
        session_id  TEXT    NOT NULL,
        snapshot_id TEXT    NOT NULL,
        attempt     INTEGER NOT NULL,
        entry       TEXT    NOT NULL,
        PRIMARY KEY (tenant, key)
    )""",
    f"CREATE INDEX IF NOT EXISTS {JOURNAL}_session ON {JOURNAL} (tenant, session_id)",
    f"CREATE INDEX IF NOT EXISTS {JOURNAL}_snapshot ON {JOURNAL} (tenant, snapshot_id)",
)


def create_journal(con: sqlite3.Connection) -> None:
    """Create the journal table and its indexes (idempotent), in the caller's write transaction."""
    for statement in JOURNAL_SCHEMA:
        con.execute(statement)


def entries(con: sqlite3.Connection, tenant: str, session_id: str | None) -> list[JournalEntry]:
    if session_id is None:
        rows = con.execute(f"SELECT key, entry FROM {JOURNAL} WHERE tenant = ?", (tenant,)).fetchall()
    else:
        sql = f"SELECT key, entry FROM {JOURNAL} WHERE tenant = ? AND session_id = ?"
        rows = con.execute(sql, (tenant, session_id)).fetchall()
    found = [stored_entry(raw, str(key)) for key, raw in rows]
    return sorted(found, key=lambda e: (e.started_at, e.key))


def delete_for(con: sqlite3.Connection, tenant: str, snapshot_ids: Sequence[str]) -> None:
    """Drop the entries of calls made from deleted snapshots."""
    for marks, chunk in batches(list(snapshot_ids)):
        con.execute(f"DELETE FROM {JOURNAL} WHERE tenant = ? AND snapshot_id IN ({marks})", (tenant, *chunk))
