"""The PostgreSQL store against SQLite: the interrupt cycle's CPU and wall time, and cycles at concurrency.

Run with ``make bench`` (or ``python bench/postgres.py [--quick]``). It starts its own
PostgreSQL clusters with ``scripts/postgres.sh`` (installing PostgreSQL if missing): one with
PostgreSQL's default durability (every commit flushed, as SQLite's ``synchronous=FULL``) and one
with the test suite's settings (``fsync=off``). An interrupt cycle is a pause, then a fresh agent
object over the same store that loads it and resumes it (``bench/agents.py``'s cycle).

Printed per store: round trips per cycle (PostgreSQL: counted on the wire by libpq's tracer,
``bench/pg_trips.py``, in a pass of its own), client CPU per cycle (this process), the PostgreSQL
server's CPU per cycle (all its processes' user + system time: backends, WAL writer,
checkpointer), wall time per cycle one at a time, and cycles/s for 1000 sessions at concurrency
100 in this one process. Target: the PostgreSQL cycle costs the client
at most 2x SQLite's CPU (the server's share is reported, not targeted).
"""

from __future__ import annotations

import asyncio
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable

from agents import one_cycle, report

from interlock.stores import SessionStore
from interlock.stores.postgres import PostgresStore
from interlock.stores.sqlite import SQLiteStore

SCRIPT = pathlib.Path(__file__).resolve().parents[1] / "scripts" / "postgres.sh"
TICK = os.sysconf("SC_CLK_TCK")


class Cluster:
    """A throwaway cluster from scripts/postgres.sh; measures its processes' CPU."""

    def __init__(self, *, durable: bool) -> None:
        self.dir = tempfile.mkdtemp(prefix="interlock-bench-pg-")
        env = {**os.environ, "PG_DURABLE": "1" if durable else "0"}
        done = subprocess.run(["bash", str(SCRIPT), "start", self.dir], capture_output=True, text=True, env=env)
        if done.returncode != 0:
            raise SystemExit(f"scripts/postgres.sh start failed:\n{done.stderr}")
        self.dsn = done.stdout.strip().splitlines()[-1]
        self.postmaster = int(pathlib.Path(self.dir, "data", "postmaster.pid").read_text().split()[0])

    def cpu(self) -> float:
        """Seconds of CPU used by the server: the postmaster, its live children, and its reaped ones."""
        total = 0
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                fields = pathlib.Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            pid, ppid = int(entry.name), int(fields[1])
            if pid == self.postmaster:
                total += sum(int(f) for f in fields[11:15])  # utime, stime, cutime, cstime
            elif ppid == self.postmaster:
                total += int(fields[11]) + int(fields[12])
        return total / TICK

    def stop(self) -> None:
        subprocess.run(["bash", str(SCRIPT), "stop", self.dir], capture_output=True, check=False)


async def per_cycle(store: SessionStore, n: int, server: Callable[[], float]) -> tuple[float, float, float]:
    """Median over 5 rounds of ``n`` sequential cycles: (client CPU ms, server CPU ms, wall ms) per cycle."""
    for _ in range(20):
        await one_cycle(store)
    rounds: list[tuple[float, float, float]] = []
    for _ in range(5):
        cpu, srv, wall = time.process_time(), server(), time.perf_counter()
        for _ in range(n):
            await one_cycle(store)
        rounds.append(
            (
                (time.process_time() - cpu) * 1000 / n,
                (server() - srv) * 1000 / n,
                (time.perf_counter() - wall) * 1000 / n,
            )
        )
    return tuple(statistics.median(r[i] for r in rounds) for i in range(3))  # type: ignore[return-value]


async def concurrent(store: SessionStore, sessions: int, width: int) -> float:
    gate = asyncio.Semaphore(width)

    async def bounded() -> None:
        async with gate:
            await one_cycle(store)

    start = time.perf_counter()
    await asyncio.gather(*(bounded() for _ in range(sessions)))
    return sessions / (time.perf_counter() - start)


async def measure(
    label: str,
    open_store: Callable[[], Awaitable[SessionStore]],
    server: Callable[[], float],
    quick: bool,
    dsn: str | None = None,
) -> float:
    store = await open_store()
    try:
        client, srv, wall = await per_cycle(store, 20 if quick else 100, server)
        rate = await concurrent(store, 200 if quick else 1000, 100)
    finally:
        await store.close()  # type: ignore[attr-defined]
    trips = "    -"
    if dsn is not None:
        from pg_trips import trips_per_cycle

        trips = f"{await trips_per_cycle(dsn):5.1f}"
    print(
        f"  {label:<44} round trips {trips}  client CPU {client:6.2f} ms  server CPU {srv:6.2f} ms  "
        f"wall {wall:6.2f} ms  concurrency 100: {rate:7.1f} cycles/s"
    )
    return client


async def main() -> None:
    quick = "--quick" in sys.argv
    print("interrupt cycle, per cycle (median of 5 rounds), and 1000 cycles at concurrency 100 in one process:")
    with tempfile.TemporaryDirectory() as tmp:

        async def sqlite() -> SessionStore:
            store = SQLiteStore(os.path.join(tmp, "cycle.db"))
            await store.setup()
            return store

        lite = await measure("SQLite (WAL, synchronous=FULL)", sqlite, lambda: 0.0, quick)
    figures: dict[str, float] = {}
    for durable, label in (
        (True, "PostgreSQL 15 (fsync on, default durability)"),
        (False, "PostgreSQL 15 (fsync off)"),
    ):
        cluster = Cluster(durable=durable)
        try:

            async def postgres(dsn: str = cluster.dsn) -> SessionStore:
                store = PostgresStore(dsn, max_size=20)
                await store.setup()
                return store

            figures[label] = await measure(label, postgres, cluster.cpu, quick, cluster.dsn)
        finally:
            cluster.stop()
    worst = max(figures.values())
    report("PostgreSQL client CPU / SQLite CPU per cycle", worst / lite, "x", "<= 2x", worst <= 2 * lite)


if __name__ == "__main__":
    asyncio.run(main())
