"""Interrupt cycles through several ``interlock serve`` processes on one PostgreSQL database.

Run with ``make bench`` (or ``python bench/multiserver.py [--quick] [--sessions N]``). Printed:

1. in process, one cycle at a time: the interrupt cycle's client CPU, PostgreSQL server CPU
   and wall time on PostgreSQL (default durability) next to SQLite (``synchronous=FULL``);
2. ``--sessions`` (1000) sessions x one interrupt cycle at concurrency 100 through 2
   ``interlock serve served_bank:agent`` processes on PostgreSQL: cycles/s, the cycle's p50
   and p99 latency, and the CPU each part spent per cycle (the servers, PostgreSQL, this load
   generator). Targets: >= 400 cycles/s (issue 11), >= 800 (issue 16).

The servers log at ``warning`` (no line per turn). A cycle over HTTP is two POSTs answered
with JSON on one keep-alive connection: the turn that
pauses, then the resume that approves it by snapshot id (``bench/served_bank.py``); the 100
connections alternate between the servers. The load generator is a raw HTTP/1.1 client on
asyncio streams (no HTTP library), so that it takes as little of the 2 cores as it can; its
CPU is measured and printed, and so is what the servers and PostgreSQL alone would sustain
on these 2 cores if the load came from elsewhere (2 CPU-seconds per second / their CPU per
cycle): an estimate, labelled as one.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable

from http_cycle import Served
from postgres import Cluster, per_cycle
from served_bank import PAUSE_BODY, resume_body

from interlock.stores import SessionStore
from interlock.stores.postgres import PostgresStore
from interlock.stores.sqlite import SQLiteStore

TARGETS = (400.0, 800.0)


class Connection:
    """One keep-alive HTTP/1.1 connection that POSTs JSON and reads JSON answers with a Content-Length."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, host: str) -> None:
        self.reader, self.writer, self.host = reader, writer, host

    @classmethod
    async def open(cls, url: str) -> Connection:
        host, port = url.removeprefix("http://").split(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        return cls(reader, writer, f"{host}:{port}")

    async def post(self, path: str, body: bytes) -> dict[str, object]:
        head = (
            f"POST {path} HTTP/1.1\r\nhost: {self.host}\r\ncontent-type: application/json\r\n"
            f"accept: application/json\r\ncontent-length: {len(body)}\r\n\r\n"
        )
        self.writer.write(head.encode("latin-1") + body)
        lines = (await self.reader.readuntil(b"\r\n\r\n")).split(b"\r\n")
        status = int(lines[0].split()[1])
        length = next(int(line.split(b":")[1]) for line in lines if line.lower().startswith(b"content-length:"))
        payload = json.loads(await self.reader.readexactly(length))
        if status != 200:
            raise RuntimeError(f"{path} answered {status}: {payload}")
        return payload["result"]

    async def cycle(self) -> None:
        paused = await self.post("/bank", PAUSE_BODY)
        assert paused["finishReason"] == "interrupted", paused
        done = await self.post("/bank", resume_body(str(paused["snapshotId"])))
        assert done["finishReason"] == "stop", done

    def close(self) -> None:
        self.writer.close()


async def drive(urls: list[str], sessions: int, width: int) -> tuple[float, list[float]]:
    """``sessions`` cycles over ``width`` connections (alternating servers): (seconds, each cycle's latency)."""
    connections = [await Connection.open(urls[i % len(urls)]) for i in range(width)]
    left = iter(range(sessions))
    latencies: list[float] = []

    async def worker(conn: Connection) -> None:
        for _ in left:
            start = time.perf_counter()
            await conn.cycle()
            latencies.append(time.perf_counter() - start)

    start = time.perf_counter()
    await asyncio.gather(*(worker(c) for c in connections))
    elapsed = time.perf_counter() - start
    for conn in connections:
        conn.close()
    return elapsed, latencies


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def in_process(cluster: Cluster, quick: bool) -> None:
    n = 20 if quick else 100
    print("interrupt cycle in process, one at a time (median of 5 rounds):")
    with tempfile.TemporaryDirectory() as tmp:
        lite = SQLiteStore(os.path.join(tmp, "cycle.db"))
        stores: list[tuple[str, SessionStore, Cluster | None]] = [
            ("SQLite (WAL, synchronous=FULL)", lite, None),
            ("PostgreSQL (default durability)", PostgresStore(cluster.dsn, max_size=20), cluster),
        ]
        for label, store, server in stores:
            try:
                client, srv, wall = await per_cycle(store, n, server.cpu if server else lambda: 0.0)
            finally:
                await store.close()  # type: ignore[attr-defined]
            print(f"  {label:<34} client CPU {client:6.2f} ms  database CPU {srv:6.2f} ms  wall {wall:6.2f} ms")


async def through_servers(cluster: Cluster | None, sessions: int, width: int, servers: int, label: str) -> float:
    """Cycles/s through ``servers`` processes on the cluster (``None``: each on its own memory store)."""
    env = {"BENCH_POOL": "20"}
    store = cluster.dsn if cluster else "memory"
    served = [Served(store=store, env=env, log_level="warning") for _ in range(servers)]
    database: Callable[[], float] = cluster.cpu if cluster else lambda: 0.0
    try:
        import httpx

        async with httpx.AsyncClient() as http:
            for s in served:
                await s.ready(http)
        urls = [s.url for s in served]
        await drive(urls, 200, width)  # warm: connections, pools, caches

        def cpu() -> dict[str, float]:
            return {
                "servers": sum(s.cpu() for s in served),
                "PostgreSQL": database(),
                "load generator": time.process_time(),
            }

        before = cpu()
        elapsed, latencies = await drive(urls, sessions, width)
        used = {k: v - before[k] for k, v in cpu().items()}
    finally:
        for s in served:
            s.stop()
    rate = sessions / elapsed
    p50, p99 = statistics.median(latencies) * 1000, percentile(latencies, 0.99) * 1000
    print(
        f"{sessions} sessions x one interrupt cycle, concurrency {width}, {servers} interlock serve processes {label}:"
    )
    print(f"  {rate:7.1f} cycles/s   cycle p50 {p50:6.1f} ms   p99 {p99:6.1f} ms   ({elapsed:.2f} s)")
    per = {k: v * 1000 / sessions for k, v in used.items()}
    print("  CPU per cycle: " + ", ".join(f"{k} {v:.2f} ms" for k, v in per.items()))
    serving = per["servers"] + per["PostgreSQL"]
    print(
        f"  estimate without the load generator on these 2 cores: {2000 / serving:.0f} cycles/s "
        f"(2 CPU-s per s / {serving:.2f} ms of server + database CPU per cycle)"
    )
    for target in TARGETS:
        print(f"  target >= {target:.0f} cycles/s: {'OK' if rate >= target else 'MISSED'} (measured {rate:.0f})")
    return rate


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer cycles (a smoke run)")
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=100)
    parser.add_argument("--servers", type=int, default=2)
    parser.add_argument(
        "--compare", action="store_true", help="also: PostgreSQL without fsync, and each server on a memory store"
    )
    args = parser.parse_args()
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} (2 cores)")
    sessions = 200 if args.quick else args.sessions
    cluster = Cluster(durable=True)
    try:
        await in_process(cluster, args.quick)
        await through_servers(cluster, sessions, args.concurrency, args.servers, "on PostgreSQL (default durability)")
    finally:
        cluster.stop()
    if args.compare:
        fast = Cluster(durable=False)
        try:
            await through_servers(fast, sessions, args.concurrency, args.servers, "on PostgreSQL (fsync off)")
        finally:
            fast.stop()
        await through_servers(None, sessions, args.concurrency, args.servers, "each on its own memory store")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    asyncio.run(main())
