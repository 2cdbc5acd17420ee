"""One side of ``bench/regress.py``: CPU per operation of four workloads, printed as one JSON line.

Run in a fresh process with ``PYTHONPATH=<a source tree>/src``; it imports only names that
the wave-1 commit (6f3566d) and later commits share, so both sides run the same code here:

- ``turn``: one user message, the model replies with text (a new session each time);
- ``cycle``: a message, the model asks for a tool that pauses, then a fresh agent object on the
  same store resumes it with the approval in ``metadata["resumed"]``, the tool runs and the
  model replies;

each on an :class:`InMemoryStore` and on a :class:`SQLiteStore` in a temporary file. Each
figure is ``time.process_time()`` (user + system CPU of this process, its threads included)
around a block of operations after a warm-up, divided by the block's size, in milliseconds:
the least of five blocks that share ``--ops`` operations.

    PYTHONPATH=src python bench/regress_workload.py --ops 200
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import tempfile
import time
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import BaseModel

import interlock
from interlock import InMemoryStore, Message, PromptAgent, Resume, ToolContext, ToolRequestPart, tool
from interlock.stores.sqlite import SQLiteStore
from interlock.testing import ScriptedModel

WARMUP = 20
BLOCKS = 5

Op = Callable[[Any], Awaitable[None]]


class Transfer(BaseModel):
    to: str
    amount: float


class Approval(BaseModel):
    approved: bool


@tool
async def transfer(req: Transfer, ctx: ToolContext[Any], approval: Approval | None) -> str:
    """Move money once approved."""
    if approval is None:
        ctx.interrupt({"to": req.to, "amount": req.amount})
    return "sent"


PAUSE = Message(role="model", content=[ToolRequestPart(name="transfer", ref="t1", input={"to": "bob", "amount": 5})])
APPROVE = Resume(
    restart=[
        ToolRequestPart(
            name="transfer", ref="t1", input={"to": "bob", "amount": 5}, metadata={"resumed": {"approved": True}}
        )
    ]
)


async def simple_turn(store: Any) -> None:
    """One user message → a text reply, in a new session."""
    out = await PromptAgent("chat", ScriptedModel(["hello there"]), store=store).run("hi")
    assert out.finish_reason == "stop", out.error


async def interrupt_cycle(store: Any) -> None:
    """Pause on the transfer, then approve it from a fresh agent object on the same store."""
    out = await PromptAgent("bank", ScriptedModel([PAUSE]), tools=[transfer], store=store).run("pay bob")
    assert out.finish_reason == "interrupted", out.error
    fresh = PromptAgent("bank", ScriptedModel(["paid"]), tools=[transfer], store=store)
    done = await fresh.run(resume=APPROVE, snapshot_id=out.snapshot_id)
    assert done.finish_reason == "stop", done.error


async def per_op_ms(op: Op, store: Any, ops: int) -> float:
    """CPU milliseconds per call of ``op``: the least of ``BLOCKS`` blocks of ``ops // BLOCKS`` calls.

    The least block is the one other processes on the machine disturbed least (their cache
    and frequency effects only ever add CPU time); a warm-up runs first.
    """
    for _ in range(WARMUP):
        await op(store)
    size = max(1, ops // BLOCKS)
    blocks: list[float] = []
    for _ in range(BLOCKS):
        gc.collect()
        start = time.process_time()
        for _ in range(size):
            await op(store)
        blocks.append((time.process_time() - start) * 1000 / size)
    return min(blocks)


async def on_sqlite(op: Op, ops: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        async with SQLiteStore(os.path.join(tmp, "regress.db")) as store:
            return await per_op_ms(op, store, ops)


async def measure(ops: int) -> dict[str, float]:
    return {
        "turn/memory": await per_op_ms(simple_turn, InMemoryStore(), ops),
        "turn/sqlite": await on_sqlite(simple_turn, ops),
        "cycle/memory": await per_op_ms(interrupt_cycle, InMemoryStore(), ops),
        "cycle/sqlite": await on_sqlite(interrupt_cycle, ops),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ops", type=int, default=200, help="measured operations per workload")
    args = parser.parse_args()
    figures = asyncio.run(measure(args.ops))
    print(json.dumps({"interlock": os.path.dirname(interlock.__file__), "ms_per_op": figures}))


if __name__ == "__main__":
    main()
