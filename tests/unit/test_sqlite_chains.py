"""Cold loads stay bounded: a row is a delta on its parent only while its base chain is cheap to read."""

from __future__ import annotations

import pathlib
import random
import sqlite3

import pytest

from interlock import Message, Snapshot
from interlock.errors import DataLossError
from interlock.messages import messages_to_json
from interlock.records._sessions import SessionState
from interlock.stores._sql.history import CHAIN_LIMIT, CHAIN_SLACK, ROW_COST, ChainCache
from interlock.stores._sql.row_codec import dumps
from interlock.stores.sqlite import SQLiteStore
from interlock.stores.sqlite._codec import id_in
from interlock.stores.sqlite._schema import MAX_CHAIN, SELECT_CHAIN


def chain_length(path: pathlib.Path, snapshot_id: str) -> int:
    """How many rows a cold load of ``snapshot_id`` reads: the row, its base, ..., down to a full checkpoint."""
    con = sqlite3.connect(path)
    try:
        return len(con.execute(SELECT_CHAIN, ("", id_in(snapshot_id), MAX_CHAIN)).fetchall())
    finally:
        con.close()


async def write_session(store: SQLiteStore, histories: list[list[Message]]) -> str:
    """One snapshot per history, each the child of the one before; returns the last one's id."""
    parent: str | None = None
    for i, messages in enumerate(histories):
        snap = Snapshot(
            snapshot_id=f"r{i}", session_id="s", parent_id=parent, state=SessionState(messages=list(messages))
        )
        await store.save(snap.snapshot_id, lambda _, snap=snap: snap)
        parent = snap.snapshot_id
    assert parent is not None
    return parent


def turn(i: int) -> list[Message]:
    return [Message.user(f"question {i} " + "q" * 300), Message.model(f"answer {i} " + "a" * 300)]


async def cold_load(path: pathlib.Path, snapshot_id: str) -> list[Message]:
    async with SQLiteStore(path) as store:
        snap = await store.load(snapshot_id)
    assert snap is not None and snap.state is not None
    return snap.state.messages


def chain_cost(path: pathlib.Path, snapshot_id: str) -> int:
    """What a cold load of ``snapshot_id`` costs: the bytes of the tails it reads, plus :data:`ROW_COST` per row."""
    con = sqlite3.connect(path)
    try:
        rows = con.execute(SELECT_CHAIN, ("", id_in(snapshot_id), MAX_CHAIN)).fetchall()
    finally:
        con.close()
    return sum(len(r[3]) + ROW_COST for r in rows)


def stored_bytes(path: pathlib.Path) -> int:
    con = sqlite3.connect(path)
    try:
        return int(con.execute("SELECT sum(length(tail)) FROM interlock_snapshots").fetchone()[0])
    finally:
        con.close()


async def test_appended_turns_are_stored_as_deltas_whose_cold_load_stays_bounded(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "a.db"
    histories: list[list[Message]] = []
    for i in range(60):
        histories.append((histories[-1] if histories else []) + turn(i))
    async with SQLiteStore(path) as store:
        leaf = await write_session(store, histories)
    for i, history in enumerate(histories):  # any row loads cold in about the time of its history as one document
        document = len(dumps(messages_to_json(history)))
        assert chain_cost(path, f"r{i}") <= CHAIN_LIMIT * document + CHAIN_SLACK + ROW_COST
    assert chain_length(path, leaf) <= 60
    final = len(dumps(messages_to_json(histories[-1])))
    assert stored_bytes(path) <= final + 60 * ROW_COST / (CHAIN_LIMIT - 1)  # linear: not 60 copies of the history
    assert await cold_load(path, leaf) == histories[-1]


async def test_rows_that_add_nothing_get_checkpoints_so_a_cold_load_stays_bounded(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "b.db"
    same = turn(0)
    async with SQLiteStore(path) as store:
        leaf = await write_session(store, [same] * 150)  # e.g. a pending row per resume, with no new message
    depth = chain_length(path, leaf)
    assert 1 <= depth <= 40  # not 150: one checkpoint and the deltas since
    assert await cold_load(path, leaf) == same


async def test_a_compacted_history_gets_checkpoints(tmp_path: pathlib.Path) -> None:
    """Each row keeps only the last messages of its parent's: without checkpoints its chain would hold them all."""
    path = tmp_path / "c.db"
    histories: list[list[Message]] = [turn(0)]
    for i in range(1, 150):
        histories.append(histories[-1][-3:] + turn(i))
    async with SQLiteStore(path) as store:
        leaf = await write_session(store, histories)
    depth = chain_length(path, leaf)
    assert 1 <= depth <= 40
    assert await cold_load(path, leaf) == histories[-1]


async def test_a_damaged_tail_is_named_even_when_the_tails_are_read_together(tmp_path: pathlib.Path) -> None:
    """The chain's tails are parsed as one document; a damaged one still fails the load, naming its row."""
    path = tmp_path / "d.db"
    histories: list[list[Message]] = []
    for i in range(6):
        histories.append((histories[-1] if histories else []) + turn(i))
    async with SQLiteStore(path) as store:
        await write_session(store, histories)
    damages = [
        '{"role": "user", "content": []}',  # valid JSON, not a list of messages
        '[{"role": "user", "content": []}],[{"role": "user", "content": []}]',  # two arrays: shifts the rest
        "[5]",
        "[",
    ]
    for damage in damages:
        con = sqlite3.connect(path)
        con.execute("UPDATE interlock_snapshots SET tail = ? WHERE snapshot_id = ?", (damage, id_in("r2")))
        con.commit()
        con.close()
        async with SQLiteStore(path) as cold:
            with pytest.raises(DataLossError, match="'r2'"):
                await cold.load("r5")


def test_the_cache_knows_the_revisions_it_holds_through_evictions_and_forgets() -> None:
    """A chain's rows are looked up in the cache only when their revision is in it: it must never go stale."""
    cache = ChainCache(cache_bytes=300)
    history = tuple(turn(0))
    for i in range(5):
        cache.remember("", f"r{i}", 100 + i, history, 100, 100)  # 3 fit: r0 and r1 are evicted
        cache.remember("", f"r{i}", 200 + i, history, 100, 100)  # a new revision replaces the old one
    cache.forget("", ["r3"])
    assert set(cache.revisions) == {c.mrev for c in cache.cache.values()} == {202, 204}
    assert all(n == 1 for n in cache.revisions.values())
    assert cache.cached("", "r4", 204) == history and cache.cached("", "r4", 104) is None
    cache.clear()
    assert not cache.revisions


async def test_content_revisions_do_not_follow_the_random_modules_seed(tmp_path: pathlib.Path) -> None:
    """Two writers that seed :mod:`random` alike (a test suite, forked workers) still draw different revisions."""
    path = tmp_path / "r.db"
    async with SQLiteStore(path) as store:
        for sid in ("a", "b"):
            random.seed(7)
            snap = Snapshot(snapshot_id=sid, session_id=sid, state=SessionState(messages=turn(0)))
            await store.save(sid, lambda _, snap=snap: snap)
    con = sqlite3.connect(path)
    try:
        revisions = [mrev for (mrev,) in con.execute("SELECT mrev FROM interlock_snapshots ORDER BY snapshot_id")]
    finally:
        con.close()
    assert len(revisions) == 2 and revisions[0] != revisions[1]


async def test_a_child_written_with_its_parent_in_one_transaction_is_a_delta_on_the_parent_as_written(
    tmp_path: pathlib.Path,
) -> None:
    """The child's base is the parent's row as this transaction left it (new messages, new revision)."""
    path = tmp_path / "r.db"
    parent = Snapshot(snapshot_id="p", session_id="s", state=SessionState(messages=turn(0)))
    grown = parent.evolve(state=SessionState(messages=turn(0) + turn(1)))
    child = Snapshot(
        snapshot_id="c", session_id="s", parent_id="p", state=SessionState(messages=turn(0) + turn(1) + turn(2))
    )
    async with SQLiteStore(path) as store:
        await store.save("p", lambda _: parent)
        await store.save_all([("p", lambda _: grown), ("c", lambda _: child)])
    con = sqlite3.connect(path)
    try:
        ((p_mrev,),) = con.execute("SELECT mrev FROM interlock_snapshots WHERE snapshot_id = ?", (id_in("p"),))
        ((keep, base_mrev),) = con.execute(
            "SELECT keep, base_mrev FROM interlock_snapshots WHERE snapshot_id = ?", (id_in("c"),)
        )
    finally:
        con.close()
    assert (keep, base_mrev) == (4, p_mrev)
    assert await cold_load(path, "c") == turn(0) + turn(1) + turn(2)
    assert await cold_load(path, "p") == turn(0) + turn(1)
