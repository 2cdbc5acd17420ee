"""The interrupt-cycle ceiling of PostgreSQL alone on this machine, measured with pgbench.

Run with ``python bench/pg_ceiling.py [--seconds S] [--clients N] [--fsync-off]``. It starts a
throwaway cluster (``scripts/postgres.sh``, PostgreSQL's default durability unless
``--fsync-off``), creates interlock's tables by opening a :class:`PostgresStore` on it, and runs
Debian's ``pgbench -M prepared`` at ``--clients`` (100) connections with ``bench/pg_ceiling.sql``:
exactly the statements of one interrupt cycle, in the store's transactions and pipelines (one
pgbench transaction is one cycle). No Python runs during the measurement.

Printed: the cycles/s PostgreSQL sustains, its CPU per cycle, pgbench's CPU per cycle, the
load average, and what PostgreSQL alone would sustain on 2 cores (2 CPU-s per s / its CPU per
cycle, an estimate: pgbench's own share subtracted).
"""

from __future__ import annotations

import argparse
import asyncio
import glob
import os
import pathlib
import re
import resource
import subprocess
import time

from postgres import Cluster

from interlock.stores.postgres import PostgresStore

HERE = pathlib.Path(__file__).resolve().parent
SCRIPT = HERE / "pg_ceiling.sql"
TARGETS = (400.0, 800.0)


def pgbench() -> str:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pgbench"))
    if not found:
        raise SystemExit("pgbench not found (Debian's postgresql package installs it)")
    return found[-1]


async def create_tables(dsn: str) -> None:
    async with PostgresStore(dsn) as store:
        await store.ready()


def run(dsn: str, clients: int, seconds: int, script: pathlib.Path) -> tuple[float, str]:
    """(cycles/s, pgbench's output) of one run."""
    command = [pgbench(), "-n", "-M", "prepared", "-c", str(clients), "-j", "2", "-T", str(seconds), "-f", str(script)]
    done = subprocess.run([*command, dsn], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"pgbench failed:\n{done.stdout}\n{done.stderr[-2000:]}")
    found = re.search(r"tps = ([0-9.]+) \(without initial connection time\)", done.stdout)
    if found is None:
        raise SystemExit(f"no tps in pgbench's output:\n{done.stdout}")
    return float(found.group(1)), done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--fsync-off", action="store_true", help="the test suite's settings (no flush per commit)")
    parser.add_argument("--script", type=pathlib.Path, default=SCRIPT)
    args = parser.parse_args()
    cluster = Cluster(durable=not args.fsync_off)
    try:
        asyncio.run(create_tables(cluster.dsn))
        run(cluster.dsn, args.clients, 2, args.script)  # warm: connections, plans, buffers
        load = os.getloadavg()
        before_pg, before_me = cluster.cpu(), resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        rate, _ = run(cluster.dsn, args.clients, args.seconds, args.script)
        elapsed = time.perf_counter() - start
        after_me = resource.getrusage(resource.RUSAGE_CHILDREN)
        pg_s = cluster.cpu() - before_pg
        bench_s = (after_me.ru_utime + after_me.ru_stime) - (before_me.ru_utime + before_me.ru_stime)
    finally:
        cluster.stop()
    cycles = rate * args.seconds
    durability = "fsync off" if args.fsync_off else "default durability"
    print(
        f"pgbench -M prepared, {args.clients} clients, {args.seconds} s, {args.script.name} "
        f"(one interrupt cycle per pgbench transaction), PostgreSQL {durability}:"
    )
    print(f"  {rate:7.1f} cycles/s   load average before {' '.join(f'{x:.2f}' for x in load)} (2 cores)")
    pg_ms, bench_ms = pg_s * 1000 / cycles, bench_s * 1000 / cycles
    print(f"  CPU per cycle: PostgreSQL {pg_ms:.2f} ms, pgbench {bench_ms:.2f} ms ({elapsed:.1f} s wall)")
    print(f"  PostgreSQL alone on 2 cores (estimate, 2 CPU-s per s / its CPU per cycle): {2000 / pg_ms:.0f} cycles/s")
    for target in TARGETS:
        print(f"  target >= {target:.0f} cycles/s: {'within' if rate >= target else 'above'} this ceiling")


if __name__ == "__main__":
    main()
