"""The approval inbox: list paused turns across sessions, approve one, read the audit trail."""

import asyncio

from pydantic import BaseModel

from interlock import Inbox, InMemoryStore, Message, PromptAgent, ToolContext, ToolRequestPart, tool
from interlock.testing import ScriptedModel


class Transfer(BaseModel):
    to: str
    amount: float


class Confirmation(BaseModel):
    approved: bool


@tool(name="transferMoney")
async def transfer_money(req: Transfer, ctx: ToolContext[Confirmation], confirmation: Confirmation | None) -> str:
    """Transfer money; asks a person first."""
    if confirmation is None:
        ctx.interrupt(req)
    return "sent" if confirmation.approved else "rejected"


async def main() -> None:
    ask = ToolRequestPart(name="transferMoney", ref="1", input={"to": "Bob", "amount": 25})
    store = InMemoryStore()
    banker = PromptAgent(
        "banker", ScriptedModel([Message(role="model", content=[ask]), "Sent."]), tools=[transfer_money], store=store
    )
    await banker.run("Send Bob 25")

    inbox = Inbox(store, agents=[banker])
    for item in await inbox.pending(agent="banker", tool="transferMoney"):
        print("waiting:", item.tool, item.data)
        await inbox.approve(item.snapshot_id, identity="alice")  # restart {"approved": true}
        for entry in await inbox.audit(item.session_id):
            print("audit:", entry.by, [(a.label, a.decision, a.payload) for a in entry.restart])
    print("still waiting:", len(await inbox.pending()))


asyncio.run(main())
