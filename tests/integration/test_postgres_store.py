"""What the PostgreSQL store adds to the shared suite: saves atomic across connections without a
process lock, watch woken by NOTIFY (and nothing else), delta storage, typed errors, the extra."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from pg import fresh_dsn

from interlock import Message
from interlock._wire import messages_to_json
from interlock.errors import (
    AlreadyExistsError,
    FailedPreconditionError,
    InvalidArgumentError,
    PermissionDeniedError,
    UnavailableError,
)
from interlock.records._journal import JournalEntry
from interlock.records._sessions import SessionState, Snapshot
from interlock.stores._sql.history import CHAIN_LIMIT, ROW_COST
from interlock.stores._urls import open_store
from interlock.stores.postgres import PostgresStore

T0 = datetime(2025, 1, 1, tzinfo=UTC)


def snap(sid: str, *, session: str = "s1", parent: str | None = None, messages: list[Message] | None = None,
         status: str = "completed", custom: object = None, at: float = 0) -> Snapshot:  # fmt: skip
    return Snapshot(
        snapshot_id=sid,
        session_id=session,
        parent_id=parent,
        created_at=T0 + timedelta(seconds=at),
        status=status,
        finish_reason="stop",
        state=SessionState(session_id=session, messages=list(messages or []), custom=custom),
    )


async def test_concurrent_read_modify_writes_from_two_pools_lose_nothing() -> None:
    url = fresh_dsn()
    async with PostgresStore(url, max_size=8) as one, PostgresStore(url, max_size=8) as two:
        await one.save("counter", lambda _: snap("counter", custom={"n": 0}))

        def bump(cur: Snapshot | None) -> Snapshot:
            assert cur is not None and cur.state is not None
            n = cur.state.custom["n"]
            return cur.evolve(state=SessionState(session_id="s1", messages=[], custom={"n": n + 1}))

        await asyncio.gather(*(store.save("counter", bump) for store in [one, two] * 30))
        final = await one.load("counter")
    assert final is not None and final.state is not None and final.state.custom == {"n": 60}
    assert final.version == 61


async def test_racing_creates_of_one_new_row_have_one_winner() -> None:
    url = fresh_dsn()

    def create(cur: Snapshot | None) -> Snapshot:
        if cur is not None:
            raise AlreadyExistsError("taken")
        return snap("new")

    async with PostgresStore(url) as one, PostgresStore(url) as two:
        results = await asyncio.gather(
            *(store.save("new", create) for store in [one, two] * 10), return_exceptions=True
        )
    assert sum(isinstance(r, Snapshot) for r in results) == 1
    assert sum(isinstance(r, AlreadyExistsError) for r in results) == 19


def entry(key: str, *, attempt: int = 1) -> JournalEntry:
    return JournalEntry(key=key, session_id="s1", snapshot_id="a", agent="bank", tool="transfer", ref="t1",
                        input_digest="d", attempt=attempt, status="running", started_at=T0)  # fmt: skip


async def test_racing_first_journal_entries_of_one_key_have_one_winner() -> None:
    url = fresh_dsn()

    def first(cur: JournalEntry | None) -> JournalEntry:
        if cur is not None:
            raise AlreadyExistsError("taken")
        return entry("k")

    async with PostgresStore(url) as one, PostgresStore(url) as two:
        results = await asyncio.gather(
            *(store.save_all([], journal=[("k", first)]) for store in [one, two] * 10), return_exceptions=True
        )
        assert await one.journal_get("k") == entry("k")
    assert sum(r == [] for r in results) == 1
    assert sum(isinstance(r, AlreadyExistsError) for r in results) == 19


async def test_a_write_the_server_refuses_rolls_back_the_writes_sent_before_it() -> None:
    """A save's writes go out without waiting for each answer: one refused by the server undoes them all."""
    async with PostgresStore(fresh_dsn(), max_size=1) as store:  # one connection: the next save reuses it
        await store.save("a", lambda _: snap("a"))
        too_big = entry("k", attempt=2**40)  # an integer column: refused by the server, after the rows' writes
        with pytest.raises(InvalidArgumentError, match="cannot store this value"):
            await store.save_all(
                [("a", lambda cur: cur.evolve(claimed_by="x") if cur else None), ("b", lambda _: snap("b"))],
                journal=[("k", lambda _: too_big)],
            )
        a = await store.load("a")
        assert a is not None and a.claimed_by is None and a.version == 1
        assert await store.load("b") is None and await store.journal_get("k") is None
        await store.save("b", lambda _: snap("b"))  # the connection was rolled back and serves the next save
        assert await store.load("b") is not None


async def test_watch_is_woken_by_notify_from_another_store_and_does_not_poll() -> None:
    url = fresh_dsn()
    async with PostgresStore(url) as watcher, PostgresStore(url) as writer:
        await writer.save("run", lambda _: snap("run", status="pending"))
        reads = 0
        real = watcher._rows.status  # pyright: ignore[reportPrivateUsage]

        async def counted(*args: object) -> str | None:
            nonlocal reads
            reads += 1
            return await real(*args)  # type: ignore[arg-type]

        watcher._rows.status = counted  # type: ignore[method-assign]
        seen: list[tuple[str, float]] = []

        async def watch() -> None:
            async for status in watcher.watch("run"):
                seen.append((status, time.monotonic()))

        task = asyncio.create_task(watch())
        await asyncio.sleep(1.0)
        assert [s for s, _ in seen] == ["pending"] and reads == 1  # idle: one read, no polling
        await writer.save("other", lambda _: snap("other", status="pending"))  # another row: no wake-up
        await asyncio.sleep(0.3)
        assert reads == 1
        wrote = time.monotonic()
        await writer.save("run", lambda cur: cur.evolve(status="completed") if cur else None)
        await asyncio.wait_for(task, 10)
    assert [s for s, _ in seen] == ["pending", "completed"]
    assert seen[-1][1] - wrote < 2.0
    assert reads == 2


async def test_a_save_notifies_once_committed_and_a_refused_save_notifies_nothing() -> None:
    """The status change is notified after the commit (so a woken watcher reads it), never for a rolled-back save."""
    url = fresh_dsn()
    async with PostgresStore(url, max_size=1) as store:
        listener = await psycopg.AsyncConnection.connect(url, autocommit=True)
        async with listener:
            await listener.execute("LISTEN interlock_snapshots")
            heard: list[tuple[str, str | None]] = []

            async def hear(count: int) -> None:
                async for note in listener.notifies(timeout=5, stop_after=count):
                    tenant, sid = json.loads(note.payload)
                    with psycopg.connect(url) as reader:  # what a woken watcher reads: the committed row
                        found = reader.execute(
                            "SELECT status FROM interlock_snapshots WHERE tenant = %s AND snapshot_id = %s",
                            (tenant, sid),
                        ).fetchone()
                    heard.append((sid, None if found is None else str(found[0])))

            await store.save("a", lambda _: snap("a", status="pending"))
            await hear(1)
            assert heard == [("a", "pending")]
            with pytest.raises(InvalidArgumentError, match="cannot store this value"):
                await store.save_all(
                    [("b", lambda _: snap("b", status="pending"))], journal=[("k", lambda _: entry("k", attempt=2**40))]
                )
            await store.save("a", lambda cur: cur.evolve(claimed_by="x") if cur else None)  # same status: silent
            await store.save("a", lambda cur: cur.evolve(status="completed") if cur else None)
            await hear(1)
            assert heard == [("a", "pending"), ("a", "completed")]  # nothing for the refused "b"


async def test_a_payload_too_long_to_notify_is_refused_before_writing() -> None:
    async with PostgresStore(fresh_dsn()) as store:
        long = "x" * 8000
        with pytest.raises(InvalidArgumentError, match="cannot be notified"):
            await store.save(long, lambda _: snap(long))
        assert await store.list() == []


async def test_a_committed_save_whose_notification_fails_still_succeeds(monkeypatch: pytest.MonkeyPatch) -> None:
    import interlock.stores.postgres._plumbing as module

    failing = "SELECT pg_notify(%s, p || repeat('x', 9000)) FROM unnest(%s::text[]) AS p"  # payload too long
    monkeypatch.setattr(module, "_NOTIFY", failing)
    async with PostgresStore(fresh_dsn(), max_size=1) as store:
        saved = await store.save("a", lambda _: snap("a", status="pending"))
        assert saved is not None
        found = await store.load("a")
        assert found is not None and found.status == "pending"
        await store.save("a", lambda cur: cur.evolve(status="completed") if cur else None)  # the connection serves on
        found = await store.load("a")
        assert found is not None and found.status == "completed" and found.version == 2


async def test_a_new_row_with_its_own_id_as_parent_is_indexed_as_the_memory_store_does() -> None:
    """A new row's insert rides in its leaf change's statement, except when it is its own parent (not its own leaf)."""
    from interlock import InMemoryStore

    outcomes: list[str] = []
    async with PostgresStore(fresh_dsn()) as pg:
        for store in (InMemoryStore(), pg):
            await store.save("a", lambda _: snap("a", session="s"))
            await store.save("loop", lambda _: snap("loop", session="l", parent="loop"))
            a = await store.latest("s")
            try:
                found = await store.latest("l")
                outcome = f"latest {found.snapshot_id if found else None}"
            except Exception as exc:
                outcome = type(exc).__name__
            outcomes.append(f"{a.snapshot_id if a else None}, {outcome}")
    assert outcomes[0] == outcomes[1] and outcomes[0].startswith("a, "), outcomes


async def test_watch_survives_a_lost_listening_connection() -> None:
    url = fresh_dsn()
    async with PostgresStore(url) as store:
        await store.save("run", lambda _: snap("run", status="pending"))
        seen: list[str] = []

        async def watch() -> None:
            async for status in store.watch("run"):
                seen.append(status)

        task = asyncio.create_task(watch())
        await asyncio.sleep(0.5)
        with psycopg.connect(url, autocommit=True) as admin:
            killed = admin.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE query LIKE 'LISTEN %'"
            ).fetchone()
        assert killed is not None and killed[0] >= 1
        await asyncio.sleep(0.5)  # the listener reconnects
        await store.save("run", lambda cur: cur.evolve(status="aborted") if cur else None)
        await asyncio.wait_for(task, 10)
    assert seen == ["pending", "aborted"]


async def test_storage_is_linear_in_the_conversation() -> None:
    url = fresh_dsn()
    messages: list[Message] = []
    async with PostgresStore(url) as store:
        for i in range(200):
            messages = [*messages, Message.user(f"question {i} " * 5), Message.model(f"answer {i} " * 5)]
            await store.save(f"s{i}", lambda _, m=list(messages), i=i: snap(
                f"s{i}", parent=f"s{i - 1}" if i else None, messages=m, at=i))  # fmt: skip
    async with PostgresStore(url) as fresh:  # a cold cache: the history is read through the base chain
        leaf = await fresh.latest("s1")
        assert leaf is not None and leaf.state is not None and leaf.state.messages == messages
    with psycopg.connect(url) as con:
        found = con.execute("SELECT sum(length(tail)), count(*) FILTER (WHERE keep = 0) FROM interlock_snapshots")
        stored, checkpoints = found.fetchone() or (0, 0)
    history = len(json.dumps(messages_to_json(messages), separators=(",", ":")))
    assert 1 <= checkpoints <= 10  # a full copy now and then, so that a cold load reads a bounded chain
    bound = history + 200 * ROW_COST / (CHAIN_LIMIT - 1)  # each row: its tail, and some 1 KiB of checkpoint
    assert stored <= bound, (stored, history)  # not the ~100× that full copies would take


async def test_the_sweeps_read_of_stale_pending_rows_uses_the_pending_index_not_every_row() -> None:
    """Every worker's sweep asks for stale pending rows every few seconds: from the few pending rows, by heartbeat."""
    url = fresh_dsn()
    async with PostgresStore(url) as store:
        for i in range(40):
            row = snap(f"r{i}", session=f"s{i}", status="pending" if i % 10 == 0 else "completed").evolve(
                heartbeat_at=T0, metadata={"swept": True}
            )
            await store.save(row.snapshot_id, lambda _, row=row: row)
        found = await store.pending_before(T0 + timedelta(seconds=1), key="swept")
        assert sorted(sid for _, sid in found) == ["r0", "r10", "r20", "r30"]
    with psycopg.connect(url, autocommit=True) as con:
        con.execute("SET enable_seqscan = off")  # a table this small would be scanned whatever indexes it has
        plan = con.execute(
            "EXPLAIN (FORMAT JSON) SELECT tenant, snapshot_id FROM interlock_snapshots WHERE status = 'pending' "
            "AND created_us + heartbeat_us < 1 AND metadata LIKE '%x%' ORDER BY created_us + heartbeat_us LIMIT 100"
        ).fetchone()
    assert plan is not None and '"Index Name": "interlock_snapshots_pending"' in json.dumps(plan[0])


async def test_unreachable_server_missing_database_and_bad_values_are_typed() -> None:
    started = time.monotonic()
    with pytest.raises(UnavailableError, match="is unreachable or busy"):
        async with PostgresStore("postgresql://postgres@127.0.0.1:1/x", connect_timeout=5) as store:
            await store.ready()
    assert time.monotonic() - started < 10
    base = fresh_dsn().split("?")[0].rsplit("/", 1)[0]
    with pytest.raises(FailedPreconditionError, match="create the database first"):
        async with PostgresStore(f"{base}/no_such_db") as store:
            await store.ready()
    async with PostgresStore(fresh_dsn()) as store:
        with pytest.raises(InvalidArgumentError, match="NUL"):
            await store.save("bad\x00id", lambda _: snap("bad\x00id"))
        with pytest.raises(InvalidArgumentError):
            await store.load("x", tenant="t\x00")
        assert await store.list() == []


async def test_a_read_only_connection_is_permission_denied() -> None:
    url = fresh_dsn()
    async with PostgresStore(url) as store:
        await store.save("a", lambda _: snap("a"))
    async with PostgresStore(url + "%20-c%20default_transaction_read_only%3Don") as store:
        assert await store.load("a") is not None
        with pytest.raises(PermissionDeniedError, match="cannot be written"):
            await store.save("b", lambda _: snap("b"))


async def test_open_store_opens_postgresql_urls() -> None:
    url = fresh_dsn()
    async with open_store(url) as store:
        assert isinstance(store, PostgresStore)
        await store.save("a", lambda _: snap("a"))
    async with open_store(url.replace("postgresql://", "postgres://", 1)) as store:
        assert await store.load("a") is not None


def test_the_missing_extra_is_named() -> None:
    code = """
import sys
sys.modules["psycopg"] = None
try:
    import interlock.stores.postgres
except ImportError as exc:
    print("import:", exc)
from interlock.errors import UnimplementedError
from interlock.stores._urls import open_store
try:
    open_store("postgresql://db/x")
except UnimplementedError as exc:
    print("open_store:", exc.message)
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    lines = done.stdout.splitlines()
    assert len(lines) == 2, done
    assert lines[0].startswith("import:") and "pip install 'interlock[postgres]'" in lines[0]
    assert lines[1].startswith("open_store:") and "pip install 'interlock[postgres]'" in lines[1]


async def test_an_id_too_long_to_notify_is_refused_before_anything_is_written() -> None:
    async with PostgresStore(fresh_dsn()) as store:
        fits = "é" * 660 + "a" * 60  # more characters than always fit, fewer bytes than the limit
        assert (await store.save(fits, lambda _: snap(fits))) is not None
        assert await store.load(fits) is not None
        too_long = "😀" * 700  # 12 bytes each once escaped: past PostgreSQL's 8000-byte payload
        with pytest.raises(InvalidArgumentError, match="cannot be notified"):
            await store.save(too_long, lambda _: snap(too_long))
        assert await store.load(too_long) is None
