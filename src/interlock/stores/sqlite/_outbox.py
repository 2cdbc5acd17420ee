"""The SQLite store's outbox table (see :mod:`interlock.records._outbox`), run on its worker thread.

One row per event: the event as JSON, plus the columns it is claimed by (``channel``,
``status``, ``due_us``: µs since the epoch, ``lease_holder``, ``lease_us``). Inserts run in
the caller's write transaction (the snapshot save they report); a claim reads and
leases its rows in one ``BEGIN IMMEDIATE`` transaction, so two processes never lease one
row at once.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import UTC, datetime

from ...records._outbox import OutboxEvent, leased, retries
from .._sql.outbox_rows import event as event_of
from .._sql.outbox_rows import row, us
from ._schema import OUTBOX

OUTBOX_SCHEMA = (
    f"""CREATE TABLE IF NOT EXISTS {OUTBOX} (
        seq          INTEGER PRIMARY KEY,
        id           TEXT    NOT NULL UNIQUE,
        tenant       TEXT    NOT NULL,
        channel      TEXT    NOT NULL,
        status       TEXT    NOT NULL,
        due_us       INTEGER NOT NULL,
        lease_holder TEXT,
        lease_us     INTEGER,
        event        TEXT    NOT NULL
    )""",
    f"CREATE INDEX IF NOT EXISTS {OUTBOX}_due ON {OUTBOX} (channel, due_us) WHERE status = 'pending'",
)
_SELECT = f"SELECT seq, event FROM {OUTBOX}"


def create_outbox(con: sqlite3.Connection) -> None:
    """Create the outbox table and its index (idempotent), in the caller's write transaction."""
    for statement in OUTBOX_SCHEMA:
        con.execute(statement)


def claim(
    con: sqlite3.Connection, channel: str, holder: str, lease: float, limit: int, now: datetime | None
) -> list[OutboxEvent]:
    """Lease up to ``limit`` due rows of ``channel`` (in the caller's write transaction)."""
    now = now or datetime.now(UTC)
    now_us = us(now)
    rows = con.execute(
        f"""{_SELECT} WHERE channel = ? AND status = 'pending' AND due_us <= ?
        AND (lease_us IS NULL OR lease_us <= ?) ORDER BY due_us, seq LIMIT ?""",
        (channel, now_us, now_us, limit),
    ).fetchall()
    taken = [leased(event_of(raw, seq, "SQLite"), holder, lease, now) for seq, raw in rows]
    _update(con, taken)
    return taken


def _update(con: sqlite3.Connection, events: Sequence[OutboxEvent]) -> None:
    con.executemany(
        f"UPDATE {OUTBOX} SET status = ?, due_us = ?, lease_holder = ?, lease_us = ?, event = ? WHERE id = ?",
        [(*row(e), e.id) for e in events],
    )


def settle(con: sqlite3.Connection, event: OutboxEvent, holder: str) -> bool:
    """Write back ``event`` without its lease if ``holder`` holds it (in the caller's write transaction)."""
    row = con.execute(f"SELECT lease_holder FROM {OUTBOX} WHERE id = ?", (event.id,)).fetchone()
    if row is None or row[0] != holder:
        return False
    _update(con, [event.evolve(lease_holder=None, lease_expires_at=None)])
    return True


def retry(con: sqlite3.Connection, channel: str, ids: Sequence[str] | None, now: datetime | None) -> list[OutboxEvent]:
    """Give the failed rows of ``channel`` (or those of ``ids``) a fresh start (in the caller's write transaction).

    The failed rows of the channel are read (an index-free scan, as a prune's), then
    :func:`interlock.records.retries` decides.
    """
    sql = f"{_SELECT} WHERE channel = ? AND status = 'failed'"
    found = [event_of(raw, seq, "SQLite") for seq, raw in con.execute(sql, (channel,)).fetchall()]
    again = retries(found, channel, ids, now or datetime.now(UTC))
    _update(con, again)
    return again


def prune(con: sqlite3.Connection, channel: str, settled_before: datetime) -> int:
    """Delete the rows of ``channel`` settled before the cutoff (in the caller's write transaction).

    :func:`interlock.records.is_prunable` in SQL: a settled row's ``due_us`` is when it settled.
    """
    sql = f"DELETE FROM {OUTBOX} WHERE channel = ? AND status <> 'pending' AND due_us < ?"
    return con.execute(sql, (channel, us(settled_before))).rowcount


def events(con: sqlite3.Connection, channel: str | None, status: str | None) -> list[OutboxEvent]:
    rows = con.execute(
        f"{_SELECT} WHERE (?1 IS NULL OR channel = ?1) AND (?2 IS NULL OR status = ?2) ORDER BY seq",
        (channel, status),
    ).fetchall()
    return [event_of(raw, seq, "SQLite") for seq, raw in rows]
