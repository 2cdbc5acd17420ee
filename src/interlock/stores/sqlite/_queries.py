"""The rest of what the SQLite store asks of its rows: latest, status, open interrupts, list, delete, prune.

The write path of a save (snapshot rows, their leaf and index rows, journal and outbox rows)
is :mod:`._rows`; these run on the worker thread too, each in the transaction its caller opened.
"""

from __future__ import annotations

import sqlite3
from datetime import datetime
from typing import Any, cast

from ..._json_object import is_object
from ...records._interrupt_index import InterruptQuery, OpenInterrupt
from ...records._sessions import Snapshot
from .. import SnapshotInfo, choose_leaf
from .._prune import prunable
from .._sql.row_codec import Messages, corrupt, from_after, from_us, loads
from ._codec import DbId, id_in, id_out, id_out_or_none, word_in, word_out, word_out_or_none
from ._index import leaves, page
from ._journal import delete_for as delete_journal_for
from ._rows import SnapshotRows, forget, refresh
from ._schema import DROP_SESSION, SESSIONS, TABLE, batches


class StoredRows(SnapshotRows):
    """The snapshot table as the store sees it: the write path of :class:`~._rows.SnapshotRows`, and the rest."""

    def latest(self, con: sqlite3.Connection, tenant: str, session_id: str, reject_branching: bool) -> Snapshot | None:
        session = self.session_key(con, tenant, session_id)
        if session is None:
            return None
        leaf = choose_leaf(session_id, leaves(con, session), reject_branching=reject_branching)
        return self.read(con, tenant, leaf)

    @staticmethod
    def open_interrupts(con: sqlite3.Connection, tenant: str, query: InterruptQuery) -> list[OpenInterrupt]:
        return page(con, tenant, query)

    @staticmethod
    def status(con: sqlite3.Connection, tenant: str, snapshot_id: str) -> str | None:
        found = con.execute(
            f"SELECT status FROM {TABLE} WHERE tenant = :tenant AND snapshot_id = :snapshot_id",
            {"tenant": tenant, "snapshot_id": id_in(snapshot_id)},
        ).fetchone()
        return None if found is None else word_out(found[0])

    def list(
        self, con: sqlite3.Connection, tenant: str, session_id: str | None, finish_reason: str | None
    ) -> list[SnapshotInfo]:
        sql = (
            "SELECT s.snapshot_id, n.session_id, s.parent_id, s.created_us, s.updated_us, s.status, s.finish_reason, "
            f"s.metadata FROM {TABLE} AS s LEFT JOIN {SESSIONS} AS n ON n.id = s.session WHERE s.tenant = :tenant"
        )
        args: dict[str, Any] = {"tenant": tenant}
        if session_id is not None:
            session = self.session_key(con, tenant, session_id)
            if session is None:
                return []
            sql += " AND s.session = :session"
            args["session"] = session
        if finish_reason is not None:
            sql += " AND s.finish_reason = :finish_reason"
            args["finish_reason"] = word_in(finish_reason)
        out: list[SnapshotInfo] = []
        for raw_sid, raw_session, parent, created, updated, status, finish, meta in con.execute(sql, args):
            sid = id_out(raw_sid)
            if raw_session is None:
                raise corrupt(sid, f"its session is missing from {SESSIONS!r}")
            metadata: Any = None if meta is None else loads(sid, "metadata", meta)
            agent = metadata.get("agent") if is_object(metadata) else None
            out.append(
                SnapshotInfo(
                    snapshot_id=sid,
                    session_id=id_out(raw_session),
                    parent_id=id_out_or_none(parent),
                    created_at=from_us(created),
                    updated_at=from_after(updated, created),
                    status=word_out(status),
                    finish_reason=word_out_or_none(finish),
                    agent=agent if isinstance(agent, str) else None,
                )
            )
        # sorted here, not in SQL: ids stored as UUID bytes and as text compare as their strings do
        out.sort(key=lambda i: (i.created_at, i.snapshot_id), reverse=True)
        return out

    def delete(self, con: sqlite3.Connection, tenant: str, ids: list[str]) -> int:
        """Delete rows, first checkpointing the rows based on them; drops sessions left without rows."""
        if not ids:
            return 0
        bases: dict[str, Messages | None] = {sid: None for sid in ids}
        self.checkpoint_dependents(con, tenant, bases, exclude=ids)
        gone: list[tuple[DbId, int, DbId | None, int]] = []
        for marks, chunk in batches([id_in(sid) for sid in ids]):
            gone += con.execute(
                f"DELETE FROM {TABLE} WHERE tenant = ? AND snapshot_id IN ({marks}) "
                "RETURNING snapshot_id, session, parent_id, created_us",
                (tenant, *chunk),
            ).fetchall()
        delete_journal_for(con, tenant, ids)
        self.forget(tenant, ids)
        for raw, _, _, created_us in gone:
            forget(con, tenant, id_out(raw), created_us)
        dropped = set(ids)
        for session, parent in {(s, id_out(p)) for _, s, p, _ in gone if p is not None}:
            if parent not in dropped:  # a child of it went away: it may be a leaf again, and wait again
                refresh(con, tenant, session, parent, lambda sid: self.read(con, tenant, sid))
        for session in {s for _, s, _, _ in gone}:
            con.execute(DROP_SESSION, {"session": session})
        return len(gone)

    def prune(
        self,
        con: sqlite3.Connection,
        tenant: str,
        session_id: str | None,
        keep_last: int | None,
        older_than: datetime | None,
    ) -> int:
        sql = f"SELECT snapshot_id, parent_id, created_us, status FROM {TABLE} WHERE tenant = :tenant"
        args: dict[str, Any] = {"tenant": tenant}
        if session_id is not None:
            session = self.session_key(con, tenant, session_id)
            if session is None:
                return self.delete(con, tenant, prunable([], keep_last=keep_last, older_than=older_than))
            sql += " AND session = :session"
            args["session"] = session
        found = cast(list[tuple[DbId, DbId | None, int, int | str]], con.execute(sql, args).fetchall())
        rows = [(id_out(s), id_out_or_none(p), from_us(us), word_out(status)) for s, p, us, status in found]
        return self.delete(con, tenant, prunable(rows, keep_last=keep_last, older_than=older_than))
