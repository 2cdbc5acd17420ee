"""The SQLite store's index of open interrupts is keyed in its listing's order, and every lookup of it seeks.

The table's key is ``(tenant, created_us, snapshot_id, position)``, with no secondary index, so
each statement that finds one snapshot's entries names their ``created_us`` too (else it would
read every entry of the tenant). These tests trace every statement the store runs on the table
through the conformance suite's index checks and an inbox's interrupt cycle, and ask SQLite for
each one's plan; and they rewrite a paused turn with another creation time, whose entries are
then found by the old one.
"""

from __future__ import annotations

import contextlib
import pathlib
import re
import sqlite3
from datetime import UTC, datetime, timedelta

from sqlite_trace import inbox_cycle, plan, traced_factory

from interlock import Message, Snapshot, ToolRequestPart
from interlock import metadata as md
from interlock.records._interrupt_index import InterruptQuery
from interlock.records._sessions import SessionState
from interlock.stores.sqlite import SQLiteStore
from interlock.testing._index_checks import INDEX_CHECKS

OPEN = "interlock_open_interrupts"
T0 = datetime(2025, 3, 4, 5, 6, 7, tzinfo=UTC)


async def test_every_statement_on_the_index_seeks_the_entries_it_finds(tmp_path: pathlib.Path) -> None:
    statements: list[str] = []
    make = traced_factory(tmp_path, statements)
    for check in INDEX_CHECKS:
        await check(make)
    async with make() as store:
        await inbox_cycle(store)
    on_index = sorted({s for s in statements if OPEN in s})
    kinds = {
        "insert": r"^INSERT INTO interlock_open_interrupts ",
        "claim": r"^UPDATE interlock_open_interrupts SET claimed_by",
        "drop": r"^DELETE FROM interlock_open_interrupts WHERE tenant = '[^']*' AND created_us = \d+ AND snapshot_id",
        "drop went on": r"^DELETE FROM interlock_open_interrupts WHERE .*created_us = \(SELECT created_us FROM",
        "listing": r"^SELECT (?!.* snapshot_id = ).* FROM interlock_open_interrupts ",
        "by snapshot": r"^SELECT .* FROM interlock_open_interrupts WHERE .*created_us = \(SELECT created_us FROM",
        "rest of a page": r"^SELECT .* FROM interlock_open_interrupts WHERE tenant = '[^']*' AND created_us = \d+ AND",
    }
    seen = {kind for kind, pattern in kinds.items() for sql in on_index if re.search(pattern, sql, re.DOTALL)}
    assert seen == set(kinds), on_index
    async with SQLiteStore(tmp_path / "plans.db") as store:
        await store.ready()
    with contextlib.closing(sqlite3.connect(tmp_path / "plans.db")) as con:
        for sql in on_index:
            lines = [line for line in plan(con, sql) if OPEN in line]
            assert all(line.startswith(f"SEARCH {OPEN} USING PRIMARY KEY (tenant=?") for line in lines), (sql, lines)
            if " snapshot_id = " in sql:  # one snapshot's entries: by the key's first three columns
                assert lines and all("(tenant=? AND created_us=? AND snapshot_id=?" in line for line in lines), (
                    sql,
                    lines,
                )


def _paused(*refs: str, **changes: object) -> Snapshot:
    calls = [
        ToolRequestPart(name="transfer", ref=r, input={"to": r, "amount": 5}, metadata={md.INTERRUPT: True})
        for r in refs
    ]
    snap = Snapshot(
        snapshot_id="p",
        session_id="s",
        created_at=T0,
        finish_reason="interrupted",
        state=SessionState(session_id="s", messages=[Message.user("pay"), Message(role="model", content=list(calls))]),
        metadata={"agent": "bank"},
    )
    return snap.evolve(**changes)


def _rows(path: pathlib.Path) -> list[tuple[str, int, int]]:
    with contextlib.closing(sqlite3.connect(path)) as con:
        return con.execute(f"SELECT snapshot_id, created_us, position FROM {OPEN}").fetchall()


async def test_a_paused_turn_rewritten_claimed_and_deleted_keeps_its_entries_in_line(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "s.db"
    now = T0 + timedelta(hours=1)
    created_us = int(T0.timestamp() * 1_000_000)
    async with SQLiteStore(path) as store:
        await store.save("p", lambda _: _paused("t1"))
        await store.save("p", lambda _: _paused("t2", "t3"))  # other calls: its entries found by key, replaced
        assert [e.ref for e in await store.open_interrupts(InterruptQuery(now=now))] == ["t2", "t3"]
        assert _rows(path) == [("p", created_us, 0), ("p", created_us, 1)]
        await store.save("p", lambda _: _paused("t2", "t3", claimed_by="r1", claim_expires_at=now))
        assert await store.open_interrupts(InterruptQuery(now=now - timedelta(seconds=1))) == []
        claimed = await store.open_interrupts(InterruptQuery(now=now, snapshot_id="p", limit=1))
        assert [(e.ref, e.claimed_by) for e in claimed] == [("t2", "r1"), ("t3", "r1")]  # a page keeps p whole
        await store.delete(["p"])
        assert _rows(path) == [] and await store.open_interrupts(InterruptQuery(now=now)) == []
