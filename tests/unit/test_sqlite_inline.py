"""The SQLite store's small writes that need no fsync (a journal outcome) run on the caller's thread when they can.

A tool's result is journaled before the model is called, with ``synchronous=NORMAL`` (it must
survive a process crash, not a power cut). Handing that one statement to the worker thread and
back cost more than the write itself, so when the worker is idle it runs on the caller's
thread. It never waits there: with the worker busy, or the file's write lock held by another
connection, it goes to the worker as before, and the event loop stays free. So does a load
whose history needs no base chain read (one statement).
"""

from __future__ import annotations

import asyncio
import pathlib
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from journal_entries import entry
from refusing import Refusing
from test_sqlite_group_commit import hold_worker, put

from interlock import Message, Snapshot
from interlock.errors import ClaimConflictError, FailedPreconditionError
from interlock.records._journal import JournalEntry
from interlock.records._sessions import SessionState
from interlock.stores import sqlite as sqlite_store
from interlock.stores._sql import ready as ready_rule
from interlock.stores.sqlite import SQLiteStore
from interlock.stores.sqlite import _rows as sqlite_rows
from interlock.stores.sqlite import _worker as sqlite_worker  # pyright: ignore[reportPrivateUsage]


@pytest.fixture
def put_threads(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The name of the thread each journal write ran on."""
    threads: list[str] = []
    real = sqlite_rows.put

    def spy(con: sqlite3.Connection, tenant: str, item: JournalEntry, expect: int) -> None:
        threads.append(threading.current_thread().name)
        real(con, tenant, item, expect)

    monkeypatch.setattr(sqlite_rows, "put", spy)
    yield threads


async def test_an_outcome_runs_on_the_callers_thread_when_the_worker_is_idle(
    tmp_path: pathlib.Path, put_threads: list[str]
) -> None:
    async with SQLiteStore(tmp_path / "s.db") as store:
        await store.journal_put(entry(), expect=0)  # an intent: durable, so the worker's (fsync with group commit)
        await store.journal_put(entry(status="done", output="sent"), expect=1, durable=False)
        stored = await store.journal_get("ik_test")
    assert put_threads == ["interlock-sqlite", threading.current_thread().name]
    assert stored is not None and (stored.status, stored.output) == ("done", "sent")
    async with SQLiteStore(tmp_path / "s.db") as reopened:  # committed, not only seen by its own connection
        again = await reopened.journal_get("ik_test")
    assert again is not None and again.status == "done"


async def test_a_superseded_outcome_is_refused_on_the_callers_thread_and_changes_nothing(
    tmp_path: pathlib.Path, put_threads: list[str]
) -> None:
    async with SQLiteStore(tmp_path / "s.db") as store:
        await store.journal_put(entry(), expect=0)
        await store.journal_put(entry(attempt=2), expect=1)  # another run took the call over
        with pytest.raises(ClaimConflictError, match="attempt 2"):
            await store.journal_put(entry(status="done", output="late"), expect=1, durable=False)
        stored = await store.journal_get("ik_test")
        assert put_threads[-1] == threading.current_thread().name
        assert stored is not None and (stored.attempt, stored.status, stored.output) == (2, "running", None)
        await store.journal_put(entry(attempt=2, status="done", output="ok"), expect=2, durable=False)  # still usable
        final = await store.journal_get("ik_test")
        assert final is not None and (final.attempt, final.status, final.output) == (2, "done", "ok")


async def test_with_the_worker_busy_an_outcome_waits_for_it_and_runs_there(
    tmp_path: pathlib.Path, put_threads: list[str]
) -> None:
    async with SQLiteStore(tmp_path / "s.db") as store:
        await store.journal_put(entry(), expect=0)
        held, release = await hold_worker(store)
        write = asyncio.ensure_future(store.journal_put(entry(status="done"), expect=1, durable=False))
        await asyncio.sleep(0.05)
        assert not write.done(), "ran beside the worker's transaction"
        release.set()
        await held
        await write
        assert put_threads == ["interlock-sqlite", "interlock-sqlite"]


async def test_another_connections_write_lock_never_blocks_the_event_loop(
    tmp_path: pathlib.Path, put_threads: list[str]
) -> None:
    path = tmp_path / "s.db"
    async with SQLiteStore(path) as store:
        await store.journal_put(entry(), expect=0)
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")  # another process writing: the file's write lock is taken
        try:
            write = asyncio.ensure_future(store.journal_put(entry(status="done"), expect=1, durable=False))
            start = time.monotonic()
            await asyncio.sleep(0.2)
            assert time.monotonic() - start < 0.5, "the event loop was blocked waiting for the lock"
            assert not write.done()
        finally:
            other.execute("COMMIT")
            other.close()
        await write  # the worker waited for the lock (its wait_for: the connection itself never waits), then wrote
        stored = await store.journal_get("ik_test")
    assert stored is not None and stored.status == "done"
    # the statement tried here was refused by the lock at once (changing nothing); the worker wrote it
    assert put_threads[0] == put_threads[-1] == "interlock-sqlite"
    assert set(put_threads[1:-1]) <= {threading.current_thread().name}


async def test_ready_runs_nothing_after_a_recent_committed_write_and_checks_again_after_a_failure(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def missing_table(con: sqlite3.Connection) -> None:
        con.execute("INSERT INTO no_such_table VALUES (1)")

    monkeypatch.setattr(ready_rule, "PROVEN", 3600.0)  # "recent": however slow this machine is
    async with SQLiteStore(tmp_path / "s.db") as store:
        worker = store._worker  # pyright: ignore[reportPrivateUsage]
        checks: list[object] = []
        real = worker.run_here

        def spy(fn: Callable[..., Any], args: tuple[Any, ...]) -> tuple[bool, Any]:
            checks.append(fn)
            return real(fn, args)

        monkeypatch.setattr(worker, "run_here", spy)
        await store.ready()
        assert len(checks) == 1  # a new store: its write lock taken (and given back) on this thread
        await store.save("a", put("a"))
        await store.ready()
        await store.ready()
        assert len(checks) == 1  # the write committed just now showed the file takes writes
        with pytest.raises(FailedPreconditionError):  # a write that failed in SQLite (here: a missing table)
            await store.save_all([("b", put("b"))], then=[missing_table])
        await store.ready()
        assert len(checks) == 2  # checked again
        assert await store.load("b") is None and await store.load("a") is not None
        await store.save("c", put("c"))
        monkeypatch.setattr(ready_rule, "PROVEN", 0.0)  # that write is no longer recent
        await store.ready()
        assert len(checks) == 3


@pytest.fixture
def fetch_threads(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The name of the thread each snapshot row was read on."""
    threads: list[str] = []
    real = sqlite_rows.SnapshotRows.fetch

    def spy(con: sqlite3.Connection, tenant: str, snapshot_id: str) -> Any:
        threads.append(threading.current_thread().name)
        return real(con, tenant, snapshot_id)

    monkeypatch.setattr(sqlite_rows.SnapshotRows, "fetch", staticmethod(spy))
    yield threads


def history(turns: int) -> list[Message]:
    return [Message.user(f"question {i} " + "q" * 300) for i in range(turns)]


def grown(sid: str, parent: str | None, turns: int) -> Snapshot:
    return Snapshot(snapshot_id=sid, session_id="s", parent_id=parent, state=SessionState(messages=history(turns)))


def messages(snap: Snapshot | None) -> list[Message] | None:
    return None if snap is None or snap.state is None else snap.state.messages


async def test_a_load_runs_on_the_callers_thread_when_the_worker_is_idle(
    tmp_path: pathlib.Path, fetch_threads: list[str]
) -> None:
    async with SQLiteStore(tmp_path / "s.db") as store:
        await store.save("a", lambda _: grown("a", None, 2))
        await store.save("b", lambda _: grown("b", "a", 3))  # a delta on "a", whose history is cached
        fetch_threads.clear()
        loaded = await store.load("b")
        assert fetch_threads == [threading.current_thread().name]
        fetch_threads.clear()
        missing = await store.load("nothing")  # not the usual load: the worker answers it
        assert fetch_threads == [threading.current_thread().name, "interlock-sqlite"]
    assert loaded is not None and (loaded.snapshot_id, loaded.parent_id) == ("b", "a")
    assert messages(loaded) == history(3)
    assert missing is None


async def test_a_load_that_needs_its_base_chain_read_goes_to_the_worker(
    tmp_path: pathlib.Path, fetch_threads: list[str]
) -> None:
    path = tmp_path / "s.db"
    async with SQLiteStore(path) as store:
        await store.save("a", lambda _: grown("a", None, 2))
        await store.save("b", lambda _: grown("b", "a", 3))
    async with SQLiteStore(path) as cold:  # a new store: nothing cached
        await cold.setup()
        fetch_threads.clear()
        loaded = await cold.load("b")
    assert fetch_threads == [threading.current_thread().name, "interlock-sqlite"]  # tried here, read there
    assert messages(loaded) == history(3)


async def test_with_the_worker_busy_a_load_waits_for_it_and_runs_there(
    tmp_path: pathlib.Path, fetch_threads: list[str]
) -> None:
    async with SQLiteStore(tmp_path / "s.db") as store:
        await store.save("a", lambda _: grown("a", None, 1))
        held, release = await hold_worker(store)
        fetch_threads.clear()
        load = asyncio.ensure_future(store.load("a"))
        await asyncio.sleep(0.05)
        assert not load.done(), "read beside the worker's work"
        release.set()
        await held
        assert messages(await load) == history(1)
    assert fetch_threads == ["interlock-sqlite"]


def test_the_worker_waits_for_a_lock_itself_and_gives_up_at_its_limit() -> None:
    busy = Refusing(3)
    sqlite_worker.wait_for(busy, "BEGIN IMMEDIATE", 10.0)  # type: ignore[arg-type]
    assert busy.calls == 4
    damaged = Refusing(1, sqlite3.SQLITE_CORRUPT)  # anything but a lock taken is not waited out
    with pytest.raises(sqlite3.OperationalError):
        sqlite_worker.wait_for(damaged, "BEGIN IMMEDIATE", 10.0)  # type: ignore[arg-type]
    assert damaged.calls == 1
    stuck = Refusing(10**6)
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        sqlite_worker.wait_for(stuck, "BEGIN IMMEDIATE", 0.05)  # type: ignore[arg-type]
    assert 1 < stuck.calls < 10**6


async def test_the_connection_of_a_wal_file_never_waits_and_other_files_keep_their_timeout(
    tmp_path: pathlib.Path,
) -> None:
    async with SQLiteStore(tmp_path / "s.db") as store:
        await store.ready()
        con = store._con  # pyright: ignore[reportPrivateUsage]
        assert con is not None and con.execute("PRAGMA busy_timeout").fetchone() == (0,)
        assert store._worker.never_waits  # pyright: ignore[reportPrivateUsage]
    rollback = sqlite3.connect(tmp_path / "rollback.db", timeout=30.0)
    try:
        rollback.execute("PRAGMA journal_mode = DELETE")
        # a file in another journal mode takes locks as it commits: its connection waits inside SQLite,
        # and nothing runs on the caller's thread
        assert not sqlite_store._never_wait(rollback)  # pyright: ignore[reportPrivateUsage]
        assert rollback.execute("PRAGMA busy_timeout").fetchone() == (30000,)
    finally:
        rollback.close()
