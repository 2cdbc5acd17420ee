"""What PostgreSQL does for each statement of an interrupt cycle: ``pg_stat_statements`` per cycle.

Run with ``python bench/pg_statements.py [--cycles N] [--analyze]``. It starts a throwaway
cluster with PostgreSQL's default durability (``scripts/postgres.sh``), restarts it with
``pg_stat_statements`` loaded, runs ``bench/bank.py``'s cycle on a new database (30 to warm
up, then ``--cycles``), and prints per cycle, for each statement: how often it ran, its
execution time, the shared buffers it read, the WAL records and bytes it wrote; then the
server CPU of the store's backends, the client's CPU and the wall time per cycle, and how many
of each table's updates were HOT (no index entry written). ``--analyze`` runs ``ANALYZE``
after the warm-up (the plans prepared statements cache are then made from statistics: compare
the two to see a plan that depends on them).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import pathlib
import subprocess
import time

import psycopg
from bank import one_cycle
from postgres import TICK, Cluster

from interlock.stores.postgres import PostgresStore

_STATEMENTS = """SELECT calls, total_exec_time, shared_blks_hit + shared_blks_read, wal_records, wal_bytes,
    left(regexp_replace(query, '\\s+', ' ', 'g'), 90)
    FROM pg_stat_statements WHERE query NOT LIKE '%%pg_stat%%' AND calls >= %s ORDER BY total_exec_time DESC"""
_TABLES = "SELECT relname, n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE n_tup_upd > 0 ORDER BY relname"


def _with_statements(cluster: Cluster) -> str:
    """Restart ``cluster`` with ``pg_stat_statements`` loaded; a new database with the extension (its DSN)."""
    with psycopg.connect(cluster.dsn, autocommit=True) as con:
        con.execute("ALTER SYSTEM SET shared_preload_libraries = pg_stat_statements")
    bin_dir = max(pathlib.Path("/usr/lib/postgresql").glob("*/bin"), key=lambda p: int(p.parent.name))
    restart = [str(bin_dir / "pg_ctl"), "-D", f"{cluster.dir}/data", "-w", "-l", f"{cluster.dir}/log", "restart"]
    if os.getuid() == 0:  # the cluster runs as postgres (scripts/postgres.sh)
        restart = ["runuser", "-u", "postgres", "--", *restart]
    subprocess.run(restart, check=True, capture_output=True)
    cluster.postmaster = int(pathlib.Path(cluster.dir, "data", "postmaster.pid").read_text().split()[0])
    with psycopg.connect(cluster.dsn, autocommit=True) as con:
        con.execute("CREATE DATABASE bench_statements")
    dsn = cluster.dsn.rsplit("/", 1)[0] + "/bench_statements"
    with psycopg.connect(dsn, autocommit=True) as con:
        con.execute("CREATE EXTENSION pg_stat_statements")
    return dsn


def _backends_cpu(con: psycopg.Connection[tuple[int]]) -> float:
    pids = con.execute(
        "SELECT pid FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()"
    ).fetchall()
    total = 0
    for (pid,) in pids:
        fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / TICK


async def _measure(dsn: str, cycles: int, analyze: bool) -> None:
    async with PostgresStore(dsn, min_size=2, max_size=2) as store:
        for _ in range(30):
            await one_cycle(store)
        with psycopg.connect(dsn, autocommit=True) as con:
            if analyze:
                con.execute("ANALYZE")
            con.execute("SELECT pg_stat_statements_reset(), pg_stat_reset()")
            server, client, wall = _backends_cpu(con), time.process_time(), time.perf_counter()
            for _ in range(cycles):
                await one_cycle(store)
            wall, client = time.perf_counter() - wall, time.process_time() - client
            server = _backends_cpu(con) - server
            _report(con, cycles)
    print(
        f"per cycle: server CPU (the store's backends) {server * 1000 / cycles:.2f} ms, "
        f"client CPU {client * 1000 / cycles:.2f} ms, wall {wall * 1000 / cycles:.2f} ms"
    )


def _report(con: psycopg.Connection[tuple[object, ...]], cycles: int) -> None:
    print(f"{'runs':>5} {'exec µs':>8} {'buffers':>8} {'WAL rec':>7} {'WAL B':>6}  statement (per cycle)")
    totals = [0.0] * 5
    for calls, exec_ms, buffers, records, wal_bytes, query in con.execute(_STATEMENTS, (cycles // 2,)).fetchall():
        row = [float(calls), float(exec_ms) * 1000, float(buffers), float(records), float(wal_bytes)]  # pyright: ignore[reportArgumentType]
        row = [v / cycles for v in row]
        totals = [t + v for t, v in zip(totals, row, strict=True)]
        print(f"{row[0]:5.1f} {row[1]:8.1f} {row[2]:8.1f} {row[3]:7.1f} {row[4]:6.0f}  {query}")
    print(f"{totals[0]:5.1f} {totals[1]:8.1f} {totals[2]:8.1f} {totals[3]:7.1f} {totals[4]:6.0f}  (all)")
    for table, updates, hot in con.execute(_TABLES).fetchall():
        print(f"  {table}: {hot} of {updates} updates HOT")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=300)
    parser.add_argument("--analyze", action="store_true", help="ANALYZE after the warm-up")
    args = parser.parse_args()
    cluster = Cluster(durable=True)
    try:
        asyncio.run(_measure(_with_statements(cluster), args.cycles, args.analyze))
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
