"""The plans PostgreSQL caches for the store's prepared lookups find rows by primary key, statistics or not.

A prepared statement's plan is made once per connection (after five runs), from the
statistics the tables have then: none while a database is new. Without them every index
whose first column is ``tenant`` looks as good as the primary key (one row, by the same
estimate), and ``key = ANY(...)`` looks dearer than reading all the tenant's rows; such a
plan read every row of the tenant per lookup until the next ``ANALYZE``. These tests ask
for the generic plan of each lookup a save or a load sends, on tables that were never
analysed, and check that it reaches the rows through the primary key on both its columns.
"""

from __future__ import annotations

import json
from typing import Any, LiteralString

import psycopg
from pg import fresh_dsn
from test_postgres_store import T0, snap

from interlock.records._journal import JournalEntry
from interlock.stores.postgres import PostgresStore
from interlock.stores.postgres._journal import lock_sql
from interlock.stores.postgres._known import guard
from interlock.stores.postgres._schema import SELECT_ROW, UPDATE_BOOKKEEPING
from interlock.stores.postgres._tx import _lock_both, _lock_rows  # pyright: ignore[reportPrivateUsage]
from interlock.stores.postgres._wire import _encode, _parse  # pyright: ignore[reportPrivateUsage]

TABLES = ("interlock_snapshots", "interlock_journal", "interlock_leaves", "interlock_open_interrupts")
KEYS = {"interlock_snapshots": "snapshot_id", "interlock_journal": "key"}


async def _filled(url: str, rows: int) -> None:
    """``rows`` snapshots and journal entries of one tenant, on tables autovacuum never analyses."""
    async with PostgresStore(url) as store:
        await store.ready()
        with psycopg.connect(url, autocommit=True) as con:
            for table in TABLES:
                con.execute(f"ALTER TABLE {table} SET (autovacuum_enabled = false)")
        for i in range(rows):
            await store.save(f"r{i}", lambda _, i=i: snap(f"r{i}", session=f"s{i}", at=i))
            entry = JournalEntry(key=f"k{i}", session_id=f"s{i}", snapshot_id=f"r{i}", agent="bank", tool="t",
                                 ref=None, input_digest="d", attempt=1, status="running", started_at=T0)  # fmt: skip
            await store.journal_put(entry, expect=0)


def _scans(plan: dict[str, Any]) -> list[dict[str, Any]]:
    found = [plan] if plan.get("Relation Name") in KEYS and plan["Node Type"].endswith("Scan") else []
    for child in plan.get("Plans", []):
        found += _scans(child)
    return found


def _generic_plan(con: psycopg.Connection[Any], sql: LiteralString, args: dict[str, Any] | tuple[Any, ...]) -> Any:
    """The plan of ``sql`` prepared as the store prepares it (its text, its arguments' types), generic."""
    parsed = _parse(sql)
    values = list(args) if parsed.pick is None else list(parsed.pick(args))  # pyright: ignore[reportArgumentType]
    _, types = _encode(values)
    result = con.pgconn.prepare(b"lookup", parsed.text, types)
    assert result.status == psycopg.pq.ExecStatus.COMMAND_OK, (sql, result.error_message)
    explain = f"EXPLAIN (FORMAT JSON) EXECUTE lookup ({', '.join(['%s'] * len(values))})"
    found = psycopg.ClientCursor(con).execute(explain, values).fetchone()  # pyright: ignore[reportArgumentType]
    assert found is not None
    return found[0][0]["Plan"]


async def test_the_lookups_of_a_save_and_a_load_use_the_primary_key_without_statistics() -> None:
    url = fresh_dsn()
    await _filled(url, 60)
    one, two = {"ids": "r1", "keys": "k1"}, {"ids": ["r1", "r2"], "keys": ["k1", "k2"]}
    seen = {"rows": ["r1 1"], "entries": ["k1 1"]}
    lookups: list[tuple[LiteralString, dict[str, Any] | tuple[Any, ...]]] = [
        (SELECT_ROW, ("", "r1")),
        (UPDATE_BOOKKEEPING, (*[None] * 5, 0, None, None, "completed", *[None] * 2, 1, None, None, None, "", "r1")),
        *[(_lock_rows(n), {"tenant": "", "ids": a["ids"]}) for n, a in ((1, one), (2, two))],
        *[(lock_sql(n), {"tenant": "", "keys": a["keys"]}) for n, a in ((1, one), (2, two))],
        *[(_lock_both(n, n), {"tenant": "", **a}) for n, a in ((1, one), (2, two))],
        *[(guard(n, m), {"tenant": "", **one, **seen}) for n, m in ((1, 1), (1, 0), (0, 1))],
        (guard(2, 2), {"tenant": "", **two, **seen}),
    ]
    with psycopg.connect(url, autocommit=True, prepare_threshold=None) as con:
        assert con.execute(
            "SELECT count(*) FROM pg_stats WHERE schemaname = current_schema() AND tablename LIKE 'interlock_%'"
        ).fetchone() == (0,)
        con.execute("SET plan_cache_mode = force_generic_plan")
        for sql, args in lookups:
            plan = _generic_plan(con, sql, args)
            con.execute("DEALLOCATE lookup")
            scans = _scans(plan)
            assert scans, (sql, json.dumps(plan))
            for scan in scans:
                table = scan["Relation Name"]
                assert scan.get("Index Name") == f"{table}_pkey", (sql, json.dumps(plan))
                assert KEYS[table] in scan["Index Cond"] and "Filter" not in scan, (sql, json.dumps(plan))
