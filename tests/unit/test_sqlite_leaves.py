"""The SQLite store's session index finds a session's leaves and a snapshot's children by seeks.

Since schema 7 a session's leaves are a ``leaf`` flag of their rows and the session index is
``(session, leaf, parent_id)``: a lookup of children must name ``leaf IN (0, 1)`` (the one
condition, ``_schema.children``), else it reads every entry of the session. These tests trace
every statement the store runs on the snapshot table by session through the whole store
conformance suite and an inbox's interrupt cycle, and ask SQLite for each one's plan.
"""

from __future__ import annotations

import contextlib
import pathlib
import re
import sqlite3
from typing import Any, cast

from sqlite_trace import inbox_cycle, plan, traced_factory

from interlock.stores.sqlite import SQLiteStore
from interlock.testing._stores import STORE_CHECKS

TABLE = "interlock_snapshots"
TREE = f"{TABLE}_tree"


async def test_every_lookup_by_session_seeks_the_session_index(tmp_path: pathlib.Path) -> None:
    statements: list[str] = []
    make = traced_factory(tmp_path, statements)
    for check in STORE_CHECKS:
        await check(cast(Any, make))
    async with make() as store:
        await inbox_cycle(store)
    traced = sorted(set(statements))
    children = f"INDEX {TREE} (session=? AND leaf=? AND parent_id=?)"
    kinds = {  # what each lookup through the session index is, and how its plan must find its rows
        "a new row's flag": (rf"^INSERT INTO {TABLE} .*NOT EXISTS \(SELECT 1 FROM {TABLE} WHERE session = ", children),
        "a flag recomputed": (rf"^UPDATE {TABLE}\s+SET leaf = NOT EXISTS", children),
        "an entry unless its session went on": (r"^INSERT INTO interlock_open_interrupts .*WHERE NOT EXISTS", children),
        "rows based on a deleted one": (
            rf"^SELECT snapshot_id, parent_id, keep, tail FROM {TABLE} WHERE session",
            children,
        ),
        "a session's leaves": (
            rf"^SELECT snapshot_id, created_us FROM {TABLE} WHERE session = \d+ AND leaf = 1",
            f"INDEX {TREE} (session=? AND leaf=?)",
        ),
    }
    found = {
        kind: [sql for sql in traced if re.search(pattern, sql, re.DOTALL)] for kind, (pattern, _) in kinds.items()
    }
    assert all(found.values()), {kind: len(sqls) for kind, sqls in found.items()}
    async with SQLiteStore(tmp_path / "plans.db") as store:
        await store.ready()
    with contextlib.closing(sqlite3.connect(tmp_path / "plans.db")) as con:
        for kind, sqls in found.items():
            for sql in sqls:
                lines = [line for line in plan(con, sql) if TREE in line or line.startswith(f"SCAN {TABLE}")]
                assert lines and all(line.endswith(kinds[kind][1]) for line in lines), (kind, sql, lines)
