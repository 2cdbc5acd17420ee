"""What one PostgreSQL round trip costs the 2 cores, driver and server together: the floor under the cycle.

Run with ``python bench/pg_floor.py [--seconds S] [--driver psycopg|asyncpg|store|all] [--loop asyncio|uvloop|all]``.
It starts a throwaway cluster (``scripts/postgres.sh``, fsync off: a trivial statement writes
nothing) and two child processes shaped like the two ``interlock serve`` processes of
``bench/multiserver.py``: each with an async pool of 10 connections (``PostgresStore``'s default)
and 50 concurrent tasks, each task taking a connection from the pool and sending ``SELECT 1``
(autocommit, one round trip, nothing for PostgreSQL to plan or execute beyond the protocol),
again and again. The driver is psycopg 3's cursors (``psycopg_pool``), the store's own path
(``store``: ``psycopg_pool`` and :mod:`interlock.stores.postgres._wire`, prepared statements through
psycopg's libpq layer), or asyncpg (its own pool), on asyncio or uvloop; asyncpg is not a
dependency of the project, so its children run in the bench's own environment (``.bench-venvs/langgraph``, made by
``bench/peers_pg.py``, with asyncpg and uvloop added on first use).

Printed per driver and loop: round trips per second, then the CPU one round trip costs the
children (driver, pool and event loop) and PostgreSQL, and what that makes of a cycle's round
trips: the cycle's 6 today (``bench/pg_trips.py``; 10.4 before the store guessed its rows),
as a ceiling on cycles per second on 2 cores with no SQL executed and no other work done at all.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import pathlib
import subprocess
import time
from collections.abc import Awaitable, Callable
from typing import Any

TASKS, POOL, SERVERS = 50, 10, 2
CYCLE_TRIPS = {"the cycle today (bench/pg_trips.py)": 6.0, "before (10.4 with the locking reads)": 10.4}
VENV_PYTHON = pathlib.Path(__file__).resolve().parents[1] / ".bench-venvs" / "langgraph" / "bin" / "python"


async def _psycopg_pool(dsn: str) -> tuple[Callable[[], Awaitable[None]], Callable[[], Awaitable[None]]]:
    from psycopg_pool import AsyncConnectionPool

    pool = AsyncConnectionPool(dsn, min_size=POOL, max_size=POOL, kwargs={"autocommit": True}, open=False)
    await pool.open(wait=True)

    async def trip() -> None:
        async with pool.connection() as con:
            await con.execute("SELECT 1")

    return trip, pool.close


async def _store_pool(dsn: str) -> tuple[Callable[[], Awaitable[None]], Callable[[], Awaitable[None]]]:
    """What the store itself sends through: psycopg's pool, and statements through ``_wire`` (libpq, prepared)."""
    from psycopg_pool import AsyncConnectionPool

    from interlock.stores.postgres._wire import Wire

    pool = AsyncConnectionPool(dsn, min_size=POOL, max_size=POOL, kwargs={"autocommit": True}, open=False)
    await pool.open(wait=True)

    async def trip() -> None:
        con = await pool.getconn()
        try:
            await (await Wire(con).execute("SELECT 1")).fetchone()
        finally:
            await pool.putconn(con)

    return trip, pool.close


async def _asyncpg_pool(dsn: str) -> tuple[Callable[[], Awaitable[None]], Callable[[], Awaitable[None]]]:
    import importlib

    asyncpg: Any = importlib.import_module("asyncpg")  # not the project's: the bench environment's

    async def keep(_: Any) -> None:  # no reset query on release (its default): psycopg_pool sends none either
        return None

    pool: Any = await asyncpg.create_pool(dsn, min_size=POOL, max_size=POOL, reset=keep)

    async def trip() -> None:
        async with pool.acquire() as con:
            await con.fetchval("SELECT 1")

    return trip, pool.close


async def _load(driver: str, dsn: str, seconds: float, start: float) -> tuple[int, float]:
    """Round trips sent in ``seconds`` from ``start`` (perf_counter, after a warm-up), and the CPU they took."""
    trip, close = await {"asyncpg": _asyncpg_pool, "store": _store_pool}.get(driver, _psycopg_pool)(dsn)
    done = 0
    counting = False
    cpu = 0.0

    async def task() -> None:
        nonlocal done
        while (now := time.perf_counter()) < start + seconds:
            await trip()
            if counting and now >= start:
                done += 1

    async def mark() -> None:
        nonlocal counting, cpu
        await asyncio.sleep(max(0.0, start - time.perf_counter()))
        counting, cpu = True, time.process_time()

    await asyncio.gather(mark(), *(task() for _ in range(TASKS)))
    cpu = time.process_time() - cpu
    await close()
    return done, cpu


def _child(
    driver: str, loop: str, dsn: str, seconds: float, start: float, out: multiprocessing.Queue[tuple[int, float]]
) -> None:
    if driver == "asyncpg":  # a spawned child has its parent's sys.path: add the bench environment's packages
        import site
        import sys

        site.addsitedir(str(next(VENV_PYTHON.parents[1].glob(f"lib/python{sys.version_info[0]}.*/site-packages"))))
    if loop == "uvloop":
        import uvloop

        out.put(uvloop.run(_load(driver, dsn, seconds, start)))
    else:
        out.put(asyncio.run(_load(driver, dsn, seconds, start)))


def _bench_python() -> str:
    """The bench environment's python (asyncpg and uvloop in it), made by bench/peers_pg.py if missing."""
    if not VENV_PYTHON.exists():
        from peers_pg import venv_python

        venv_python()
    probe = subprocess.run([str(VENV_PYTHON), "-c", "import asyncpg, uvloop"], capture_output=True)
    if probe.returncode != 0:
        subprocess.run([str(VENV_PYTHON), "-m", "pip", "install", "--quiet", "asyncpg", "uvloop"], check=True)
    return str(VENV_PYTHON)


def measure(dsn: str, driver: str, loop: str, seconds: float, cluster_cpu: Callable[[], float]) -> None:
    ctx = multiprocessing.get_context("spawn")
    if driver == "asyncpg":
        ctx.set_executable(_bench_python())
    out: multiprocessing.Queue[tuple[int, float]] = ctx.Queue()
    start = time.perf_counter() + 3.0  # the children start, open their pools and warm up before it
    children = [ctx.Process(target=_child, args=(driver, loop, dsn, seconds, start, out)) for _ in range(SERVERS)]
    for child in children:
        child.start()
    time.sleep(max(0.0, start - time.perf_counter()))
    pg_before = cluster_cpu()
    results = [out.get() for _ in children]
    pg_cpu = cluster_cpu() - pg_before
    for child in children:
        child.join()
    trips = sum(done for done, _ in results)
    client_cpu = sum(cpu for _, cpu in results)
    client_us, pg_us = client_cpu / trips * 1e6, pg_cpu / trips * 1e6
    print(f"{driver} on {loop}: {SERVERS} processes x {TASKS} tasks on pools of {POOL}, SELECT 1: ", end="")
    print(f"{trips / seconds:,.0f} round trips/s")
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


def main() -> None:
    from machine import describe
    from postgres import Cluster

    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="measured seconds (after the warm-up)")
    parser.add_argument("--driver", choices=["psycopg", "asyncpg", "store", "all"], default="psycopg")
    parser.add_argument("--loop", choices=["asyncio", "uvloop", "all"], default="asyncio")
    args = parser.parse_args()
    drivers = ["psycopg", "asyncpg", "store"] if args.driver == "all" else [args.driver]
    loops = ["asyncio", "uvloop"] if args.loop == "all" else [args.loop]
    print(describe())
    cluster = Cluster(durable=False)
    try:
        for driver in drivers:
            for loop in loops:
                measure(cluster.dsn, driver, loop, args.seconds, cluster.cpu)
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
