"""Session stores: where snapshots live.

A store is a small Protocol: :meth:`SessionStore.load` a snapshot by id,
:meth:`SessionStore.latest` (the leaf) of a session, the index of open interrupts
(:meth:`SessionStore.open_interrupts`, :mod:`interlock.interrupt_index`), an atomic read-modify-write
:meth:`SessionStore.save` of one row and :meth:`SessionStore.save_all` of several in one
transaction (a resume's commit is fenced by its claim that way), a
:meth:`SessionStore.watch` of a snapshot's status, and :meth:`SessionStore.ready`, which
says before a turn runs whether the store can take writes. Every call is scoped by
``tenant`` (``None`` or a non-empty string, see :func:`check_tenant`): a snapshot of
another tenant does not exist.

Two stores come in the box: :class:`~interlock.stores.memory.InMemoryStore` and
:class:`~interlock.stores.sqlite.SQLiteStore` (the embedded default).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from ..errors import FailedPreconditionError, InvalidArgumentError
from ..journal import JournalEntry
from ..outbox import OutboxEvent
from ..sessions import Snapshot, utcnow

if TYPE_CHECKING:  # the index module reads claims, which import this package
    from ..interrupt_index import InterruptQuery, OpenInterrupt

__all__ = [
    "JournalUpdater",
    "SessionStore",
    "SnapshotInfo",
    "Updater",
    "apply_update",
    "check_tenant",
    "choose_leaf",
]

Updater = Callable[[Snapshot | None], Snapshot | None]
"""A pure function from the current row (or ``None``) to the row to write (or ``None``: write nothing).

It runs inside the store's transaction and may run again under contention, so it must
not have side effects. Raising aborts the save and propagates.
"""

JournalUpdater = Callable[[JournalEntry | None], JournalEntry | None]
"""As :data:`Updater`, for the effect journal's entry of one idempotency key (``None``: none stored)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class SnapshotInfo:
    """A snapshot's bookkeeping without its state, for listings."""

    snapshot_id: str
    session_id: str
    parent_id: str | None
    created_at: datetime
    updated_at: datetime | None
    status: str
    finish_reason: str | None
    agent: str | None


@runtime_checkable
class SessionStore(Protocol):
    """Where snapshots are kept. Implementations must pass :func:`interlock.testing.check_store`."""

    async def load(self, snapshot_id: str, *, tenant: str | None = None) -> Snapshot | None:
        """The snapshot with this id (full state), or ``None``."""
        ...

    async def latest(self, session_id: str, *, tenant: str | None = None) -> Snapshot | None:
        """The session's leaf snapshot, whatever its status, or ``None`` for an unknown session.

        Stores keep each session's leaves as they write (a branching session has several),
        so this reads the leaves, not the session's rows (the rule is :func:`choose_leaf`'s).
        """
        ...

    async def open_interrupts(self, query: InterruptQuery, *, tenant: str | None = None) -> list[OpenInterrupt]:
        """The page of the index of open interrupts that ``query`` asks for (see :mod:`interlock.interrupt_index`).

        The index is written in the transaction of every snapshot write (and delete), so it
        always agrees with the snapshots; a listing reads nothing else.
        """
        ...

    async def save(self, snapshot_id: str, update: Updater, *, tenant: str | None = None) -> Snapshot | None:
        """Atomically read the row, apply ``update`` and write the result; returns what was written."""
        ...

    async def save_all(
        self,
        updates: Sequence[tuple[str, Updater]],
        *,
        tenant: str | None = None,
        journal: Sequence[tuple[str, JournalUpdater]] = (),
        events: Sequence[OutboxEvent] = (),
    ) -> list[Snapshot | None]:
        """:meth:`save` several rows (distinct ids) in one transaction, with effect journal entries and outbox events.

        ``journal`` pairs an idempotency key with an updater of its entry, applied after
        ``updates`` in the same transaction (distinct keys): a claim records the intents of
        the calls it restarts, a commit the outcomes of the turn's calls, with no write of
        their own. ``events`` are added to the outbox (:mod:`interlock.outbox`) in the same
        transaction. All are written, or none when an updater raises (the error propagates).
        Events are written whenever the transaction commits, also when every updater
        returned ``None``: an updater that must not report raises instead.
        """
        ...

    async def outbox_claim(
        self, *, channel: str, holder: str, lease: float, limit: int = 100, now: datetime | None = None
    ) -> list[OutboxEvent]:
        """Lease to ``holder`` for ``lease`` seconds up to ``limit`` rows of ``channel``, oldest first.

        Taken are the rows :func:`interlock.outbox.is_claimable` admits (pending, due by
        ``now``, no live lease), across tenants, in one atomic write: two claimers never
        get the same row while its lease lasts. Returns them as leased.
        """
        ...

    async def outbox_settle(self, event: OutboxEvent, *, holder: str) -> bool:
        """Write back ``event``'s delivery state (status, attempts, due_at, ...) and drop its lease.

        Only while ``holder`` holds the row's lease (also a lapsed one nobody took over);
        returns ``False``, writing nothing, when another consumer took it.
        """
        ...

    async def outbox_events(self, *, channel: str | None = None, status: str | None = None) -> list[OutboxEvent]:
        """Outbox rows (optionally of one channel and status), oldest first, across tenants."""
        ...

    async def outbox_retry(
        self, *, channel: str, ids: Sequence[str] | None = None, now: datetime | None = None
    ) -> list[OutboxEvent]:
        """Give the ``failed`` rows of ``channel`` (``ids``: only those) a fresh start; returns them as written.

        Taken are the rows :func:`interlock.outbox.is_retryable` admits, made
        :func:`interlock.outbox.retried` (pending, due ``now``, attempts from 0), across
        tenants, in one write. A ``done`` or pending row, or an unknown id, is left alone.
        """
        ...

    async def outbox_prune(self, *, channel: str, settled_before: datetime) -> int:
        """Delete the rows of ``channel`` settled before ``settled_before``, across tenants; returns how many.

        Deleted are the rows :func:`interlock.outbox.is_prunable` admits (``done`` or
        ``failed``, settled before the cutoff); a pending row is never deleted.
        """
        ...

    async def ready(self) -> None:
        """Raise the typed error that a write would raise now (missing, read-only or damaged storage)."""
        ...

    async def journal_get(self, key: str, *, tenant: str | None = None) -> JournalEntry | None:
        """The effect journal's entry for a call's idempotency key, or ``None``."""
        ...

    async def journal_put(
        self, entry: JournalEntry, *, expect: int, tenant: str | None = None, durable: bool = True
    ) -> None:
        """Write a journal entry if the stored attempt is ``expect`` (0: none stored).

        ``durable=False`` allows the store not to flush this write to disk before returning
        (it must survive a process crash, not necessarily a power failure).

        Raises:
            ClaimConflictError: the stored attempt differs (another run took the call over).
        """
        ...

    async def journal_entries(self, *, session_id: str | None = None, tenant: str | None = None) -> list[JournalEntry]:
        """Journal entries (of one session, or all), oldest first; :meth:`delete` drops those of deleted snapshots."""
        ...

    def watch(self, snapshot_id: str, *, tenant: str | None = None) -> AsyncIterator[str]:
        """Yield the snapshot's status now and on every change; ends after a terminal status or if missing."""
        ...

    async def list(
        self, *, tenant: str | None = None, session_id: str | None = None, finish_reason: str | None = None
    ) -> list[SnapshotInfo]:
        """Snapshots (without state), newest first, optionally filtered."""
        ...

    async def delete(self, snapshot_ids: Iterable[str], *, tenant: str | None = None) -> int:
        """Delete snapshots, keeping every remaining snapshot loadable; returns how many were deleted."""
        ...


def check_tenant(tenant: object) -> str | None:
    """The one tenant rule every store applies: ``None`` (no tenant) or a non-empty string."""
    if tenant is None or (isinstance(tenant, str) and tenant):
        return tenant
    raise InvalidArgumentError(
        f"a tenant must be None or a non-empty string, not {tenant!r}; check the context provider that sets it"
    )


def apply_update(current: Snapshot | None, update: Updater, snapshot_id: str) -> Snapshot | None:
    """Run an updater and enforce the rules every store shares.

    The row keeps its id and session; a terminal status never changes; the version is
    bumped; ``created_at`` is kept and ``updated_at`` stamped.
    """
    new = update(current)
    if new is None:
        return None
    if new.snapshot_id != snapshot_id:
        new = new.evolve(snapshot_id=snapshot_id)
    if not new.session_id:
        raise InvalidArgumentError(f"snapshot {snapshot_id!r} needs a session id")
    if current is not None:
        if new.session_id != current.session_id:
            raise FailedPreconditionError(
                f"snapshot {snapshot_id!r} belongs to session {current.session_id!r}; it cannot move to another"
            )
        if current.is_terminal and new.status != current.status:
            raise FailedPreconditionError(
                f"snapshot {snapshot_id!r} is {current.status}; a finished snapshot's status cannot change"
            )
        return new.evolve(version=current.version + 1, created_at=current.created_at, updated_at=utcnow())
    return new.evolve(version=1, updated_at=new.updated_at or new.created_at)


def choose_leaf(session_id: str, leaves: list[tuple[datetime, str]], *, reject_branching: bool) -> str:
    """Choose a session's latest snapshot among its leaves' ``(created_at, snapshot_id)``.

    A leaf is a snapshot that no snapshot of its session names as its parent. Several
    leaves (a branching session): the newest, ties broken by id, unless
    ``reject_branching``. A session with snapshots but no leaf has a cycle: corrupt history.
    """
    if not leaves:
        raise FailedPreconditionError(
            f"Session {session_id!r} has no leaf snapshot (corrupt or cyclic history); resume by snapshotId instead."
        )
    if len(leaves) > 1 and reject_branching:
        raise FailedPreconditionError(
            f"Session {session_id!r} has branching snapshots ({len(leaves)} leaves), so there is no single latest "
            "snapshot. Resume by snapshotId instead."
        )
    return max(leaves)[1]
