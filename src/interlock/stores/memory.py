"""The in-memory store: snapshots, the effect journal and the outbox in this process's memory.

Besides the rows it keeps, as every store does, each session's leaves and the index of
open interrupts (:mod:`interlock.records._interrupt_index`): which rows wait, updated with every
write and delete (plain dictionary updates), and their entries, built when a listing first reads
them and kept until the row is written again.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable, Sequence
from datetime import datetime

from ..records._interrupt_index import InterruptQuery, OpenInterrupt, entries_of, waits
from ..records._journal import JournalEntry, superseded
from ..records._outbox import OutboxEvent, is_claimable, is_prunable, leased, retries
from ..records._sessions import Snapshot, utcnow
from . import JournalUpdater, SnapshotInfo, TxStep, Updater, apply_update, check_tenant, choose_leaf, run_steps
from ._prune import prunable

__all__ = ["InMemoryStore"]


class InMemoryStore:
    """A :class:`~interlock.stores.SessionStore` in this process's memory.

    Snapshots share (immutable) messages instead of copying them.
    """

    def __init__(self, *, reject_branching: bool = False) -> None:
        self.reject_branching = reject_branching
        self._rows: dict[tuple[str | None, str], Snapshot] = {}
        self._by_session: dict[tuple[str | None, str], list[str]] = {}
        self._children: dict[tuple[str | None, str, str], set[str]] = {}  # (tenant, session, parent) → children
        self._leaves: dict[tuple[str | None, str], set[str]] = {}
        self._open: dict[tuple[str | None, str], Snapshot] = {}  # the rows that wait, their session not gone on
        self._entries: dict[tuple[str | None, str], list[OpenInterrupt]] = {}  # their entries, built when first listed
        self._journal: dict[tuple[str | None, str], JournalEntry] = {}
        self._outbox: dict[str, OutboxEvent] = {}  # insertion order is the outbox's order
        self.poll_interval = 0.01

    async def load(self, snapshot_id: str, *, tenant: str | None = None) -> Snapshot | None:
        row = self._rows.get((check_tenant(tenant), snapshot_id))
        return None if row is None else _isolated(row)

    async def latest(self, session_id: str, *, tenant: str | None = None) -> Snapshot | None:
        tenant = check_tenant(tenant)
        if not self._by_session.get((tenant, session_id)):
            return None
        leaves = [(self._rows[(tenant, i)].created_at, i) for i in self._leaves.get((tenant, session_id), ())]
        return await self.load(choose_leaf(session_id, leaves, reject_branching=self.reject_branching), tenant=tenant)

    async def open_interrupts(self, query: InterruptQuery, *, tenant: str | None = None) -> list[OpenInterrupt]:
        tenant = check_tenant(tenant)
        found = [
            e for key, row in self._open.items() if key[0] == tenant for e in self._listed(key, row) if query.admits(e)
        ]
        return query.page(found)

    def _listed(self, key: tuple[str | None, str], row: Snapshot) -> list[OpenInterrupt]:
        """The index entries of a row that waits: built on its first listing, kept until it is written again."""
        entries = self._entries.get(key)
        if entries is None:
            entries = self._entries[key] = entries_of(row)
        return entries

    async def save(self, snapshot_id: str, update: Updater, *, tenant: str | None = None) -> Snapshot | None:
        return (await self.save_all([(snapshot_id, update)], tenant=tenant))[0]

    async def save_all(
        self,
        updates: Sequence[tuple[str, Updater]],
        *,
        tenant: str | None = None,
        journal: Sequence[tuple[str, JournalUpdater]] = (),
        events: Sequence[OutboxEvent] = (),
        then: Sequence[TxStep] = (),
    ) -> list[Snapshot | None]:
        """As :meth:`SnapshotStore.save_all <interlock.stores.SnapshotStore.save_all>`; ``then``'s steps get ``None``.

        They run (synchronously) once every updater has, before anything is written: one that
        raises writes nothing.
        """
        tenant = check_tenant(tenant)
        staged: list[tuple[Snapshot | None, Snapshot | None]] = []
        for snapshot_id, update in updates:  # every updater runs before anything is written
            current = self._rows.get((tenant, snapshot_id))  # updaters are pure: the stored row itself, no copy
            staged.append((current, apply_update(current, update, snapshot_id)))
        entries = [(key, update(self._journal.get((tenant, key)))) for key, update in journal]
        if then:
            run_steps(then, None)
        for key, entry in entries:
            if entry is not None:
                self._journal[(tenant, key)] = entry
        touched: dict[tuple[str, str], None] = {}
        for current, new in staged:
            if new is not None:
                self._rows[(tenant, new.snapshot_id)] = _isolated(new)
                if current is None:
                    self._by_session.setdefault((tenant, new.session_id), []).append(new.snapshot_id)
                self._link(tenant, new.session_id, new.snapshot_id, current, touched)
        self._refresh(tenant, touched)
        for event in events:
            self._outbox[event.id] = event
        return [new for _, new in staged]

    async def outbox_claim(
        self, *, channel: str, holder: str, lease: float, limit: int = 100, now: datetime | None = None
    ) -> list[OutboxEvent]:
        now = now or utcnow()
        due = sorted(
            (e for e in self._outbox.values() if is_claimable(e, channel, now)), key=lambda e: (e.due, e.created_at)
        )
        taken = [leased(e, holder, lease, now) for e in due[:limit]]
        for event in taken:
            self._outbox[event.id] = event
        return taken

    async def outbox_settle(self, event: OutboxEvent, *, holder: str) -> bool:
        current = self._outbox.get(event.id)
        if current is None or current.lease_holder != holder:
            return False
        self._outbox[event.id] = event.evolve(lease_holder=None, lease_expires_at=None)
        return True

    async def outbox_events(self, *, channel: str | None = None, status: str | None = None) -> list[OutboxEvent]:
        return [e for e in self._outbox.values() if channel in (None, e.channel) and status in (None, e.status)]

    async def outbox_retry(
        self, *, channel: str, ids: Sequence[str] | None = None, now: datetime | None = None
    ) -> list[OutboxEvent]:
        again = retries(self._outbox.values(), channel, ids, now or utcnow())
        for event in again:
            self._outbox[event.id] = event
        return again

    async def outbox_prune(self, *, channel: str, settled_before: datetime) -> int:
        gone = [e.id for e in self._outbox.values() if is_prunable(e, channel, settled_before)]
        for event_id in gone:
            del self._outbox[event_id]
        return len(gone)

    async def ready(self) -> None:
        return None

    async def journal_get(self, key: str, *, tenant: str | None = None) -> JournalEntry | None:
        return self._journal.get((check_tenant(tenant), key))

    async def journal_put(
        self, entry: JournalEntry, *, expect: int, tenant: str | None = None, durable: bool = True
    ) -> None:
        slot = (check_tenant(tenant), entry.key)
        current = self._journal.get(slot)
        stored = 0 if current is None else current.attempt
        if stored != expect:
            raise superseded(entry, current, expect)
        self._journal[slot] = entry

    async def journal_entries(self, *, session_id: str | None = None, tenant: str | None = None) -> list[JournalEntry]:
        tenant = check_tenant(tenant)
        found = [
            e
            for (t, _), e in self._journal.items()
            if t == tenant and (session_id is None or e.session_id == session_id)
        ]
        return sorted(found, key=lambda e: (e.started_at, e.key))

    async def watch(self, snapshot_id: str, *, tenant: str | None = None) -> AsyncIterator[str]:
        tenant = check_tenant(tenant)
        last: str | None = None
        while True:
            row = self._rows.get((tenant, snapshot_id))
            if row is None:
                return
            if row.status != last:
                last = row.status
                yield last
            if row.is_terminal:
                return
            await asyncio.sleep(self.poll_interval)

    async def list(
        self, *, tenant: str | None = None, session_id: str | None = None, finish_reason: str | None = None
    ) -> list[SnapshotInfo]:
        tenant = check_tenant(tenant)
        rows = [
            s
            for (t, _), s in self._rows.items()
            if t == tenant
            and (session_id is None or s.session_id == session_id)
            and (finish_reason is None or s.finish_reason == finish_reason)
        ]
        rows.sort(key=lambda s: (s.created_at, s.snapshot_id), reverse=True)
        return [_info(s) for s in rows]

    async def delete(self, snapshot_ids: Iterable[str], *, tenant: str | None = None) -> int:
        tenant = check_tenant(tenant)
        count = 0
        touched: dict[tuple[str, str], None] = {}
        for sid in snapshot_ids:
            row = self._rows.pop((tenant, sid), None)
            for slot in [k for k, e in self._journal.items() if k[0] == tenant and e.snapshot_id == sid]:
                del self._journal[slot]
            if row is not None:
                self._by_session[(tenant, row.session_id)].remove(sid)
                self._link(tenant, row.session_id, sid, row, touched)
                count += 1
        self._refresh(tenant, touched)
        return count

    def _link(
        self,
        tenant: str | None,
        session_id: str,
        snapshot_id: str,
        old: Snapshot | None,
        touched: dict[tuple[str, str], None],
    ) -> None:
        """After a write (or delete) of ``snapshot_id`` (``old``: the row before): its parent link.

        Adds to ``touched`` the snapshots whose leaf mark or index entries the change may move:
        itself, and a parent it joined or left, or whose ``completed`` child it became or stopped being.
        """
        row = self._rows.get((tenant, snapshot_id))
        old_parent = None if old is None else old.parent_id
        parent = None if row is None else row.parent_id
        if old_parent != parent or (old is None) != (row is None):
            if old_parent is not None:
                self._children.get((tenant, session_id, old_parent), set()).discard(snapshot_id)
                touched[(session_id, old_parent)] = None
            if parent is not None:
                self._children.setdefault((tenant, session_id, parent), set()).add(snapshot_id)
                touched[(session_id, parent)] = None
        elif parent is not None and (old is not None and old.status == "completed") != (
            row is not None and row.status == "completed"
        ):
            touched[(session_id, parent)] = None
        touched[(session_id, snapshot_id)] = None

    def _refresh(self, tenant: str | None, touched: dict[tuple[str, str], None]) -> None:
        """Bring the ``touched`` snapshots' leaf marks and index entries in line with the rows, each once.

        Each is seen from its ``(session, snapshot)`` pair's session: a parent in another
        session is left to its own.
        """
        rows, children_of, leaves_of = self._rows, self._children, self._leaves
        for session_id, snapshot_id in touched:
            key = (tenant, snapshot_id)
            row = rows.get(key)
            leaves = leaves_of.get((tenant, session_id))
            if leaves is None:
                leaves = leaves_of[(tenant, session_id)] = set()
            self._entries.pop(key, None)
            if row is None:
                leaves.discard(snapshot_id)
                self._open.pop(key, None)
                continue
            if row.session_id != session_id:
                continue
            children = children_of.get((tenant, session_id, snapshot_id))
            if children:
                leaves.discard(snapshot_id)
            else:
                leaves.add(snapshot_id)
            if waits(row) and not (children and any(rows[(tenant, c)].status == "completed" for c in children)):
                self._open[key] = row  # it waits, and its session did not go on from it
            else:
                self._open.pop(key, None)

    async def prune(
        self,
        *,
        session_id: str | None = None,
        keep_last: int | None = None,
        older_than: datetime | None = None,
        tenant: str | None = None,
    ) -> int:
        """Delete old snapshots (the rule is :func:`interlock.stores._prune.prunable`'s); returns how many."""
        tenant = check_tenant(tenant)
        rows = [
            (s.snapshot_id, s.parent_id, s.created_at, s.status)
            for (t, _), s in self._rows.items()
            if t == tenant and (session_id is None or s.session_id == session_id)
        ]
        return await self.delete(prunable(rows, keep_last=keep_last, older_than=older_than), tenant=tenant)


def _isolated(s: Snapshot) -> Snapshot:
    """A copy whose lists and custom state the caller may change without touching the store."""
    return s if s.state is None else s.evolve(state=s.state.copy())


def _info(s: Snapshot) -> SnapshotInfo:
    agent = (s.metadata or {}).get("agent")
    return SnapshotInfo(
        snapshot_id=s.snapshot_id,
        session_id=s.session_id,
        parent_id=s.parent_id,
        created_at=s.created_at,
        updated_at=s.updated_at,
        status=s.status,
        finish_reason=s.finish_reason,
        agent=agent if isinstance(agent, str) else None,
    )
