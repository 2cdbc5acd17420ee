"""A SQLite file with damaged pages: the calls that touch them fail with DATA_LOSS, the rest is served.

The store is built with many sessions (so many pages), then whole pages of the file are
overwritten with garbage, as a careless live copy of a busy database can leave it. Every
wait is bounded, so a hang fails the test instead of blocking it. Also: a worker thread that
dies (a bug) fails every waiting and later call at once, with UNAVAILABLE.
"""

from __future__ import annotations

import asyncio
import contextlib
import pathlib
import random
import sqlite3
import sys
import textwrap
import threading
from collections.abc import Awaitable
from datetime import UTC, datetime
from typing import Any, TypeVar

import httpx
import pytest
from http_helpers import serve_process

from interlock import Message, Snapshot
from interlock.errors import DataLossError, UnavailableError
from interlock.records._sessions import SessionState
from interlock.stores.sqlite import SQLiteStore
from interlock.stores.sqlite._worker import Job

T0 = datetime(2025, 1, 1, tzinfo=UTC)
SESSIONS = 300
WAIT = 20.0
"""Seconds any one call may take before the test calls it a hang."""

_T = TypeVar("_T")


def snapshot(i: int) -> Snapshot:
    session = f"session-{i:03d}"
    state = SessionState(session_id=session, messages=[Message.user(f"question {i} " + "q" * 300)])
    return Snapshot(snapshot_id=f"snap-{i:03d}", session_id=session, created_at=T0, state=state)


async def build(path: pathlib.Path) -> list[Snapshot]:
    """The store's snapshots, as written."""
    written: list[Snapshot] = []
    async with SQLiteStore(path) as store:
        for i in range(SESSIONS):
            snap = snapshot(i)
            saved = await store.save(snap.snapshot_id, lambda _, s=snap: s)
            assert saved is not None
            written.append(saved)
    with contextlib.closing(sqlite3.connect(path)) as con:
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # every page in the main file
    return written


def row_pages(path: pathlib.Path) -> tuple[int, list[int]]:
    """The page size, and the leaf pages of the snapshot table (in file order)."""
    with contextlib.closing(sqlite3.connect(path)) as con:
        size = con.execute("PRAGMA page_size").fetchone()[0]
        pages = con.execute(
            "SELECT pageno FROM dbstat WHERE name = 'interlock_snapshots' AND pagetype = 'leaf' ORDER BY pageno"
        ).fetchall()
    return size, [page for (page,) in pages]


def garble(path: pathlib.Path, fractions: tuple[float, ...]) -> None:
    """Overwrite the leaf pages of the snapshot table at these fractions of their run (not the last) with garbage."""
    size, leaves = row_pages(path)
    assert len(leaves) > 10, leaves
    rng = random.Random(25)
    with path.open("r+b") as f:
        for fraction in fractions:
            page = leaves[int(fraction * (len(leaves) - 2))]  # the last leaf takes new rows: keep it
            f.seek((page - 1) * size)
            f.write(rng.randbytes(size))


async def bounded(call: Awaitable[_T]) -> _T:
    async with asyncio.timeout(WAIT):
        return await call


async def outcome(call: Awaitable[Any]) -> Any:
    """The call's value, or ``"DATA_LOSS"`` (any other error, or a hang, fails the test)."""
    try:
        return await bounded(call)
    except DataLossError as exc:
        assert "restore it from a backup" in exc.message
        return "DATA_LOSS"


OFFSETS = [(0.0, 0.5), (0.2, 0.8), (0.4, 0.9), (0.6, 0.7)]
"""Where the two damaged pages are, as fractions of the run of the snapshot table's leaf pages."""


@pytest.mark.parametrize("fractions", OFFSETS, ids=str)
async def test_damaged_pages_are_data_loss_and_the_rest_is_served(
    tmp_path: pathlib.Path, fractions: tuple[float, ...]
) -> None:
    path = tmp_path / "damaged.db"
    written = await build(path)
    garble(path, fractions)
    store = SQLiteStore(path)
    try:
        assert await outcome(store.list()) == "DATA_LOSS"  # reads every row
        loads = [await outcome(store.load(f"snap-{i:03d}")) for i in range(SESSIONS)]
        lost = [i for i, got in enumerate(loads) if got == "DATA_LOSS"]
        assert lost, "no load touched a damaged page"
        served = [i for i in range(SESSIONS) if i not in lost]
        assert len(served) >= SESSIONS // 2
        for i in served:  # exactly what was written, read after the failures
            assert loads[i] == written[i]
            assert await outcome(store.latest(f"session-{i:03d}")) == written[i]
        again = await outcome(store.load(f"snap-{lost[0]:03d}"))
        assert again == "DATA_LOSS"  # still refused, still answered
        fresh = Snapshot(snapshot_id="fresh", session_id="fresh", created_at=T0)
        saved = await outcome(store.save("fresh", lambda _: fresh))  # a new turn still writes
        assert isinstance(saved, Snapshot) and await outcome(store.load("fresh")) == saved
        await bounded(store.ready())
    finally:
        await bounded(store.close())


AGENTS = """
from interlock import PromptAgent
from interlock.stores.sqlite import SQLiteStore
from interlock.testing import EchoModel

agents = [PromptAgent("echo", EchoModel(), store=SQLiteStore({path!r}))]
"""


async def test_a_served_store_with_damaged_pages_answers_data_loss_and_keeps_serving(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "damaged.db"
    await build(path)
    garble(path, (0.1, 0.6))
    (tmp_path / "damaged_agents.py").write_text(textwrap.dedent(AGENTS.format(path=str(path))))
    command = [sys.executable, "-m", "interlock", "serve", "damaged_agents:agents", "--port", "0"]
    with serve_process(command, cwd=tmp_path) as server:
        async with httpx.AsyncClient(base_url=server.url, timeout=WAIT) as http:

            async def get(i: int) -> httpx.Response:
                return await http.post("/echo/getSnapshot", json={"data": {"snapshotId": f"snap-{i:03d}"}})

            answers = [await get(i) for i in range(SESSIONS)]
            lost = [i for i, answer in enumerate(answers) if answer.status_code != 200]
            assert lost, "no getSnapshot touched a damaged page"
            for i in lost:
                body = answers[i].json()
                assert body["status"] == "DATA_LOSS", body
                assert "restore it from a backup" in body["message"]
            assert (await get(lost[-1])).json()["status"] == "DATA_LOSS"
            served = [i for i in range(SESSIONS) if i not in lost]
            assert len(served) >= SESSIONS // 2
            for i in served[:: len(served) // 10]:  # still served after the failures
                assert (
                    (await get(i))
                    .json()["result"]["state"]["messages"][0]["content"][0]["text"]
                    .startswith(f"question {i} ")
                )
            health = await http.get("/healthz")
            assert (health.status_code, health.json()["status"]) == (200, "SERVING")
            body = {"data": {"message": {"role": "user", "content": [{"text": "hi"}]}}, "init": {}}
            turn = await http.post("/echo", json=body)
            assert turn.status_code == 200, turn.text
            assert turn.json()["result"]["finishReason"] == "stop"
    assert "Traceback" not in "".join(server.log), "".join(server.log)


async def test_a_dead_worker_thread_fails_every_waiting_and_later_call(tmp_path: pathlib.Path) -> None:
    """Whatever kills the worker thread, no call waits for ever: each fails with UNAVAILABLE, saying what to do."""
    store = SQLiteStore(tmp_path / "dead.db")
    await store.setup()
    worker = store._worker  # pyright: ignore[reportPrivateUsage]
    taken, go = threading.Event(), threading.Event()

    def execute(batch: list[Job]) -> None:  # in place of the worker's: an error that escapes it
        taken.set()
        go.wait(WAIT)
        raise RuntimeError("injected")

    worker._execute = execute  # type: ignore[method-assign]
    first = asyncio.ensure_future(store.load("a"))
    assert await asyncio.to_thread(taken.wait, WAIT)
    waiting = [
        asyncio.ensure_future(store.load("b")),
        asyncio.ensure_future(store.list()),
        asyncio.ensure_future(store.ready()),
    ]
    await asyncio.sleep(0)
    go.set()
    for call in [first, *waiting, store.load("later"), store.journal_entries(), store.ready()]:
        with pytest.raises(UnavailableError, match="worker thread failed .*RuntimeError: injected.*restart") as info:
            await bounded(call)
        assert info.value.status == "UNAVAILABLE"
    await bounded(store.close())
