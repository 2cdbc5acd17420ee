"""The SQLite store's row logic, run on its worker thread: reads, writes (as deltas on a base), deletes.

A new row's messages are stored as a delta on its parent's when they share a prefix
(histories come from :mod:`interlock.stores.sqlite._chain`); before a row's messages
change or it is deleted, the rows based on it are rewritten as full checkpoints. Every
method takes the connection, inside a transaction the caller opened (see
:mod:`interlock.stores.sqlite`).
"""

from __future__ import annotations

import secrets
import sqlite3
from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple, cast

from ..._json_object import is_object
from ...errors import DataLossError
from ...messages import messages_to_json
from ...records._interrupt_index import InterruptQuery, OpenInterrupt
from ...records._sessions import Artifact, Snapshot
from .. import SnapshotInfo, Updater, apply_update, choose_leaf
from .._prune import prunable
from .._sql.history import common_prefix
from .._sql.row_codec import Messages, Row, bookkeeping, corrupt, decode, dumps, from_after, from_us, loads, same
from . import _index as index
from ._chain import MessageChains
from ._codec import (
    DbId,
    id_in,
    id_or_none,
    id_out,
    id_out_or_none,
    row_of,
    word_in,
    word_or_none,
    word_out,
    word_out_or_none,
)
from ._journal import delete_for as delete_journal_for
from ._schema import (
    BOOKKEEPING,
    DROP_SESSION,
    INSERT_SESSION,
    SELECT_PARENT,
    SELECT_ROW,
    SELECT_SESSION,
    SESSIONS,
    TABLE,
    UPDATE_BOOKKEEPING,
    UPSERT,
    batches,
)


class Parent(NamedTuple):
    """What a new row needs of its parent."""

    mrev: int
    stateless: bool
    session: int
    session_id: str | None


class SnapshotRows(MessageChains):
    """The snapshot table seen from the worker thread: reads, writes, deletes."""

    # reading ----------------------------------------------------------------------------------

    @staticmethod
    def fetch(con: sqlite3.Connection, tenant: str, snapshot_id: str) -> Row | None:
        found = con.execute(SELECT_ROW, {"tenant": tenant, "snapshot_id": id_in(snapshot_id)}).fetchone()
        return None if found is None else row_of(found)

    @staticmethod
    def session_key(con: sqlite3.Connection, tenant: str, session_id: str) -> int | None:
        """The interned key of a session, or ``None`` if it has no snapshots."""
        found = con.execute(SELECT_SESSION, {"tenant": tenant, "session_id": id_in(session_id)}).fetchone()
        return None if found is None else int(found[0])

    def read(self, con: sqlite3.Connection, tenant: str, snapshot_id: str) -> Snapshot | None:
        row = self.fetch(con, tenant, snapshot_id)
        if row is None:
            return None
        return decode(row, self.messages_of(con, tenant, row))[0]

    def latest(self, con: sqlite3.Connection, tenant: str, session_id: str, reject_branching: bool) -> Snapshot | None:
        session = self.session_key(con, tenant, session_id)
        if session is None:
            return None
        leaf = choose_leaf(session_id, index.leaves(con, session), reject_branching=reject_branching)
        return self.read(con, tenant, leaf)

    @staticmethod
    def open_interrupts(con: sqlite3.Connection, tenant: str, query: InterruptQuery) -> list[OpenInterrupt]:
        return index.page(con, tenant, query)

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

    # writing ----------------------------------------------------------------------------------

    def save(
        self, con: sqlite3.Connection, tenant: str, snapshot_id: str, update: Updater
    ) -> tuple[Snapshot | None, bool]:
        """Read → update → write in the caller's write transaction: the row written, and if its status changed."""
        row = self.fetch(con, tenant, snapshot_id)
        old: Messages | None = None
        current: Snapshot | None = None
        old_artifacts: list[Artifact] = []
        if row is not None:
            old = self.messages_of(con, tenant, row)
            current, old_artifacts = decode(row, old)
        new = apply_update(current, update, snapshot_id)
        if new is None:
            return None, False
        session = self.write(con, tenant, row, old, old_artifacts, new)
        before = None if row is None else (row.parent_id, row.status, row.finish_reason)
        index.written(con, tenant, session, before, new, lambda sid: self.read(con, tenant, sid))
        return new, row is None or row.status != new.status

    def write(
        self,
        con: sqlite3.Connection,
        tenant: str,
        row: Row | None,
        old: Messages | None,
        old_artifacts: list[Artifact],
        new: Snapshot,
    ) -> int:
        """Write ``new`` over ``row``; returns the row's session key."""
        sid = new.snapshot_id
        state = new.state
        stored = bookkeeping(new, row, old_artifacts, ident=id_or_none, word=word_or_none)
        values = dict(zip(BOOKKEEPING, stored, strict=True))
        values |= {"tenant": tenant, "snapshot_id": id_in(sid)}
        if old is None or state is None:
            unchanged = old is None and state is None
        else:
            unchanged = same(state.messages, old)
        if row is not None and unchanged:
            # Heartbeats, aborts, claims: the messages stay as stored, not re-encoded.
            kept_base = row.base_id
            if kept_base is None and row.keep > 0 and new.parent_id != row.parent_id:
                kept_base = row.parent_id  # the implicit base (the old parent) must be named now
            con.execute(UPDATE_BOOKKEEPING, values | {"base_id": id_or_none(kept_base)})
            return row.session
        if row is not None and old is not None:
            self.checkpoint_dependents(con, tenant, {sid: old}, exclude=())
        needs_parent = row is None or (state is not None and bool(state.messages))  # for the session, the base
        parent = self.parent_of(con, tenant, new) if needs_parent else None
        if row is not None:
            session = row.session
        elif parent is not None and parent.session_id == new.session_id:
            session = parent.session  # the usual child: in its parent's session, whose key is known
        else:
            session = self.intern(con, tenant, new.session_id)
        base_id: str | None = None
        keep = 0
        base_mrev: int | None = None
        tail: str | None = None
        mrev = 0
        if state is not None:
            messages = tuple(state.messages)
            base = self.base_for(con, tenant, new, parent, session, messages)
            if base is not None:
                base_id, keep, base_mrev = base
            tail = dumps(messages_to_json(list(messages[keep:])))
            mrev = secrets.randbits(47)  # 6 bytes on disk; a collision would also need the same row
            based = None if new.parent_id is None or base_mrev is None else (base_id or new.parent_id, base_mrev, keep)
            self.remember_written(tenant, sid, mrev, messages, tail, based)
        content = {"session": session, "base_id": id_or_none(base_id), "keep": keep, "tail": tail, "mrev": mrev}
        con.execute(UPSERT, values | content | {"base_mrev": base_mrev})
        return session

    def intern(self, con: sqlite3.Connection, tenant: str, session_id: str) -> int:
        """The session's interned key, added if new (in the caller's write transaction)."""
        added = con.execute(INSERT_SESSION, {"tenant": tenant, "session_id": id_in(session_id)})
        if added.rowcount == 1:
            return cast(int, added.lastrowid)
        session = self.session_key(con, tenant, session_id)
        if session is None:  # not reachable: the insert was skipped because the session is there
            raise DataLossError(f"session {session_id!r} is neither new nor in {SESSIONS!r} of the SQLite store")
        return session

    @staticmethod
    def parent_of(con: sqlite3.Connection, tenant: str, new: Snapshot) -> Parent | None:
        """The parent of a row being written, if it names one that exists."""
        parent_id = new.parent_id
        if parent_id is None or parent_id == new.snapshot_id:
            return None
        found = con.execute(SELECT_PARENT, {"tenant": tenant, "snapshot_id": id_in(parent_id)}).fetchone()
        if found is None:
            return None
        mrev, stateless, session, session_id = found
        return Parent(mrev, bool(stateless), session, id_out_or_none(session_id))

    def base_for(
        self,
        con: sqlite3.Connection,
        tenant: str,
        new: Snapshot,
        parent: Parent | None,
        session: int,
        messages: Messages,
    ) -> tuple[str | None, int, int] | None:
        """``(base_id, keep, base_mrev)`` for new messages: the parent, when it shares a prefix.

        ``base_id`` is ``None`` (the base is implicitly the parent) when the parent is in
        the same session, so that rows based on a row are found through the session index.
        """
        parent_id = new.parent_id
        if parent is None or parent_id is None or parent.stateless or not messages:
            return None
        mrev = parent.mrev
        prefix = self.cached(tenant, parent_id, mrev)
        if prefix is None:
            try:
                prefix = self.chain(con, tenant, parent_id, mrev)
            except DataLossError:
                return None  # a corrupt parent: this row becomes a full checkpoint instead
        keep = common_prefix(messages, prefix)
        if keep == 0 or self.too_deep(tenant, parent_id, mrev, keep):
            return None
        return (None if parent.session == session else parent_id), keep, mrev

    def checkpoint_dependents(
        self, con: sqlite3.Connection, tenant: str, bases: dict[str, Messages | None], *, exclude: Sequence[str]
    ) -> None:
        """Rewrite every row based on one of ``bases`` (id → its messages, loaded if ``None``) as a full checkpoint.

        Their message content (and so their ``mrev``) does not change, only how it is stored.
        """
        stored = [id_in(b) for b in bases]
        found: list[tuple[DbId, DbId, int, str | None]] = []
        sessions: dict[int, list[DbId]] = {}
        for marks, chunk in batches(stored):
            # named bases (the partial index on base_id) ...
            found += con.execute(
                f"SELECT snapshot_id, base_id, keep, tail FROM {TABLE} WHERE tenant = ? AND base_id IN ({marks})",
                (tenant, *chunk),
            ).fetchall()
            for raw_sid, session in con.execute(
                f"SELECT snapshot_id, session FROM {TABLE} WHERE tenant = ? AND snapshot_id IN ({marks})",
                (tenant, *chunk),
            ):
                sessions.setdefault(session, []).append(raw_sid)
        # ... and implicit ones: children in the base's own session (the session index)
        for session, parents in sessions.items():
            for marks, chunk in batches(parents):
                found += con.execute(
                    f"SELECT snapshot_id, parent_id, keep, tail FROM {TABLE} "
                    f"WHERE session = ? AND base_id IS NULL AND keep > 0 AND parent_id IN ({marks})",
                    (session, *chunk),
                ).fetchall()
        skip = set(exclude)
        encoded: dict[str, list[dict[str, Any]]] = {}
        for raw_sid, raw_base, keep, tail in found:
            sid, base_id = id_out(raw_sid), id_out(raw_base)
            if sid in skip:
                continue
            if base_id not in encoded:
                messages = bases[base_id]
                if messages is None:
                    messages = self.chain(con, tenant, base_id, None)
                encoded[base_id] = messages_to_json(list(messages))
            prefix = encoded[base_id]
            if tail is None or keep > len(prefix):
                raise corrupt(sid, f"it keeps {keep} messages of base {base_id!r}, which has {len(prefix)}")
            rest = loads(sid, "tail", tail)
            if not isinstance(rest, list):
                raise corrupt(sid, "column 'tail' is not a JSON list")
            full = prefix[:keep] + cast(list[Any], rest)
            con.execute(
                f"UPDATE {TABLE} SET base_id = NULL, keep = 0, base_mrev = NULL, tail = :tail "
                "WHERE tenant = :tenant AND snapshot_id = :snapshot_id",
                {"tail": dumps(full), "tenant": tenant, "snapshot_id": raw_sid},
            )

    def delete(self, con: sqlite3.Connection, tenant: str, ids: list[str]) -> int:
        """Delete rows, first checkpointing the rows based on them; drops sessions left without rows."""
        if not ids:
            return 0
        bases: dict[str, Messages | None] = {sid: None for sid in ids}
        self.checkpoint_dependents(con, tenant, bases, exclude=ids)
        gone: list[tuple[DbId, int, DbId | None]] = []
        for marks, chunk in batches([id_in(sid) for sid in ids]):
            gone += con.execute(
                f"DELETE FROM {TABLE} WHERE tenant = ? AND snapshot_id IN ({marks}) "
                "RETURNING snapshot_id, session, parent_id",
                (tenant, *chunk),
            ).fetchall()
        delete_journal_for(con, tenant, ids)
        self.forget(tenant, ids)
        for raw, session, _ in gone:
            index.forget(con, tenant, session, id_out(raw))
        dropped = set(ids)
        for session, parent in {(s, id_out(p)) for _, s, p in gone if p is not None}:
            if parent not in dropped:  # a child of it went away: it may be a leaf again, and wait again
                index.refresh(con, tenant, session, parent, lambda sid: self.read(con, tenant, sid))
        for session in {s for _, s, _ in gone}:
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
