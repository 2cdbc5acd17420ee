"""An orchestrator delegates to a banker agent whose transfer needs approval: the person answers the orchestrator.

The banker's interrupt surfaces in the orchestrator's output (tagged with the agent path);
approving it there resumes the banker's paused turn, then the orchestrator's delegation call
with the banker's reply, then the orchestrator's model.
"""

import asyncio

from pydantic import BaseModel

from interlock import InMemoryStore, Message, PromptAgent, Resume, ToolContext, ToolRequestPart, delegate, tool
from interlock import metadata as md
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


def ask(name: str, ref: str, **input: object) -> Message:
    return Message(role="model", content=[ToolRequestPart(name=name, ref=ref, input=dict(input))])


async def main() -> None:
    store = InMemoryStore()
    banker = PromptAgent(
        "banker",
        ScriptedModel([ask("transfer_money", "1", to="Bob", amount=25), "Sent 25 to Bob."]),
        tools=[transfer_money],
        store=store,
        description="Moves money between accounts.",
    )
    orchestrator = PromptAgent(
        "orchestrator",
        ScriptedModel([ask("delegate_to_banker", "d1", task="Send Bob 25"), "Bob has his 25."]),
        tools=delegate([banker]),  # one tool: delegate_to_banker({task}) -> {response, artifacts?}
        store=store,
    )
    out = await orchestrator.run("Pay Bob back")
    part = out.interrupts[0]
    print(f"{out.finish_reason}: {part.name} via {' > '.join(md.agent_path(part))}, ref {part.ref}")
    call = transfer_money.interrupted(part)  # the banker's own tool claims it
    assert call is not None
    done = await orchestrator.run(
        resume=Resume(restart=[call.restart(Confirmation(approved=True))]), snapshot_id=out.snapshot_id
    )
    print(f"{done.finish_reason}: {done.text}")


asyncio.run(main())
