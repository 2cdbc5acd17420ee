"""An agent for AG-UI front ends: ``interlock serve agui_app:agent --ag-ui`` (run from examples/).

The model is scripted (no LLM needed): "pay NAME AMOUNT" asks to transfer money, and the
transfer tool pauses for a person. The session lives in a SQLite file (``$AGUI_STORE``, by
default ``agui.sqlite3``), keyed by the AG-UI ``threadId``. ``agui_client.cjs`` drives it.
"""

from __future__ import annotations

import os
from typing import Any

from pydantic import BaseModel

from interlock import Message, PromptAgent, ToolContext, ToolRequestPart, tool
from interlock.models import ModelRequest, ModelResponse
from interlock.stores.sqlite import SQLiteStore
from interlock.testing import ScriptedModel


class Transfer(BaseModel):
    to: str
    amount: float


class Confirmation(BaseModel):
    approved: bool


@tool
async def transfer_money(req: Transfer, ctx: ToolContext[Any], ok: Confirmation | None) -> dict[str, Any]:
    """Transfer money; asks a person first."""
    if ok is None:
        ctx.interrupt({"question": f"Send {req.amount:g} to {req.to}?"})
    return {"status": "sent" if ok.approved else "cancelled", "to": req.to, "amount": req.amount}


def teller(request: ModelRequest) -> ModelResponse:
    last = request.messages[-1]
    if last.role == "tool":
        return ModelResponse(message=Message.model(f"Done: {last.tool_responses[0].output['status']}."))
    _, to, amount = last.text.split()
    call = ToolRequestPart(name="transfer_money", ref="pay-1", input={"to": to, "amount": float(amount)})
    return ModelResponse(message=Message(role="model", content=[call]))


agent = PromptAgent(
    "banker",
    ScriptedModel([teller] * 1000),
    tools=[transfer_money],
    store=SQLiteStore(os.environ.get("AGUI_STORE", "agui.sqlite3")),
)
