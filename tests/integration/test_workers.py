"""Detached turns run by ``interlock worker`` processes, handed off by ``interlock serve --detach-to-workers``.

Real PostgreSQL (``pg.fresh_dsn``), real server and worker processes (``workers_fleet``).
Every tool body appends one line to a log, so a test counts body runs across processes.
"""

from __future__ import annotations

import asyncio
import pathlib
import signal
import time

import pytest
from pg import fresh_dsn
from workers_fleet import DSN, FAST, LOG, Fleet, fleet, job_statuses, kill, logged, runs, settled_jobs, upgrade

from interlock import PromptAgent, Snapshot
from interlock._engine.commit import Claims
from interlock.agents._host import Host
from interlock.cli import main
from interlock.errors import ClaimConflictError
from interlock.http._client import RemoteAgent
from interlock.metadata import is_in_doubt
from interlock.records._sessions import new_id, utcnow
from interlock.stores.postgres import PostgresStore
from interlock.testing import EchoModel
from interlock.workers import WorkerQueue

pytestmark = pytest.mark.slow


async def _detach(url: str, agent: str = "errand") -> tuple[str, str]:
    """Send a detached turn through a server: ``(pending snapshot id, session id)``."""
    async with RemoteAgent(f"{url}/{agent}") as remote:
        out = await remote.run("go", detach=True)
    assert out.finish_reason == "detached" and out.snapshot_id and out.session_id, out
    return out.snapshot_id, out.session_id


async def _wait(url: str, snapshot_id: str, timeout: float = 20.0, agent: str = "errand") -> Snapshot:
    async with RemoteAgent(f"{url}/{agent}") as remote:
        return await remote.wait(snapshot_id, timeout=timeout)


def test_db_upgrade_installs_the_worker_queue_once() -> None:
    dsn = fresh_dsn()
    assert upgrade(dsn).strip().endswith("worker queue tables installed")
    assert upgrade(dsn).strip().endswith("worker queue tables present")
    assert job_statuses(dsn) == []


async def test_a_detached_turn_is_enqueued_and_run_by_a_worker(tmp_path: pathlib.Path) -> None:
    with fleet(fresh_dsn(), tmp_path) as f:
        server = f.server()
        worker = f.worker("--poll", "600")  # a poll this slow never fires: only NOTIFY can start the job
        assert server.url is not None
        pending, session = await _detach(server.url)
        done = await _wait(server.url, pending)
        assert (done.status, done.finish_reason) == ("completed", "stop"), done
        assert done.state is not None and done.state.messages[-1].text == "done"
        assert [pid for pid, _ in runs(f.log, "pay", session)] == [worker.pid]  # run by the worker, once
        assert [pid for pid, _ in runs(f.log, "wait", session)] == [worker.pid]
        async with RemoteAgent(f"{server.url}/errand") as remote:
            latest = await remote.get_snapshot(session_id=session)
        assert latest.snapshot_id == pending and latest.status == "completed"
        assert await settled_jobs(f.dsn) == ["succeeded"]
        async with PostgresStore(f.dsn) as store:  # an agent no worker runs: its turn fails once, saying why
            queue = WorkerQueue(f.dsn)
            ghost = PromptAgent("ghost", EchoModel(), store=store, host=Host(detach_to=queue))
            out = await ghost.run("boo", detach=True)
            assert out.snapshot_id is not None
            failed = await ghost.wait(out.snapshot_id, timeout=20)
            await queue.aclose()
        assert failed.status == "failed" and failed.error is not None, failed
        assert (failed.error.status, failed.error.message) == (
            "FAILED_PRECONDITION",
            "no worker runs agent 'ghost' (interlock worker --agents)",
        )
        assert await settled_jobs(f.dsn) == ["succeeded", "succeeded"]


async def _killed_mid_turn(f: Fleet, url: str) -> tuple[Snapshot, str]:
    pending, session = await _detach(url)
    pid, _ = await logged(f.log, "wait", session)
    kill(next(w for w in f.workers if w.pid == pid))
    return await _wait(url, pending, timeout=30), session


async def test_a_sigkilled_workers_turn_completes_on_another_worker_without_a_silent_repeat(
    tmp_path: pathlib.Path,
) -> None:
    with fleet(fresh_dsn(), tmp_path, sleep=60) as f:
        server = f.server()
        assert server.url is not None
        f.worker()
        f.worker()
        for _ in range(2):
            done, session = await _killed_mid_turn(f, server.url)
            assert (done.status, done.finish_reason) == ("completed", "interrupted"), done
            assert done.state is not None
            (paused,) = done.state.messages[-1].interrupts
            assert paused.name == "wait" and is_in_doubt(paused)  # the journal asks: did it take effect?
            assert len(runs(f.log, "pay", session)) == 1  # replayed from the journal, not run again
            assert len(runs(f.log, "wait", session)) == 1  # in doubt, not repeated
            f.worker()  # replace the killed one


async def test_abort_through_one_server_cancels_the_run_on_a_worker_behind_another(tmp_path: pathlib.Path) -> None:
    with fleet(fresh_dsn(), tmp_path, sleep=60) as f:
        a, b = f.server(), f.server()
        f.worker()
        f.worker()
        assert a.url is not None and b.url is not None
        pending, session = await _detach(b.url)
        await logged(f.log, "wait", session)
        async with RemoteAgent(f"{a.url}/errand") as remote:
            assert await remote.abort(pending) == "pending"
            assert (await remote.get_snapshot(pending)).status == "aborted"
        await logged(f.log, "cancelled", session, timeout=10)  # the running tool body was cancelled
        deadline = time.monotonic() + 10
        while job_statuses(f.dsn) != ["aborted"]:
            assert time.monotonic() < deadline, job_statuses(f.dsn)
            await asyncio.sleep(0.05)
        assert (await _wait(b.url, pending)).status == "aborted"
        again, session2 = await _detach(a.url, "quick")  # both workers are free again
        assert (await _wait(b.url, again, agent="quick")).status == "completed", session2


async def test_sigterm_hands_an_unfinished_turn_back_to_another_worker(tmp_path: pathlib.Path) -> None:
    with fleet(fresh_dsn(), tmp_path, sleep=60) as f:
        server = f.server()
        assert server.url is not None
        slow = ("--lease", "60", "--stalled-after", "60", "--grace", "0.5", "--poll", "0.5")
        f.worker(*slow)
        f.worker(*slow)
        pending, session = await _detach(server.url)
        pid, _ = await logged(f.log, "wait", session)
        stopping = next(w for w in f.workers if w.pid == pid)
        kill(stopping, signal.SIGTERM)
        assert stopping.proc.wait(timeout=20) == 0, stopping.output()
        assert runs(f.log, "cancelled", session)  # after the 0.5 s grace its tool body was cancelled
        done = await _wait(server.url, pending, timeout=20)  # inside the 60 s lease: given back, not left to lapse
        assert (done.status, done.finish_reason) == ("completed", "interrupted"), done
        assert done.state is not None
        (paused,) = done.state.messages[-1].interrupts
        assert paused.name == "wait" and is_in_doubt(paused)  # cancelled mid-body: it may have taken effect
        assert len(runs(f.log, "pay", session)) == 1  # replayed from the journal
        assert len(runs(f.log, "wait", session)) == 1


async def test_a_zombie_attempts_late_write_is_refused(tmp_path: pathlib.Path) -> None:
    async with PostgresStore(fresh_dsn()) as store:
        row = Snapshot(snapshot_id=new_id(), session_id=new_id(), status="pending", heartbeat_at=utcnow())
        await store.save(row.snapshot_id, lambda _: row)
        claims = Claims(store, None, ttl=0.3)
        zombie = await claims.take(row.snapshot_id, "attempt-1")
        zombie.settled()  # its refresher stops, as a frozen process's would (its writes are still fenced)
        with pytest.raises(ClaimConflictError):  # a second worker cannot take a held lease
            await claims.take(row.snapshot_id, "attempt-2")
        await asyncio.sleep(0.4)
        taker = await claims.take(row.snapshot_id, "attempt-2")

        def finish(cur: Snapshot | None) -> Snapshot | None:
            return None if cur is None else cur.evolve(status="completed")

        with pytest.raises(ClaimConflictError):
            await store.save(row.snapshot_id, zombie.own_updater(finish))
        written = await store.save(row.snapshot_id, taker.own_updater(finish))
        taker.settled()
        assert written is not None and written.status == "completed" and written.claimed_by is None


def test_worker_refuses_agents_without_a_postgres_store(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "sqlite_agents.py").write_text(
        "from interlock import PromptAgent\nfrom interlock.stores.sqlite import SQLiteStore\n"
        "from interlock.testing import EchoModel\n"
        "agent = PromptAgent('echo', EchoModel(), store=SQLiteStore('s.db'))\n"
    )
    monkeypatch.chdir(tmp_path)
    assert main(["worker", "--store", "postgresql://nobody@127.0.0.1:1/x", "--agents", "sqlite_agents:agent"]) == 2
    assert "agent 'echo' needs a PostgresStore to run on workers" in capsys.readouterr().err


def test_serve_refuses_detach_to_workers_in_several_processes(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(DSN, "postgresql://nobody@127.0.0.1:1/x")  # workers_app's store; never opened
    monkeypatch.setenv(LOG, str(tmp_path / "runs.log"))
    assert main(["serve", "workers_app:agents", "--detach-to-workers", "--workers", "2"]) == 2
    assert "--detach-to-workers configures the agents of one process" in capsys.readouterr().err


async def test_sigterm_lets_a_turn_that_ends_within_the_grace_finish(tmp_path: pathlib.Path) -> None:
    with fleet(fresh_dsn(), tmp_path, sleep=2) as f:
        server = f.server()
        assert server.url is not None
        worker = f.worker("--grace", "30", *FAST)
        pending, session = await _detach(server.url)
        await logged(f.log, "wait", session)
        kill(worker, signal.SIGTERM)
        assert worker.proc.wait(timeout=30) == 0, worker.output()
        done = await _wait(server.url, pending, timeout=5)
        assert (done.status, done.finish_reason) == ("completed", "stop"), done  # finished, not handed back
        assert not runs(f.log, "cancelled", session) and len(runs(f.log, "wait", session)) == 1


async def test_a_detach_before_the_queue_is_installed_names_db_upgrade() -> None:
    dsn = fresh_dsn()
    async with PostgresStore(dsn) as store:
        queue = WorkerQueue(dsn)  # interlock db upgrade was not run: no procrastinate tables
        agent = PromptAgent("echo", EchoModel(), store=store, host=Host(detach_to=queue))
        out = await agent.run("hi", detach=True, raise_on_error=False)
        await queue.aclose()
        assert await store.list() == []  # the row went with the job's failed insert: one transaction
    assert out.error is not None and out.error.status == "FAILED_PRECONDITION", out
    assert "the worker queue's tables are missing: run interlock db upgrade --store" in out.error.message
