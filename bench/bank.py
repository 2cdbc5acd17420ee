"""The benchmarks' bank: one tool that pauses for approval, and the scripted cycle around it.

One interrupt cycle is what a person's approval costs end to end: a turn whose model asks
for ``transfer`` (which pauses), then a fresh agent object that resumes it with an approval.
Shared by ``bench/agents.py``, ``bench/store.py`` and ``bench/served_bank.py``.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from interlock import Message, PromptAgent, Resume, ToolContext, ToolRequestPart, tool
from interlock.stores import SessionStore
from interlock.testing import ScriptedModel


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


async def one_cycle(store: SessionStore) -> None:
    """Pause on the transfer, then approve it from a fresh agent object on the same store."""
    out = await PromptAgent("bank", ScriptedModel([PAUSE]), tools=[transfer], store=store).run("pay bob")
    fresh = PromptAgent("bank", ScriptedModel(["paid"]), tools=[transfer], store=store)
    done = await fresh.run(resume=APPROVE, snapshot_id=out.snapshot_id)
    assert done.finish_reason == "stop", done.error
