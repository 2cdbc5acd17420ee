"""Detached turns on a worker fleet: enqueue → start latency, and recovery after a worker is SIGKILLed.

Run with ``make bench`` (or ``python bench/workers.py [--quick]``). It starts its own
PostgreSQL cluster (``scripts/postgres.sh``, the test suite's settings) and the fleet of
``tests/kit/workers_fleet.py``: ``interlock serve --detach-to-workers`` and ``interlock worker``
processes (lease 2 s, stalled after 2 s, sweep every 0.5 s).

* **Latency**: an in-process agent with ``detach_to=WorkerQueue(dsn)`` detaches a turn of
  ``quick`` (whose model logs when it is called) one after another; the figure is the time
  from the detach call to the model's first line in the worker, so it includes writing the
  pending row, the enqueue, NOTIFY, procrastinate's fetch, the lease claim and loading the
  turn: an upper bound of enqueue → start. Target: p50 ≤ 20 ms.
* **SIGKILL** (the acceptance loop, 20 runs): a turn of ``errand`` (``pay``, then ``wait``
  sleeping 60 s) is detached through the server; once ``wait`` started, its worker's
  process group is SIGKILLed and a fresh worker started. Printed: runs, lost turns (not
  completed within 30 s), silent repeats (a tool body logged twice for one session), and
  the recovery time from the kill to the completed snapshot, p50 and max.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

from interlock import PromptAgent
from interlock.agents._host import Host
from interlock.http._client import RemoteAgent
from interlock.stores.postgres import PostgresStore
from interlock.workers import WorkerQueue

KIT = pathlib.Path(__file__).resolve().parents[1] / "tests" / "kit"
SCRIPT = KIT.parents[1] / "scripts" / "postgres.sh"
sys.path.insert(0, str(KIT))
wf: Any = importlib.import_module("workers_fleet")  # the tests' fleet: serve and worker processes


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def latency(f: Any, count: int) -> tuple[list[float], list[float]]:
    """Detach ``count`` quick turns in-process, one after another: seconds to the worker's start from the
    detach call, and from the enqueue's return (the detached output)."""
    os.environ[wf.DSN], os.environ[wf.LOG] = f.dsn, str(f.log)  # workers_app reads them on import
    quick: Any = importlib.import_module("workers_app").Quick

    found: list[float] = []
    after: list[float] = []
    async with PostgresStore(f.dsn) as store:
        queue = WorkerQueue(f.dsn)
        agent = PromptAgent("quick", quick(), store=store, host=Host(detach_to=queue))
        try:
            for _ in range(count):
                before = len(wf.runs(f.log, "start"))
                sent = time.time()
                out = await agent.run("go", detach=True)
                enqueued = time.time()
                assert out.finish_reason == "detached", out
                done = await agent.wait(out.snapshot_id or "", timeout=10)  # woken by NOTIFY: no polling here
                starts = wf.runs(f.log, "start")
                assert done.status == "completed" and len(starts) == before + 1, done
                found.append(starts[-1][1] - sent)
                after.append(starts[-1][1] - enqueued)
        finally:
            await queue.aclose()
    return found, after


async def sigkill_runs(f: Any, url: str, count: int) -> tuple[int, int, list[float]]:
    """``count`` SIGKILLs mid-turn: (lost turns, silent repeats, recovery seconds of each completed turn)."""
    lost = repeats = 0
    recovery: list[float] = []
    async with RemoteAgent(f"{url}/errand") as remote:
        for _ in range(count):
            out = await remote.run("go", detach=True)
            assert out.snapshot_id and out.session_id, out
            pid, _ = await wf.logged(f.log, "wait", out.session_id)
            wf.kill(next(w for w in f.workers if w.pid == pid))
            killed = time.monotonic()
            f.worker("--log-level", "warning", *wf.FAST)
            try:
                done = await remote.wait(out.snapshot_id, timeout=30)
            except TimeoutError:
                done = None
            if done is None or done.status != "completed":
                lost += 1
            else:
                recovery.append(time.monotonic() - killed)
            repeats += sum(len(wf.runs(f.log, tool, out.session_id)) > 1 for tool in ("pay", "wait"))
    return lost, repeats, recovery


def start_cluster() -> tuple[str, str]:
    directory = tempfile.mkdtemp(prefix="interlock-bench-workers-")
    done = subprocess.run(["bash", str(SCRIPT), "start", directory], capture_output=True, text=True, check=True)
    return done.stdout.strip().splitlines()[-1], directory


async def main(quick: bool) -> None:
    dsn, directory = start_cluster()
    try:
        with tempfile.TemporaryDirectory() as tmp, wf.fleet(dsn, pathlib.Path(tmp), sleep=60) as f:
            server = f.server()
            quiet = ("--log-level", "warning", *wf.FAST)  # as deployed: no log line per job
            f.worker(*quiet)
            f.worker(*quiet)
            assert server.url is not None
            found, after = await latency(f, 30 if quick else 200)
            found, after = found[3:], after[3:]  # the first turns warm the processes up
            print(
                f"detach call -> worker start ({len(found)} turns, one at a time): "
                f"p50 {pct(found, 0.5) * 1000:.1f} ms, p99 {pct(found, 0.99) * 1000:.1f} ms (target p50 <= 20 ms); "
                f"from the enqueue's return: p50 {pct(after, 0.5) * 1000:.1f} ms, p99 {pct(after, 0.99) * 1000:.1f} ms"
            )
            count = 3 if quick else 20
            lost, repeats, recovery = await sigkill_runs(f, server.url, count)
            spread = f"p50 {statistics.median(recovery):.2f} s, max {max(recovery):.2f} s" if recovery else "none"
            print(
                f"worker SIGKILLed mid-turn: {count} runs, {lost} lost, {repeats} silent repeats, "
                f"recovery (kill -> completed on another worker) {spread}"
            )
    finally:
        subprocess.run(["bash", str(SCRIPT), "stop", directory], capture_output=True, check=False)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer turns and runs")
    asyncio.run(main(parser.parse_args().quick))
