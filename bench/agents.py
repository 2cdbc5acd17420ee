"""Agent-layer benchmarks (scripted model): interrupt cycles, a long session, and concurrency.

Run with ``make bench`` (or ``python bench/agents.py``). Prints figures against targets:

- interrupt cycle (pause, then a fresh agent object over the same store loads and resumes):
  ≤ 2 ms CPU in memory, ≤ 5 ms CPU on SQLite with fsync;
- a 200-turn session with a tool call every 5th turn: CPU per turn at turn 200 ≤ 2× turn 10;
  SQLite file ≤ 2× the JSON size of the final history;
- 1000 sessions × one interrupt cycle at concurrency 100 on SQLite: ≥ 150 cycles/s.
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from typing import Any

from bank import one_cycle

from interlock import InMemoryStore, Message, PromptAgent, ToolRequestPart, tool
from interlock.messages import messages_to_json
from interlock.models import ModelRequest, ModelResponse
from interlock.stores import SessionStore
from interlock.stores.sqlite import SQLiteStore
from interlock.testing import ScriptedModel


@tool
def lookup(input: dict[str, Any]) -> dict[str, Any]:
    """Look something up."""
    return {"result": "a fact of moderate length " * 3, "query": input.get("q")}


def report(label: str, value: float, unit: str, target: str, ok: bool) -> None:
    print(f"  {label:<52} {value:>10.3f} {unit:<8} target {target:<12} {'OK' if ok else 'MISSED'}")


async def cycle_ms(store: SessionStore, n: int) -> float:
    for _ in range(20):
        await one_cycle(store)
    samples = []
    for _ in range(5):
        start = time.process_time()
        for _ in range(n):
            await one_cycle(store)
        samples.append((time.process_time() - start) * 1000 / n)
    return statistics.median(samples)


def session_model() -> Any:
    def answer(request: ModelRequest) -> ModelResponse:
        last = request.messages[-1]
        turn = sum(1 for m in request.messages if m.role == "user")
        if last.role == "user" and turn % 5 == 0:
            return ModelResponse(
                message=Message(
                    role="model", content=[ToolRequestPart(name="lookup", ref=f"c{turn}", input={"q": turn})]
                )
            )
        return ModelResponse(message=Message.model(f"Answer number {turn}: " + "some words of a reply " * 6))

    class Endless(ScriptedModel):
        async def generate(self, request: ModelRequest, *, on_chunk: Any = None) -> ModelResponse:
            return answer(request)

    return Endless()


async def long_session(path: str) -> None:
    async with SQLiteStore(path) as store:
        agent = PromptAgent("chat", session_model(), tools=[lookup], store=store)
        snapshot_id: str | None = None
        per_turn: dict[int, float] = {}
        sizes: dict[int, int] = {}
        history: list[Message] = []
        for turn in range(1, 201):
            start = time.process_time()
            out = await agent.run(f"question {turn}: " + "please tell me more " * 4, snapshot_id=snapshot_id)
            per_turn[turn] = (time.process_time() - start) * 1000
            snapshot_id = out.snapshot_id
            if turn in (50, 100, 200):
                snap = await store.load(snapshot_id or "")
                assert snap is not None and snap.state is not None
                history = snap.state.messages
                sizes[turn] = _db_bytes(path)

        def around(t: int) -> float:
            return statistics.median(per_turn[i] for i in range(t - 4, t + 1) if i in per_turn)

        t10, t200 = around(10), around(200)
        print(f"  CPU per turn at turn 10: {t10:.3f} ms, at turn 200: {t200:.3f} ms (median of 5 turns around each)")
        report("turn 200 / turn 10", t200 / t10, "x", "<= 2x", t200 <= 2 * t10)
        json_size = len(json.dumps(messages_to_json(history), separators=(",", ":")))
        for t, size in sizes.items():
            print(f"  SQLite file after {t:>3} turns: {size:>9,} bytes")
        report(
            "file / JSON of final history (200 turns)",
            sizes[200] / json_size,
            "x",
            "<= 2x",
            sizes[200] <= 2 * json_size,
        )
        print(f"  (final history: {len(history)} messages, {json_size:,} bytes of JSON)")


def _db_bytes(path: str) -> int:
    import sqlite3

    con = sqlite3.connect(path)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    return sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p))


async def concurrency(path: str, sessions: int = 1000, width: int = 100) -> None:
    async with SQLiteStore(path) as store:
        gate = asyncio.Semaphore(width)

        async def bounded() -> None:
            async with gate:
                await one_cycle(store)

        start = time.perf_counter()
        await asyncio.gather(*(bounded() for _ in range(sessions)))
        elapsed = time.perf_counter() - start
    rate = sessions / elapsed
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    report(f"{sessions} cycles at concurrency {width} (SQLite)", rate, "cycles/s", ">= 150", rate >= 150)
    print(f"  peak RSS: {peak:.1f} MiB")


async def main() -> None:
    quick = "--quick" in sys.argv
    print("interrupt cycle (pause; a fresh agent over the same store loads and resumes), CPU per cycle:")
    mem = await cycle_ms(InMemoryStore(), 50 if quick else 200)
    report("in memory", mem, "ms", "<= 2 ms", mem <= 2)
    with tempfile.TemporaryDirectory() as tmp:
        async with SQLiteStore(os.path.join(tmp, "cycle.db")) as store:
            lite = await cycle_ms(store, 20 if quick else 100)
        report("SQLite (WAL, synchronous=FULL)", lite, "ms", "<= 5 ms", lite <= 5)
        print("a 200-turn session, a tool call every 5th turn (SQLite):")
        await long_session(os.path.join(tmp, "session.db"))
        print("1000 sessions x one interrupt cycle:")
        await concurrency(os.path.join(tmp, "many.db"), sessions=200 if quick else 1000)


if __name__ == "__main__":
    asyncio.run(main())
