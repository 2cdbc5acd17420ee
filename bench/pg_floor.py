"""What one PostgreSQL round trip costs the 2 cores, driver and server together: the floor under the cycle.

Run with ``python bench/pg_floor.py [--seconds S]``. It starts a throwaway cluster
(``scripts/postgres.sh``, fsync off: a trivial statement writes nothing) and two child
processes shaped like the two ``interlock serve`` processes of ``bench/multiserver.py``: each
with a psycopg 3 async pool of 10 connections (``PostgresStore``'s default) and 50 concurrent
tasks, each task taking a connection from the pool and sending ``SELECT 1`` (autocommit, one
round trip, nothing for PostgreSQL to plan or execute beyond the protocol), again and again.

Printed: round trips per second, then the CPU one round trip costs the children (psycopg,
its pool and asyncio) and PostgreSQL, and what that makes of a cycle's round trips: the
cycle's 10.4 today (``bench/pg_trips.py --http``) and 5, the fewest a cycle can have (the
intent before the tool body, the pause's commit, one load-and-claim, the outcome before the
model goes on, the resume's commit), as a ceiling on cycles per second on 2 cores with no
SQL executed and no other work done at all.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import time

from machine import describe
from postgres import Cluster

TASKS, POOL, SERVERS = 50, 10, 2
CYCLE_TRIPS = {"today (bench/pg_trips.py --http)": 10.4, "the fewest a cycle can have": 5.0}


async def _load(dsn: str, seconds: float, start: float) -> tuple[int, float]:
    """Round trips sent in ``seconds`` from ``start`` (perf_counter, after a warm-up), and the CPU they took."""
    from psycopg_pool import AsyncConnectionPool

    pool = AsyncConnectionPool(dsn, min_size=POOL, max_size=POOL, kwargs={"autocommit": True}, open=False)
    await pool.open(wait=True)
    done = 0
    counting = False
    cpu = 0.0

    async def task() -> None:
        nonlocal done
        while (now := time.perf_counter()) < start + seconds:
            async with pool.connection() as con:
                await con.execute("SELECT 1")
            if counting and now >= start:
                done += 1

    async def mark() -> None:
        nonlocal counting, cpu
        await asyncio.sleep(max(0.0, start - time.perf_counter()))
        counting, cpu = True, time.process_time()

    await asyncio.gather(mark(), *(task() for _ in range(TASKS)))
    cpu = time.process_time() - cpu
    await pool.close()
    return done, cpu


def _child(dsn: str, seconds: float, start: float, out: multiprocessing.Queue[tuple[int, float]]) -> None:
    out.put(asyncio.run(_load(dsn, seconds, start)))


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="measured seconds (after 1 s of warm-up)")
    args = parser.parse_args()
    print(describe())
    cluster = Cluster(durable=False)
    try:
        out: multiprocessing.Queue[tuple[int, float]] = multiprocessing.Queue()
        start = time.perf_counter() + 2.0  # the children's pools open and warm up before it
        children = [
            multiprocessing.Process(target=_child, args=(cluster.dsn, args.seconds, start, out)) for _ in range(SERVERS)
        ]
        for child in children:
            child.start()
        time.sleep(max(0.0, start - time.perf_counter()))
        pg_before = cluster.cpu()
        results = [out.get() for _ in children]
        pg_cpu = cluster.cpu() - pg_before
        for child in children:
            child.join()
    finally:
        cluster.stop()
    trips = sum(done for done, _ in results)
    client_cpu = sum(cpu for _, cpu in results)
    client_us, pg_us = client_cpu / trips * 1e6, pg_cpu / trips * 1e6
    print(
        f"{SERVERS} processes x {TASKS} tasks on pools of {POOL}, SELECT 1: {trips / args.seconds:,.0f} round trips/s"
    )
    print(
        f"  CPU per round trip: {client_us:.0f} us in the client processes"
        f" + {pg_us:.0f} us in PostgreSQL = {client_us + pg_us:.0f} us"
    )
    for label, per_cycle in CYCLE_TRIPS.items():
        ms = per_cycle * (client_us + pg_us) / 1000
        print(
            f"  {per_cycle:4.1f} round trips per cycle ({label}): {ms:.2f} ms of CPU per cycle,"
            f" at most {2000 / ms:,.0f} cycles/s on 2 cores with no SQL and no other work"
        )


if __name__ == "__main__":
    main()
