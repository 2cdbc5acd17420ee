"""Pause a turn for approval, persist it, and resume it from a fresh agent object.

The model is scripted (no LLM needed): it asks to transfer money; the transfer tool
interrupts for approval; we print the pending interrupt, approve it, and print the
resumed answer. The session lives in a SQLite file, so the resume could come from
another process.
"""

from __future__ import annotations

import asyncio
import pathlib
import tempfile
from typing import Any

from pydantic import BaseModel

from interlock import Message, PromptAgent, Resume, ToolContext, ToolRequestPart, tool
from interlock.stores.sqlite import SQLiteStore
from interlock.testing import ScriptedModel


class Transfer(BaseModel):
    to: str
    amount: float
    reason: str = ""


class Confirmation(BaseModel):
    approved: bool
    note: str = ""


@tool
async def transfer_money(req: Transfer, ctx: ToolContext[Any], confirmation: Confirmation | None) -> dict[str, Any]:
    """Transfer money to another account; asks a person first."""
    if confirmation is None:
        ctx.interrupt(req)
    if not confirmation.approved:
        return {"status": "rejected", "note": confirmation.note}
    return {"status": "sent", "to": req.to, "amount": req.amount}


def teller(store: SQLiteStore, script: list[Any]) -> PromptAgent:
    return PromptAgent(
        "banker",
        ScriptedModel(script),
        instructions="You are a careful bank teller.",
        tools=[transfer_money],
        store=store,
    )


async def main() -> None:
    path = pathlib.Path(tempfile.mkdtemp()) / "sessions.db"
    ask = Message(
        role="model",
        content=[
            ToolRequestPart(name="transfer_money", ref="call-1", input={"to": "Bob", "amount": 25, "reason": "lunch"})
        ],
    )
    async with SQLiteStore(path) as store:
        paused = await teller(store, [ask]).run("Send Bob 25 for lunch")
        print(f"turn paused ({paused.finish_reason}); snapshot {paused.snapshot_id}")
        for part in paused.interrupts:
            print(f"  pending: {part.name}({part.input}) waiting for approval: {part.meta('interrupt')}")

        # Later, maybe in another process: a fresh agent object over the same store.
        agent = teller(store, ["Done: 25 sent to Bob."])
        pending = await agent.pending_interrupts(paused.snapshot_id)
        call = transfer_money.interrupted(pending[0])
        assert call is not None
        print(f"approving transfer of {call.input.amount} to {call.input.to} ...")
        resumed = await agent.run(
            resume=Resume(restart=[call.restart(Confirmation(approved=True, note="ok by demo"))]),
            snapshot_id=paused.snapshot_id,
        )
        print(f"resumed ({resumed.finish_reason}): {resumed.text}")
        snap = await agent.get_snapshot(resumed.snapshot_id)
        assert snap is not None and snap.state is not None
        print(f"tool result recorded in history: {snap.state.messages[-2].tool_responses[0].output}")


if __name__ == "__main__":
    asyncio.run(main())
