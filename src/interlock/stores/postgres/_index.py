"""The PostgreSQL store's leaf rows and index of open interrupts (see :mod:`interlock.stores._sql.index_rows`).

The same tables and rules as the SQLite store's (:mod:`interlock.stores.sqlite._index`),
keyed by ``(tenant, session_id)`` since sessions are not interned here. The open
interrupts' ``snapshot_id`` is collated ``"C"`` so that SQL orders ids as Python orders
strings (paging by cursor needs it). Every function runs in the caller's transaction, after
the snapshot row was written (and locked).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, LiteralString, cast

from ...records._interrupt_index import InterruptQuery, OpenInterrupt, entries_of
from ...records._sessions import Snapshot
from .._sql.index_rows import (
    ENTRY_COLUMNS,
    entry_of,
    entry_values,
    own_entries_change,
    page_sql,
    plan,
    rest_args,
    rest_sql,
)
from .._sql.row_codec import to_us
from ._wire import Wire as Conn

Reader = Callable[[str], Awaitable[Snapshot | None]]

TABLE = "interlock_snapshots"
LEAVES = "interlock_leaves"
OPEN = "interlock_open_interrupts"

V3: tuple[LiteralString, ...] = (
    f"DROP INDEX IF EXISTS {TABLE}_session",
    f"CREATE INDEX IF NOT EXISTS {TABLE}_children ON {TABLE} (tenant, session_id, parent_id)",
    f"""CREATE TABLE IF NOT EXISTS {LEAVES} (
        tenant      text   NOT NULL,
        session_id  text   NOT NULL,
        snapshot_id text   NOT NULL,
        created_us  bigint NOT NULL,
        PRIMARY KEY (tenant, session_id, snapshot_id)
    )""",
    f"""CREATE TABLE IF NOT EXISTS {OPEN} (
        tenant         text    NOT NULL,
        snapshot_id    text    COLLATE "C" NOT NULL,
        position       integer NOT NULL,
        session_id     text    NOT NULL,
        agent          text,
        tool           text    NOT NULL,
        ref            text,
        created_us     bigint  NOT NULL,
        deadline_us    bigint,
        in_doubt       integer NOT NULL,
        claimed_by     text,
        claim_until_us bigint,
        part           text    NOT NULL,
        PRIMARY KEY (tenant, snapshot_id, position)
    )""",
    f"CREATE INDEX IF NOT EXISTS {OPEN}_created ON {OPEN} (tenant, created_us, snapshot_id, position)",
    f"""INSERT INTO {LEAVES} (tenant, session_id, snapshot_id, created_us)
        SELECT s.tenant, s.session_id, s.snapshot_id, s.created_us FROM {TABLE} AS s
        WHERE NOT EXISTS (SELECT 1 FROM {TABLE} AS c
            WHERE c.tenant = s.tenant AND c.session_id = s.session_id AND c.parent_id = s.snapshot_id)
        ON CONFLICT DO NOTHING""",
)
"""Schema version 3's statements (the open interrupts are filled by :func:`backfill` after them)."""

_SCOPE = "tenant = %(tenant)s AND session_id = %(session_id)s"
_DROP_LEAF = f"DELETE FROM {LEAVES} WHERE {_SCOPE} AND snapshot_id = %(snapshot_id)s"
_ADD_LEAF = f"""INSERT INTO {LEAVES} (tenant, session_id, snapshot_id, created_us)
    SELECT %(tenant)s, %(session_id)s, %(snapshot_id)s, %(created_us)s
    WHERE NOT EXISTS (SELECT 1 FROM {TABLE} WHERE {_SCOPE} AND parent_id = %(snapshot_id)s)
    ON CONFLICT DO NOTHING"""
_DROP_ENTRIES = f"DELETE FROM {OPEN} WHERE tenant = %(tenant)s AND snapshot_id = %(snapshot_id)s"
_WENT_ON = f"""SELECT 1 FROM {TABLE} WHERE {_SCOPE} AND parent_id = %(snapshot_id)s AND status = 'completed'
    LIMIT 1"""
_INSERT_ENTRY = (
    f"INSERT INTO {OPEN} (tenant, {', '.join(ENTRY_COLUMNS)}) "
    f"SELECT %(tenant)s, {', '.join(f'%({c})s' for c in ENTRY_COLUMNS)} WHERE NOT EXISTS ({_WENT_ON})"
)
"""An entry, unless a completed child continues its snapshot (checked in the statement: no answer to wait for)."""
_LINK = f"""WITH parent_leaf AS (
        DELETE FROM {LEAVES} WHERE {_SCOPE} AND snapshot_id = %(parent)s
    ), parent_entries AS (
        DELETE FROM {OPEN} WHERE tenant = %(tenant)s AND snapshot_id = %(went_on)s AND session_id = %(session_id)s
    )
    INSERT INTO {LEAVES} (tenant, session_id, snapshot_id, created_us)
    SELECT %(tenant)s, %(session_id)s, %(snapshot_id)s, %(created_us)s
    WHERE %(add)s AND NOT EXISTS (SELECT 1 FROM {TABLE} WHERE {_SCOPE} AND parent_id = %(snapshot_id)s)
    ON CONFLICT DO NOTHING"""
"""A write's changes to others' rows in one statement: its parent is no leaf (``parent``), the row is one
if new (``add``) and childless, and its parent's calls no longer wait (``went_on``); ``NULL``/false skip each."""
_CLAIM_ENTRIES = f"""UPDATE {OPEN} SET claimed_by = %(claimed_by)s, claim_until_us = %(claim_until_us)s
    WHERE tenant = %(tenant)s AND snapshot_id = %(snapshot_id)s"""
"""A row's entries' claim columns, when a write changed nothing else of them (``index_rows.own_entries_change``)."""
_SELECT_OWN = f"""SELECT created_us, finish_reason FROM {TABLE}
    WHERE tenant = %(tenant)s AND snapshot_id = %(snapshot_id)s AND session_id = %(session_id)s"""


Statement = tuple[LiteralString, dict[str, Any]]
"""A write (its SQL and named arguments) that :func:`written` may fold into its own statement."""


def _mark(name: str) -> str:
    return f"%({name})s"


async def written(
    con: Conn,
    tenant: str,
    before: tuple[str | None, str, str | None] | None,
    new: Snapshot,
    read: Reader,
    *,
    insert: Statement | None = None,
    old: Snapshot | None = None,
    same_messages: bool = False,
) -> None:
    """Bring the leaves and the index in line after ``new`` was written (``before``: see ``index_rows.plan``).

    ``insert`` is the new row's insert, not sent yet: it runs first, in the statement of the
    changes to the leaves when there are some (a statement's parts see the database as it was
    before it, so the new row must not be its own parent's child: the caller sends that row alone).
    ``old`` is the snapshot the row held (``same_messages``: ``new`` keeps its messages): a write
    that leaves its entries alone, or changes only their claim, does not rewrite them.
    """
    p = plan(before, new)
    scope = {"tenant": tenant, "session_id": new.session_id}
    if p.unlink is not None:
        if insert is not None:
            await con.execute(*insert)
            insert = None
        await refresh(con, tenant, new.session_id, p.unlink, read)
    if p.drop_parent_leaf is not None or p.add_leaf or p.drop_parent_entries is not None:
        args = scope | {
            "parent": p.drop_parent_leaf,
            "add": p.add_leaf,
            "snapshot_id": new.snapshot_id,
            "created_us": to_us(new.created_at),
            "went_on": p.drop_parent_entries,
        }
        if insert is None:
            await con.execute(_LINK, args)  # one statement for a turn's usual three changes
        else:  # and the new row's insert with them
            sql, values = insert
            await con.execute(_with_insert(sql), values | args)
            insert = None
    if insert is not None:
        await con.execute(*insert)
    if not p.own_entries:
        return
    change = own_entries_change(old, new, same_messages)
    if change == "all":  # a new row has no entries to drop: its insert (no ON CONFLICT) proves it did not exist
        await _put_entries(con, tenant, new, fresh=before is None)
    elif change == "claim" and old is not None:
        if old.claimed_by != new.claimed_by or old.claim_expires_at != new.claim_expires_at:
            until = new.claim_expires_at
            claim = {"claimed_by": new.claimed_by, "claim_until_us": None if until is None else to_us(until)}
            await con.execute(_CLAIM_ENTRIES, claim | {"tenant": tenant, "snapshot_id": new.snapshot_id})


def _with_insert(insert: LiteralString) -> LiteralString:
    """:data:`_LINK` with ``insert`` ahead of it, in one statement (built once per insert: its text is a key)."""
    found = _WITH_INSERT.get(insert)
    if found is None:
        found = _WITH_INSERT[insert] = "WITH new_row AS (" + insert + "), " + _LINK.removeprefix("WITH ")
    return found


_WITH_INSERT: dict[str, LiteralString] = {}


async def refresh(con: Conn, tenant: str, session_id: str, snapshot_id: str, read: Reader) -> None:
    """Recompute one snapshot's leaf row and entries from the rows (a child of it in ``session_id`` went away).

    A snapshot of another session (the child forked a session from it) is left alone: its own
    session's rows decide its leaf and whether its calls wait.
    """
    args = {"tenant": tenant, "session_id": session_id, "snapshot_id": snapshot_id}
    found = await (await con.execute(_SELECT_OWN, args)).fetchone()
    if found is None:
        return
    await con.execute(_DROP_LEAF, args)
    await con.execute(_ADD_LEAF, args | {"created_us": found[0]})
    if found[1] == "interrupted":
        snap = await read(snapshot_id)
        if snap is not None:
            await _put_entries(con, tenant, snap)


async def _put_entries(con: Conn, tenant: str, snap: Snapshot, *, fresh: bool = False) -> None:
    """Replace a snapshot's entries with its open interrupts' (``fresh``: it has none yet)."""
    args = {"tenant": tenant, "session_id": snap.session_id, "snapshot_id": snap.snapshot_id}
    if not fresh:
        await con.execute(_DROP_ENTRIES, args)
    for entry in entries_of(snap):  # one statement each (pipelined): cheaper than executemany's own cursor
        await con.execute(_INSERT_ENTRY, entry_values(tenant, entry))


async def forget(con: Conn, tenant: str, session_id: str, snapshot_id: str) -> None:
    """Drop a deleted snapshot's leaf row and entries."""
    args = {"tenant": tenant, "session_id": session_id, "snapshot_id": snapshot_id}
    await con.execute(_DROP_LEAF, args)
    await con.execute(_DROP_ENTRIES, args)


async def page(con: Conn, tenant: str, query: InterruptQuery) -> list[OpenInterrupt]:
    """One page of open interrupts (see :meth:`~interlock.stores.InterruptIndex.open_interrupts`)."""
    if query.empty:
        return []
    sql, args = page_sql(OPEN, query, _mark)
    found = [
        entry_of(r) for r in await (await con.execute(cast(LiteralString, sql), args | {"tenant": tenant})).fetchall()
    ]
    if query.limit is not None and len(found) == query.limit:
        more = rest_args(tenant, found[-1], args["now"])
        rest = await (await con.execute(cast(LiteralString, rest_sql(OPEN, _mark)), more)).fetchall()
        found += [entry_of(r) for r in rest]
    return found


async def backfill(con: Conn, read: Callable[[str, str], Awaitable[Snapshot | None]]) -> None:
    """Fill the open interrupts from the snapshot rows (the migration to version 3, after :data:`V3`)."""
    cur = await con.execute(
        f"SELECT tenant, snapshot_id FROM {TABLE} WHERE status = 'completed' AND finish_reason = 'interrupted'"
    )
    for tenant, sid in cast(list[tuple[str, str]], await cur.fetchall()):
        snap = await read(tenant, sid)
        if snap is not None:
            await _put_entries(con, tenant, snap)
