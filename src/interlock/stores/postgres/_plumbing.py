"""How the PostgreSQL store runs its statements: the base class of :class:`~interlock.stores.postgres.PostgresStore`.

:class:`PgPlumbing` holds the store's plumbing: reads on a pooled connection (autocommitted,
or in one repeatable-read snapshot), writes in a pipelined transaction retried on a lost race
(:func:`_transaction`), PostgreSQL's failures as typed interlock errors (:meth:`PgPlumbing._guard`),
and the schema check (or creation, or migration) on open. The store sets the attributes it
declares and provides :attr:`PgPlumbing.where` and :meth:`PgPlumbing.setup`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import time
from abc import abstractmethod
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any, LiteralString, TypeVar

import psycopg
from psycopg import AsyncConnection, errors
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from ...errors import (
    FailedPreconditionError,
    InterlockError,
    InvalidArgumentError,
    PermissionDeniedError,
    UnavailableError,
    UsageError,
)
from .._sql.ready import proven
from .._sql.row_codec import to_us
from .._sql.versions import SCHEMA_TABLE, plan_upgrade
from . import _index as index
from . import _journal as journal_rows
from ._errors import pg_error, redacted
from ._known import Guess, Stale
from ._link import Links
from ._rows import PgRows
from ._schema import (
    CHANNEL,
    CREATE_VERSIONS,
    CURRENT,
    INDEX_VERSION,
    LOCK_SCHEMA,
    MIGRATIONS,
    PRIMARY_KEY,
    SELECT_VERSION,
    STAMP,
    TABLE,
)
from ._wire import Answer, Wire
from ._wire import Wire as Conn

_R = TypeVar("_R")
_RETRIES = 20
_RETRYABLE = (errors.SerializationFailure, errors.DeadlockDetected)
_RACED = (PRIMARY_KEY, journal_rows.PRIMARY_KEY)
"""The primary keys whose violation means another transaction created the row first: the save runs again."""
_NOTIFY = """SELECT pg_notify(%s, p) FROM unnest(%s::text[]) AS p
    WHERE set_config('synchronous_commit', 'off', true) IS NOT NULL"""
"""A committed save's status changes, notified in a transaction of their own that does not wait for a flush."""
_log = logging.getLogger("interlock.stores.postgres")


class PgPlumbing:
    """Reads, writes and the schema check of a :class:`~interlock.stores.postgres.PostgresStore` (its base)."""

    dsn: str
    upgrade: bool
    connect_timeout: float
    pool_timeout: float
    upgraded_from: int | None
    _pool: AsyncConnectionPool[AsyncConnection[tuple[Any, ...]]]
    _links: Links
    _closed: bool
    _opened: bool
    _wrote_at: float | None = None
    """When (``time.monotonic()``) a write of this store last committed, if nothing failed since (see :meth:`ready`)."""

    @property
    @abstractmethod
    def where(self) -> str:
        """The store, for messages (the store's)."""

    @abstractmethod
    async def setup(self) -> None:
        """Connect and open the pool (the store's)."""

    async def ready(self) -> None:
        """Connect (creating or checking the schema) and check that the server takes writes.

        A write this store committed within the last
        :data:`~interlock.stores._sql.ready.PROVEN` seconds, with no failure since, answers
        without asking the server (:func:`~interlock.stores._sql.ready.proven`): a busy store
        saves a round trip per turn.
        """
        if not self._opened or self._closed:
            await self.setup()
        if proven(self._wrote_at):
            return

        async def check(con: Conn) -> None:
            found = await (await con.execute("SELECT pg_is_in_recovery()")).fetchone()
            if found is not None and found[0]:
                raise PermissionDeniedError(f"{self.where} is a read-only standby; point the store at the primary")

        await self._read(check)

    async def pending_before(self, before: datetime, *, key: str, limit: int = 100) -> list[tuple[str | None, str]]:
        """Pending rows whose heartbeat is older than ``before``, across tenants: ``(tenant, snapshot_id)``.

        Only rows whose metadata mentions ``key`` (a superset: check the rows' metadata), oldest heartbeat first.
        """
        sql = (
            f"SELECT tenant, snapshot_id FROM {TABLE} WHERE status = 'pending' AND created_us + heartbeat_us < %s "
            "AND metadata LIKE %s ORDER BY created_us + heartbeat_us LIMIT %s"
        )
        pattern = "%" + json.dumps(key).replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"

        async def find(con: Conn) -> list[tuple[str | None, str]]:
            rows = await (await con.execute(sql, (to_us(before), pattern, limit))).fetchall()
            return [(str(t) or None, str(sid)) for t, sid in rows]

        return await self._read(find)

    async def _read(self, fn: Callable[[Conn], Awaitable[_R]], *, consistent: bool = False) -> _R:
        """Run ``fn`` on a pooled connection, autocommitted, or (``consistent``) in one snapshot.

        The snapshot is a repeatable-read, read-only transaction: every query sees the same database.
        """
        if not self._opened:  # setup() is idempotent: not awaited once the store is open (every call asks)
            await self.setup()

        async def run() -> _R:
            link = await self._links.take()
            try:
                if not consistent:
                    return await fn(Wire(link.con, link))
                return await _transaction(Wire(link.con, link), "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY", fn)
            finally:
                await self._links.give(
                    link
                )  # one left in a transaction goes to the pool (rolled back), a broken one too

        return await self._guard(run)

    async def _write(
        self,
        fn: Callable[[Conn], Awaitable[_R]],
        *,
        transaction: bool = True,
        notify: list[str] | None = None,
        guess: Guess | None = None,
    ) -> _R:
        """Run ``fn`` in a read-committed transaction (or autocommitted: one statement), retried on a lost race.

        The transaction is pipelined (see :func:`_transaction`); the payloads ``fn`` adds to
        ``notify`` (emptied before each attempt) are notified once it has committed. A lost race
        is a deadlock, a serialization failure, or a row created by another transaction (a
        violation of a primary key in :data:`_RACED`). A save that guessed its rows (``guess``,
        see :mod:`._known`) and guessed wrong runs again at once, reading them.
        """
        if not self._opened:  # setup() is idempotent: not awaited once the store is open (every call asks)
            await self.setup()

        async def run() -> _R:
            for attempt in range(_RETRIES):
                if notify is not None:
                    notify.clear()
                try:
                    link = await self._links.take()
                    try:
                        if not transaction:
                            done = await fn(Wire(link.con, link))
                        else:
                            done = await _transaction(Wire(link.con, link), "BEGIN", fn, notify)
                    finally:
                        await self._links.give(link)
                    self._wrote_at = time.monotonic()
                    return done
                except (Stale, errors.DivisionByZero):  # only a guessed save's guard divides
                    if guess is None or not guess.on:
                        raise
                    guess.on = False
                    continue
                except (*_RETRYABLE, errors.UniqueViolation) as exc:
                    lost = not isinstance(exc, errors.UniqueViolation) or exc.diag.constraint_name in _RACED
                    if not lost or attempt == _RETRIES - 1:
                        raise
                    await asyncio.sleep(0.001 * (attempt + 1))
            raise AssertionError("unreachable")

        return await self._guard(run)

    async def _guard(self, fn: Callable[[], Awaitable[_R]]) -> _R:
        """Run ``fn``, with PostgreSQL's failures as typed interlock errors."""
        if self._closed:
            raise UsageError(f"{self.where} is closed")
        try:
            return await fn()
        except InterlockError:
            raise
        except PoolTimeout as exc:
            self._wrote_at = None  # a failure: the next ready() asks the server
            raise UnavailableError(
                f"{self.where} found no connection to the database within {self.pool_timeout:g} s (the server is down, "
                f"unreachable or has no free connection: {exc}); retrying may help"
            ) from exc
        except psycopg.Error as exc:
            self._wrote_at = None
            raise pg_error(exc, self.where) from exc
        except UnicodeEncodeError as exc:
            raise InvalidArgumentError(f"{self.where} cannot store a value that is not UTF-8 text ({exc})") from exc

    async def _prepare_schema(self) -> None:
        """Check the schema version; create or migrate the tables under an advisory lock if needed."""
        con = await AsyncConnection.connect(
            self.dsn, autocommit=True, connect_timeout=connect_seconds(self.connect_timeout)
        )
        async with con:
            if await _stored_version(con) == CURRENT:  # the usual case: no lock, no DDL (a read-only role may open)
                return
            async with con.transaction():
                await con.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_SCHEMA,))
                await con.execute(CREATE_VERSIONS)
                found = await _stored_version(con)
                if found is None:
                    has = await (await con.execute("SELECT to_regclass(%s) IS NOT NULL", (TABLE,))).fetchone()
                    if has is not None and has[0]:
                        raise FailedPreconditionError(
                            f"{self.where} has a table {TABLE!r} without a schema version: not interlock's; "
                            "use another database or schema"
                        )
                    todo = range(1, CURRENT + 1)  # an empty database: create the current layout
                else:
                    url = redacted(self.dsn)
                    todo = plan_upgrade(found, CURRENT, where=self.where, url=url, upgrade=self.upgrade)
                rows = PgRows(64)
                for target in todo:
                    for statement in MIGRATIONS[target]:
                        await con.execute(statement)
                    if target == INDEX_VERSION:
                        await _backfill(Wire(con), rows)
                if todo:
                    await con.execute(STAMP, (CURRENT,))
                    self.upgraded_from = found


def connect_seconds(timeout: float) -> int:
    """The ``connect_timeout`` to give libpq for ``timeout`` seconds (whole seconds; libpq waits at least 2)."""
    return max(2, math.ceil(timeout))


async def _transaction(
    con: Conn, begin: LiteralString, fn: Callable[[Conn], Awaitable[_R]], notify: list[str] | None = None
) -> _R:
    """Run ``fn`` in one transaction opened by ``begin``, in one batch of statements; rolled back if anything fails.

    The batch is :meth:`~._wire.Wire.batch` (libpq's pipeline mode).
    A statement whose answer ``fn`` does not read is sent without waiting for it: ``BEGIN`` goes
    out with the first read, and the writes after the last read go out with ``COMMIT``, which
    is one round trip for them all. A read-committed transaction (``begin`` is ``BEGIN``) whose
    statements all go out at the end (a guessed save, :mod:`._known`) sends neither: the batch
    is the implicit transaction PostgreSQL runs up to the pipeline's synchronisation point,
    committed there (:meth:`~._wire.Wire.commit`): two statements fewer per save. A statement
    that fails makes the server skip the rest up to the transaction's end; its error is raised
    when that part of the batch is sent (at the latest at the end), and the transaction is
    rolled back.

    The ``notify`` payloads go out after the commit in the same round trip (:data:`_NOTIFY`), in
    a transaction of their own that does not wait for the WAL flush: PostgreSQL holds one
    database-wide lock from a notifying transaction's commit until its flush, so notifying
    inside the transaction would serialise every save's commit and flush. After ``COMMIT`` the
    server skips them if the transaction failed; after a synchronisation point it sends them
    anyway (a watcher woken by a save that failed reads an unchanged status and waits on). If
    they fail after it committed (a full notification queue), the save still succeeded: the
    error is logged, and watchers wake at their next notification.
    """
    done: list[_R] = []
    committed: Answer | None = None
    try:
        deferred = begin == "BEGIN"  # read committed: the implicit transaction of a batch that goes out whole is one
        con.start_batch(b"BEGIN" if deferred else None)  # con.batch() without its context manager's machinery
        try:
            if not deferred:
                await con.execute(begin, prepare=False)
            done.append(await fn(con))
            committed = await con.commit()
            if notify:
                await con.execute(_NOTIFY, (CHANNEL, notify))
        except BaseException:
            con.drop_batch()
            raise
        await con.end_batch()
    except psycopg.Error as exc:
        if committed is None or committed.pgresult is None:  # the transaction did not commit
            await _rollback(con)
            raise
        _log.warning("a committed save could not notify its watchers: %s", exc)
    except BaseException:
        await _rollback(con)
        raise
    return done[0]


async def _backfill(con: Conn, rows: PgRows) -> None:
    await index.backfill(con, lambda tenant, sid: rows.read(con, tenant, sid))


async def _rollback(con: Conn) -> None:
    con.discard()
    if not con.idle:
        with contextlib.suppress(psycopg.Error):
            await con.execute("ROLLBACK", prepare=False)


async def _stored_version(con: AsyncConnection[tuple[Any, ...]]) -> int | None:
    """The stored schema version, or ``None`` if there is no version table or row."""
    has = await (await con.execute("SELECT to_regclass(%s) IS NOT NULL", (SCHEMA_TABLE,))).fetchone()
    if has is None or not has[0]:
        return None
    found = await (await con.execute(SELECT_VERSION)).fetchone()
    return None if found is None else int(found[0])
