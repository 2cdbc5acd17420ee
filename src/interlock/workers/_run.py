"""The worker side: claim a pending snapshot, run its turn, sweep stalled jobs (``interlock worker``).

A job names a pending snapshot (``snapshot_id``, ``tenant``). The worker that takes it:

1. **claims** the pending row with a lease, through :class:`interlock._engine.commit.Claims` (the one
   mechanism for claims): the holder is a fresh attempt id, the fencing token. While another
   attempt's lease is held the job waits for it to lapse (or for the row to stop being pending);
   a lapsed one is taken over (``metadata.reclaimedFrom``).
2. **runs** the turn from what the row carries (:mod:`interlock._engine.handoff`), with the
   runtime's detached machinery: heartbeats, the abort watch (LISTEN/NOTIFY), the effect
   journal. The lease is refreshed every ``lease / 3`` seconds; the turn's outcome is written
   fenced by it, so a zombie attempt whose lease was taken over commits nothing.
3. On **abort** (the snapshot flipped, or procrastinate's abort of the job) the turn is cancelled.
   On **shutdown** (SIGTERM: procrastinate waits ``grace`` seconds for running jobs, then aborts
   them) an unfinished turn is *handed back*: its lease is released and the job is retried, so
   another worker takes it at once. The journal decides what its tool calls replay.

The **sweeper** (a loop in every worker) asks procrastinate for jobs whose worker stopped
heartbeating (``get_stalled_jobs``: a SIGKILLed worker, a lost host) and retries them; the
worker that picks one up waits out the dead attempt's lease, then takes it over. It also
refreshes the heartbeat of rows whose job is queued (a queued turn reads ``pending``), and
re-enqueues handed-off rows that read ``expired`` with no queued or running job.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta

from procrastinate import JobContext, RetryStrategy
from procrastinate.exceptions import JobAborted
from procrastinate.job_context import AbortReason

from .._engine.commit import ClaimHold, Claims
from .._engine.handoff import HANDOFF
from .._engine.invocation import run_handed_off
from .._engine.protocols import RunnableAgent
from ..errors import ClaimConflictError, FailedPreconditionError, InterlockError
from ..records import _sessions as sessions  # pyright: ignore[reportPrivateUsage]  (EXPIRY read at call time)
from ..records._sessions import ErrorInfo, Snapshot, new_id, utcnow
from ..records.snapshots import NoChange, fail_pending, heartbeat, if_orphaned, is_orphaned, requeue, requeues
from ..stores import SnapshotStore
from ..stores.postgres import PostgresStore
from . import TASK, WorkerQueue

log = logging.getLogger("interlock.workers")


@dataclass(frozen=True, kw_only=True, slots=True)
class WorkerSettings:
    """How a worker runs, claims and sweeps (``interlock worker`` options)."""

    concurrency: int = 8
    """Turns one worker runs at once."""
    lease: float = 30.0
    """Seconds a turn's claim lasts without refresh: a dead worker's turn is taken over after this."""
    stalled_after: float = 30.0
    """Seconds without a procrastinate heartbeat after which a worker's jobs are retried by the sweeper."""
    sweep_every: float = 5.0
    """Seconds between sweeps for stalled jobs."""
    grace: float = 30.0
    """Seconds a stopping worker (SIGTERM) waits for its turns before handing them back."""
    poll: float = 1.0
    """procrastinate's fallback poll (seconds): new jobs wake workers by NOTIFY; a retried job by this or a sweep."""


class TurnWorker:
    """Runs detached turns of ``agents`` from ``queue``, with pending snapshots read from ``store``."""

    def __init__(
        self,
        store: SnapshotStore,
        agents: Mapping[str, RunnableAgent],
        queue: WorkerQueue,
        settings: WorkerSettings | None = None,
    ) -> None:
        self.store = store
        self.agents = dict(agents)
        self.queue = queue
        self.settings = settings or WorkerSettings()
        queue.app.task(
            name=TASK,
            queue=queue.queue,
            pass_context=True,
            retry=RetryStrategy(max_attempts=1_000, wait=1),
        )(self.run_job)

    async def run(self, *, install_signal_handlers: bool = True) -> None:
        """Work until stopped (SIGTERM/SIGINT with the handlers, or cancellation); the sweeper runs beside."""
        s = self.settings
        app = await self.queue.open()
        sweeper = asyncio.ensure_future(self.sweep())
        try:
            await app.run_worker_async(
                queues=[self.queue.queue],
                concurrency=s.concurrency,
                shutdown_graceful_timeout=s.grace,
                update_heartbeat_interval=max(0.1, s.stalled_after / 3),
                stalled_worker_timeout=s.stalled_after,
                fetch_job_polling_interval=s.poll,
                abort_job_polling_interval=s.poll,
                install_signal_handlers=install_signal_handlers,
            )
        finally:
            sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sweeper
            await self.queue.aclose()

    # one job ----------------------------------------------------------------------------------

    async def run_job(self, context: JobContext, snapshot_id: str, tenant: str | None) -> str:
        """The task: claim the pending snapshot, run its turn; returns what happened (the job's result)."""
        pending = await self.store.load(snapshot_id, tenant=tenant)
        if pending is None or pending.status != "pending":
            return "not pending"
        lease = await self._take(pending, tenant)
        if lease is None:
            return "not pending"
        name = (pending.metadata or {}).get("agent")
        agent = self.agents.get(str(name))
        try:
            if agent is None:
                raise FailedPreconditionError(f"no worker runs agent {name!r} (interlock worker --agents)")
            invocation = run_handed_off(agent, pending, lease)
        except InterlockError as exc:  # it cannot run anywhere (no such agent, no handed-off input): say so, once
            error = ErrorInfo(status=exc.status, message=exc.message)
            await self.store.save(snapshot_id, lease.own_updater(fail_pending(error)), tenant=tenant)
            lease.settled()
            return "failed"
        try:
            await asyncio.shield(invocation.main)
        except asyncio.CancelledError:
            if context.abort_reason() == AbortReason.SHUTDOWN:
                invocation.hand_back()
            else:
                invocation.abort()
            with contextlib.suppress(BaseException):
                await invocation.main
            raise
        if invocation.abort_event.is_set():  # the snapshot was aborted (its watch stopped the run): so is the job
            raise JobAborted(f"snapshot {snapshot_id} was aborted")
        return "ran"

    async def _take(self, pending: Snapshot, tenant: str | None) -> ClaimHold | None:
        """Claim the pending row for a new attempt, after another attempt's lease (``None``: no longer pending)."""
        claims = Claims(self.store, tenant, ttl=self.settings.lease)
        attempt = new_id()
        while True:
            try:
                return await claims.take(pending.snapshot_id, attempt)
            except ClaimConflictError:
                pass
            cur = await self.store.load(pending.snapshot_id, tenant=tenant)
            if cur is None or cur.status != "pending":
                return None
            left = (cur.claim_expires_at - utcnow()).total_seconds() if cur.claim_expires_at else 0.0
            await asyncio.sleep(min(max(left, 0.0) + 0.05, self.settings.lease))

    # the sweeper ------------------------------------------------------------------------------

    async def sweep(self) -> None:
        """Every ``sweep_every`` seconds, retry the jobs of workers that stopped heartbeating."""
        while True:
            await asyncio.sleep(self.settings.sweep_every)
            try:
                await self.sweep_once()
            except Exception as exc:  # the database is unreachable: try again next time
                log.warning("sweep failed: %s", exc)

    async def sweep_once(self) -> int:
        """One sweep; returns how many stalled jobs it retried.

        Then it keeps the rows of queued jobs fresh (:meth:`refresh_queued`) and re-enqueues
        handed-off rows whose job is gone (:meth:`reconcile`).
        """
        retried = await self._retry_stalled()
        await self.refresh_queued()
        await self.reconcile()
        return retried

    async def refresh_queued(self) -> int:
        """Refresh the heartbeat of every pending row whose job waits in the queue; returns how many.

        A queued turn (every worker busy) so reads ``pending``, not ``expired``, while a worker
        lives to sweep; with every worker dead its row reads ``expired`` once the heartbeat is
        :data:`~interlock.records._sessions.EXPIRY` old, and its job still waits: a worker that comes back runs it.
        """
        by_tenant: dict[str | None, set[str]] = {}
        for tenant, sid in await self.queue.jobs("todo"):
            by_tenant.setdefault(tenant, set()).add(sid)
        fresh = timedelta(seconds=self.settings.sweep_every)
        refreshed = 0
        for tenant, ids in by_tenant.items():
            queued = sorted(ids)
            for start in range(
                0, len(queued), REFRESH_BATCH
            ):  # short transactions: a big backlog keeps no rows locked for long
                batch = queued[start : start + REFRESH_BATCH]
                written = await self.store.save_all([(sid, heartbeat(fresh)) for sid in batch], tenant=tenant)
                refreshed += sum(w is not None for w in written)
        return refreshed

    async def reconcile(self) -> int:
        """Re-enqueue (or fail) handed-off rows that read ``expired`` and have no queued or running job.

        Such a row's job ended without the turn's outcome (procrastinate failed or cancelled it, it
        was deleted, or the run's final write was lost) and nobody holds a live lease on it. The
        row is re-enqueued, its heartbeat refreshed, in one transaction (:meth:`WorkerQueue.write`),
        at most :data:`REQUEUES` times; then it is failed (``UNAVAILABLE``). Returns how many it handled.
        """
        store = self.store
        if not isinstance(store, PostgresStore):
            return 0
        candidates = await store.pending_before(utcnow() - sessions.EXPIRY, key=HANDOFF)
        if not candidates:
            return 0
        live = set(await self.queue.jobs("todo", "doing"))
        handled = 0
        for tenant, sid in candidates:
            if (tenant, sid) in live:
                continue
            cur = await store.load(sid, tenant=tenant)
            if cur is None or not is_orphaned(cur):
                continue
            count = requeues(cur)
            try:
                if count >= REQUEUES:
                    error = ErrorInfo(
                        status="UNAVAILABLE", message=f"the turn's job ended {count + 1} times without its outcome"
                    )
                    await store.save(sid, if_orphaned(fail_pending(error)), tenant=tenant)
                    log.warning("failed orphaned snapshot %s", sid)
                else:
                    await self.queue.write(store, [(sid, if_orphaned(requeue()))], sid, tenant)
                    log.info("re-enqueued orphaned snapshot %s", sid)
            except NoChange:  # no longer an orphan (it finished, was refreshed, or its lease is held)
                continue
            handled += 1
        return handled

    async def _retry_stalled(self) -> int:
        app = await self.queue.open()
        stalled = await app.job_manager.get_stalled_jobs(
            queue=self.queue.queue, task_name=TASK, seconds_since_heartbeat=self.settings.stalled_after
        )
        retried = 0
        for job in stalled:
            if job.id is None:
                continue
            try:
                await app.job_manager.retry_job(job)
            except Exception as exc:  # another worker's sweeper retried it first
                log.debug("job %s not retried: %s", job.id, exc)
                continue
            retried += 1
            log.info("retrying stalled job %s (snapshot %s)", job.id, job.task_kwargs.get("snapshot_id"))
            await self.queue.wake(job.id)
        return retried


REQUEUES = 3
"""How many times the sweeper re-enqueues a handed-off row whose job ended without its outcome; then it fails it."""
REFRESH_BATCH = 200
"""Queued rows whose heartbeat one transaction of :meth:`TurnWorker.refresh_queued` refreshes."""
