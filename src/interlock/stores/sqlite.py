"""The embedded default store: one SQLite file, shared safely by threads and processes.

This module is the public class and its plumbing (the worker thread, the connection,
transactions). The rest lives in private modules:

* :mod:`._sqlite_schema`: the file's layout (delta rows, interned sessions, compact ids
  and timestamps) and its SQL;
* :mod:`._sqlite_codec`: column values ↔ Python values, rows ↔ snapshots;
* :mod:`._sqlite_chain`: message histories from base chains, and their cache;
* :mod:`._sqlite_rows`: reads, writes (as deltas), deletes and prunes;
* :mod:`._sqlite_index`: each session's leaves and the index of open interrupts, written
  with the rows.

Threads
-------
Each store owns one connection, used only by one dedicated worker thread; the async
methods hand work to it (:mod:`._sqlite_worker`: a lighter hop than ``run_in_executor``),
so no blocking call runs on the event loop. The worker keeps an LRU cache of message lists keyed by each
row's content revision, so it is never stale, even when another process writes the file.

Concurrency
-----------
WAL journal, ``synchronous=FULL`` and a 30 s busy timeout; every write transaction starts
with ``BEGIN IMMEDIATE`` (creating the schema too, so concurrent processes opening a new
file are safe), and :meth:`SQLiteStore.save` runs read → updater → write inside that one
transaction, so it is atomic across processes. The updater therefore runs on the worker
thread: like every updater, it must be a pure function.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Generator, Iterable, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from types import TracebackType
from typing import Any, TypeVar

from ..errors import InvalidArgumentError, UsageError
from ..interrupt_index import InterruptQuery, OpenInterrupt
from ..journal import JournalEntry
from ..outbox import OutboxEvent
from ..sessions import TERMINAL, Snapshot
from ..telemetry import hooks
from . import JournalUpdater, SnapshotInfo, Updater, check_tenant
from . import _sqlite_journal as journal
from . import _sqlite_outbox as outbox
from ._sqlite_errors import check_layout, sqlite_error
from ._sqlite_migrate import CURRENT, prepare
from ._sqlite_rows import SnapshotRows
from ._sqlite_schema import create_indexes, path_of
from ._sqlite_worker import Worker

__all__ = ["SQLiteStore"]

_R = TypeVar("_R")


class SQLiteStore:
    """The embedded default :class:`~interlock.stores.SessionStore`: one SQLite file.

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
        cache_size: how many snapshots' message lists the LRU cache keeps.
        upgrade: migrate a file of an older schema version on open (what ``interlock db
            upgrade`` does); without it such a file is refused with ``FAILED_PRECONDITION``.
    """

    SCHEMA_VERSION = CURRENT
    """The schema version this code writes (see :mod:`interlock.stores._sqlite_migrate`)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        reject_branching: bool = False,
        poll_interval: float = 0.05,
        cache_size: int = 256,
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
        self._rows = SnapshotRows(cache_size)
        self._con: sqlite3.Connection | None = None
        self._worker = Worker("interlock-sqlite")
        self._closed = False
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
            await self._worker.call(self._close_db)
        finally:
            self._worker.stop()

    # SessionStore ---------------------------------------------------------------------------

    async def load(self, snapshot_id: str, *, tenant: str | None = None) -> Snapshot | None:
        return await self._call(self._load, _key(tenant), snapshot_id)

    async def latest(self, session_id: str, *, tenant: str | None = None) -> Snapshot | None:
        return await self._call(self._latest, _key(tenant), session_id)

    async def open_interrupts(self, query: InterruptQuery, *, tenant: str | None = None) -> list[OpenInterrupt]:
        return await self._call(self._open_interrupts, _key(tenant), query)

    async def save(self, snapshot_id: str, update: Updater, *, tenant: str | None = None) -> Snapshot | None:
        return (await self.save_all([(snapshot_id, update)], tenant=tenant))[0]

    async def save_all(
        self,
        updates: Sequence[tuple[str, Updater]],
        *,
        tenant: str | None = None,
        journal: Sequence[tuple[str, JournalUpdater]] = (),
        events: Sequence[OutboxEvent] = (),
    ) -> list[Snapshot | None]:
        written, status_changed = await self._call(
            self._save_all, _key(tenant), list(updates), list(journal), list(events)
        )
        if status_changed:
            self._wake()
        return written

    async def outbox_claim(
        self, *, channel: str, holder: str, lease: float, limit: int = 100, now: datetime | None = None
    ) -> list[OutboxEvent]:
        return await self._call(self._write_txn, outbox.claim, channel, holder, lease, limit, now)

    async def outbox_settle(self, event: OutboxEvent, *, holder: str) -> bool:
        return await self._call(self._write_txn, outbox.settle, event, holder)

    async def outbox_events(self, *, channel: str | None = None, status: str | None = None) -> list[OutboxEvent]:
        return await self._call(self._outbox_events, channel, status)

    async def journal_get(self, key: str, *, tenant: str | None = None) -> JournalEntry | None:
        return await self._call(self._journal_get, _key(tenant), key)

    async def journal_put(
        self, entry: JournalEntry, *, expect: int, tenant: str | None = None, durable: bool = True
    ) -> None:
        await self._call(self._journal_put, _key(tenant), entry, expect, durable)

    async def journal_entries(self, *, session_id: str | None = None, tenant: str | None = None) -> list[JournalEntry]:
        return await self._call(self._journal_entries, _key(tenant), session_id)

    async def ready(self) -> None:
        """Open the file (creating the schema) and check that it takes writes."""
        await self._call(self._check_writable)

    async def watch(self, snapshot_id: str, *, tenant: str | None = None) -> AsyncIterator[str]:
        loop = asyncio.get_running_loop()
        wake = asyncio.Event()
        entry = (loop, wake)
        self._watchers.add(entry)
        try:
            last: str | None = None
            while True:
                wake.clear()
                status = await self._call(self._status, _key(tenant), snapshot_id)
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
        return await self._call(self._list, _key(tenant), session_id, finish_reason)

    async def delete(self, snapshot_ids: Iterable[str], *, tenant: str | None = None) -> int:
        ids = list(dict.fromkeys(snapshot_ids))
        return await self._call(self._delete, _key(tenant), ids)

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
        return await self._call(self._prune, _key(tenant), session_id, keep_last, older_than)

    # plumbing -------------------------------------------------------------------------------

    async def _call(self, fn: Callable[..., _R], *args: Any) -> _R:
        """Run ``fn(*args)`` on the worker thread."""
        if self._closed:
            raise UsageError(f"the SQLite store at {self.path!r} is closed")
        try:
            return await self._worker.call(fn, *args)
        except sqlite3.DatabaseError as exc:  # locked (retry) or permanent: read-only, no directory, damaged, ...
            error = sqlite_error(exc, self.path)
            hooks.store_error(error, store="sqlite", operation=getattr(fn, "__name__", "call").lstrip("_"))
            raise error from exc

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
        """The connection (worker thread only), opened and set up on first use."""
        if self._con is not None:
            return self._con
        con = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
        try:
            con.execute("PRAGMA busy_timeout = 30000")
            con.execute("PRAGMA journal_mode = WAL")
            con.execute("PRAGMA synchronous = FULL")
            con.execute("BEGIN IMMEDIATE")
            try:
                self.upgraded_from = prepare(con, self.path, upgrade=self.upgrade)
                create_indexes(con)
                check_layout(con, self.path)
                con.execute("COMMIT")
            except BaseException:
                con.execute("ROLLBACK")
                raise
        except BaseException:
            con.close()
            raise
        self._con = con
        return con

    def _close_db(self) -> None:
        if self._con is not None:
            self._con.close()
            self._con = None
        self._rows.cache.clear()

    @contextlib.contextmanager
    def _read_txn(self) -> Generator[sqlite3.Connection, None, None]:
        """A read transaction: every query inside sees one consistent version of the file."""
        con = self._db()
        con.execute("BEGIN")
        try:
            yield con
        finally:
            if con.in_transaction:
                con.execute("COMMIT")

    def _write_txn(self, fn: Callable[..., _R], *args: Any) -> _R:
        con = self._db()
        con.execute("BEGIN IMMEDIATE")
        try:
            result = fn(con, *args)
            con.execute("COMMIT")
        except BaseException:
            if con.in_transaction:
                con.execute("ROLLBACK")
            raise
        return result

    # work on the worker thread ---------------------------------------------------------------

    def _load(self, tenant: str, snapshot_id: str) -> Snapshot | None:
        with self._read_txn() as con:
            return self._rows.read(con, tenant, snapshot_id)

    def _latest(self, tenant: str, session_id: str) -> Snapshot | None:
        with self._read_txn() as con:
            return self._rows.latest(con, tenant, session_id, self.reject_branching)

    def _open_interrupts(self, tenant: str, query: InterruptQuery) -> list[OpenInterrupt]:
        with self._read_txn() as con:
            return self._rows.open_interrupts(con, tenant, query)

    def _status(self, tenant: str, snapshot_id: str) -> str | None:
        return self._rows.status(self._db(), tenant, snapshot_id)

    def _list(self, tenant: str, session_id: str | None, finish_reason: str | None) -> list[SnapshotInfo]:
        with self._read_txn() as con:
            return self._rows.list(con, tenant, session_id, finish_reason)

    def _save_all(
        self,
        tenant: str,
        updates: list[tuple[str, Updater]],
        entries: list[tuple[str, JournalUpdater]],
        events: list[OutboxEvent],
    ) -> tuple[list[Snapshot | None], bool]:
        def save_each(con: sqlite3.Connection) -> tuple[list[Snapshot | None], bool]:
            results = [self._rows.save(con, tenant, sid, update) for sid, update in updates]
            for key, update in entries:
                journal.update(con, tenant, key, update)
            outbox.insert(con, events)
            return [written for written, _ in results], any(changed for _, changed in results)

        return self._write_txn(save_each)

    def _check_writable(self) -> None:
        # BEGIN IMMEDIATE takes the write lock: it fails now, before a turn runs, where a commit would fail later.
        self._write_txn(_nothing)

    def _journal_put(self, tenant: str, entry: JournalEntry, expect: int, durable: bool) -> None:
        if durable:
            self._write_txn(journal.put, tenant, entry, expect)
            return
        con = self._db()
        con.execute("PRAGMA synchronous = NORMAL")  # WAL: the commit survives a process crash without an fsync
        try:
            self._write_txn(journal.put, tenant, entry, expect)
        finally:
            con.execute("PRAGMA synchronous = FULL")

    def _outbox_events(self, channel: str | None, status: str | None) -> list[OutboxEvent]:
        with self._read_txn() as con:
            return outbox.events(con, channel, status)

    def _journal_get(self, tenant: str, key: str) -> JournalEntry | None:
        with self._read_txn() as con:
            return journal.get(con, tenant, key)

    def _journal_entries(self, tenant: str, session_id: str | None) -> list[JournalEntry]:
        with self._read_txn() as con:
            return journal.entries(con, tenant, session_id)

    def _delete(self, tenant: str, ids: list[str]) -> int:
        return self._write_txn(self._rows.delete, tenant, ids)

    def _prune(self, tenant: str, session_id: str | None, keep_last: int | None, older_than: datetime | None) -> int:
        return self._write_txn(self._rows.prune, tenant, session_id, keep_last, older_than)


def _nothing(con: sqlite3.Connection) -> None:
    return None


def _key(tenant: str | None) -> str:
    """The tenant as the file stores it (``''`` for no tenant; :func:`check_tenant` keeps ``''`` out)."""
    return check_tenant(tenant) or ""
