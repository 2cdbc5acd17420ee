"""Delegation: the CPU and wall time of an interrupt cycle (pause, then approve) answered through 0, 1 and 2 levels.

Each cycle starts a session whose deepest agent's tool pauses for approval, then approves it
through the top agent, on one SQLite file (scripted models: no LLM). Level 0 is the agent
alone; level 1 an orchestrator delegating to it; level 2 one more agent in between. Every level
claims, journals and commits its own snapshot, so a level should cost about one cycle more.
"""

from __future__ import annotations

import asyncio
import pathlib
import statistics
import tempfile
import time
from typing import Any

from interlock import Message, PromptAgent, Resume, SessionStore, ToolContext, ToolRequestPart, delegate, tool
from interlock.stores.sqlite import SQLiteStore
from interlock.testing import Script, ScriptedModel

CYCLES = 30


@tool
async def pay(req: dict[str, Any], ctx: ToolContext[dict[str, bool]], answer: dict[str, bool] | None) -> str:
    """Pay; a person approves first."""
    if answer is None:
        ctx.interrupt({"to": req.get("to")})
    return "paid"


def ask(name: str, **input: object) -> Message:
    return Message(role="model", content=[ToolRequestPart(name=name, ref="1", input=dict(input))])


def chain(store: SessionStore, levels: int) -> PromptAgent:
    """The top agent of ``levels`` delegations down to the agent whose tool pauses (scripts for CYCLES cycles)."""
    script: list[Script] = [ask("pay", to="bob"), "paid"] * CYCLES
    agent = PromptAgent("payer", ScriptedModel(script), tools=[pay], store=store)
    for level in range(levels):
        script = [ask(f"delegate_to_{agent.name}", task="pay bob"), "done"] * CYCLES
        agent = PromptAgent(f"level{level}", ScriptedModel(script), tools=delegate([agent]), store=store)
    return agent


async def cycle(top: PromptAgent) -> None:
    out = await top.run("pay bob")
    (part,) = out.interrupts
    restart = ToolRequestPart(name=part.name, ref=part.ref, input=part.input, metadata={"resumed": {"ok": True}})
    done = await top.run(resume=Resume(restart=[restart]), snapshot_id=out.snapshot_id)
    assert done.finish_reason == "stop", done


async def measure(folder: pathlib.Path, levels: int) -> tuple[float, float]:
    async with SQLiteStore(folder / f"levels{levels}.db") as store:
        top = chain(store, levels)
        await cycle(top)  # warm up (schema, caches)
        cpu: list[float] = []
        wall: list[float] = []
        for _ in range(CYCLES - 1):
            c, w = time.process_time(), time.perf_counter()
            await cycle(top)
            cpu.append((time.process_time() - c) * 1e3)
            wall.append((time.perf_counter() - w) * 1e3)
    return statistics.median(cpu), statistics.median(wall)


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        print(f"interrupt cycle through delegation levels, SQLite (median of {CYCLES - 1} cycles):")
        base = None
        for levels in (0, 1, 2):
            cpu, wall = await measure(pathlib.Path(tmp), levels)
            base = base or cpu
            print(f"  {levels} levels: {cpu:7.1f} ms CPU  {wall:7.1f} ms wall  ({cpu / base:4.2f}x the CPU of 0)")


if __name__ == "__main__":
    asyncio.run(main())
