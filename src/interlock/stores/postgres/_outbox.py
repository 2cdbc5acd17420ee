"""The PostgreSQL store's outbox table (see :mod:`interlock.records._outbox`): the SQLite store's, in PostgreSQL.

Inserts run in the caller's transaction (the save they report). A claim locks the due rows
it takes with ``FOR UPDATE SKIP LOCKED``, so two processes claiming at once take different
rows and never wait on each other; a settle locks its row and checks the lease holder.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, LiteralString

from ...records._outbox import OutboxEvent, leased, retries
from .._sql.outbox_rows import event as event_of
from .._sql.outbox_rows import row, us

if TYPE_CHECKING:  # psycopg is the optional extra: this module's SQL is imported without it
    from ._wire import Wire as Conn

OUTBOX = "interlock_outbox"
V2: tuple[LiteralString, ...] = (
    f"""CREATE TABLE IF NOT EXISTS {OUTBOX} (
        seq          bigserial PRIMARY KEY,
        id           text    NOT NULL UNIQUE,
        tenant       text    NOT NULL,
        channel      text    NOT NULL,
        status       text    NOT NULL,
        due_us       bigint  NOT NULL,
        lease_holder text,
        lease_us     bigint,
        event        text    NOT NULL
    )""",
    f"CREATE INDEX IF NOT EXISTS {OUTBOX}_due ON {OUTBOX} (channel, due_us) WHERE status = 'pending'",
)
"""Schema version 2: the outbox."""
_SELECT = f"SELECT seq, event FROM {OUTBOX}"
_INSERT = f"""INSERT INTO {OUTBOX} (id, tenant, channel, status, due_us, lease_holder, lease_us, event)
    VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"""
_UPDATE = f"UPDATE {OUTBOX} SET status = %s, due_us = %s, lease_holder = %s, lease_us = %s, event = %s WHERE id = %s"


async def insert(con: Conn, events: Sequence[OutboxEvent]) -> None:
    """Add ``events`` (in the caller's transaction)."""
    if not events:
        return
    for e in events:  # queued: the save's batch sends them with its other writes
        await con.execute(_INSERT, (e.id, e.tenant or "", e.channel, *row(e)))


async def claim(
    con: Conn, channel: str, holder: str, lease: float, limit: int, now: datetime | None
) -> list[OutboxEvent]:
    """Lease up to ``limit`` due rows of ``channel`` (in the caller's transaction)."""
    now = now or datetime.now(UTC)
    now_us = us(now)
    found = await con.execute(
        f"""{_SELECT} WHERE channel = %s AND status = 'pending' AND due_us <= %s
        AND (lease_us IS NULL OR lease_us <= %s) ORDER BY due_us, seq LIMIT %s FOR UPDATE SKIP LOCKED""",
        (channel, now_us, now_us, limit),
    )
    taken = [leased(event_of(raw, seq, "PostgreSQL"), holder, lease, now) for seq, raw in await found.fetchall()]
    await _update(con, taken)
    return taken


async def _update(con: Conn, events: Sequence[OutboxEvent]) -> None:
    if not events:
        return
    for e in events:
        await con.execute(_UPDATE, (*row(e), e.id))


async def settle(con: Conn, event: OutboxEvent, holder: str) -> bool:
    """Write back ``event`` without its lease if ``holder`` holds it (in the caller's transaction)."""
    found = await con.execute(f"SELECT lease_holder FROM {OUTBOX} WHERE id = %s FOR UPDATE", (event.id,))
    row = await found.fetchone()
    if row is None or row[0] != holder:
        return False
    await _update(con, [event.evolve(lease_holder=None, lease_expires_at=None)])
    return True


async def retry(con: Conn, channel: str, ids: Sequence[str] | None, now: datetime | None) -> list[OutboxEvent]:
    """Give the failed rows of ``channel`` (or those of ``ids``) a fresh start (in the caller's transaction).

    The failed rows of the channel are read and locked, then :func:`interlock.records.retries` decides.
    """
    found = await con.execute(f"{_SELECT} WHERE channel = %s AND status = 'failed' FOR UPDATE", (channel,))
    events = [event_of(raw, seq, "PostgreSQL") for seq, raw in await found.fetchall()]
    again = retries(events, channel, ids, now or datetime.now(UTC))
    await _update(con, again)
    return again


async def prune(con: Conn, channel: str, settled_before: datetime) -> int:
    """Delete the rows of ``channel`` settled before the cutoff (in the caller's transaction).

    :func:`interlock.records.is_prunable` in SQL: a settled row's ``due_us`` is when it settled.
    """
    sql = f"""WITH gone AS (DELETE FROM {OUTBOX} WHERE channel = %s AND status <> 'pending' AND due_us < %s
        RETURNING 1) SELECT count(*) FROM gone"""  # a count, not rowcount: a pipeline's rowcount is not known yet
    found = await (await con.execute(sql, (channel, us(settled_before)))).fetchone()
    return 0 if found is None else int(found[0])


async def events(con: Conn, channel: str | None, status: str | None) -> list[OutboxEvent]:
    found = await con.execute(
        f"""{_SELECT} WHERE (%(channel)s::text IS NULL OR channel = %(channel)s)
        AND (%(status)s::text IS NULL OR status = %(status)s) ORDER BY seq""",
        {"channel": channel, "status": status},
    )
    return [event_of(raw, seq, "PostgreSQL") for seq, raw in await found.fetchall()]
