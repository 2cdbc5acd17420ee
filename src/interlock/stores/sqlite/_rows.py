"""The SQLite store's write path, run on its worker thread: every row a save writes, in one module.

:meth:`SnapshotRows.commit` is the body of a ``save_all`` transaction: the snapshot rows
(read, updated, written as deltas on a base), their leaf and open-interrupt rows, the
journal's entries and the outbox's events. A new row's messages are stored as a delta on its
parent's when they share a prefix (histories come from :mod:`._chain`); before a row's
messages change, the rows based on it are rewritten as full checkpoints. The tables' DDL
and the rest of their queries live in :mod:`._index`, :mod:`._journal` and :mod:`._outbox`;
the snapshot table's other queries (latest, list, delete, prune) in :mod:`._queries`. Every
function takes the connection, inside a transaction the caller opened.
"""

from __future__ import annotations

import json
import os
import random
import sqlite3
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, cast

from ..._json_object import json_encoder
from ...errors import DataLossError
from ...messages import messages_to_json
from ...records._interrupt_index import OpenInterrupt, entries_of
from ...records._journal import Expecting, JournalEntry, superseded
from ...records._outbox import OutboxEvent
from ...records._sessions import Artifact, Snapshot
from .. import JournalUpdater, Updater, apply_update
from .._sql.history import common_prefix
from .._sql.index_rows import ENTRY_COLUMNS, entry_values, own_entries_change, plan
from .._sql.outbox_rows import row as outbox_row
from .._sql.row_codec import Messages, Row, bookkeeping, corrupt, decode, dumps, loads, same, to_us
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
)
from ._schema import (
    INSERT_SESSION,
    JOURNAL,
    OPEN,
    OUTBOX,
    SELECT_PARENT,
    SELECT_ROW,
    SELECT_SESSION,
    SESSIONS,
    TABLE,
    UPDATE_BOOKKEEPING,
    UPDATE_BOOKKEEPING_IN_PLACE,
    UPSERT,
    batches,
    children,
)

_revisions = random.Random()
"""Draws each row's ``mrev``: seeded from ``os.urandom`` (again in a forked child, which would otherwise draw
its parent's numbers), private (a caller seeding :mod:`random` cannot make two processes draw alike), and
with no system call per draw (``secrets`` makes one)."""
os.register_at_fork(after_in_child=_revisions.seed)


class Parent(NamedTuple):
    """What a new row needs of its parent: its content revision, whether it has no state, its session."""

    mrev: int
    stateless: bool
    session: int
    session_id: str | None


def _as_parent(row: Row) -> Parent:
    """What a child needs of ``row`` (its messages unchanged by the write)."""
    return Parent(row.mrev, row.tail is None, row.session, row.session_id)


class SnapshotRows(MessageChains):
    """The snapshot table seen from the worker thread: reads, writes, deletes."""

    # reading ----------------------------------------------------------------------------------

    @staticmethod
    def fetch(con: sqlite3.Connection, tenant: str, snapshot_id: str) -> Row | None:
        found = con.execute(SELECT_ROW, (tenant, id_in(snapshot_id))).fetchone()
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

    def read_one(self, con: sqlite3.Connection, tenant: str, snapshot_id: str) -> Snapshot | None:
        """:meth:`read` in one statement, for the usual load: a row whose history is at hand; else ``None``.

        One statement is a read transaction of its own (no ``BEGIN``/``COMMIT``); the history comes
        from the row itself (a checkpoint) or the cache (a recently seen base). ``None`` (no such
        row, or a base chain to read) leaves the load to :meth:`read` on the worker.
        """
        row = self.fetch(con, tenant, snapshot_id)
        if row is None:
            return None
        messages = None if row.tail is None else self.without_chain(tenant, row)
        if row.tail is not None and messages is None:
            return None
        return decode(row, messages)[0]

    # writing ----------------------------------------------------------------------------------

    def commit(
        self,
        con: sqlite3.Connection,
        tenant: str,
        updates: list[tuple[str, Updater]],
        entries: list[tuple[str, JournalUpdater]],
        events: list[OutboxEvent],
    ) -> tuple[list[Snapshot | None], bool]:
        """Write every row of a ``save_all`` in the caller's write transaction; the snapshots, and if a status changed.

        The snapshots (with their leaf and index rows), the journal's entries and the outbox's events.
        """
        dropped: set[str] = set()  # snapshots whose entries this transaction deleted (no second delete)
        known: dict[str, Parent] = {}  # rows this transaction wrote, as a child of theirs needs them
        results = [self.save(con, tenant, sid, update, dropped, known) for sid, update in updates]
        for key, update in entries:
            if isinstance(update, Expecting):  # one conditional statement, no read
                put(con, tenant, update.entry, update.entry.attempt)
            else:
                update_entry(con, tenant, key, update)
        if events:
            insert(con, events)
        return [written for written, _ in results], any(changed for _, changed in results)

    def save(
        self,
        con: sqlite3.Connection,
        tenant: str,
        snapshot_id: str,
        update: Updater,
        dropped: set[str],
        known: dict[str, Parent],
    ) -> tuple[Snapshot | None, bool]:
        """Read → update → write in the caller's write transaction: the row written, and if its status changed.

        ``dropped``: the snapshots whose entries the transaction has deleted so far (see :func:`written`);
        ``known``: the rows it has written so far, as a child's write needs its parent (see :meth:`write`).
        """
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
        written_row, same_messages = self.write(con, tenant, row, old, old_artifacts, new, known)
        known[snapshot_id] = written_row
        session = written_row.session
        before = None if row is None else (row.parent_id, row.status, row.finish_reason)
        written(
            con, tenant, session, before, current, new, same_messages, lambda sid: self.read(con, tenant, sid), dropped
        )
        return new, row is None or row.status != new.status

    def write(
        self,
        con: sqlite3.Connection,
        tenant: str,
        row: Row | None,
        old: Messages | None,
        old_artifacts: list[Artifact],
        new: Snapshot,
        known: dict[str, Parent],
    ) -> tuple[Parent, bool]:
        """Write ``new`` over ``row``: what a child of the row written needs of it, and whether its messages stayed.

        ``known``: rows this transaction wrote before, by id; a parent among them is not read again.
        """
        sid = new.snapshot_id
        state = new.state
        stored = bookkeeping(new, row, old_artifacts, ident=id_or_none, word=word_or_none)
        raw_id = id_in(sid)
        if old is None or state is None:
            unchanged = old is None and state is None
        else:
            unchanged = same(state.messages, old)
        if row is not None and unchanged:
            # Heartbeats, aborts, claims: the messages stay as stored, not re-encoded.
            kept_base = row.base_id
            if new.parent_id == row.parent_id:  # the usual case (a claim, a heartbeat): no index entry changes
                con.execute(UPDATE_BOOKKEEPING_IN_PLACE, (*stored[1:], tenant, raw_id))
                return _as_parent(row), True
            if kept_base is None and row.keep > 0:
                kept_base = row.parent_id  # the implicit base (the old parent) must be named now
            con.execute(UPDATE_BOOKKEEPING, (id_or_none(kept_base), *stored, tenant, raw_id))
            return _as_parent(row), True
        if row is not None and old is not None:
            self.checkpoint_dependents(con, tenant, {sid: old}, exclude=())
        needs_parent = row is None or (state is not None and bool(state.messages))  # for the session, the base
        parent = self.parent_of(con, tenant, new, known) if needs_parent else None
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
            mrev = _revisions.getrandbits(47)  # 6 bytes on disk; a collision would also need the same row
            based = None if new.parent_id is None or base_mrev is None else (base_id or new.parent_id, base_mrev, keep)
            self.remember_written(tenant, sid, mrev, messages, tail, based)
        values = (tenant, raw_id, session, id_or_none(base_id), keep, tail, mrev, base_mrev, *stored, session, raw_id)
        con.execute(UPSERT, values)
        session_id = new.session_id if row is None else row.session_id  # a row keeps the session it was interned in
        return Parent(mrev, tail is None, session, session_id), unchanged

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
    def parent_of(con: sqlite3.Connection, tenant: str, new: Snapshot, known: dict[str, Parent]) -> Parent | None:
        """The parent of a row being written, if it names one that exists (``known``: see :meth:`write`)."""
        parent_id = new.parent_id
        if parent_id is None or parent_id == new.snapshot_id:
            return None
        if parent_id in known:  # written by this transaction (a resume's commit: the answered parent, then its child)
            return known[parent_id]
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
                    f"WHERE {children('?', f'IN ({marks})')} AND base_id IS NULL AND keep > 0",
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


# the leaf and index rows a write keeps in line (tables: ._index) ---------------------------------


_NOT_A_LEAF = f"""UPDATE {TABLE} SET leaf = 0
    WHERE tenant = :tenant AND snapshot_id = :snapshot_id AND session = :session AND leaf = 1"""
"""A parent in ``session`` has a child now (one of another session, which forked from it, leaves it a leaf)."""


_LEAF_AGAIN = f"""UPDATE {TABLE}
    SET leaf = NOT EXISTS (SELECT 1 FROM {TABLE} WHERE {children(":session", "= :snapshot_id")})
    WHERE tenant = :tenant AND snapshot_id = :snapshot_id AND session = :session
    RETURNING finish_reason"""
"""A row's flag recomputed from the rows (a child of it went away); returns its ``finish_reason`` (no row: none)."""


# The index of open interrupts is keyed by (tenant, created_us, snapshot_id, position): a statement that
# finds a snapshot's entries names their created_us (the snapshot's created_at, as the entries were
# written) so that it seeks rather than reads every entry of the tenant.

_DROP_ENTRIES = f"DELETE FROM {OPEN} WHERE tenant = :tenant AND created_us = :created_us AND snapshot_id = :snapshot_id"


_DROP_ENTRIES_IN = f"""DELETE FROM {OPEN} WHERE tenant = :tenant
    AND created_us = (SELECT created_us FROM {TABLE} WHERE tenant = :tenant AND snapshot_id = :raw_id)
    AND snapshot_id = :snapshot_id AND session_id = :session_id"""
"""The entries of a parent whose session went on: its ``created_us`` is its row's (whose entries, if it was
written earlier in the transaction, were rewritten with it)."""


_CLAIM_ENTRIES = f"""UPDATE {OPEN} SET claimed_by = :claimed_by, claim_until_us = :until
    WHERE tenant = :tenant AND created_us = :created_us AND snapshot_id = :snapshot_id"""


_INSERT_ENTRY = (
    f"INSERT INTO {OPEN} (tenant, {', '.join(ENTRY_COLUMNS)}) "
    f"SELECT :tenant, {', '.join(':' + c for c in ENTRY_COLUMNS)} WHERE NOT EXISTS "
    f"(SELECT 1 FROM {TABLE} WHERE {children(':session', '= :raw_id')} AND status = :completed)"
)
"""An entry, unless its session went on from its snapshot (a completed child names it as parent)."""


_COMPLETED = word_in("completed")


Reader = Callable[[str], Snapshot | None]
"""Reads a snapshot (full state) in the caller's transaction."""


def written(
    con: sqlite3.Connection,
    tenant: str,
    session: int,
    before: tuple[str | None, str, str | None] | None,
    old: Snapshot | None,
    new: Snapshot,
    same_messages: bool,
    read: Reader,
    dropped: set[str],
) -> None:
    """Bring the leaves and the index in line after ``new`` was written over ``old`` (``before``: see :func:`plan`).

    ``same_messages``: ``new`` keeps the messages ``old`` had (see :func:`rewrite_entries`).

    ``dropped`` holds the snapshots this transaction left without entries: a parent whose own write
    dropped them (its claim was answered) is not deleted from again when its child completes.
    """
    p = plan(before, new)
    if p.unlink is not None:
        dropped.discard(p.unlink)
        refresh(con, tenant, session, p.unlink, read)
    if p.drop_parent_leaf is not None:  # (p.add_leaf: the row's UPSERT set its flag)
        con.execute(_NOT_A_LEAF, {"tenant": tenant, "snapshot_id": id_in(p.drop_parent_leaf), "session": session})
    parent = p.drop_parent_entries
    if parent is not None and parent not in dropped:
        went_on = {"tenant": tenant, "raw_id": id_in(parent), "snapshot_id": parent, "session_id": new.session_id}
        con.execute(_DROP_ENTRIES_IN, went_on)
    if p.own_entries:
        rewrite_entries(con, tenant, session, old, new, same_messages, dropped)


def rewrite_entries(
    con: sqlite3.Connection,
    tenant: str,
    session: int,
    old: Snapshot | None,
    new: Snapshot,
    same_messages: bool,
    dropped: set[str],
) -> None:
    """Write ``new``'s entries over ``old``'s with the fewest statements (``old``: ``None`` for a new row).

    The table holds ``old``'s entries (none for a new row, or once its session went on). What
    changes is :func:`~interlock.stores._sql.index_rows.own_entries_change`'s to say (as for the
    PostgreSQL store): nothing when neither waits, the claim columns only when both wait on the
    same calls (a claim taken, refreshed, released: one ``UPDATE``, or no statement when the claim
    stayed), else every entry (``same_messages``: ``new`` keeps ``old``'s messages).

    The entries in the table were written with ``old``'s ``created_us``: the statements find
    them by it, never by ``new``'s.
    """
    sid = new.snapshot_id
    change = own_entries_change(old, new, same_messages)
    if change == "none":
        return
    if change == "claim" and old is not None:
        if old.claimed_by != new.claimed_by or old.claim_expires_at != new.claim_expires_at:
            until = new.claim_expires_at
            claim = {"claimed_by": new.claimed_by, "until": None if until is None else to_us(until)}
            con.execute(_CLAIM_ENTRIES, claim | _entries_of(tenant, old))
        return
    if old is not None and sid not in dropped:
        con.execute(_DROP_ENTRIES, _entries_of(tenant, old))
    dropped.add(sid)
    entries = entries_of(new)
    if entries:
        _insert_entries(con, tenant, session, sid, entries, dropped)


def refresh(con: sqlite3.Connection, tenant: str, session: int, snapshot_id: str, read: Reader) -> None:
    """Recompute one snapshot's leaf row and entries from the rows (a child of it in ``session`` went away).

    A snapshot of another session (the child forked a session from it) is left alone: its own
    session's rows decide its leaf and whether its calls wait.
    """
    args = {"tenant": tenant, "snapshot_id": id_in(snapshot_id), "session": session}
    found = con.execute(_LEAF_AGAIN, args).fetchall()
    if not found:
        return
    if found[0][0] == word_in("interrupted"):
        snap = read(snapshot_id)
        if snap is not None:
            put_entries(con, tenant, session, snap)


def put_entries(con: sqlite3.Connection, tenant: str, session: int, snap: Snapshot) -> None:
    """Rewrite one snapshot's entries from scratch (whatever the table held for it; ``snap``: its row as stored)."""
    con.execute(_DROP_ENTRIES, _entries_of(tenant, snap))
    entries = entries_of(snap)
    if entries:
        _insert_entries(con, tenant, session, snap.snapshot_id, entries, set())


def _entries_of(tenant: str, snap: Snapshot) -> dict[str, object]:
    """The parameters that find ``snap``'s entries (written when ``snap`` was the row)."""
    return {"tenant": tenant, "created_us": to_us(snap.created_at), "snapshot_id": snap.snapshot_id}


def _insert_entries(
    con: sqlite3.Connection, tenant: str, session: int, sid: str, entries: list[OpenInterrupt], dropped: set[str]
) -> None:
    """Insert a snapshot's entries (it has none in the table), unless its session went on from it."""
    went_on = {"session": session, "raw_id": id_in(sid), "completed": _COMPLETED}
    if con.executemany(_INSERT_ENTRY, [entry_values(tenant, e) | went_on for e in entries]).rowcount:
        dropped.discard(sid)


def forget(con: sqlite3.Connection, tenant: str, snapshot_id: str, created_us: int) -> None:
    """Drop a deleted snapshot's entries (``created_us``: the deleted row's; its leaf flag went with it)."""
    con.execute(_DROP_ENTRIES, {"tenant": tenant, "created_us": created_us, "snapshot_id": snapshot_id})


# the journal's rows (table: ._journal) ---------------------------------------------------------


_entry_text = json_encoder(ensure_ascii=True, separators=(", ", ": "))
"""An entry's text: ``json.dumps``'s, straight through the C encoder (as the PostgreSQL store's)."""


def stored_entry(raw: object, key: str) -> JournalEntry:
    try:
        return JournalEntry.from_json(json.loads(cast(str, raw)))
    except (TypeError, ValueError, KeyError) as exc:
        raise DataLossError(f"the journal entry {key!r} of the SQLite store is damaged: {exc}") from None


def get(con: sqlite3.Connection, tenant: str, key: str) -> JournalEntry | None:
    row = con.execute(f"SELECT entry FROM {JOURNAL} WHERE tenant = ? AND key = ?", (tenant, key)).fetchone()
    return None if row is None else stored_entry(row[0], key)


def put(con: sqlite3.Connection, tenant: str, entry: JournalEntry, expect: int) -> None:
    """Write ``entry`` if the stored attempt is ``expect`` (0: none stored), else raise ABORTED.

    One statement (so it may run as its own transaction: ``Worker.run_here``): the insert of a
    new call, or the update of the attempt ``expect``.
    """
    text = _entry_text(entry.to_json())
    if expect == 0:
        sql = f"""INSERT INTO {JOURNAL} (tenant, key, session_id, snapshot_id, attempt, entry)
            VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (tenant, key) DO NOTHING"""
        written = con.execute(sql, (tenant, entry.key, entry.session_id, entry.snapshot_id, entry.attempt, text))
    else:
        sql = f"UPDATE {JOURNAL} SET attempt = ?, entry = ? WHERE tenant = ? AND key = ? AND attempt = ?"
        written = con.execute(sql, (entry.attempt, text, tenant, entry.key, expect))
    if written.rowcount != 1:
        raise superseded(entry, get(con, tenant, entry.key), expect)


def update_entry(
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
            "entry": _entry_text(entry.to_json()),
        },
    )


# the outbox's rows (table: ._outbox) -----------------------------------------------------------


def insert(con: sqlite3.Connection, events: Sequence[OutboxEvent]) -> None:
    """Add ``events`` (in the caller's transaction)."""
    con.executemany(
        f"""INSERT INTO {OUTBOX} (id, tenant, channel, status, due_us, lease_holder, lease_us, event)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?)""",
        [(e.id, e.tenant or "", e.channel, *outbox_row(e)) for e in events],
    )
