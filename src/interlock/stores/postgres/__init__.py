"""The PostgreSQL store: many processes on many hosts sharing one database (``interlock[postgres]``).

:class:`PostgresStore` keeps the SQLite store's layout and rules (delta rows, so storage
stays linear in the conversation; the effect journal; tenants) in PostgreSQL, through
psycopg 3's connection pool and its libpq layer: every statement is prepared on a connection
the first time it runs there, and a transaction's statements go out together, in libpq's
pipeline mode, with one wait for their answers (:mod:`~._wire`):

* **Atomic, fenced saves across processes.** :meth:`PostgresStore.save_all` runs in one
  transaction that reads its rows and journal entries ``FOR UPDATE`` (row locks held to the
  commit), runs the updaters (the claim rules of :mod:`interlock._engine.commit` live in updaters)
  and writes. A row that did not exist is inserted without ``ON CONFLICT``: if another
  transaction created it meanwhile, the insert fails on the primary key and the whole save
  runs again, so its updater sees that row. A deadlock or serialization failure is retried
  the same way (updaters are pure). Nothing is serialised inside the process: concurrent
  saves run on different connections, and PostgreSQL's WAL group commit batches their commits.
* **One round trip per save, usually.** The transaction is pipelined (:func:`~._plumbing._transaction`). A
  save of rows this store last read or wrote (and of new ids) runs its updaters on what it
  remembers and sends a guard that locks the rows and fails the transaction unless each is the
  row version remembered (:mod:`~._known`): the guard and every write, as the pipeline's implicit
  transaction (committed at its sync: no ``BEGIN`` or ``COMMIT``), then the notification, in one
  round trip. Otherwise (or after a stale guess) ``BEGIN`` and the
  locking reads go out together, then every write and ``COMMIT`` together: two.
* **Reads** are single autocommitted statements when a row's history is a checkpoint or in
  the cache; a read that must follow a base chain (or a session's rows) runs in one
  repeatable-read transaction.
* **Leaves and open interrupts.** Each session's leaves and the index of open interrupts
  (:mod:`interlock.stores.postgres._index`) are written in the transaction of the snapshot write,
  under the row locks above: ``latest`` reads a session's leaves' rows in one statement, and
  the inbox lists from the index.
* **Watch by LISTEN/NOTIFY.** A save that changes a row's status notifies channel
  ``interlock_snapshots`` once it has committed (in the same round trip, see
  :func:`~._plumbing._transaction`); one listening
  connection per store wakes the watchers of that row, which then read its status. No
  polling: after a lost connection the listener reconnects and wakes every watcher once.
* **Schema versions.** An empty database gets the current tables on open; an older one is
  refused with ``FAILED_PRECONDITION`` naming ``interlock db upgrade --store URL``, which
  opens the store with ``upgrade=True`` (see :mod:`interlock.stores._sql.versions`).

Errors are typed: an unreachable server is ``UNAVAILABLE`` (after ``pool_timeout``, 5 s by
default, when no pooled connection can be had: calls never wait for the database without bound), a refused login
``UNAUTHENTICATED``, a missing database or foreign tables ``FAILED_PRECONDITION``, a read-only
server ``PERMISSION_DENIED``, a value PostgreSQL cannot store (a NUL character in an id)
``INVALID_ARGUMENT``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from inspect import isawaitable
from types import TracebackType
from typing import Any

try:
    import psycopg
    from psycopg import conninfo
    from psycopg_pool import AsyncConnectionPool
except ImportError as exc:  # pragma: no cover - exercised by the test that hides psycopg
    raise ModuleNotFoundError(
        f"interlock.stores.postgres needs psycopg 3 and psycopg_pool ({exc}): pip install 'interlock[postgres]'",
        name=exc.name,
    ) from exc

from ..._json_object import json_encoder
from ...errors import DataLossError, InvalidArgumentError, UsageError
from ...records._interrupt_index import InterruptQuery, OpenInterrupt
from ...records._journal import JournalEntry
from ...records._outbox import OutboxEvent
from ...records._sessions import TERMINAL, Snapshot
from .. import JournalUpdater, SnapshotInfo, Updater, check_tenant
from . import _journal as journal_rows
from . import _outbox as outbox
from ._known import Guess, Stale
from ._link import Links
from ._listen import Listener
from ._plumbing import PgPlumbing, connect_seconds
from ._rows import PgRows
from ._schema import CURRENT
from ._tx import Tx, settle
from ._wire import Wire as Conn

__all__ = ["PostgresStore", "TxStep"]

TxStep = Callable[[psycopg.AsyncConnection[Any]], Awaitable[None] | None]
"""A step of a :meth:`PostgresStore.save_all` transaction, after its writes (a worker queue's job insert).

Called with the transaction's connection; what it returns is awaited when awaitable.
"""

_json = json_encoder(ensure_ascii=True, separators=(", ", ": "))
"""``json.dumps``, straight through the C encoder."""
_MAX_PAYLOAD = 8000
"""PostgreSQL refuses a notification payload of this many bytes or more."""
_SHORT = (_MAX_PAYLOAD - 9) // 12
"""Characters of tenant and snapshot id that always fit a payload: each is at most 12 bytes of ASCII JSON (a
surrogate pair's escapes), around 8 bytes of brackets, quotes and separators."""


class PostgresStore(PgPlumbing):
    """A :class:`~interlock.stores.SessionStore` (every capability) in a PostgreSQL database (15 or later).

    Use it from one event loop (its pool and listener belong to the loop that opened it), as an
    async context manager (or call :meth:`setup` and :meth:`close`)::

        async with PostgresStore("postgresql://user@host/db") as store:
            ...

    Args:
        dsn: a libpq connection string or ``postgresql://`` URL.
        reject_branching: make :meth:`latest` raise ``FailedPreconditionError`` for a
            session with several leaves instead of returning the newest.
        upgrade: apply forward migrations on open (what ``interlock db upgrade`` does);
            without it an older schema is refused.
        min_size: the connection pool's lower bound.
        max_size: the connection pool's upper bound.
        connect_timeout: seconds to wait for the server to accept a new connection (libpq's
            ``connect_timeout``, whole seconds, at least 2).
        pool_timeout: seconds a call waits for a pooled connection (a new one included) before it
            fails with ``UNAVAILABLE``: during an outage calls fail after this long instead of
            waiting for the database to come back.
        cache_bytes: how much the LRU cache of message lists may hold, in bytes of their
            stored JSON (a history's objects take a few times that in memory).
    """

    SCHEMA_VERSION = CURRENT
    """The schema version this code writes (see :mod:`interlock.stores.postgres._schema`)."""

    def __init__(
        self,
        dsn: str,
        *,
        reject_branching: bool = False,
        upgrade: bool = False,
        min_size: int = 1,
        max_size: int = 10,
        connect_timeout: float = 10.0,
        pool_timeout: float = 5.0,
        cache_bytes: int = 64 << 20,
    ) -> None:
        if not isinstance(dsn, str) or not dsn.strip():  # pyright: ignore[reportUnnecessaryIsInstance]
            raise InvalidArgumentError("the PostgreSQL store needs a connection string, e.g. postgresql://user@host/db")
        self.dsn = dsn
        self.reject_branching = reject_branching
        self.upgrade = upgrade
        self.connect_timeout = connect_timeout
        self.pool_timeout = pool_timeout
        self.upgraded_from: int | None = None
        """The schema version found on open when migrations ran (``None``: none were needed)."""
        self._rows = PgRows(cache_bytes)
        self._pool = AsyncConnectionPool(
            dsn,
            min_size=min_size,
            max_size=max_size,
            kwargs={"autocommit": True, "connect_timeout": connect_seconds(connect_timeout)},
            open=False,
            timeout=pool_timeout,
        )
        self._links = Links(self._pool)
        self._listener = Listener(dsn, connect_timeout, self._guard)
        self._opened = False
        self._closed = False
        self._opening: asyncio.Lock | None = None

    @classmethod
    @asynccontextmanager
    async def from_url(
        cls, url: str, *, reject_branching: bool = False, upgrade: bool = False
    ) -> AsyncGenerator[PostgresStore, None]:
        """Open a store from a ``postgresql://`` (or ``postgres://``) URL; closed on exit."""
        store = cls(url, reject_branching=reject_branching, upgrade=upgrade)
        try:
            await store.setup()
            yield store
        finally:
            await store.close()

    async def __aenter__(self) -> PostgresStore:
        await self.setup()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    @property
    def where(self) -> str:
        """The store, for messages (the DSN without its password)."""
        try:
            info = conninfo.conninfo_to_dict(self.dsn)
        except psycopg.ProgrammingError:
            return "the PostgreSQL store"
        return f"the PostgreSQL store {info.get('dbname', '')!s}@{info.get('host', '')!s}:{info.get('port', '')!s}"

    async def setup(self) -> None:
        """Connect, check (or create, or with ``upgrade`` migrate) the schema and open the pool (idempotent)."""
        if self._closed:
            raise UsageError(f"{self.where} is closed")
        if self._opened:
            return
        if self._opening is None:
            self._opening = asyncio.Lock()
        async with self._opening:
            if self._opened:
                return
            await self._guard(self._prepare_schema)
            await self._pool.open(wait=False)
            self._opened = True

    async def close(self) -> None:
        """Stop the listener and close the pool (idempotent)."""
        if self._closed:
            return
        self._closed = True
        await self._listener.stop()
        await self._links.close()
        await self._pool.close()

    # SessionStore ---------------------------------------------------------------------------

    async def load(self, snapshot_id: str, *, tenant: str | None = None) -> Snapshot | None:
        t = _key(tenant)
        try:  # one statement, outside a transaction, when the history is a checkpoint or cached
            return await self._read(lambda con: self._rows.read(con, t, snapshot_id))
        except DataLossError:  # or a base chain that changed between two statements: read it again, consistently
            return await self._read(lambda con: self._rows.read(con, t, snapshot_id), consistent=True)

    async def latest(self, session_id: str, *, tenant: str | None = None) -> Snapshot | None:
        t = _key(tenant)
        try:  # one statement when the leaf's history is a checkpoint or cached (as load)
            return await self._read(lambda con: self._rows.latest(con, t, session_id, self.reject_branching))
        except DataLossError:  # or a base chain that changed between two statements: read it again, consistently
            return await self._read(
                lambda con: self._rows.latest(con, t, session_id, self.reject_branching), consistent=True
            )

    async def open_interrupts(self, query: InterruptQuery, *, tenant: str | None = None) -> list[OpenInterrupt]:
        t = _key(tenant)
        return await self._read(lambda con: self._rows.open_interrupts(con, t, query))

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
        """As :meth:`SnapshotStore.save_all <interlock.stores.SnapshotStore.save_all>`; see :data:`TxStep`."""
        t = _key(tenant)
        todo = list(updates)
        entries = list(journal)
        added = list(events)

        changed: list[str] = []
        for sid, _ in todo:  # a notification PostgreSQL would refuse fails the save first
            if len(t) + len(sid) > _SHORT:
                _payload(t, sid)
        guess = Guess(on=not then)  # a step's own writes are not the store's to run again on a stale guess
        last: list[Tx] = []

        async def save_each(con: Conn) -> list[Snapshot | None]:
            tx = await self._rows.begin(con, t, [sid for sid, _ in todo], [key for key, _ in entries], guess)
            last[:] = [tx]
            try:
                written = await self._rows.updates(tx, todo, entries)
            except psycopg.Error:
                raise
            except Exception as exc:
                if not tx.guessed:
                    raise
                raise Stale from exc  # raised on a guess: asked again of the rows as they are
            changed.extend(_payload(t, sid) for sid in tx.status_changed)
            if added:
                await outbox.insert(con, added)
            if then:
                await con.flush()  # the batch so far goes out: the steps run on psycopg's own API
                con.lend()
            for step in then:
                if isawaitable(done := step(con.con)):
                    await done
            return written

        try:
            saved = await self._write(save_each, notify=changed, guess=guess)
        except BaseException:
            self._rows.known.forget(t, [sid for sid, _ in todo], [key for key, _ in entries])
            raise
        settle(last[0], self._rows.known)
        return saved

    async def outbox_claim(
        self, *, channel: str, holder: str, lease: float, limit: int = 100, now: datetime | None = None
    ) -> list[OutboxEvent]:
        return await self._write(lambda con: outbox.claim(con, channel, holder, lease, limit, now))

    async def outbox_settle(self, event: OutboxEvent, *, holder: str) -> bool:
        return await self._write(lambda con: outbox.settle(con, event, holder))

    async def outbox_events(self, *, channel: str | None = None, status: str | None = None) -> list[OutboxEvent]:
        return await self._read(lambda con: outbox.events(con, channel, status))

    async def outbox_retry(
        self, *, channel: str, ids: Sequence[str] | None = None, now: datetime | None = None
    ) -> list[OutboxEvent]:
        return await self._write(lambda con: outbox.retry(con, channel, ids, now))

    async def outbox_prune(self, *, channel: str, settled_before: datetime) -> int:
        return await self._write(lambda con: outbox.prune(con, channel, settled_before))

    async def journal_get(self, key: str, *, tenant: str | None = None) -> JournalEntry | None:
        t = _key(tenant)
        return await self._read(lambda con: journal_rows.get(con, t, key))

    async def journal_put(
        self, entry: JournalEntry, *, expect: int, tenant: str | None = None, durable: bool = True
    ) -> None:
        t = _key(tenant)
        try:
            put = await self._write(lambda con: journal_rows.put(con, t, entry, expect, durable), transaction=False)
        except BaseException:
            self._rows.known.forget(t, keys=[entry.key])
            raise
        self._rows.known.saw_entry(t, entry.key, *put)

    async def journal_entries(self, *, session_id: str | None = None, tenant: str | None = None) -> list[JournalEntry]:
        t = _key(tenant)
        return await self._read(lambda con: journal_rows.entries(con, t, session_id))

    async def watch(self, snapshot_id: str, *, tenant: str | None = None) -> AsyncIterator[str]:
        t = _key(tenant)
        await self.setup()
        wake = asyncio.Event()
        async with self._listener.waiting(t, snapshot_id, wake):
            last: str | None = None
            while True:
                wake.clear()
                status = await self._read(lambda con: self._rows.status(con, t, snapshot_id))
                if status is None:
                    return
                if status != last:
                    last = status
                    yield status
                if status in TERMINAL:
                    return
                await wake.wait()

    async def list(
        self, *, tenant: str | None = None, session_id: str | None = None, finish_reason: str | None = None
    ) -> list[SnapshotInfo]:
        t = _key(tenant)
        return await self._read(lambda con: self._rows.list(con, t, session_id, finish_reason))

    async def delete(self, snapshot_ids: Iterable[str], *, tenant: str | None = None) -> int:
        t = _key(tenant)
        ids = list(dict.fromkeys(snapshot_ids))
        return await self._write(lambda con: self._rows.delete(con, t, ids))

    async def prune(
        self,
        *,
        session_id: str | None = None,
        keep_last: int | None = None,
        older_than: datetime | None = None,
        tenant: str | None = None,
    ) -> int:
        """Delete old snapshots (the rule is :func:`interlock.stores._prune.prunable`'s); returns how many."""
        t = _key(tenant)
        return await self._write(lambda con: self._rows.prune(con, t, session_id, keep_last, older_than))


def _payload(tenant: str, snapshot_id: str) -> str:
    """The notification of a row's status change, refused if PostgreSQL could not carry it."""
    payload = _json([tenant, snapshot_id])
    if len(payload.encode()) >= _MAX_PAYLOAD:
        raise InvalidArgumentError(
            f"{len(payload.encode())} bytes of tenant and snapshot id cannot be notified (limit {_MAX_PAYLOAD - 1})"
        )
    return payload


def _key(tenant: str | None) -> str:
    """The tenant as stored (``''`` for no tenant; :func:`check_tenant` keeps ``''`` out)."""
    return check_tenant(tenant) or ""


def _register() -> None:
    from .._urls import register_store_scheme

    def opener(url: str, *, upgrade: bool = False) -> contextlib.AbstractAsyncContextManager[PostgresStore]:
        return PostgresStore.from_url(url, upgrade=upgrade)

    for scheme in ("postgresql", "postgres"):
        register_store_scheme(scheme, opener)


_register()
