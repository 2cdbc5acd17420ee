"""Detached turns run by a worker fleet: a job queue on the store's PostgreSQL (``interlock[workers]``).

An agent given ``host=Host(detach_to=WorkerQueue(dsn))`` (or served by ``interlock serve
--detach-to-workers``) does not run a detached turn in its own process: the turn's pending
snapshot is written with everything the turn needs (its input, its parent, the caller's
context; :mod:`interlock._engine.handoff`) and, in the same transaction on the store's connection,
a job naming that snapshot is enqueued on `procrastinate <https://procrastinate.readthedocs.io>`_,
whose tables live in the same database (``interlock db upgrade`` installs them). ``interlock
worker`` processes pick the job up through LISTEN/NOTIFY and run the turn
(:mod:`interlock.workers._run`). The job carries only the snapshot's id and tenant: a worker
never receives state the store does not have.

Aborting the turn (``abort``) flips its snapshot and asks procrastinate to abort the job,
which cancels it on whatever worker runs it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

try:
    import psycopg
    from procrastinate import App, PsycopgConnector
    from procrastinate.exceptions import ConnectorException
    from procrastinate.manager import get_channel_for_queues
    from procrastinate.schema import SchemaManager
    from psycopg import AsyncConnection
    from psycopg.rows import TupleRow
    from psycopg_pool import AsyncConnectionPool
except ImportError as exc:  # pragma: no cover - exercised by a process without the extra
    raise ModuleNotFoundError(
        f"interlock.workers needs procrastinate ({exc}): pip install 'interlock[workers]'", name=exc.name
    ) from exc

from ..errors import FailedPreconditionError, InvalidArgumentError
from ..records._sessions import Snapshot
from ..records.snapshots import put_row
from ..stores import SnapshotStore, Updater
from ..stores.postgres import PostgresStore
from ..stores.postgres._errors import redacted
from ..stores.postgres._schema import LOCK_SCHEMA

__all__ = ["QUEUE", "TASK", "WorkerQueue", "install_schema", "job_lock"]

TASK = "interlock.run_detached"
"""The procrastinate task a detached turn's job names; its arguments are ``snapshot_id`` and ``tenant``."""
QUEUE = "interlock"
"""The procrastinate queue interlock's jobs go to (``interlock worker --queue`` reads another)."""


def job_lock(snapshot_id: str, tenant: str | None) -> str:
    """The procrastinate lock of a turn's job: at most one job of a snapshot runs at a time, and abort finds it."""
    return json.dumps(["interlock", tenant or "", snapshot_id])


class WorkerQueue:
    """Where an agent sends its detached turns: a procrastinate queue in a PostgreSQL database.

    Opened on first use, in the event loop that uses it; :meth:`aclose` closes its pool.

    A hand-off's job is inserted through the agent's store (its connection, its transaction:
    :meth:`write`); this queue's own pool lists, aborts and announces jobs, and runs workers.

    Args:
        dsn: the database (the agent's ``PostgresStore`` DSN: the queue lives beside the snapshots).
        queue: the procrastinate queue name.
        connect_timeout: seconds to wait for a pooled connection before the enqueue is UNAVAILABLE.
    """

    def __init__(self, dsn: str, *, queue: str = QUEUE, connect_timeout: float = 30.0) -> None:
        if not isinstance(dsn, str) or not dsn.strip():  # pyright: ignore[reportUnnecessaryIsInstance]
            raise InvalidArgumentError("a worker queue needs a PostgreSQL connection string")
        self.dsn = dsn
        self.queue = queue
        self.connect_timeout = connect_timeout
        self.app = App(connector=PsycopgConnector())
        self._pool: AsyncConnectionPool | None = None
        self._opening = asyncio.Lock()

    def __repr__(self) -> str:
        return f"WorkerQueue(queue={self.queue!r})"

    async def open(self) -> App:
        """The opened procrastinate app, on a pool of our own (idempotent).

        Raises:
            psycopg.OperationalError: no connection within ``connect_timeout`` (``PoolTimeout``).
        """
        async with self._opening:
            if self._pool is None:
                pool: AsyncConnectionPool[AsyncConnection[TupleRow]] = AsyncConnectionPool(
                    self.dsn,
                    min_size=1,
                    max_size=4,
                    open=False,
                    timeout=self.connect_timeout,
                    check=AsyncConnectionPool.check_connection,  # only live connections, as procrastinate's own
                )
                try:
                    await pool.open(wait=True, timeout=self.connect_timeout)
                except BaseException:
                    await pool.close()
                    raise
                await self.app.open_async(pool=pool)
                self._pool = pool
        return self.app

    async def aclose(self) -> None:
        if self._pool is not None:
            pool, self._pool = self._pool, None
            await self.app.close_async()
            await pool.close()

    async def hand_off(self, store: SnapshotStore, pending: Snapshot, tenant: str | None) -> None:
        """Write the pending row and the job that runs it in one transaction of ``store`` (both or neither).

        Raises:
            FailedPreconditionError: ``store`` is not a :class:`PostgresStore`, or the queue's tables
                are missing (``interlock db upgrade``).
            UnavailableError: the database could not be reached.
        """
        await self.write(store, [(pending.snapshot_id, put_row(pending))], pending.snapshot_id, tenant)

    async def write(
        self, store: SnapshotStore, updates: Sequence[tuple[str, Updater]], snapshot_id: str, tenant: str | None
    ) -> None:
        """Save ``updates`` and enqueue the job that runs ``snapshot_id``, in one transaction of ``store``.

        The one way a job is enqueued (a hand-off, the sweeper's re-enqueue): procrastinate's
        insert runs on the store's connection, after the rows; its trigger's NOTIFY wakes the
        workers when the transaction commits. An updater that raises writes neither.
        """
        if not isinstance(store, PostgresStore):
            raise FailedPreconditionError(
                f"a worker queue needs the agent's store to be a PostgresStore in its database, not {store!r}"
            )

        async def defer(con: AsyncConnection[tuple[Any, ...]]) -> None:
            deferrer = self.app.configure_task(
                TASK, queue=self.queue, lock=job_lock(snapshot_id, tenant), connection=con
            )
            try:
                await deferrer.defer_async(snapshot_id=snapshot_id, tenant=tenant)
            except ConnectorException as exc:
                missing = (
                    psycopg.errors.UndefinedTable,
                    psycopg.errors.UndefinedFunction,
                    psycopg.errors.UndefinedObject,
                )
                if isinstance(exc.__cause__, missing):
                    raise FailedPreconditionError(
                        f"the worker queue's tables are missing: run interlock db upgrade --store {redacted(store.dsn)}"
                    ) from exc
                cause = exc.__cause__
                raise (cause if isinstance(cause, psycopg.Error) else exc) from None  # the store types its errors

        await store.save_all(updates, tenant=tenant, then=[defer])

    async def jobs(self, *statuses: str) -> list[tuple[str | None, str]]:
        """``(tenant, snapshot_id)`` of this queue's jobs in ``statuses`` (e.g. ``"todo"``)."""
        app = await self.open()
        found: list[tuple[str | None, str]] = []
        for status in statuses:
            for job in await app.job_manager.list_jobs_async(queue=self.queue, task=TASK, status=status):
                sid, tenant = job.task_kwargs.get("snapshot_id"), job.task_kwargs.get("tenant")
                if isinstance(sid, str):
                    found.append((tenant if isinstance(tenant, str) else None, sid))
        return found

    async def abort(self, snapshot_id: str, tenant: str | None) -> int:
        """Ask procrastinate to abort the snapshot's queued or running jobs; returns how many it asked."""
        app = await self.open()
        asked = 0
        for status in ("todo", "doing"):
            for job in await app.job_manager.list_jobs_async(lock=job_lock(snapshot_id, tenant), status=status):
                if job.id is not None and await app.job_manager.cancel_job_by_id_async(job.id, abort=True):
                    asked += 1
        return asked

    async def wake(self, job_id: int) -> None:
        """Tell listening workers a job is ready (a retried job is not announced by procrastinate itself)."""
        app = await self.open()
        payload = json.dumps({"type": "job_inserted", "job_id": job_id})
        for channel in get_channel_for_queues([self.queue]):
            await app.connector.execute_query_async(
                "SELECT pg_notify(%(channel)s, %(payload)s)", channel=channel, payload=payload
            )


async def install_schema(dsn: str) -> bool:
    """Create procrastinate's tables in the database when they are missing; ``True`` if it did.

    Under the store's schema lock, in one transaction: several processes may run it at once.
    """
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as con, con.transaction():
        await con.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_SCHEMA,))
        found = await (await con.execute("SELECT to_regclass('procrastinate_jobs') IS NOT NULL")).fetchone()
        if found is not None and found[0]:
            return False
        await con.execute(SchemaManager.get_schema())
        return True
