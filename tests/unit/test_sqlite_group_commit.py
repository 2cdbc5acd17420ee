"""The SQLite store's worker: group commit (a write that fails is rolled back alone), durability, the WAL."""

from __future__ import annotations

import asyncio
import contextlib
import pathlib
import sqlite3
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
from banking import APPROVE, PAY, Approval, Transfer
from journal_entries import entry

from interlock import Message, PromptAgent, ToolContext, tool
from interlock.errors import ClaimConflictError, FailedPreconditionError, UnavailableError
from interlock.records._sessions import SessionState, Snapshot
from interlock.stores import Updater
from interlock.stores.sqlite import SQLiteStore
from interlock.stores.sqlite import _wal as sqlite_wal  # pyright: ignore[reportPrivateUsage]
from interlock.testing import ScriptedModel


@tool
async def transfer(req: Transfer, ctx: ToolContext[Approval], approval: Approval | None) -> str:
    """Move money once approved."""
    if approval is None:
        ctx.interrupt({"to": req.to})
    return "sent"


def snap(sid: str, text: str = "hello") -> Snapshot:
    return Snapshot(snapshot_id=sid, session_id="s-" + sid, state=SessionState(messages=[Message.user(text)]))


def put(sid: str) -> Updater:
    return lambda _: snap(sid)


def refuse(exc: Exception) -> Updater:
    def update(cur: Snapshot | None) -> Snapshot | None:
        raise exc

    return update


async def hold_worker(store: SQLiteStore) -> tuple[asyncio.Future[None], threading.Event]:
    """Block the store's worker thread until the event is set (so the work queued meanwhile waits as one batch)."""
    entered, release = threading.Event(), threading.Event()

    def block() -> None:
        entered.set()
        release.wait(10)

    held = asyncio.ensure_future(store._call(block))  # pyright: ignore[reportPrivateUsage]
    while not entered.is_set():
        await asyncio.sleep(0.001)
    return held, release


async def test_waiting_saves_commit_as_one_transaction_and_failures_fail_alone(tmp_path: pathlib.Path) -> None:
    async with SQLiteStore(tmp_path / "g.db") as store:
        await store.save("warm", put("warm"))
        worker = store._worker  # pyright: ignore[reportPrivateUsage]
        commits = worker.commits
        held, release = await hold_worker(store)
        saves: list[Coroutine[Any, Any, list[Snapshot | None]]] = []
        for i in range(30):
            if i % 5 == 1:  # an updater that raises
                saves.append(store.save_all([(f"s{i}", refuse(ValueError(f"no {i}")))]))
            elif i % 5 == 2:  # a fencing refusal, after another row of the same save was written
                saves.append(store.save_all([(f"s{i}", put(f"s{i}")), (f"t{i}", refuse(ClaimConflictError("lapsed")))]))
            else:
                saves.append(store.save_all([(f"s{i}", put(f"s{i}")), (f"t{i}", put(f"t{i}"))]))
        pending = asyncio.gather(*saves, return_exceptions=True)
        await asyncio.sleep(0.01)
        release.set()
        results = await pending
        await held
        assert worker.commits == commits + 1  # 30 saves, one transaction (and one fsync)
        for i, result in enumerate(results):
            if i % 5 == 1:
                assert isinstance(result, ValueError) and str(result) == f"no {i}"
            elif i % 5 == 2:
                assert isinstance(result, ClaimConflictError)
            else:
                assert isinstance(result, list) and [s.snapshot_id for s in result if s] == [f"s{i}", f"t{i}"]
        for i in range(30):
            written = i % 5 not in (1, 2)
            assert (await store.load(f"s{i}") is not None) == written  # a failed save leaves no trace
            assert (await store.load(f"t{i}") is not None) == written
        assert len(await store.list()) == 1 + 2 * 18


async def test_an_error_that_ends_the_transaction_fails_only_its_write(tmp_path: pathlib.Path) -> None:
    """SQLite rolls the whole transaction back on some errors (disk full, I/O): the other writes run again."""
    async with SQLiteStore(tmp_path / "g.db") as store:
        await store.save("warm", put("warm"))

        def lose_transaction(con: sqlite3.Connection) -> None:
            con.execute("ROLLBACK")
            raise sqlite3.OperationalError("database or disk is full")

        runs: dict[str, int] = {}

        def counted(sid: str) -> Updater:
            def update(cur: Snapshot | None) -> Snapshot | None:
                runs[sid] = runs.get(sid, 0) + 1
                return snap(sid)

            return update

        held, release = await hold_worker(store)
        first = [store.save(f"a{i}", counted(f"a{i}")) for i in range(5)]
        lost = store._write(lose_transaction)  # pyright: ignore[reportPrivateUsage]
        then = [store.save(f"b{i}", counted(f"b{i}")) for i in range(5)]
        pending = asyncio.gather(*first, lost, *then, return_exceptions=True)
        await asyncio.sleep(0.01)
        release.set()
        results = await pending
        await held
        assert isinstance(results[5], FailedPreconditionError) and "disk is full" in results[5].message
        assert all(isinstance(r, Snapshot) for r in results[:5] + results[6:])
        for sid in [f"a{i}" for i in range(5)] + [f"b{i}" for i in range(5)]:
            assert await store.load(sid) is not None
        assert all(runs[f"a{i}"] == 2 for i in range(5))  # ran again, in the next transaction
        assert all(runs[f"b{i}"] == 1 for i in range(5))


def wal_bytes(path: pathlib.Path) -> int:
    wal = pathlib.Path(str(path) + "-wal")
    return wal.stat().st_size if wal.exists() else 0


async def wait_for(check: Callable[[], bool], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.01)
    return True


async def test_the_wal_is_checkpointed_and_truncated_as_it_grows(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "w.db"
    async with SQLiteStore(path) as store:
        worker = store._worker  # pyright: ignore[reportPrivateUsage]
        worker.wal_soft, worker.wal_hard = 64 << 10, 256 << 10
        largest = 0
        for i in range(300):
            await store.save(f"w{i}", lambda _, i=i: snap(f"w{i}", "words " * 100))
            largest = max(largest, wal_bytes(path))
        assert worker.checkpoints > 0
        assert largest <= (256 << 10) + (64 << 10)  # never far past the hard limit, whatever is waiting
        assert await wait_for(lambda: wal_bytes(path) < 64 << 10)  # idle: back under the soft limit
        assert len(await store.list()) == 300
    con = sqlite3.connect(path)
    assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    con.close()


async def test_housekeeping_never_waits_for_another_process_reading(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "r.db"
    async with SQLiteStore(path) as store:
        worker = store._worker  # pyright: ignore[reportPrivateUsage]
        worker.wal_soft, worker.wal_hard, worker.busy_backoff = 16 << 10, 32 << 10, 10
        await store.save("first", put("first"))
        reader = sqlite3.connect(path, isolation_level=None)
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM interlock_snapshots").fetchone()  # holds a read snapshot of the WAL
        try:
            start = time.monotonic()
            for i in range(100):
                await store.save(f"r{i}", lambda _, i=i: snap(f"r{i}", "words " * 100))
            assert time.monotonic() - start < 10  # far below the 30 s busy timeout a waiting checkpoint would take
            assert worker._retry_after > 0  # pyright: ignore[reportPrivateUsage]  # (a checkpoint found it busy)
        finally:
            reader.execute("COMMIT")
            reader.close()
        checkpoints = worker.checkpoints
        for i in range(10):  # past the back-off after a busy checkpoint
            await store.save(f"last{i}", put(f"last{i}"))
        assert await wait_for(lambda: worker.checkpoints > checkpoints and wal_bytes(path) < 16 << 10)


async def test_a_turn_on_a_busy_store_still_pauses_and_resumes(tmp_path: pathlib.Path) -> None:
    """Concurrent interrupt cycles through one store: each one's writes are grouped with the others'."""
    async with SQLiteStore(tmp_path / "c.db") as store:

        async def cycle() -> str | None:
            out = await PromptAgent("bank", ScriptedModel([PAY]), tools=[transfer], store=store).run("pay")
            fresh = PromptAgent("bank", ScriptedModel(["paid"]), tools=[transfer], store=store)
            done = await fresh.run(resume=APPROVE, snapshot_id=out.snapshot_id)
            return done.finish_reason

        worker = store._worker  # pyright: ignore[reportPrivateUsage]
        before = worker.commits, worker.writes
        assert await asyncio.gather(*(cycle() for _ in range(40))) == ["stop"] * 40
        commits, writes = worker.commits - before[0], worker.writes - before[1]
        assert commits < writes  # some writes shared a transaction


async def test_reads_and_writes_that_need_no_flush_do_not_wait_for_the_durable_group(tmp_path: pathlib.Path) -> None:
    """A batch's read and its journal outcome (no fsync) are answered while its durable writes are still running."""
    async with SQLiteStore(tmp_path / "g.db") as store:
        await store.save("old", put("old"))
        await store.journal_put(entry(), expect=0)
        inside, release = threading.Event(), threading.Event()

        def slow(con: sqlite3.Connection) -> None:  # the durable group's last step: it has not committed yet
            inside.set()
            release.wait(10)

        held, unhold = await hold_worker(store)
        read = asyncio.ensure_future(store.load("old"))
        outcome = asyncio.ensure_future(store.journal_put(entry(status="done", output="sent"), expect=1, durable=False))
        durable = asyncio.ensure_future(store.save_all([("new", put("new"))], then=[slow]))
        await asyncio.sleep(0.01)
        unhold.set()
        await held
        assert await wait_for(inside.is_set)
        loaded = await read
        await outcome
        assert loaded is not None and loaded.snapshot_id == "old" and not durable.done()
        with contextlib.closing(sqlite3.connect(tmp_path / "g.db")) as other:  # committed: another connection sees it
            assert other.execute("SELECT COUNT(*) FROM interlock_journal").fetchone() == (1,)
        release.set()
        assert [s.snapshot_id for s in await durable if s] == ["new"]
        assert await store.load("new") is not None


async def test_a_group_in_which_no_write_fails_runs_under_one_savepoint(tmp_path: pathlib.Path) -> None:
    async with SQLiteStore(tmp_path / "g.db") as store:
        await store.save("warm", put("warm"))
        statements: list[str] = []
        store._con.set_trace_callback(statements.append)  # pyright: ignore[reportOptionalMemberAccess, reportPrivateUsage]
        held, release = await hold_worker(store)
        pending = asyncio.gather(*(store.save(f"s{i}", put(f"s{i}")) for i in range(10)))
        await asyncio.sleep(0.01)
        release.set()
        await held
        assert all(s is not None for s in await pending)
        assert [s for s in statements if s.startswith(("SAVEPOINT", "BEGIN", "COMMIT"))] == [
            "BEGIN IMMEDIATE",
            "SAVEPOINT together",
            "COMMIT",
        ]


async def test_saves_started_together_reach_the_worker_as_one_batch(tmp_path: pathlib.Path) -> None:
    """The worker is not woken by the first of them while the event loop is still starting the others."""
    async with SQLiteStore(tmp_path / "g.db") as store:
        await store.save("warm", put("warm"))
        worker = store._worker  # pyright: ignore[reportPrivateUsage]
        before = worker.commits, worker.flushes

        async def save(sid: str) -> Snapshot | None:
            time.sleep(0.002)  # the loop is busy before each (and lets the worker thread run meanwhile)
            return await store.save(sid, put(sid))

        saved = await asyncio.gather(*(save(f"s{i}") for i in range(10)))
        assert [s.snapshot_id for s in saved if s] == [f"s{i}" for i in range(10)]
        assert (worker.commits, worker.flushes) == (before[0] + 1, before[1] + 1)


async def test_a_worker_thread_that_dies_fails_the_waiting_and_later_calls(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def bug(batch: list[Any]) -> None:
        raise RuntimeError("a bug in the worker")

    async with asyncio.timeout(10), SQLiteStore(tmp_path / "g.db") as store:  # fails at once, never waits
        await store.save("warm", put("warm"))
        worker = store._worker  # pyright: ignore[reportPrivateUsage]
        monkeypatch.setattr(worker, "_execute", bug)
        waiting = await asyncio.gather(store.save("a", put("a")), store.load("warm"), return_exceptions=True)
        assert all(isinstance(e, UnavailableError) for e in waiting), waiting
        assert worker.dead is not None
        with pytest.raises(UnavailableError):
            await store.load("warm")


def test_the_frames_waiting_in_the_wal_are_read_from_its_header(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "h.db"
    con = sqlite3.connect(path, isolation_level=None)
    con.execute("PRAGMA journal_mode = WAL")
    con.execute("PRAGMA wal_autocheckpoint = 0")
    con.execute("CREATE TABLE t (v TEXT)")
    wal = sqlite_wal.WalIndex(f"{path}-wal")
    wal.attach()
    for _ in range(20):
        con.execute("INSERT INTO t VALUES (?)", ("x" * 3000,))
    assert wal.pending_bytes() >= 20 * 3000
    _, frames, copied = con.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    assert frames == copied > 0  # nobody else reads: every frame copied
    assert wal.pending_bytes() == 0
    con.execute("INSERT INTO t VALUES ('y')")  # the log starts again at its beginning, the file keeps its size
    assert 0 < wal.pending_bytes() < wal.file_bytes()
    wal.detach()
    assert wal.pending_bytes() == wal.file_bytes()  # detached: the log's size stands in
    con.close()
    assert sqlite_wal.WalIndex(str(tmp_path / "none.db-wal")).pending_bytes() == 0  # no log: nothing waits
