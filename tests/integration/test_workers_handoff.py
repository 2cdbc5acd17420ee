"""The hand-off's gaps, closed: one transaction for the pending row and its job, a queued turn
reads ``pending``, the sweeper re-enqueues a handed-off row whose job is gone.

Real PostgreSQL (``pg.fresh_dsn``); real server and worker processes where a turn runs (``workers_fleet``).
"""

from __future__ import annotations

import asyncio
import pathlib
import time
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from pg import fresh_dsn
from workers_fleet import FAST, fleet, job_statuses, settled_jobs, upgrade

from interlock import PromptAgent, Snapshot
from interlock import metadata as md
from interlock._engine.handoff import HANDOFF
from interlock.agents._host import Host
from interlock.records import _sessions as sessions  # pyright: ignore[reportPrivateUsage]
from interlock.stores.memory import InMemoryStore
from interlock.stores.postgres import PostgresStore
from interlock.testing import EchoModel
from interlock.workers import WorkerQueue
from interlock.workers import _run as run
from interlock.workers._run import REQUEUES, TurnWorker, WorkerSettings

pytestmark = pytest.mark.slow

_DIE = """
CREATE FUNCTION test_die() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN PERFORM pg_terminate_backend(pg_backend_pid()); RETURN NEW; END $$;
CREATE TRIGGER test_die BEFORE INSERT ON procrastinate_jobs FOR EACH ROW EXECUTE FUNCTION test_die();
"""


def _sql(dsn: str, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn, autocommit=True) as con:
        cur = con.execute(sql.encode(), args)
        return cur.fetchall() if cur.description else []


def _jobs(dsn: str) -> list[tuple[str, str]]:
    """``(status, snapshot id)`` of every job, oldest first."""
    rows = _sql(dsn, "SELECT status::text, args->>'snapshot_id' FROM procrastinate_jobs ORDER BY id")
    return [(str(s), str(sid)) for s, sid in rows]


async def _rows(store: PostgresStore) -> list[Snapshot]:
    return [s for i in await store.list() if (s := await store.load(i.snapshot_id)) is not None]


async def test_a_hand_off_that_dies_before_its_commit_leaves_neither_row_nor_job() -> None:
    dsn = fresh_dsn()
    upgrade(dsn)
    _sql(dsn, _DIE)  # the job's insert kills the connection: after the row's write, before the commit
    async with PostgresStore(dsn) as store:
        queue = WorkerQueue(dsn)
        agent = PromptAgent("echo", EchoModel(), store=store, host=Host(detach_to=queue))
        out = await agent.run("hi", detach=True, raise_on_error=False)
        assert out.finish_reason == "failed" and out.error is not None and out.error.status == "UNAVAILABLE", out
        assert await _rows(store) == [] and job_statuses(dsn) == []
        _sql(dsn, "DROP TRIGGER test_die ON procrastinate_jobs")
        handed = [await agent.run(f"hi {i}", detach=True) for i in range(3)]
        await queue.aclose()
        rows = await _rows(store)
    assert {r.snapshot_id for r in rows} == {o.snapshot_id for o in handed}
    assert all(r.status == "pending" and HANDOFF in (r.metadata or {}) for r in rows)
    assert sorted(_jobs(dsn)) == sorted(("todo", r.snapshot_id) for r in rows)  # each committed row has its job


async def test_a_worker_queue_needs_the_agents_postgres_store() -> None:
    agent = PromptAgent(
        "echo", EchoModel(), store=InMemoryStore(), host=Host(detach_to=WorkerQueue("postgresql://x@127.0.0.1:1/x"))
    )
    out = await agent.run("hi", detach=True, raise_on_error=False)
    assert out.error is not None and out.error.status == "FAILED_PRECONDITION", out
    assert "a worker queue needs the agent's store to be a PostgresStore" in out.error.message


async def test_a_turn_queued_longer_than_the_staleness_window_reads_pending_then_completes(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with fleet(fresh_dsn(), tmp_path, sleep=6) as f:
        f.worker("--concurrency", "1", *FAST)
        async with PostgresStore(f.dsn) as store:
            queue = WorkerQueue(f.dsn)
            agent = PromptAgent("errand", EchoModel(), store=store, host=Host(detach_to=queue))
            first = await agent.run("one", detach=True)
            while ("doing", first.snapshot_id) not in _jobs(f.dsn):
                await asyncio.sleep(0.05)
            second = await agent.run("two", detach=True)
            assert second.snapshot_id is not None
            handed = await store.load(second.snapshot_id)
            assert handed is not None and handed.heartbeat_at is not None
            with monkeypatch.context() as m:  # this process reads with a window of 2 s; the turn waits 3
                m.setattr(sessions, "EXPIRY", timedelta(seconds=2))
                await asyncio.sleep(3)
                assert ("todo", second.snapshot_id) in _jobs(f.dsn)  # still queued: the only worker is busy
                queued = await store.load(second.snapshot_id)
                assert queued is not None and queued.heartbeat_at is not None and queued.read_status() == "pending"
            assert queued.heartbeat_at - handed.heartbeat_at > timedelta(seconds=1.5)  # the sweeper keeps it fresh
            done = await agent.wait(second.snapshot_id, timeout=30)
            await queue.aclose()
        assert (done.status, done.finish_reason) == ("completed", "stop"), done
        assert await settled_jobs(f.dsn) == ["succeeded", "succeeded"]


async def test_the_sweeper_refreshes_a_queued_backlog_in_short_transactions(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    dsn = fresh_dsn()
    upgrade(dsn)
    async with PostgresStore(dsn) as store:
        queue = WorkerQueue(dsn)
        agent = PromptAgent("quick", EchoModel(), store=store, host=Host(detach_to=queue))
        queued = [(await agent.run(f"t{i}", detach=True)).snapshot_id for i in range(5)]  # no worker runs them
        before = {s.snapshot_id: s.heartbeat_at for s in await _rows(store)}
        writes: list[int] = []
        save_all = store.save_all

        async def counted(updates: Any, **kw: Any) -> Any:
            writes.append(len(updates))
            return await save_all(updates, **kw)

        monkeypatch.setattr(store, "save_all", counted)
        monkeypatch.setattr(run, "REFRESH_BATCH", 2)
        await asyncio.sleep(0.2)  # older than a sweep: due for a fresh heartbeat
        assert await TurnWorker(store, {}, queue, WorkerSettings(sweep_every=0.1)).refresh_queued() == 5
        assert writes == [2, 2, 1]  # one transaction per batch, not one for the whole backlog
        after = {s.snapshot_id: s.heartbeat_at for s in await _rows(store)}
        for sid in queued:
            assert sid is not None
            old, new = before[sid], after[sid]
            assert old is not None and new is not None and new > old
        await queue.aclose()


async def test_the_sweeper_re_enqueues_a_handed_off_row_whose_job_is_gone(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with fleet(fresh_dsn(), tmp_path) as f:
        async with PostgresStore(f.dsn) as store:
            queue = WorkerQueue(f.dsn)
            agent = PromptAgent("quick", EchoModel(), store=store, host=Host(detach_to=queue))
            lost, cancelled = [(await agent.run(t, detach=True)).snapshot_id for t in ("lost", "cancelled")]
            assert lost is not None and cancelled is not None
            _sql(f.dsn, "DELETE FROM procrastinate_jobs WHERE args->>'snapshot_id' = %s", (lost,))
            app = await queue.open()
            (job,) = await app.job_manager.list_jobs_async(status="todo")
            assert job.id is not None and await app.job_manager.cancel_job_by_id_async(job.id)
            assert _jobs(f.dsn) == [("cancelled", cancelled)]
            stale = sessions.utcnow() - timedelta(hours=1)  # a turn of a process that died, not handed off
            local = Snapshot(
                snapshot_id="local", session_id="s", status="pending", heartbeat_at=stale, created_at=stale
            )
            await store.save("local", lambda _: local)
            sweeper = TurnWorker(store, {}, queue, WorkerSettings(sweep_every=0.1))
            assert await sweeper.reconcile() == 0  # not expired yet: nothing to do
            found = await store.pending_before(sessions.utcnow(), key=HANDOFF)
            assert sorted(sid for _, sid in found) == sorted([lost, cancelled])  # not the row without a hand-off
            monkeypatch.setattr(sessions, "EXPIRY", timedelta(seconds=0.3))
            await asyncio.sleep(0.4)
            assert {
                (await store.load(s) or Snapshot(snapshot_id="", session_id="")).read_status()
                for s in (lost, cancelled)
            } == {"expired"}
            assert await sweeper.reconcile() == 2
            assert await sweeper.reconcile() == 0  # re-enqueued: fresh, with a queued job
            assert sorted(_jobs(f.dsn)) == sorted([("cancelled", cancelled), ("todo", lost), ("todo", cancelled)])
            for sid in (lost, cancelled):
                row = await store.load(sid)
                assert row is not None and row.read_status() == "pending" and (row.metadata or {})[md.REQUEUED] == 1
            kept = await store.load("local")
            assert kept is not None and kept.version == 1 and kept.read_status() == "expired"  # not ours: untouched
            monkeypatch.setattr(sessions, "EXPIRY", timedelta(seconds=60))
            f.worker()  # a worker runs both
            done = [await agent.wait(sid, timeout=30) for sid in (lost, cancelled)]
            await queue.aclose()
        assert [(d.status, d.finish_reason) for d in done] == [("completed", "stop")] * 2, done


async def test_the_sweeper_fails_a_row_whose_job_keeps_ending_without_its_outcome(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    dsn = fresh_dsn()
    upgrade(dsn)
    monkeypatch.setattr(sessions, "EXPIRY", timedelta(seconds=0.2))
    async with PostgresStore(dsn) as store:
        queue = WorkerQueue(dsn)
        agent = PromptAgent("quick", EchoModel(), store=store, host=Host(detach_to=queue))
        sid = (await agent.run("x", detach=True)).snapshot_id
        assert sid is not None
        sweeper = TurnWorker(store, {}, queue, WorkerSettings())
        for _ in range(REQUEUES + 1):
            _sql(dsn, "DELETE FROM procrastinate_jobs")
            deadline = time.monotonic() + 5
            while await sweeper.reconcile() == 0:
                assert time.monotonic() < deadline
                await asyncio.sleep(0.05)
        await queue.aclose()
        row = await store.load(sid)
    assert row is not None and row.status == "failed" and row.error is not None, row
    assert row.error.status == "UNAVAILABLE" and f"ended {REQUEUES + 1} times" in row.error.message
    assert job_statuses(dsn) == []


async def test_with_every_worker_dead_a_queued_turn_reads_expired_and_runs_when_one_comes_back(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with fleet(fresh_dsn(), tmp_path) as f:
        async with PostgresStore(f.dsn) as store:
            queue = WorkerQueue(f.dsn)
            agent = PromptAgent("quick", EchoModel(), store=store, host=Host(detach_to=queue))
            sid = (await agent.run("later", detach=True)).snapshot_id
            assert sid is not None
            with monkeypatch.context() as m:  # no worker sweeps: nothing refreshes the row (a short window)
                m.setattr(sessions, "EXPIRY", timedelta(seconds=0.3))
                await asyncio.sleep(0.5)
                row = await store.load(sid)
                assert row is not None and row.read_status() == "expired" and _jobs(f.dsn) == [("todo", sid)]
            f.worker()  # a worker comes back: the job still waits, and runs
            done = await agent.wait(sid, timeout=30)
            await queue.aclose()
        assert (done.status, done.finish_reason) == ("completed", "stop"), done
        assert await settled_jobs(f.dsn) == ["succeeded"]
