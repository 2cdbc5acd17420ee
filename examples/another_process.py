"""Pause a turn in one process and resume it in another, over the same SQLite file.

Run without arguments: it pauses a transfer, then starts itself again as a second process
(``another_process.py resume DB SNAPSHOT``), which finds the pending call and approves it.
"""

import asyncio
import pathlib
import subprocess
import sys
import tempfile

from pydantic import BaseModel

from interlock import Message, PromptAgent, Resume, SQLiteStore, ToolContext, ToolRequestPart, tool
from interlock.testing import ScriptedModel


class Transfer(BaseModel):
    to: str
    amount: float


class Confirmation(BaseModel):
    approved: bool


@tool
async def transfer_money(req: Transfer, ctx: ToolContext[Confirmation], confirmation: Confirmation | None) -> str:
    """Transfer money; asks a person first."""
    if confirmation is None:
        ctx.interrupt(req)
    return "sent" if confirmation.approved else "rejected"


def banker(store: SQLiteStore, *script: str | Message) -> PromptAgent:
    return PromptAgent("banker", ScriptedModel(script), tools=[transfer_money], store=store)


async def pause(db: pathlib.Path) -> str:
    ask = ToolRequestPart(name="transfer_money", ref="1", input={"to": "Bob", "amount": 25})
    async with SQLiteStore(db) as store:
        out = await banker(store, Message(role="model", content=[ask])).run("Send Bob 25")
    print(f"process 1: paused on snapshot {out.snapshot_id}")
    return out.snapshot_id or ""


async def resume(db: pathlib.Path, snapshot_id: str) -> None:
    async with SQLiteStore(db) as store:
        agent = banker(store, "Sent.")
        pending = await agent.pending_interrupts(snapshot_id)
        call = transfer_money.interrupted(pending[0])
        assert call is not None
        out = await agent.run(
            resume=Resume(restart=[call.restart(Confirmation(approved=True))]), snapshot_id=snapshot_id
        )
    print(f"process 2: approved {call.input.amount} to {call.input.to}; the model says {out.text!r}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["resume"]:
        asyncio.run(resume(pathlib.Path(sys.argv[2]), sys.argv[3]))
    else:
        db = pathlib.Path(tempfile.mkdtemp()) / "sessions.db"
        snapshot = asyncio.run(pause(db))
        subprocess.run([sys.executable, __file__, "resume", str(db), snapshot], check=True)
