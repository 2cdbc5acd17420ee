"""Restart a paused call with a revised input (the agent must allow it)."""

import asyncio

from pydantic import BaseModel

from interlock import InMemoryStore, Message, PromptAgent, Resume, ToolContext, ToolRequestPart, tool
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
    return f"sent {req.amount} to {req.to}" if confirmation.approved else "rejected"


async def main() -> None:
    ask = ToolRequestPart(name="transfer_money", ref="1", input={"to": "Bob", "amount": 25})
    model = ScriptedModel([Message(role="model", content=[ask]), "Done."])
    agent = PromptAgent("banker", model, tools=[transfer_money], store=InMemoryStore(), allow_replaced_input=True)
    out = await agent.run("Send Bob 25")
    call = transfer_money.interrupted(out.interrupts[0])
    assert call is not None
    revised = call.restart_with_input(Transfer(to="Bob", amount=20), Confirmation(approved=True))
    out = await agent.run(resume=Resume(restart=[revised]), snapshot_id=out.snapshot_id)
    result = model.requests[-1].messages[-1].tool_responses[0]
    print("tool result:", result.output)
    print("original input kept:", model.requests[-1].messages[-2].tool_requests[0].meta("replacedInput"))


asyncio.run(main())
