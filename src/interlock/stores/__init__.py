"""Session stores: where snapshots live.

The store seam is split by capability, one small Protocol each:
:class:`SnapshotStore` is the core (:meth:`~SnapshotStore.load` a snapshot by id,
:meth:`~SnapshotStore.latest` (the leaf) of a session, an atomic read-modify-write
:meth:`~SnapshotStore.save` of one row and :meth:`~SnapshotStore.save_all` of several in one
transaction (a resume's commit is fenced by its claim that way), a
:meth:`~SnapshotStore.watch` of a snapshot's status, and :meth:`~SnapshotStore.ready`, which
says before a turn runs whether the store can take writes); :class:`JournalStore` keeps the
effect journal, :class:`OutboxStore` serves the outbox's consumers, :class:`InterruptIndex`
lists open interrupts (:mod:`interlock.records._interrupt_index`) and :class:`StoreAdmin` lists,
deletes and prunes snapshots. :class:`SessionStore` is all five: what an agent, an inbox
and the command line take. Each part of the engine asks only for the capability it uses (the
effect journal a :class:`JournalStore`, the webhook deliverer an :class:`OutboxStore`, ...), and
each capability has its conformance checks (:mod:`interlock.testing._stores`). Every call is
scoped by ``tenant`` (``None`` or a non-empty string, see :func:`check_tenant`): a snapshot of
another tenant does not exist.

Three stores come in the box, each a whole :class:`SessionStore`:
:class:`~interlock.stores.memory.InMemoryStore`, :class:`~interlock.stores.sqlite.SQLiteStore`
(the embedded default) and :class:`~interlock.stores.postgres.PostgresStore`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from inspect import isawaitable
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ..errors import FailedPreconditionError, InvalidArgumentError, UsageError
from ..records._journal import JournalEntry
from ..records._outbox import OutboxEvent
from ..records._sessions import Snapshot
from ..records.snapshots import Updater, apply_update

if TYPE_CHECKING:  # the index module reads claims, which import this package
    from ..records._interrupt_index import InterruptQuery, OpenInterrupt

__all__ = [
    "InterruptIndex",
    "JournalStore",
    "JournalUpdater",
    "OutboxStore",
    "SessionStore",
    "SnapshotInfo",
    "SnapshotStore",
    "StoreAdmin",
    "TxStep",
    "Updater",
    "apply_update",
    "check_tenant",
    "choose_leaf",
    "run_steps",
]


JournalUpdater = Callable[[JournalEntry | None], JournalEntry | None]
"""As :data:`Updater`, for the effect journal's entry of one idempotency key (``None``: none stored)."""

TxStep = Callable[[Any], Any]
"""A step of :meth:`SnapshotStore.save_all`'s transaction, run after its writes with the store's own handle.

The handle is the store's: ``PostgresStore`` passes the transaction's psycopg connection (and
awaits what the step returns when it is awaitable, see ``postgres.TxStep``), ``SQLiteStore``
its ``sqlite3.Connection`` on its worker thread, ``InMemoryStore`` ``None``. A plain function
(not a coroutine function) works on every store. A step that raises aborts the whole save.
"""


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
class SnapshotStore(Protocol):
    """The core of a store: snapshots by id, a session's latest, atomic saves, watch and ready.

    Every call is scoped by ``tenant`` (``None`` or a non-empty string, see
    :func:`~interlock.stores.check_tenant`): a snapshot of another tenant does not exist.
    Checked by :data:`interlock.testing._stores.SNAPSHOT_CHECKS`.
    """

    async def load(self, snapshot_id: str, *, tenant: str | None = None) -> Snapshot | None:
        """The snapshot with this id (full state), or ``None``."""
        ...

    async def latest(self, session_id: str, *, tenant: str | None = None) -> Snapshot | None:
        """The session's leaf snapshot, whatever its status, or ``None`` for an unknown session.

        Stores keep each session's leaves as they write (a branching session has several),
        so this reads the leaves, not the session's rows (the rule is
        :func:`~interlock.stores.choose_leaf`'s).
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
        then: Sequence[TxStep] = (),
    ) -> list[Snapshot | None]:
        """:meth:`save` several rows (distinct ids) in one transaction, with effect journal entries and outbox events.

        ``journal`` pairs an idempotency key with an updater of its entry, applied after
        ``updates`` in the same transaction (distinct keys): a claim records the intents of
        the calls it restarts, a commit the outcomes of the turn's calls, with no write of
        their own. ``events`` are added to the outbox (:mod:`interlock.records._outbox`) in the same
        transaction. ``then`` runs last, in the same transaction (see :data:`TxStep`: a
        worker queue inserts its job this way). All are written, or none when an updater
        or a step raises (the error propagates). Events are written whenever the
        transaction commits, also when every updater returned ``None``: an updater that
        must not report raises instead.
        """
        ...

    def watch(self, snapshot_id: str, *, tenant: str | None = None) -> AsyncIterator[str]:
        """Yield the snapshot's status now and on every change; ends after a terminal status or if missing."""
        ...

    async def ready(self) -> None:
        """Raise the typed error that a write would raise now (missing, read-only or damaged storage)."""
        ...


@runtime_checkable
class JournalStore(Protocol):
    """The effect journal: one entry per tool call's idempotency key (:mod:`interlock.records._journal`).

    Checked by :data:`interlock.testing._stores.JOURNAL_CHECKS`.
    """

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
        """Journal entries (of one session, or all), oldest first; deleting a snapshot drops those made from it."""
        ...


@runtime_checkable
class OutboxStore(Protocol):
    """The outbox's consumers: lease, settle, list, retry and prune its rows (:mod:`interlock.records._outbox`).

    Rows are written by :meth:`SnapshotStore.save_all`'s ``events``. Checked by
    :data:`interlock.testing._stores.OUTBOX_CHECKS`.
    """

    async def outbox_claim(
        self, *, channel: str, holder: str, lease: float, limit: int = 100, now: datetime | None = None
    ) -> list[OutboxEvent]:
        """Lease to ``holder`` for ``lease`` seconds up to ``limit`` rows of ``channel``, oldest first.

        Taken are the rows :func:`interlock.records.is_claimable` admits (pending, due by
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

        Taken are the rows :func:`interlock.records.is_retryable` admits, made
        :func:`interlock.records.retried` (pending, due ``now``, attempts from 0), across
        tenants, in one write. A ``done`` or pending row, or an unknown id, is left alone.
        """
        ...

    async def outbox_prune(self, *, channel: str, settled_before: datetime) -> int:
        """Delete the rows of ``channel`` settled before ``settled_before``, across tenants; returns how many.

        Deleted are the rows :func:`interlock.records.is_prunable` admits (``done`` or
        ``failed``, settled before the cutoff); a pending row is never deleted.
        """
        ...


@runtime_checkable
class InterruptIndex(Protocol):
    """The index of open interrupts, which the inbox lists from.

    Checked by :data:`interlock.testing._stores.INDEX_CHECKS`.
    """

    async def open_interrupts(self, query: InterruptQuery, *, tenant: str | None = None) -> list[OpenInterrupt]:
        """The page of the index of open interrupts that ``query``, an :class:`~interlock.records.InterruptQuery`, asks.

        The index is written in the transaction of every snapshot write (and delete), so it
        always agrees with the snapshots; a listing reads nothing else.
        """
        ...


@runtime_checkable
class StoreAdmin(Protocol):
    """Listing, deleting and pruning snapshots. Checked by :data:`interlock.testing._stores.ADMIN_CHECKS`."""

    async def list(
        self, *, tenant: str | None = None, session_id: str | None = None, finish_reason: str | None = None
    ) -> list[SnapshotInfo]:
        """Snapshots (without state), newest first, optionally filtered."""
        ...

    async def delete(self, snapshot_ids: Iterable[str], *, tenant: str | None = None) -> int:
        """Delete snapshots, keeping every remaining snapshot loadable; returns how many were deleted.

        The effect journal's entries of calls made from a deleted snapshot go with it.
        """
        ...

    async def prune(
        self,
        *,
        session_id: str | None = None,
        keep_last: int | None = None,
        older_than: datetime | None = None,
        tenant: str | None = None,
    ) -> int:
        """Delete old snapshots of a tenant (one session, or all); returns how many were deleted.

        Deleted are the snapshots that are not ``pending``, not among the last ``keep_last``
        snapshots of any leaf's parent chain (so the latest snapshot of every session stays),
        and, with ``older_than``, created before it. At least one of ``keep_last`` (≥ 1) and
        ``older_than`` is required (else ``INVALID_ARGUMENT``). Every remaining snapshot stays
        loadable with its full history (see :meth:`delete`). The rule is
        :func:`interlock.stores._prune.prunable`'s.
        """
        ...


@runtime_checkable
class SessionStore(SnapshotStore, JournalStore, OutboxStore, InterruptIndex, StoreAdmin, Protocol):
    """A whole store: every capability Protocol at once.

    :class:`SnapshotStore`, :class:`JournalStore`, :class:`OutboxStore`, :class:`InterruptIndex`
    and :class:`StoreAdmin`. What an agent, an inbox and ``open_store`` deal in; the stores in the box implement it.
    Code written against ``SessionStore`` keeps working: the capability Protocols only name
    its parts. A store of your own must pass :func:`interlock.testing.check_store`.
    """


def check_tenant(tenant: object) -> str | None:
    """The one tenant rule every store applies: ``None`` (no tenant) or a non-empty string."""
    if tenant is None or (isinstance(tenant, str) and tenant):
        return tenant
    raise InvalidArgumentError(
        f"a tenant must be None or a non-empty string, not {tenant!r}; check the context provider that sets it"
    )


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


def run_steps(steps: Sequence[TxStep], handle: object) -> None:
    """Run a synchronous store's :data:`TxStep` steps with its transaction's ``handle``, in order.

    A step that returns an awaitable (a coroutine function) is refused with ``FAILED_PRECONDITION``
    (so the save writes nothing): this store runs its transaction without an event loop.
    """
    for step in steps:
        result = step(handle)
        if isawaitable(result):
            close = getattr(result, "close", None)
            if callable(close):
                close()
            raise UsageError(
                f"save_all's then= step {step!r} returned an awaitable; this store runs its steps synchronously "
                "inside its transaction: pass a plain function (awaited steps are PostgresStore's)"
            )
