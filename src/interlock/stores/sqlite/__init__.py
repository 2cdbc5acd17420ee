"""The embedded default store: one SQLite file, shared safely by threads and processes.

This module is the public class and its plumbing (the worker thread, the connection,
transactions). The rest lives in private modules:

* :mod:`._schema`: the file's layout (delta rows, interned sessions, compact ids
  and timestamps) and its SQL;
* :mod:`._codec`: its compact ids and statuses, and its rows read (the rest of the
  codec, column values ↔ Python values and rows ↔ snapshots, is :mod:`interlock.stores._sql.row_codec`'s,
  shared with the PostgreSQL store);
* :mod:`._chain`: message histories from base chains, and their cache;
* :mod:`._rows`: the write path: every row a save writes (snapshots as deltas, their leaf
  and index rows, journal entries, outbox events), and a snapshot's read;
* :mod:`._queries`: the rest of the snapshot table's queries (latest, list, delete, prune);
* :mod:`._index`, :mod:`._journal`, :mod:`._outbox`: the other tables' DDL and queries.

Threads
-------
Each store owns one connection, used by its worker thread (:mod:`._worker`): the
async methods queue work for it, so no blocking call runs on the event loop. Two exceptions,
which run on the caller's thread when the worker is idle, no other call waits for it, and no
other connection's lock stands in the way, never waiting for any of these (else the worker takes
them): a journal write that needs no flush (one statement with ``synchronous=NORMAL``, no fsync:
``Worker.run_here``), and a :meth:`SQLiteStore.load` of a row whose history needs no base chain
read (one statement: ``Worker.read_here``). Each saves the two thread hand-offs, which cost more than it.
The worker takes the work in batches and commits the writes waiting together in one transaction
(group commit: one fsync for them all, a write that fails rolled back alone, none acknowledged
before its commit is durable). It keeps an LRU cache of message lists, bounded by their size
and keyed by each row's content revision, so it is never stale, even when another process
writes the file.

Concurrency
-----------
WAL journal and ``synchronous=FULL``; the connection never waits for a lock inside SQLite
(``busy_timeout = 0``): the worker waits for another connection's lock itself, up to 30 s, where
its transactions take their locks (``Worker.wait_for``), so the caller's thread may use the
connection as it is (opening the file waits inside SQLite, and a file SQLite keeps out of WAL
mode keeps that timeout, and every call goes to the worker). Every write transaction starts
with ``BEGIN IMMEDIATE`` (creating the schema too, so concurrent processes opening a new file
are safe), and :meth:`SQLiteStore.save` runs read → updater → write inside that one
transaction, so it is atomic across processes. The updater therefore runs on the worker
thread: like every updater, it must be a pure function. The worker checkpoints the WAL
itself, between batches, and truncates it once idle, so a long-running store stays near its
logical size (see :mod:`._worker`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from types import TracebackType
from typing import Any, TypeVar

from ...errors import InvalidArgumentError, UnavailableError, UsageError
from ...records._interrupt_index import InterruptQuery, OpenInterrupt
from ...records._journal import JournalEntry
from ...records._outbox import OutboxEvent
from ...records._sessions import TERMINAL, Snapshot
from ...telemetry import _hooks as hooks
from .. import JournalUpdater, SnapshotInfo, Updater, check_tenant, run_steps
from .._sql.ready import proven
from . import _journal as journal
from . import _outbox as outbox
from . import _rows as rows
from ._errors import check_layout, is_busy, sqlite_error, stopped
from ._migrate import CURRENT, prepare
from ._queries import StoredRows
from ._schema import create_indexes, path_of
from ._wal import WalIndex
from ._worker import JobKind, Worker

__all__ = ["SQLiteStep", "SQLiteStore"]

_R = TypeVar("_R")

SQLiteStep = Callable[[sqlite3.Connection], None]
"""A step of :meth:`SQLiteStore.save_all`'s transaction: called on the worker thread with its connection."""


class SQLiteStore:
    """The embedded default :class:`~interlock.stores.SessionStore` (every capability): one SQLite file.

    Several stores, in several threads or processes, may share one file. Use it as an
    async context manager (or call :meth:`close`) so its worker thread and connection
    are released::

        async with SQLiteStore("sessions.db") as store:
            ...

    Args:
        path: the database file (created if missing), or ``":memory:"`` for a private
            in-memory database.
        reject_branching: make :meth:`latest` raise ``FailedPreconditionError`` for a
            session with several leaves instead of returning the newest.
        poll_interval: how often :meth:`watch` polls for changes made by other store
            objects or processes (changes through this object wake it at once).
        cache_bytes: how much the LRU cache of message lists may hold, in bytes of their
            stored JSON (a history's objects take a few times that in memory).
        upgrade: migrate a file of an older schema version on open (what ``interlock db
            upgrade`` does); without it such a file is refused with ``FAILED_PRECONDITION``.
    """

    SCHEMA_VERSION = CURRENT
    """The schema version this code writes (see :mod:`interlock.stores.sqlite._migrate`)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        reject_branching: bool = False,
        poll_interval: float = 0.05,
        cache_bytes: int = 64 << 20,
        upgrade: bool = False,
    ) -> None:
        self.path = os.fspath(path)
        if not self.path.strip():
            raise InvalidArgumentError(
                "the SQLite store needs a database path (an empty one would be a throwaway temporary database); "
                'pass a file path, or ":memory:" for a private in-memory database'
            )
        self.reject_branching = reject_branching
        self.poll_interval = poll_interval
        self.upgrade = upgrade
        self.upgraded_from: int | None = None
        """The schema version found on open when migrations ran (``None``: none were needed)."""
        self._rows = StoredRows(cache_bytes)
        self._con: sqlite3.Connection | None = None
        self._wal = None if self.path == ":memory:" else WalIndex(os.path.abspath(self.path) + "-wal")
        self._worker = Worker(
            self._db, self._wal, name="interlock-sqlite", reset=self._close_db, died=lambda exc: stopped(self.path, exc)
        )
        self._closed = False
        self._wrote_at: float | None = None
        """When (``time.monotonic()``) a write committed on the current connection, if no call failed since."""
        self._watchers: set[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = set()

    @classmethod
    @asynccontextmanager
    async def from_url(
        cls, url: str | os.PathLike[str], *, reject_branching: bool = False, upgrade: bool = False
    ) -> AsyncGenerator[SQLiteStore, None]:
        """Open a store from ``sqlite:///<path>`` (``sqlite:////abs/path`` for an absolute one) or a path."""
        store = cls(path_of(url), reject_branching=reject_branching, upgrade=upgrade)
        try:
            await store.setup()
            yield store
        finally:
            await store.close()

    async def __aenter__(self) -> SQLiteStore:
        await self.setup()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def setup(self) -> None:
        """Open the file and create the table and indexes (idempotent; first use does it too)."""
        await self._call(self._db)

    async def close(self) -> None:
        """Close the connection and stop the worker thread (idempotent)."""
        if self._closed:
            return
        self._closed = True
        try:
            with contextlib.suppress(UnavailableError):  # only a dead worker thread refuses it (closed below)
                await self._worker.submit("call", self._close_db, ()).future
        finally:
            self._worker.stop()
            self._close_db()  # nothing left to do, unless the worker thread died first

    # SessionStore ---------------------------------------------------------------------------

    async def load(self, snapshot_id: str, *, tenant: str | None = None) -> Snapshot | None:
        key = _key(tenant)
        if self._con is not None and not self._closed:  # one statement on this thread when the worker is idle
            try:
                done, found = self._worker.read_here(self._rows.read_one, (key, snapshot_id))
            except sqlite3.DatabaseError as exc:
                raise self._error(exc, self._rows.read) from exc
            if done and found is not None:  # else: no such row, or a base chain to read (the worker's)
                return found
        return await self._read(self._rows.read, key, snapshot_id)

    async def latest(self, session_id: str, *, tenant: str | None = None) -> Snapshot | None:
        return await self._read(self._rows.latest, _key(tenant), session_id, self.reject_branching)

    async def open_interrupts(self, query: InterruptQuery, *, tenant: str | None = None) -> list[OpenInterrupt]:
        return await self._read(self._rows.open_interrupts, _key(tenant), query)

    async def save(self, snapshot_id: str, update: Updater, *, tenant: str | None = None) -> Snapshot | None:
        return (await self.save_all([(snapshot_id, update)], tenant=tenant))[0]

    async def save_all(
        self,
        updates: Sequence[tuple[str, Updater]],
        *,
        tenant: str | None = None,
        journal: Sequence[tuple[str, JournalUpdater]] = (),
        events: Sequence[OutboxEvent] = (),
        then: Sequence[SQLiteStep] = (),
    ) -> list[Snapshot | None]:
        """As :meth:`SnapshotStore.save_all <interlock.stores.SnapshotStore.save_all>`.

        ``then``'s steps run last in the write transaction, on the worker thread, each called with
        the connection (synchronously: they must not block for long, the worker waits for them).
        """
        written, status_changed = await self._write(
            self._save_all, _key(tenant), list(updates), list(journal), list(events), list(then)
        )
        if status_changed:
            self._wake()
        return written

    async def outbox_claim(
        self, *, channel: str, holder: str, lease: float, limit: int = 100, now: datetime | None = None
    ) -> list[OutboxEvent]:
        return await self._write(outbox.claim, channel, holder, lease, limit, now)

    async def outbox_settle(self, event: OutboxEvent, *, holder: str) -> bool:
        return await self._write(outbox.settle, event, holder)

    async def outbox_events(self, *, channel: str | None = None, status: str | None = None) -> list[OutboxEvent]:
        return await self._read(outbox.events, channel, status)

    async def outbox_retry(
        self, *, channel: str, ids: Sequence[str] | None = None, now: datetime | None = None
    ) -> list[OutboxEvent]:
        return await self._write(outbox.retry, channel, None if ids is None else list(ids), now)

    async def outbox_prune(self, *, channel: str, settled_before: datetime) -> int:
        return await self._write(outbox.prune, channel, settled_before)

    async def journal_get(self, key: str, *, tenant: str | None = None) -> JournalEntry | None:
        return await self._read(rows.get, _key(tenant), key)

    async def journal_put(
        self, entry: JournalEntry, *, expect: int, tenant: str | None = None, durable: bool = True
    ) -> None:
        # durable=False: committed with synchronous=NORMAL (WAL: it survives a process crash without an fsync),
        # unless a durable write shares its transaction; on this thread when the worker is idle (no hand-off)
        args = (_key(tenant), entry, expect)
        if not durable and self._con is not None and not self._closed:
            try:
                done, _ = self._worker.run_here(rows.put, args)
            except sqlite3.DatabaseError as exc:
                raise self._error(exc, rows.put) from exc
            if done:
                self._wrote_at = time.monotonic()
                return
        await self._run("write", rows.put, args, durable=durable)

    async def journal_entries(self, *, session_id: str | None = None, tenant: str | None = None) -> list[JournalEntry]:
        return await self._read(journal.entries, _key(tenant), session_id)

    async def ready(self) -> None:
        """Open the file (creating the schema) and check that it takes writes.

        A write committed on the store's connection within the last
        :data:`~interlock.stores._sql.ready.PROVEN` seconds, with no call failing since, has
        shown that: nothing is run (:func:`~interlock.stores._sql.ready.proven`, as for the
        PostgreSQL store). An empty write would find little more: the connection keeps the file
        open, and ``BEGIN IMMEDIATE`` on a WAL file takes its lock in shared memory, without I/O.
        """
        if proven(self._wrote_at) and not self._closed and self._worker.dead is None:
            return
        # BEGIN IMMEDIATE takes the write lock: it fails now, before a turn runs, where a commit would fail later.
        # Nothing is written, so it commits without an fsync whatever the level. On this thread when the worker
        # is idle and the lock free (no hand-off, which costs more than the check); else the worker takes it.
        if self._con is not None and not self._closed:
            try:
                done, _ = self._worker.run_here(_take_write_lock, ())
            except sqlite3.DatabaseError as exc:
                raise self._error(exc, _nothing) from exc
            if done:
                return
        await self._run("write", _nothing, (), durable=False)

    async def watch(self, snapshot_id: str, *, tenant: str | None = None) -> AsyncIterator[str]:
        loop = asyncio.get_running_loop()
        wake = asyncio.Event()
        entry = (loop, wake)
        self._watchers.add(entry)
        try:
            last: str | None = None
            while True:
                wake.clear()
                status = await self._read(self._rows.status, _key(tenant), snapshot_id)
                if status is None:
                    return
                if status != last:
                    last = status
                    yield status
                if status in TERMINAL:
                    return
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.poll_interval):
                        await wake.wait()
        finally:
            self._watchers.discard(entry)

    async def list(
        self, *, tenant: str | None = None, session_id: str | None = None, finish_reason: str | None = None
    ) -> list[SnapshotInfo]:
        return await self._read(self._rows.list, _key(tenant), session_id, finish_reason)

    async def delete(self, snapshot_ids: Iterable[str], *, tenant: str | None = None) -> int:
        ids = list(dict.fromkeys(snapshot_ids))
        return await self._write(self._rows.delete, _key(tenant), ids)

    async def prune(
        self,
        *,
        session_id: str | None = None,
        keep_last: int | None = None,
        older_than: datetime | None = None,
        tenant: str | None = None,
    ) -> int:
        """Delete old snapshots of a tenant (one session, or all); returns how many were deleted.

        Deleted are the snapshots that are not ``pending``, not among the last
        ``keep_last`` snapshots of any leaf's parent chain (so the latest snapshot of every
        session stays), and, with ``older_than``, created before it. At least one of
        ``keep_last`` (≥ 1) and ``older_than`` is required. Every remaining snapshot stays
        loadable with its full history (see :meth:`delete`).
        """
        return await self._write(self._rows.prune, _key(tenant), session_id, keep_last, older_than)

    # plumbing -------------------------------------------------------------------------------

    async def _read(self, fn: Callable[..., _R], *args: Any) -> _R:
        """``fn(con, *args)`` on the worker thread, in a read transaction (one version of the file)."""
        return await self._run("read", fn, args)

    async def _write(self, fn: Callable[..., _R], *args: Any) -> _R:
        """``fn(con, *args)`` on the worker thread, in a write transaction, acknowledged once durable."""
        value = await self._run("write", fn, args)
        self._wrote_at = time.monotonic()
        return value

    async def _call(self, fn: Callable[..., _R], *args: Any) -> _R:
        """``fn(*args)`` on the worker thread, outside any transaction."""
        return await self._run("call", fn, args)

    async def _run(self, kind: JobKind, fn: Callable[..., _R], args: tuple[Any, ...], *, durable: bool = True) -> _R:
        if self._closed:
            raise UsageError(f"the SQLite store at {self.path!r} is closed")
        try:
            return await self._worker.submit(kind, fn, args, durable=durable).future
        except sqlite3.DatabaseError as exc:  # locked (retry) or permanent: read-only, no directory, damaged, ...
            raise self._error(exc, fn) from exc

    def _error(self, exc: sqlite3.DatabaseError, fn: Callable[..., Any]) -> Exception:
        """The store error ``exc`` from ``fn`` is (see :func:`sqlite_error`), reported to the hooks."""
        self._wrote_at = None  # the next ready() checks again
        error = sqlite_error(exc, self.path)
        name = getattr(fn, "__name__", "call").lstrip("_")
        hooks.store_error(error, store="sqlite", operation=_OPERATIONS.get((fn.__module__, name), name))
        return error

    def _wake(self) -> None:
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        for loop, event in list(self._watchers):
            if loop is running:
                event.set()
            elif not loop.is_closed():
                loop.call_soon_threadsafe(event.set)

    def _db(self) -> sqlite3.Connection:
        """The connection (the worker's; used under its lock), opened and set up on first use."""
        if self._con is not None:
            return self._con
        # check_same_thread=False: the worker's lock serialises its use (Worker.run_here runs on the caller's thread)
        # timeout: opening (switching to WAL, migrating) waits for other connections' locks, up to 30 s
        con = sqlite3.connect(self.path, timeout=30.0, isolation_level=None, check_same_thread=False)
        try:
            _enter_wal(con)
            con.execute("PRAGMA synchronous = FULL")
            con.execute("PRAGMA wal_autocheckpoint = 0")  # the worker checkpoints, between batches
            con.execute("BEGIN IMMEDIATE")
            try:
                self.upgraded_from = prepare(con, self.path, upgrade=self.upgrade)
                create_indexes(con)
                check_layout(con, self.path)
                con.execute("COMMIT")
            except BaseException:
                con.execute("ROLLBACK")
                raise
            self._worker.never_waits = _never_wait(con)
        except BaseException:
            con.close()
            raise
        self._con = con
        if self._wal is not None:
            self._wal.attach()  # the -shm file exists now: WAL mode, and a transaction committed
        return con

    def _close_db(self) -> None:
        con, self._con = self._con, None
        self._wrote_at = None
        self._rows.clear()
        if con is not None:
            with contextlib.suppress(sqlite3.Error):  # closing rolls back what is open; nothing to report
                con.close()
            if self._wal is not None:
                self._wal.detach()  # after the connection: see WalIndex

    # work on the worker thread ---------------------------------------------------------------

    def _save_all(
        self,
        con: sqlite3.Connection,
        tenant: str,
        updates: list[tuple[str, Updater]],
        entries: list[tuple[str, JournalUpdater]],
        events: list[OutboxEvent],
        then: list[SQLiteStep],
    ) -> tuple[list[Snapshot | None], bool]:
        written = self._rows.commit(con, tenant, updates, entries, events)
        run_steps(then, con)
        return written


_OPERATIONS = {
    (f"{__name__}._rows", "read"): "load",
    (__name__, "nothing"): "ready",
    (rows.__name__, "put"): "journal_put",
    (rows.__name__, "get"): "journal_get",
    (journal.__name__, "entries"): "journal_entries",
    (outbox.__name__, "claim"): "outbox_claim",
    (outbox.__name__, "settle"): "outbox_settle",
    (outbox.__name__, "events"): "outbox_events",
    (outbox.__name__, "prune"): "outbox_prune",
    (outbox.__name__, "retry"): "outbox_retry",
}
"""The store method a worker function serves, for telemetry (by the function's module and name)."""


def _enter_wal(con: sqlite3.Connection, timeout: float = 30.0) -> None:
    """Switch the file to WAL; while another connection opening it at once holds its lock, wait and try again.

    The switch takes the file's exclusive lock. When waiting for it could deadlock with a
    concurrent opener, SQLite returns ``SQLITE_BUSY`` at once instead of calling the busy
    handler (as its ``sqlite3_busy_handler`` documentation says it may), so the busy timeout
    does not cover it; this does (on the worker thread, which may wait).
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            con.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if not is_busy(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.005)


def _never_wait(con: sqlite3.Connection) -> bool:
    """Make ``con`` fail at once on a lock another connection holds, if its file is in WAL mode (or in memory).

    Then the worker waits for locks itself, where its transactions take them (``Worker.wait_for``),
    and the caller's thread may use the connection (``Worker.run_here``) without setting a timeout
    per call. A WAL transaction takes its locks as it begins; a file in another journal mode takes
    more as it commits, so its connection keeps the 30 s timeout, and every call goes to the worker.
    """
    (mode,) = con.execute("PRAGMA journal_mode").fetchone()
    if str(mode).lower() not in ("wal", "memory"):
        return False
    con.execute("PRAGMA busy_timeout = 0")
    return True


def _nothing(con: sqlite3.Connection) -> None:
    return None


def _take_write_lock(con: sqlite3.Connection) -> None:
    """``BEGIN IMMEDIATE`` (the write lock; refused at once when another connection holds it), then end it."""
    con.execute("BEGIN IMMEDIATE")
    try:
        con.execute("COMMIT")
    except BaseException:
        con.rollback()
        raise


def _key(tenant: str | None) -> str:
    """The tenant as the file stores it (``''`` for no tenant; :func:`check_tenant` keeps ``''`` out)."""
    return check_tenant(tenant) or ""
