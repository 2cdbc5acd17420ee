"""Answer a paused call with a precomputed result: the tool does not run."""

import asyncio

from pydantic import BaseModel

from interlock import InMemoryStore, Message, PromptAgent, Resume, ToolContext, ToolRequestPart, tool
from interlock.testing import ScriptedModel


class Transfer(BaseModel):
    to: str
    amount: float


@tool
async def transfer_money(req: Transfer, ctx: ToolContext[None]) -> str:
    """Transfer money; a person must answer first."""
    ctx.interrupt(req)
    return "unreachable: this example always answers by respond"


async def main() -> None:
    ask = ToolRequestPart(name="transfer_money", ref="1", input={"to": "Bob", "amount": 25})
    model = ScriptedModel([Message(role="model", content=[ask]), "Bob was paid by the back office."])
    agent = PromptAgent("banker", model, tools=[transfer_money], store=InMemoryStore())
    out = await agent.run("Send Bob 25")
    call = transfer_money.interrupted(out.interrupts[0])
    assert call is not None
    out = await agent.run(resume=Resume(respond=[call.respond("sent by the back office")]), snapshot_id=out.snapshot_id)
    print(out.finish_reason, "-", out.text)
    print("the model saw:", model.requests[-1].messages[-1].tool_responses[0].output)


asyncio.run(main())
