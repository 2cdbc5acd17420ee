"""SQLite-specific behaviour: linear storage, cold loads, several stores and processes on one file, corruption."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import pathlib
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import cast

import pytest
from refusing import Refusing

from interlock import InMemoryStore, Message, Snapshot
from interlock.errors import DataLossError, FailedPreconditionError, InvalidArgumentError, UsageError
from interlock.messages import messages_to_json
from interlock.records._sessions import SessionState, new_id
from interlock.stores.sqlite import SQLiteStore

T0 = datetime(2025, 1, 1, tzinfo=UTC)


def turn(i: int) -> list[Message]:
    """Two messages of about 300 bytes of JSON each."""
    return [Message.user(f"question {i:03d} " + "q" * 270), Message.model(f"answer {i:03d} " + "a" * 272)]


async def write_chain(store: SQLiteStore, n: int, *, session_id: str = "s") -> list[list[Message]]:
    """n turns written as the runtime does: load the parent, append a turn, save the child."""
    histories: list[list[Message]] = []
    parent: Snapshot | None = None
    for i in range(n):
        messages = (parent.state.messages if parent is not None and parent.state else []) + turn(i)
        snap = Snapshot(
            snapshot_id=f"t{i}",
            session_id=session_id,
            parent_id=None if parent is None else parent.snapshot_id,
            created_at=T0 + timedelta(seconds=i),
            metadata={"agent": "bench"},
            state=SessionState(session_id=session_id, messages=list(messages), custom={"turn": i}),
        )
        await store.save(snap.snapshot_id, lambda _, s=snap: s)
        histories.append(list(messages))
        parent = await store.load(snap.snapshot_id)
    return histories


def raw(path: pathlib.Path, sql: str, args: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    with contextlib.closing(sqlite3.connect(path, timeout=30)) as con, con:
        return con.execute(sql, args).fetchall()


def json_size(messages: list[Message]) -> int:
    return len(json.dumps(messages_to_json(messages), ensure_ascii=False, separators=(",", ":")).encode())


async def test_storage_is_linear_in_conversation_length(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "linear.db"
    async with SQLiteStore(path) as store:
        histories = await write_chain(store, 200)
    final = histories[-1]
    assert len(final) == 400
    history_bytes = json_size(final)  # ≈ 120 KB
    raw(path, "PRAGMA wal_checkpoint(TRUNCATE)")
    size = path.stat().st_size
    # Each message's JSON is stored once, in the tail of the turn that added it (≈ history_bytes
    # in all). Each row adds ~0.5 KB of bookkeeping (ids, timestamps, custom, metadata) plus its
    # entries in the primary-key, session and base indexes, ≈ 100 KB for 200 rows, below the second
    # history_bytes. 64 KiB covers the fixed part: the header and schema pages, the first page of the
    # table and each index, and B-tree page slack. Copying the history into every row would need
    # ~sum(2i × 300 B) ≈ 12 MB, a hundred times this budget.
    assert size <= 2 * history_bytes + 64 * 1024, (size, history_bytes)
    # every turn but the first is a delta on its parent (base_id NULL: the base is the parent)
    rows = raw(path, "SELECT snapshot_id, parent_id, base_id, keep, tail FROM interlock_snapshots")
    by_id = {r[0]: r for r in rows}
    for i in range(1, 200):
        _, parent_id, base_id, keep, tail = by_id[f"t{i}"]
        assert (parent_id, base_id, keep) == (f"t{i - 1}", None, 2 * i)
        assert isinstance(tail, str) and len(json.loads(tail)) == 2


def short_turn(i: int) -> list[Message]:
    """Two messages of about 160 bytes of JSON each, like the agent benchmark's."""
    return [Message.user(f"question {i:03d}: " + "q" * 110), Message.model(f"answer {i:03d}: " + "a" * 106)]


async def test_per_row_overhead_stays_small_for_short_turns(tmp_path: pathlib.Path) -> None:
    """A 200-turn session of ~160-byte messages, ids made as the runtime makes them: the file stays ≤ 2× its JSON."""
    path = tmp_path / "short.db"
    session_id = new_id()
    ids = [new_id() for _ in range(200)]
    messages: list[Message] = []
    async with SQLiteStore(path) as store:
        for i, sid in enumerate(ids):
            messages = messages + short_turn(i)
            snap = Snapshot(
                snapshot_id=sid,
                session_id=session_id,
                parent_id=ids[i - 1] if i else None,
                created_at=T0 + timedelta(seconds=i),
                finish_reason="stop",
                metadata={"agent": "chat"},
                state=SessionState(session_id=session_id, messages=list(messages)),
            )
            await store.save(sid, lambda _, s=snap: s)
        leaf = await store.latest(session_id)
        assert leaf is not None and leaf.state is not None and leaf.state.messages == messages
    assert len(json.dumps(messages_to_json(messages[:1]), separators=(",", ":"))) in range(150, 170)
    history_bytes = json_size(messages)  # ≈ 64 KB
    raw(path, "PRAGMA wal_checkpoint(TRUNCATE)")
    size = path.stat().st_size
    # Each row adds its tail (its turn's JSON) plus ~130 bytes: two 16-byte ids, a one-byte
    # session key, two 6-byte message revisions, one timestamp, the metadata, the record header,
    # and its entries in the primary-key and session indexes (the session index names the parent
    # too, 17 bytes, so that it finds a row's children). 68 KiB covers the fixed part: the header
    # and schema pages and the first page of each table and index (the outbox's table and its two
    # indexes are three of them; the leaves, the open interrupts and its two indexes four more).
    # (With ids as text and the session id's text in every row and session-index entry, this was ~2.5×.)
    assert size <= 2 * history_bytes + 68 * 1024, (size, history_bytes, size / history_bytes)
    stored = raw(
        path,
        "SELECT typeof(snapshot_id), length(snapshot_id), typeof(parent_id), session, updated_us, status, "
        "finish_reason FROM interlock_snapshots WHERE snapshot_id = ?",
        (bytes.fromhex(ids[5].replace("-", "")),),
    )
    assert stored == [("blob", 16, "blob", 1, 0, 0, 1)]  # 0: "completed", 1: "stop"
    assert raw(path, "SELECT id, tenant, length(session_id) FROM interlock_sessions") == [(1, "", 16)]


ODD_IDS = [
    "t1",
    "123",
    "0",
    "é-ü ✓",
    " padded ",
    "8C4A0D4E-1B2C-4D5E-8F90-A1B2C3D4E5F6",  # a UUID, but not lowercase
    "{8c4a0d4e-1b2c-4d5e-8f90-a1b2c3d4e5f6}",
    "8c4a0d4e1b2c4d5e8f90a1b2c3d4e5f6",
    "8c4a0d4e-1b2c-4d5e-8f90-a1b2c3d4e5f6\n",
    "8c4a0d4e-1b2c-4d5e-8f90-a1b2c3d4e5fg",  # 36 characters, dashes in place, not hex
    "urn:uuid:8c4a0d4e-1b2c-4d5e-8f90-a1b2c3d4e5f6",
]
UUID_IDS = ["8c4a0d4e-1b2c-4d5e-8f90-a1b2c3d4e5f6", "00000000-0000-0000-0000-000000000000", new_id()]


async def test_ids_and_session_ids_round_trip_exactly(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "ids.db"
    ids = ODD_IDS + UUID_IDS
    sessions = {sid: ids[(n + 1) % len(ids)] for n, sid in enumerate(ids)}  # every id is also a session id
    memory = InMemoryStore()
    async with SQLiteStore(path) as store:
        for n, sid in enumerate(ids):
            snap = Snapshot(
                snapshot_id=sid,
                session_id=sessions[sid],
                parent_id=ids[n - 1] if n else None,
                created_at=T0,  # all at once: list breaks the tie by id
                status="pending" if n % 2 else "odd status",
                finish_reason=None if n % 3 else "an odd reason",
                claimed_by=ids[-n - 1],
                claim_expires_at=T0 - timedelta(seconds=n),
                state=SessionState(session_id=ids[-n - 1], messages=turn(n)),
            )
            for target in (store, memory):
                await target.save(sid, lambda _, s=snap: s, tenant=UUID_IDS[0])
    async with SQLiteStore(path) as cold:
        for sid in ids:
            loaded = await cold.load(sid, tenant=UUID_IDS[0])
            assert loaded is not None and loaded == await memory.load(sid, tenant=UUID_IDS[0]), sid
            assert await cold.latest(sessions[sid], tenant=UUID_IDS[0]) == loaded
            listed = await cold.list(tenant=UUID_IDS[0], session_id=sessions[sid])
            assert [i.snapshot_id for i in listed] == [sid]
        assert await cold.list(tenant=UUID_IDS[0]) == await memory.list(tenant=UUID_IDS[0])
        assert await cold.list(tenant=UUID_IDS[0], finish_reason="an odd reason") == await memory.list(
            tenant=UUID_IDS[0], finish_reason="an odd reason"
        )
        upper, lower = [await cold.load(sid, tenant=UUID_IDS[0]) for sid in (UUID_IDS[0].upper(), UUID_IDS[0])]
        assert upper is not None and lower is not None and upper.session_id != lower.session_id  # two rows
        assert await cold.load(UUID_IDS[0]) is None  # another tenant
    kinds = dict(
        cast(
            list[tuple[object, str]],
            raw(path, "SELECT snapshot_id, typeof(snapshot_id) || length(snapshot_id) FROM interlock_snapshots"),
        )
    )
    assert sorted(k for k in kinds.values() if k == "blob16") == ["blob16"] * len(UUID_IDS)
    assert {sid for sid, kind in kinds.items() if kind != "blob16"} == set(ODD_IDS)


async def test_sessions_are_interned_and_dropped_with_their_last_snapshot(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "interned.db"
    async with SQLiteStore(path) as store:
        await write_chain(store, 3, session_id="a")
        assert raw(path, "SELECT tenant, session_id FROM interlock_sessions ORDER BY id") == [("", "a")]
        b = Snapshot(snapshot_id="b0", session_id="b", state=SessionState(session_id="b", messages=turn(0)))
        await store.save("b0", lambda _: b, tenant="acme")
        await store.save("b1", lambda _: b.evolve(snapshot_id="b1", parent_id="b0"), tenant="acme")
        assert raw(path, "SELECT tenant, session_id FROM interlock_sessions ORDER BY id") == [("", "a"), ("acme", "b")]
        assert await store.delete(["b0"], tenant="acme") == 1
        assert len(raw(path, "SELECT * FROM interlock_sessions")) == 2  # b1 is left
        assert await store.delete(["b1"], tenant="acme") == 1
        assert raw(path, "SELECT tenant, session_id FROM interlock_sessions") == [("", "a")]
        assert await store.latest("b", tenant="acme") is None
        await store.save("b2", lambda _: b.evolve(snapshot_id="b2"), tenant="acme")  # interned again
        assert (await store.latest("b", tenant="acme")) is not None
        assert await store.prune(session_id="a", keep_last=1) == 2
        assert [i.snapshot_id for i in await store.list()] == ["t2"]


async def test_stores_opening_a_new_file_at_once_share_one_schema(tmp_path: pathlib.Path) -> None:
    """Each store creates the schema in its own BEGIN IMMEDIATE transaction: concurrent first opens are safe."""
    path = tmp_path / "race.db"
    stores = [SQLiteStore(path) for _ in range(6)]
    try:
        session_id = new_id()

        async def first_write(n: int, store: SQLiteStore) -> None:
            snap = Snapshot(
                snapshot_id=f"r{n}", session_id=session_id, state=SessionState(session_id=session_id, messages=turn(n))
            )
            await store.save(snap.snapshot_id, lambda _: snap)

        await asyncio.gather(*(first_write(n, store) for n, store in enumerate(stores)))
        assert {i.snapshot_id for i in await stores[0].list(session_id=session_id)} == {f"r{n}" for n in range(6)}
    finally:
        for store in stores:
            await store.close()
    assert len(raw(path, "SELECT * FROM interlock_sessions")) == 1


async def test_a_file_in_the_earlier_layout_is_refused(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "old.db"
    raw(path, "CREATE TABLE interlock_snapshots (tenant TEXT, snapshot_id TEXT, session_id TEXT)")
    store = SQLiteStore(path)
    try:
        with pytest.raises(FailedPreconditionError, match="earlier interlock"):
            await store.load("x")
    finally:
        await store.close()


async def test_cold_store_loads_the_full_history(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "cold.db"
    async with SQLiteStore(path) as store:
        histories = await write_chain(store, 50)
        warm = await store.load("t49")
    async with SQLiteStore(path) as cold:
        leaf = await cold.load("t49")
        assert leaf is not None and leaf.state is not None
        assert leaf == warm
        assert leaf.state.messages == histories[-1]
        middle = await cold.load("t20")
        assert middle is not None and middle.state is not None
        assert middle.state.messages == histories[20]
        latest = await cold.latest("s")
        assert latest == warm
        # a child saved by the cold store is again a delta on its parent
        child = leaf.evolve(snapshot_id="t50", parent_id="t49", state=leaf.state.copy(), created_at=T0)
        assert child.state is not None
        child.state.messages.extend(turn(50))
        await cold.save("t50", lambda _: child)
    assert raw(path, "SELECT base_id, keep FROM interlock_snapshots WHERE snapshot_id = 't50'") == [(None, 100)]
    async with SQLiteStore(path) as again:
        loaded = await again.load("t50")
        assert loaded is not None and loaded.state is not None
        assert loaded.state.messages == histories[-1] + turn(50)


async def test_bookkeeping_updates_do_not_rewrite_messages(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "beat.db"
    async with SQLiteStore(path) as store:
        await write_chain(store, 3)
        before = raw(path, "SELECT base_id, keep, tail, mrev FROM interlock_snapshots WHERE snapshot_id = 't2'")
        await store.save("t2", lambda cur: None if cur is None else cur.evolve(heartbeat_at=T0, claimed_by="x"))
        after = raw(path, "SELECT base_id, keep, tail, mrev FROM interlock_snapshots WHERE snapshot_id = 't2'")
        assert after == before
        loaded = await store.load("t2")
        assert loaded is not None and (loaded.heartbeat_at, loaded.claimed_by, loaded.version) == (T0, "x", 2)


async def test_rewrite_by_another_store_is_seen_despite_the_cache(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "shared.db"
    async with SQLiteStore(path) as a, SQLiteStore(path) as b:
        histories = await write_chain(a, 3)
        replaced = [Message.user("replaced")]
        await b.save(
            "t1", lambda cur: None if cur is None else cur.evolve(state=SessionState(session_id="s", messages=replaced))
        )
        t1 = await a.load("t1")
        assert t1 is not None and t1.state is not None and t1.state.messages == replaced
        t2 = await a.load("t2")
        assert t2 is not None and t2.state is not None and t2.state.messages == histories[2]


async def test_child_written_by_another_store_builds_on_the_cached_parent(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "handoff.db"
    async with SQLiteStore(path) as a, SQLiteStore(path) as b:
        histories = await write_chain(a, 3)  # a has t2 cached
        t2 = await b.load("t2")
        assert t2 is not None and t2.state is not None
        child = t2.evolve(snapshot_id="t3", parent_id="t2", state=t2.state.copy())
        assert child.state is not None
        child.state.messages.extend(turn(3))
        await b.save("t3", lambda _: child)
        t3 = await a.load("t3")  # t2's messages from a's cache + t3's tail
        assert t3 is not None and t3.state is not None
        assert t3.state.messages == histories[2] + turn(3)
        assert t3.state.messages[0] is (await a.load("t2")).state.messages[0]  # type: ignore[union-attr]


async def test_a_child_that_rewrites_history_stores_only_what_differs(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "rewrite.db"
    async with SQLiteStore(path) as store:
        histories = await write_chain(store, 3)
        t2 = await store.load("t2")
        assert t2 is not None and t2.state is not None
        # a resume replaces the parent's last (interrupted) message, then appends
        resumed = [*t2.state.messages[:-1], Message.model("answer 2, resumed"), *turn(3)]
        child = t2.evolve(snapshot_id="t3", parent_id="t2", state=SessionState(session_id="s", messages=resumed))
        await store.save("t3", lambda _: child)
        # a compaction keeps nothing of the parent: a full checkpoint
        compacted = [Message.system("summary"), *turn(4)]
        grandchild = child.evolve(
            snapshot_id="t4", parent_id="t3", state=SessionState(session_id="s", messages=compacted)
        )
        await store.save("t4", lambda _: grandchild)
    rows = raw(path, "SELECT snapshot_id, base_id, keep, tail FROM interlock_snapshots WHERE snapshot_id >= 't3'")
    by_id = {r[0]: r[1:] for r in rows}
    assert by_id["t3"][:2] == (None, 5) and len(json.loads(str(by_id["t3"][2]))) == 3
    assert by_id["t4"][:2] == (None, 0) and len(json.loads(str(by_id["t4"][2]))) == 3
    async with SQLiteStore(path) as cold:
        for sid, expected in (("t3", resumed), ("t4", compacted), ("t2", histories[2])):
            loaded = await cold.load(sid)
            assert loaded is not None and loaded.state is not None and loaded.state.messages == expected


async def test_named_bases_survive_deletes(tmp_path: pathlib.Path) -> None:
    """A base that is not the row's own (same-session) parent is named in base_id, and still honoured."""
    path = tmp_path / "named.db"
    async with SQLiteStore(path) as store:
        histories = await write_chain(store, 4)
        t1 = await store.load("t1")
        assert t1 is not None and t1.state is not None
        # a child in another session: its base t1 is named
        other = Snapshot(
            snapshot_id="o",
            session_id="other",
            parent_id="t1",
            state=SessionState(session_id="s", messages=[*t1.state.messages, *turn(9)]),
        )
        await store.save("o", lambda _: other)
        # t3 re-parented with unchanged messages: its implicit base t2 becomes named
        await store.save("t3", lambda cur: None if cur is None else cur.evolve(parent_id="t0"))
        named = raw(path, "SELECT snapshot_id, base_id FROM interlock_snapshots WHERE base_id IS NOT NULL")
        assert sorted(named) == [("o", "t1"), ("t3", "t2")]
        assert await store.delete(["t1", "t2"]) == 2
    async with SQLiteStore(path) as cold:
        o = await cold.load("o")
        assert o is not None and o.state is not None
        assert o.state.messages == histories[1] + turn(9)
        assert o.state.session_id == "s" and o.session_id == "other"
        t3 = await cold.load("t3")
        assert t3 is not None and t3.state is not None and t3.parent_id == "t0"
        assert t3.state.messages == histories[3]


async def test_custom_state_must_be_json(tmp_path: pathlib.Path) -> None:
    async with SQLiteStore(tmp_path / "custom.db") as store:
        with pytest.raises(InvalidArgumentError, match=r"state\.custom\.when is not a JSON value"):
            SessionState(session_id="s", custom={"when": T0})  # refused at the edge
        state = SessionState(session_id="s")
        state.custom = {"when": T0}  # the store still refuses what slipped past it
        bad = Snapshot(snapshot_id="x", session_id="s", state=state)
        with pytest.raises(InvalidArgumentError, match="'x'.*not JSON-serialisable"):
            await store.save("x", lambda _: bad)
        assert await store.load("x") is None


async def test_a_small_cache_still_loads_everything(tmp_path: pathlib.Path) -> None:
    async with SQLiteStore(tmp_path / "small.db", cache_bytes=3_000) as store:
        histories = await write_chain(store, 20)
        for i in (19, 0, 7, 13, 19, 1):
            loaded = await store.load(f"t{i}")
            assert loaded is not None and loaded.state is not None
            assert loaded.state.messages == histories[i]


INCREMENT = """
def increment(current, who):
    state = current.state.copy()
    counts = dict(state.custom)
    counts["n"] += 1
    counts[who] = counts.get(who, 0) + 1
    state.custom = counts
    return current.evolve(state=state)
"""
namespace: dict[str, object] = {}
exec(INCREMENT, namespace)  # the same updater in this process and in the child process
increment = cast(Callable[[Snapshot | None, str], Snapshot | None], namespace["increment"])


async def seed_counter(store: SQLiteStore) -> None:
    counter = Snapshot(
        snapshot_id="c", session_id="s", state=SessionState(session_id="s", messages=turn(0), custom={"n": 0})
    )
    await store.save("c", lambda _: counter)


async def test_two_stores_on_one_file_never_lose_updates(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "two.db"
    async with SQLiteStore(path) as a, SQLiteStore(path) as b:
        await seed_counter(a)
        await asyncio.gather(
            *(a.save("c", lambda cur: increment(cur, "a")) for _ in range(50)),
            *(b.save("c", lambda cur: increment(cur, "b")) for _ in range(50)),
        )
        loaded = await b.load("c")
        assert loaded is not None and loaded.state is not None
        assert loaded.state.custom == {"n": 100, "a": 50, "b": 50}
        assert loaded.version == 101


CHILD = (
    textwrap.dedent(
        """
    import asyncio, sys
    from interlock.stores.sqlite import SQLiteStore
    """
    )
    + INCREMENT
    + textwrap.dedent(
        """
    async def main(path, n):
        async with SQLiteStore(path) as store:
            await store.load("c")
            print("ready", flush=True)
            sys.stdin.readline()
            for _ in range(n):
                await store.save("c", lambda cur: increment(cur, "child"))
    asyncio.run(main(sys.argv[1], int(sys.argv[2])))
    """
    )
)


@pytest.mark.slow
async def test_another_process_on_the_same_file_never_loses_updates(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "procs.db"
    n = 100
    async with SQLiteStore(path) as store:
        await seed_counter(store)
        with subprocess.Popen(
            [sys.executable, "-c", CHILD, os.fspath(path), str(n)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        ) as proc:
            assert proc.stdin is not None and proc.stdout is not None
            assert (await asyncio.to_thread(proc.stdout.readline)).strip() == "ready"
            proc.stdin.write("go\n")
            proc.stdin.flush()
            for _ in range(n):
                await store.save("c", lambda cur: increment(cur, "parent"))
            assert await asyncio.to_thread(proc.wait, 60) == 0
        loaded = await store.load("c")
        assert loaded is not None and loaded.state is not None
        assert loaded.state.custom == {"n": 2 * n, "parent": n, "child": n}
        assert loaded.version == 2 * n + 1


async def test_watch_sees_an_abort_written_by_another_store(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "watch.db"
    async with SQLiteStore(path) as a, SQLiteStore(path) as b:
        pending = Snapshot(snapshot_id="p", session_id="s", heartbeat_at=T0, status="pending")
        await a.save("p", lambda _: pending)
        seen: list[str] = []

        async def watch() -> None:
            async for status in a.watch("p"):
                seen.append(status)
                if status == "pending":
                    await b.save("p", lambda cur: None if cur is None else cur.evolve(status="aborted"))

        async with asyncio.timeout(10):
            await watch()
        assert seen == ["pending", "aborted"]


async def test_corrupt_rows_raise_data_loss(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "corrupt.db"
    async with SQLiteStore(path) as store:
        await write_chain(store, 4)
    raw(path, "UPDATE interlock_snapshots SET tail = '[{\"role\": ' WHERE snapshot_id = 't2'")
    raw(path, "UPDATE interlock_snapshots SET custom = 'nope' WHERE snapshot_id = 't1'")
    raw(path, "UPDATE interlock_snapshots SET metadata = '{' WHERE snapshot_id = 't0'")
    async with SQLiteStore(path) as cold:
        with pytest.raises(DataLossError, match="'t2'") as info:
            await cold.load("t3")  # its history passes through t2
        assert info.value.status == "DATA_LOSS"
        with pytest.raises(DataLossError, match="'t1'"):
            await cold.load("t1")
        with pytest.raises(DataLossError, match="'t0'"):
            await cold.load("t0")
        with pytest.raises(DataLossError, match="'t0'"):
            await cold.list()
        with pytest.raises(DataLossError, match="'t2'"):
            await cold.save("t3", lambda cur: None if cur is None else cur.evolve(heartbeat_at=T0))
    raw(path, "UPDATE interlock_snapshots SET tail = '[{\"role\": 5}]' WHERE snapshot_id = 't2'")
    async with SQLiteStore(path) as cold:
        with pytest.raises(DataLossError, match="'t2'"):
            await cold.load("t2")
    raw(path, "UPDATE interlock_snapshots SET artifacts = '[5]' WHERE snapshot_id = 't0'")
    async with SQLiteStore(path) as cold:
        with pytest.raises(DataLossError, match="'t0'.*wrong shape"):
            await cold.load("t0")
    raw(path, "DELETE FROM interlock_snapshots WHERE snapshot_id = 't2'")  # behind the store's back
    async with SQLiteStore(path) as cold:
        with pytest.raises(DataLossError, match="'t3'.*'t2' is missing"):
            await cold.load("t3")


async def test_not_a_database_raises_data_loss(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "junk.db"
    path.write_bytes(b"this is not a database" * 100)
    store = SQLiteStore(path)
    try:
        with pytest.raises(DataLossError, match="not a usable database"):
            await store.load("x")
    finally:
        await store.close()


async def test_from_url_setup_and_close(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "url.db"
    async with SQLiteStore.from_url(f"sqlite:///{path}") as store:  # sqlite:////abs/path
        assert store.path == os.fspath(path)
        assert raw(path, "PRAGMA journal_mode") == [("wal",)]
        await store.setup()  # idempotent
        await seed_counter(store)
    with pytest.raises(UsageError, match="closed"):
        await store.load("c")
    await store.close()  # idempotent
    async with SQLiteStore.from_url(path) as again:
        assert (await again.load("c")) is not None
    async with SQLiteStore(":memory:") as memory:
        await seed_counter(memory)
        assert (await memory.load("c")) is not None


def test_switching_to_wal_waits_while_a_concurrent_opener_holds_the_lock() -> None:
    """SQLite can refuse the switch at once (no busy handler) while another opener holds a lock: it is tried again."""
    from interlock.stores import sqlite as sqlite_module

    busy = Refusing(3, sqlite3.SQLITE_BUSY)
    sqlite_module._enter_wal(busy)  # type: ignore[arg-type]
    assert busy.calls == 4
    damaged = Refusing(1, sqlite3.SQLITE_CORRUPT)  # anything else is not waited out
    with pytest.raises(sqlite3.OperationalError):
        sqlite_module._enter_wal(damaged)  # type: ignore[arg-type]
    assert damaged.calls == 1
    stuck = Refusing(10**6, sqlite3.SQLITE_BUSY)
    with pytest.raises(sqlite3.OperationalError):
        sqlite_module._enter_wal(stuck, timeout=0.05)  # type: ignore[arg-type]


_TAKE_SHM = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
try:
    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 128)  # SQLite's "in use" byte of the -shm file
except OSError:
    print("in use")
else:
    print("free")
"""


async def test_another_process_finds_the_wal_index_in_use_while_a_store_has_it_open(tmp_path: pathlib.Path) -> None:
    """SQLite's lock on the -shm file outlives the worker's reads of the WAL header (no descriptor closed on it).

    A process that found the lock free would take itself for the file's first user and reset
    the WAL index under the store's connection.
    """
    path = tmp_path / "inuse.db"
    async with SQLiteStore(path) as store:
        for i in range(3):  # batches, each followed by a look at the WAL
            await store.save(f"s{i}", lambda _, i=i: Snapshot(snapshot_id=f"s{i}", session_id="s"))
        await store.load("s0")
        probe = subprocess.run(
            [sys.executable, "-c", _TAKE_SHM, f"{path}-shm"], capture_output=True, text=True, check=True, timeout=60
        )
        assert probe.stdout.strip() == "in use"


async def test_the_wal_index_stays_in_use_while_any_store_of_the_process_has_the_file_open(
    tmp_path: pathlib.Path,
) -> None:
    """Two stores of one file under two paths share one descriptor: one closing leaves the other's lock."""
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "alias").symlink_to(real, target_is_directory=True)
    first, second = SQLiteStore(real / "shared.db"), SQLiteStore(tmp_path / "alias" / "shared.db")
    async with second:
        async with first:
            await first.save("a", lambda _: Snapshot(snapshot_id="a", session_id="s"))
            await second.save("b", lambda _: Snapshot(snapshot_id="b", session_id="s"))
        await second.save("c", lambda _: Snapshot(snapshot_id="c", session_id="s"))  # a batch after it closed
        probe = subprocess.run(
            [sys.executable, "-c", _TAKE_SHM, f"{real / 'shared.db'}-shm"],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        )
        assert probe.stdout.strip() == "in use"
