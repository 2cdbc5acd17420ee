"""The SQLite store's effect journal table (see :mod:`interlock.records._journal`), run on its worker thread.

One row per ``(tenant, key)``: the entry as JSON, plus the columns it is found and
pruned by. Writes are conditional on the stored attempt, in the caller's write
transaction, so a runner whose attempt was superseded cannot record over it.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence
from typing import cast

from ...errors import DataLossError
from ...records._journal import JournalEntry, superseded
from ._schema import batches

JOURNAL = "interlock_journal"
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


def _entry(raw: object, key: str) -> JournalEntry:
    try:
        return JournalEntry.from_json(json.loads(cast(str, raw)))
    except (TypeError, ValueError, KeyError) as exc:
        raise DataLossError(f"the journal entry {key!r} of the SQLite store is damaged: {exc}") from None


def get(con: sqlite3.Connection, tenant: str, key: str) -> JournalEntry | None:
    row = con.execute(f"SELECT entry FROM {JOURNAL} WHERE tenant = ? AND key = ?", (tenant, key)).fetchone()
    return None if row is None else _entry(row[0], key)


def put(con: sqlite3.Connection, tenant: str, entry: JournalEntry, expect: int) -> None:
    """Write ``entry`` if the stored attempt is ``expect`` (0: none stored), else raise ABORTED.

    One statement (so it may run as its own transaction: ``Worker.run_here``): the insert of a
    new call, or the update of the attempt ``expect``.
    """
    text = json.dumps(entry.to_json())
    if expect == 0:
        sql = f"""INSERT INTO {JOURNAL} (tenant, key, session_id, snapshot_id, attempt, entry)
            VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (tenant, key) DO NOTHING"""
        written = con.execute(sql, (tenant, entry.key, entry.session_id, entry.snapshot_id, entry.attempt, text))
    else:
        sql = f"UPDATE {JOURNAL} SET attempt = ?, entry = ? WHERE tenant = ? AND key = ? AND attempt = ?"
        written = con.execute(sql, (entry.attempt, text, tenant, entry.key, expect))
    if written.rowcount != 1:
        raise superseded(entry, get(con, tenant, entry.key), expect)


def update(
    con: sqlite3.Connection, tenant: str, key: str, fn: Callable[[JournalEntry | None], JournalEntry | None]
) -> None:
    """Apply ``fn`` to the entry of ``key`` (``None``: none stored) and write what it returns, if anything."""
    new = fn(get(con, tenant, key))
    if new is not None:
        _write(con, tenant, new)


def _write(con: sqlite3.Connection, tenant: str, entry: JournalEntry) -> None:
    con.execute(
        f"""INSERT INTO {JOURNAL} (tenant, key, session_id, snapshot_id, attempt, entry)
        VALUES (:tenant, :key, :session_id, :snapshot_id, :attempt, :entry)
        ON CONFLICT (tenant, key) DO UPDATE SET attempt = excluded.attempt, entry = excluded.entry""",
        {
            "tenant": tenant,
            "key": entry.key,
            "session_id": entry.session_id,
            "snapshot_id": entry.snapshot_id,
            "attempt": entry.attempt,
            "entry": json.dumps(entry.to_json()),
        },
    )


def entries(con: sqlite3.Connection, tenant: str, session_id: str | None) -> list[JournalEntry]:
    if session_id is None:
        rows = con.execute(f"SELECT key, entry FROM {JOURNAL} WHERE tenant = ?", (tenant,)).fetchall()
    else:
        sql = f"SELECT key, entry FROM {JOURNAL} WHERE tenant = ? AND session_id = ?"
        rows = con.execute(sql, (tenant, session_id)).fetchall()
    found = [_entry(raw, str(key)) for key, raw in rows]
    return sorted(found, key=lambda e: (e.started_at, e.key))


def delete_for(con: sqlite3.Connection, tenant: str, snapshot_ids: Sequence[str]) -> None:
    """Drop the entries of calls made from deleted snapshots."""
    for marks, chunk in batches(list(snapshot_ids)):
        con.execute(f"DELETE FROM {JOURNAL} WHERE tenant = ? AND snapshot_id IN ({marks})", (tenant, *chunk))
