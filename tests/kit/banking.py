"""The bank the safety tests share: a transfer that pauses for approval, the model turn asking for it, its approval."""

from __future__ import annotations

from pydantic import BaseModel

from interlock import Message, Resume, ToolContext, ToolRequestPart, tool


class Transfer(BaseModel):
    to: str
    amount: float


class Approval(BaseModel):
    approved: bool


PAY = Message(role="model", content=[ToolRequestPart(name="transfer", ref="t1", input={"to": "bob", "amount": 5})])
"""The model turn that asks to pay bob 5."""
APPROVE = Resume(
    restart=[
        ToolRequestPart(
            name="transfer", ref="t1", input={"to": "bob", "amount": 5}, metadata={"resumed": {"approved": True}}
        )
    ]
)
"""The resume that approves it."""


@tool
async def transfer(req: Transfer, ctx: ToolContext[Approval], approval: Approval | None) -> str:
    """Move money once approved."""
    if approval is None:
        ctx.interrupt({"to": req.to, "amount": req.amount})
    return "sent"
