"""The agents and app the inbox's HTTP tests, browser tests and benchmark share.

``build_agents(store)`` is also what ``interlock inbox serve --agents inbox_apps:build_agents``
loads. Identity comes from the ``X-User`` header and the tenant from ``X-Tenant`` (:func:`who`):
the context hook a real deployment would write over its own sign-in.
"""

from __future__ import annotations

import json
import os
from typing import Any

from pydantic import BaseModel, Field

from interlock import Agent, Message, PromptAgent, SessionStore, ToolContext, ToolRequestPart, interrupt_tool, tool
from interlock.agents._host import Host
from interlock.errors import UnauthenticatedError
from interlock.http import RequestInfo
from interlock.http._inbox import InboxApp
from interlock.inbox._inbox import Inbox
from interlock.interrupts._tokens import TokenSigner
from interlock.models import ModelRequest, ModelResponse
from interlock.testing import ScriptedModel
from interlock.tools._middleware import tool_approval


class Transfer(BaseModel):
    to: str = Field(min_length=1, description="who gets the money")
    amount: float = Field(gt=0, description="in euros")


class Approval(BaseModel):
    approved: bool
    note: str | None = None


class Receipt(BaseModel):
    status: str
    reference: str | None = None


class Question(BaseModel):
    question: str


class Reply(BaseModel):
    answer: str


class FileRequest(BaseModel):
    path: str


RUNS: list[dict[str, Any]] = []
"""Every transfer that ran, in this process."""
RUNS_LOG = os.environ.get("INBOX_RUNS_LOG")
"""If set, a file every transfer that runs appends one JSON line to (for servers in processes of their own)."""


@tool
async def transfer(req: Transfer, ctx: ToolContext[Any], approval: Approval | None) -> Receipt:
    """Move money; asks a person first."""
    if approval is None:
        ctx.interrupt({"question": f"Send {req.amount:g} EUR to {req.to}?", "to": req.to, "amount": req.amount})
    if not approval.approved:
        return Receipt(status="cancelled")
    RUNS.append(req.model_dump())
    if RUNS_LOG:
        with open(RUNS_LOG, "a") as f:  # O_APPEND: one whole line per run
            f.write(json.dumps(req.model_dump()) + "\n")
    return Receipt(status="sent", reference=f"T-{req.to}-{req.amount:g}")


@tool
def delete_file(req: FileRequest) -> str:
    """Delete a file (held for approval by the ops agent's middleware)."""
    return f"deleted {req.path}"


ask_user = interrupt_tool("ask_user", input=Question, output=Reply, description="Ask the user.")


def plan(request: ModelRequest) -> ModelResponse:
    """The scripted model: 'pay NAME AMOUNT', 'delete PATH' or 'ask ...' calls a tool; then it reports."""
    last = request.messages[-1]
    if last.role == "tool":
        return ModelResponse(message=Message.model("done: " + "; ".join(str(r.output) for r in last.tool_responses)))
    match last.text.split():
        case ["pay", to, amount, "and", to2, amount2]:  # two calls in one turn: the turn waits on both
            calls = [
                ToolRequestPart(name="transfer", ref="t1", input={"to": to, "amount": float(amount)}),
                ToolRequestPart(name="transfer", ref="t2", input={"to": to2, "amount": float(amount2)}),
            ]
            return ModelResponse(message=Message(role="model", content=[*calls]))
        case ["pay", to, amount]:
            call = ToolRequestPart(name="transfer", ref="t1", input={"to": to, "amount": float(amount)})
        case ["delete", path]:
            call = ToolRequestPart(name="delete_file", ref="d1", input={"path": path})
        case ["ask", *words]:
            call = ToolRequestPart(name="ask_user", ref="q1", input={"question": " ".join(words)})
        case _:
            return ModelResponse(message=Message.model("hello"))
    return ModelResponse(message=Message(role="model", content=[call]))


def build_agents(store: SessionStore, *, tokens: bool = False) -> list[Agent]:
    """A bank (its transfers may be edited), an ops agent whose deletes are held, and a helpdesk that asks."""
    signer = TokenSigner({"k1": b"inbox-test-key-0123456789abcdef!"}) if tokens else None
    model = lambda: ScriptedModel([plan] * 10_000)  # noqa: E731
    options: dict[str, Any] = {"store": store, "host": Host(resume_tokens=signer, require_resume_tokens=tokens)}
    return [
        PromptAgent("bank", model(), tools=[transfer], allow_replaced_input=True, **options),
        PromptAgent("ops", model(), tools=[delete_file], middleware=[tool_approval()], **options),
        PromptAgent("helpdesk", model(), tools=[ask_user], **options),
    ]


def build_token_agents(store: SessionStore) -> list[Agent]:
    """:func:`build_agents` with resume tokens required."""
    return build_agents(store, tokens=True)


def who(info: RequestInfo) -> dict[str, Any]:
    """The test deployment's context hook: ``X-User`` is who asks, ``X-Tenant`` their tenant."""
    user = info.headers.get("x-user")
    if not user:
        raise UnauthenticatedError("sign in: send X-User")
    return {"identity": user, "tenant": info.headers.get("x-tenant") or None}


def build_app(store: SessionStore, *, tokens: bool = False, poll_interval: float = 0.2) -> tuple[InboxApp, list[Agent]]:
    agents = build_agents(store, tokens=tokens)
    return InboxApp(Inbox(store, agents=agents), context=who, poll_interval=poll_interval), agents
