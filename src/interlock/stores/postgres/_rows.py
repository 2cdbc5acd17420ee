"""The PostgreSQL store's row logic: reads, writes (as deltas on a base), deletes.

The same storage rules as the SQLite store's (:mod:`interlock.stores.sqlite._rows`): a new
row's messages are a delta on its parent's when they share a prefix, and before a row's
messages change or it is deleted, the rows based on it are rewritten as full checkpoints.
The codec (rows ↔ snapshots: :mod:`interlock.stores._sql.row_codec`) and the history rules
(:mod:`interlock.stores._sql.history`) are shared; this module only reads and writes them the
PostgreSQL way. Every method runs in a transaction the caller opened
(:mod:`interlock.stores.postgres`).

Locks that keep histories sound across processes: a row being saved or deleted is read
``FOR UPDATE``, and a new row's parent ``FOR SHARE`` (unless the save already holds it
``FOR UPDATE``), so a parent's messages cannot change, nor the parent go, between reading
its history and committing a delta on it. A save locks all its rows ``FOR UPDATE`` in one
statement (:meth:`PgRows.begin`, in id order, so that two saves lock in the same order: it
reads them, or checks the rows it guessed from what the store last saw, :mod:`._tx`) and
then sends its writes without waiting for each one's answer (the store pipelines them): a
new row is inserted without ``ON CONFLICT``, so one created meanwhile by another
transaction fails the insert on :data:`~._schema.PRIMARY_KEY`, and the save runs again.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from datetime import datetime
from typing import Any, cast

from ..._json_object import is_object
from ..._wire import messages_to_json
from ...errors import DataLossError
from ...records._interrupt_index import InterruptQuery, OpenInterrupt
from ...records._sessions import Artifact, Snapshot
from .. import JournalUpdater, SnapshotInfo, Updater, apply_update, choose_leaf
from .._prune import prunable
from .._sql.history import ChainCache, common_prefix
from .._sql.row_codec import Link, Messages, Row, bookkeeping, corrupt, decode, dumps, from_us, loads, plain
from . import _index as index
from . import _journal as journal
from ._known import Guess, Known, row_of
from ._schema import (
    CHECKPOINT,
    COLUMNS,
    INSERT,
    INSERT_NAMED,
    JOURNAL,
    LOCK_ROW,
    MAX_CHAIN,
    SELECT_CHAIN,
    SELECT_DEPENDENTS,
    SELECT_LEAF_ROWS,
    SELECT_PARENT,
    SELECT_ROW,
    TABLE,
    UPDATE_BOOKKEEPING,
    UPSERT,
)
from ._tx import Parent, Tx, begin
from ._wire import Wire as Conn

_ROW_ARGS = [f"row_{c}" for c in ("tenant", *COLUMNS.split(", "))]


class PgRows(ChainCache):
    """The snapshot and journal tables, seen through one connection's transaction.

    ``known`` is what the store last saw of each row (:mod:`._known`): reads and saves keep it.
    """

    def __init__(self, cache_bytes: int) -> None:
        super().__init__(cache_bytes)
        self.known = Known()

    # reading ----------------------------------------------------------------------------------

    async def fetch(self, con: Conn, tenant: str, snapshot_id: str, *, lock: bool = False) -> Row | None:
        """A row (``lock``: ``FOR UPDATE``, in the caller's transaction); read outside a save, it becomes known."""
        cur = await con.execute(LOCK_ROW if lock else SELECT_ROW, (tenant, snapshot_id))
        found = await cur.fetchone()
        if found is None:
            return None
        row = row_of(found)
        if not lock:
            self.known.saw_row(tenant, row, found[-1])
        return row

    async def messages_of(self, con: Conn, tenant: str, row: Row) -> Messages | None:
        if row.tail is None:
            return None
        found = self.without_chain(tenant, row)
        return found if found is not None else await self.chain(con, tenant, row.snapshot_id, row.mrev)

    async def chain(self, con: Conn, tenant: str, snapshot_id: str, mrev: int | None) -> Messages:
        cur = await con.execute(SELECT_CHAIN, {"tenant": tenant, "id": snapshot_id, "max": MAX_CHAIN})
        links = [Link(*r) for r in await cur.fetchall()]
        return self.assemble(tenant, snapshot_id, mrev, links)

    async def read(self, con: Conn, tenant: str, snapshot_id: str) -> Snapshot | None:
        row = await self.fetch(con, tenant, snapshot_id)
        if row is None:
            return None
        return decode(row, await self.messages_of(con, tenant, row))[0]

    async def latest(self, con: Conn, tenant: str, session_id: str, reject_branching: bool) -> Snapshot | None:
        """The session's leaf: its leaves' rows in one statement, then the chosen one's history (cache or chain)."""
        cur = await con.execute(SELECT_LEAF_ROWS, {"tenant": tenant, "session_id": session_id})
        found = await cur.fetchall()
        rows = {r.snapshot_id: r for r in map(row_of, found)}
        if not rows:
            cur = await con.execute(
                f"SELECT 1 FROM {TABLE} WHERE tenant = %s AND session_id = %s LIMIT 1", (tenant, session_id)
            )
            if await cur.fetchone() is None:
                return None  # an unknown session (with rows but no leaf, it has a cycle: choose_leaf says so)
        leaves = [(from_us(r.created_us), sid) for sid, r in rows.items()]
        row = rows[choose_leaf(session_id, leaves, reject_branching=reject_branching)]
        self.known.saw_row(tenant, row, next(f[-1] for f in found if f[0] == row.snapshot_id))
        return decode(row, await self.messages_of(con, tenant, row))[0]

    @staticmethod
    async def open_interrupts(con: Conn, tenant: str, query: InterruptQuery) -> list[OpenInterrupt]:
        return await index.page(con, tenant, query)

    @staticmethod
    async def status(con: Conn, tenant: str, snapshot_id: str) -> str | None:
        cur = await con.execute(
            f"SELECT status FROM {TABLE} WHERE tenant = %s AND snapshot_id = %s", (tenant, snapshot_id)
        )
        found = await cur.fetchone()
        return None if found is None else str(found[0])

    @staticmethod
    async def list(con: Conn, tenant: str, session_id: str | None, finish_reason: str | None) -> list[SnapshotInfo]:
        sql = (
            "SELECT snapshot_id, session_id, parent_id, created_us, updated_us, status, finish_reason, metadata "
            f"FROM {TABLE} WHERE tenant = %s"
        )
        args: list[Any] = [tenant]
        if session_id is not None:
            sql += " AND session_id = %s"
            args.append(session_id)
        if finish_reason is not None:
            sql += " AND finish_reason = %s"
            args.append(finish_reason)
        out: list[SnapshotInfo] = []
        for sid, session, parent, created, updated, status, finish, meta in await (
            await con.execute(sql, args)
        ).fetchall():
            metadata: Any = None if meta is None else loads(sid, "metadata", meta)
            agent = metadata.get("agent") if is_object(metadata) else None
            out.append(
                SnapshotInfo(
                    snapshot_id=sid,
                    session_id=session,
                    parent_id=parent,
                    created_at=from_us(created),
                    updated_at=None if updated is None else from_us(created + updated),
                    status=status,
                    finish_reason=finish,
                    agent=agent if isinstance(agent, str) else None,
                )
            )
        out.sort(key=lambda i: (i.created_at, i.snapshot_id), reverse=True)
        return out

    # writing ----------------------------------------------------------------------------------

    async def begin(self, con: Conn, tenant: str, ids: Sequence[str], keys: Sequence[str], guess: Guess) -> Tx:
        """Open a save of the rows of ``ids`` and the entries of ``keys``, guessed or read ``FOR UPDATE`` (``_tx``)."""
        return await begin(con, tenant, ids, keys, self.known, self, guess)

    async def updates(
        self, tx: Tx, todo: Sequence[tuple[str, Updater]], entries: Sequence[tuple[str, JournalUpdater]]
    ) -> list[Snapshot | None]:
        """A save's updates of rows, then of journal entries, in ``tx``: the rows written (``None``: none)."""
        written: list[Snapshot | None] = []
        for sid, update in todo:
            new, status_changed = await self.save(tx, sid, update)
            written.append(new)
            if status_changed:
                tx.status_changed.append(sid)
        for key, update in entries:
            tx.wrote_entries[key] = await journal.update(tx.con, tx.tenant, key, update, tx.entries)
        return written

    async def save(self, tx: Tx, snapshot_id: str, update: Updater) -> tuple[Snapshot | None, bool]:
        """Read → update → write: the row written, and whether its status changed."""
        con, tenant = tx.con, tx.tenant
        if snapshot_id in tx.rows:
            row = tx.rows.pop(snapshot_id)
        else:  # an id saved twice in one transaction: the second save sees the first's write
            row = await self.fetch(con, tenant, snapshot_id, lock=True)
        old: Messages | None = None
        current: Snapshot | None = None
        old_artifacts: list[Artifact] = []
        if row is not None:
            old = await self.messages_of(con, tenant, row)
            current, old_artifacts = decode(row, old)
        new = apply_update(current, update, snapshot_id)
        if new is None:
            return None, False
        state = new.state
        if old is None or state is None:
            unchanged = old is None and state is None
        else:
            unchanged = len(state.messages) == len(old) and tuple(state.messages) == old
        insert = await self.write(tx, row, old, old_artifacts, new, unchanged, current)
        before = None if row is None else (row.parent_id, row.status, row.finish_reason)
        await index.written(
            con,
            tenant,
            before,
            new,
            lambda sid: self.read(con, tenant, sid),
            insert=insert,
            old=current,
            same_messages=unchanged,
        )
        return new, row is None or row.status != new.status

    async def write(
        self,
        tx: Tx,
        row: Row | None,
        old: Messages | None,
        old_artifacts: list[Artifact],
        new: Snapshot,
        unchanged: bool,
        current: Snapshot | None = None,
    ) -> index.Statement | None:
        """Write ``new`` over ``row``; a new row's insert is returned instead, for the index to send with its changes.

        ``unchanged``: ``new`` keeps the row's messages (``old``); ``current``: the snapshot ``row`` holds. Not when
        the new row is its own parent: its insert must come before the index's changes look for children.
        """
        con, tenant = tx.con, tx.tenant
        sid = new.snapshot_id
        state = new.state
        stored = bookkeeping(new, row, old_artifacts, ident=plain, word=plain, old=current)
        if row is not None and unchanged:
            kept_base = row.base_id
            if kept_base is None and row.keep > 0 and new.parent_id != row.parent_id:
                kept_base = row.parent_id  # the implicit base (the old parent) must be named now
            await con.execute(UPDATE_BOOKKEEPING, (kept_base, *stored, tenant, sid))
            kept = (row.session_id, stored[0], kept_base, row.keep, row.tail, row.mrev, row.base_mrev, *stored[1:])
            tx.wrote[sid] = row_of((sid, *kept))
            return None
        if row is not None and old is not None:
            await self.checkpoint_dependents(con, tenant, {sid: old}, {row.session_id}, exclude=[])
        base_id: str | None = None
        keep = 0
        base_mrev: int | None = None
        tail: str | None = None
        mrev = 0
        if state is not None:
            messages = tuple(state.messages)
            base = await self.base_for(tx, new, messages)
            if base is not None:
                base_id, keep, base_mrev = base
            tail = dumps(messages_to_json(list(messages[keep:])))
            mrev = secrets.randbits(47)
            based = None if new.parent_id is None or base_mrev is None else (base_id or new.parent_id, base_mrev, keep)
            self.remember_written(tenant, sid, mrev, messages, tail, based)
        (parent_id, state_session, *rest) = stored
        values = (tenant, sid, new.session_id, parent_id, base_id, keep, tail, mrev, base_mrev, state_session, *rest)
        session_id = new.session_id if row is None else row.session_id  # an upsert keeps the row's session
        tx.held[sid] = Parent(mrev, tail is None, session_id)
        tx.wrote[sid] = row_of((sid, session_id, *values[3:]))
        # not awaited for an answer: a row created meanwhile fails the insert on the primary key (see the module)
        if row is None and new.parent_id != sid:
            return INSERT_NAMED, dict(zip(_ROW_ARGS, values, strict=True))
        await con.execute(INSERT if row is None else UPSERT, values)
        return None

    async def base_for(self, tx: Tx, new: Snapshot, messages: Messages) -> tuple[str | None, int, int] | None:
        """``(base_id, keep, base_mrev)``: the parent, when it shares a prefix (``base_id`` ``None`` if implicit)."""
        con, tenant = tx.con, tx.tenant
        parent_id = new.parent_id
        if parent_id is None or parent_id == new.snapshot_id or not messages:
            return None
        parent = tx.held.get(parent_id)  # locked FOR UPDATE by this transaction: as good as FOR SHARE
        if parent is None:
            found = await (await con.execute(SELECT_PARENT, (tenant, parent_id))).fetchone()
            if found is None:
                return None
            parent = Parent(*found)
        if parent.stateless:
            return None
        prefix = self.cached(tenant, parent_id, parent.mrev)
        if prefix is None:
            try:
                prefix = await self.chain(con, tenant, parent_id, parent.mrev)
            except DataLossError:
                return None  # a corrupt parent: this row becomes a full checkpoint instead
        keep = common_prefix(messages, prefix)
        if keep == 0 or self.too_deep(tenant, parent_id, parent.mrev, keep):
            return None
        return (None if parent.session_id == new.session_id else parent_id), keep, parent.mrev

    async def checkpoint_dependents(
        self,
        con: Conn,
        tenant: str,
        bases: dict[str, Messages | None],
        sessions: set[str],
        *,
        exclude: Sequence[str],
    ) -> None:
        """Rewrite every row based on one of ``bases`` (id → its messages, read if ``None``) as a full checkpoint."""
        args = {"tenant": tenant, "ids": list(bases), "sessions": list(sessions), "exclude": list(exclude)}
        found = cast(
            list[tuple[str, str, int, str | None]], await (await con.execute(SELECT_DEPENDENTS, args)).fetchall()
        )
        encoded: dict[str, list[dict[str, Any]]] = {}
        for sid, base_id, keep, tail in found:
            if base_id not in encoded:
                messages = bases[base_id]
                if messages is None:
                    messages = await self.chain(con, tenant, base_id, None)
                encoded[base_id] = messages_to_json(list(messages))
            prefix = encoded[base_id]
            if tail is None or keep > len(prefix):
                raise corrupt(sid, f"it keeps {keep} messages of base {base_id!r}, which has {len(prefix)}")
            rest = loads(sid, "tail", tail)
            if not isinstance(rest, list):
                raise corrupt(sid, "column 'tail' is not a JSON list")
            await con.execute(CHECKPOINT, (dumps(prefix[:keep] + cast(list[Any], rest)), tenant, sid))
            self.known.forget(tenant, [sid])

    async def delete(self, con: Conn, tenant: str, ids: list[str]) -> int:
        """Delete rows (checkpointing the rows based on them first) and their journal entries."""
        if not ids:
            return 0
        cur = await con.execute(
            f"SELECT snapshot_id, session_id, parent_id FROM {TABLE} WHERE tenant = %s AND snapshot_id = ANY(%s) "
            "ORDER BY snapshot_id FOR UPDATE",
            (tenant, ids),
        )
        locked = cast(list[tuple[str, str, str | None]], await cur.fetchall())
        if locked:
            bases: dict[str, Messages | None] = {sid: None for sid, _, _ in locked}
            await self.checkpoint_dependents(con, tenant, bases, {s for _, s, _ in locked}, exclude=ids)
            await con.execute(f"DELETE FROM {TABLE} WHERE tenant = %s AND snapshot_id = ANY(%s)", (tenant, ids))
        await con.execute(f"DELETE FROM {JOURNAL} WHERE tenant = %s AND snapshot_id = ANY(%s)", (tenant, ids))
        self.forget(tenant, ids)
        self.known.forget(tenant, ids)
        for sid, session_id, _ in locked:
            await index.forget(con, tenant, session_id, sid)
        dropped = set(ids)
        for session_id, parent in sorted({(s, p) for _, s, p in locked if p is not None and p not in dropped}):
            # a child of it went away: it may be a leaf again, and wait again
            await index.refresh(con, tenant, session_id, parent, lambda sid: self.read(con, tenant, sid))
        return len(locked)

    async def prune(
        self, con: Conn, tenant: str, session_id: str | None, keep_last: int | None, older_than: datetime | None
    ) -> int:
        sql = f"SELECT snapshot_id, parent_id, created_us, status FROM {TABLE} WHERE tenant = %s"
        args: list[Any] = [tenant]
        if session_id is not None:
            sql += " AND session_id = %s"
            args.append(session_id)
        found = cast(list[tuple[str, str | None, int, str]], await (await con.execute(sql, args)).fetchall())
        rows = [(s, p, from_us(us), status) for s, p, us, status in found]
        return await self.delete(con, tenant, prunable(rows, keep_last=keep_last, older_than=older_than))
