"""The bank of the answer-policy tests: a transfer only treasury may approve, never its requester.

Every run of the transfer's body appends a line to ``$POLICY_RUNS`` (a file, so tests across
processes count them), else to :data:`RUNS`.
"""

from __future__ import annotations

import os
from typing import Any

from pydantic import BaseModel

from interlock import Message, PromptAgent, SessionStore, ToolContext, ToolRequestPart, tool
from interlock.interrupts import AnswerPolicy, any_of, has_role, is_identity, may_decrease
from interlock.models import ModelRequest, ModelResponse
from interlock.testing import ScriptedModel

RUNS: list[dict[str, Any]] = []

ALICE = {"id": "alice", "roles": ["treasury", "clerk"]}
"""Asks for transfers; treasury too (so only separation of duties refuses her)."""
BOB = {"id": "bob", "roles": ["treasury"]}
CAROL = {"id": "carol", "roles": ["treasury"]}
DAVE = {"id": "dave", "roles": ["treasury"]}
MALLORY = {"id": "mallory", "roles": ["clerk"]}
"""Not in treasury."""

TREASURY = AnswerPolicy(
    name="treasury",
    who=any_of(has_role("treasury"), is_identity("bob", "carol", "dave")),  # the CLI's --as names a person
    decisions=frozenset({"approve", "deny"}),
    edits={"amount": may_decrease(low=0)},
    quorum=lambda input: 2 if input["amount"] > 10_000 else 1,
)


class Transfer(BaseModel):
    to: str
    amount: float


class Approval(BaseModel):
    approved: bool


def _count(req: Transfer) -> None:
    where = os.environ.get("POLICY_RUNS")
    if where:
        with open(where, "a") as f:
            f.write(f"{req.to} {req.amount}\n")
    else:
        RUNS.append({"to": req.to, "amount": req.amount})


@tool(policy=TREASURY)
async def transfer(req: Transfer, ctx: ToolContext[Any], approval: Approval | None) -> str:
    """Move money; treasury approves."""
    if approval is None:
        ctx.interrupt({"to": req.to, "amount": req.amount})
    if not approval.approved:
        return "transfer cancelled"
    _count(req)
    return f"sent {req.amount:g} to {req.to}"


def _plan(request: ModelRequest) -> ModelResponse:
    last = request.messages[-1]
    if last.role == "tool":
        return ModelResponse(message=Message.model("done: " + "; ".join(str(r.output) for r in last.tool_responses)))
    match last.text.split():
        case ["pay", to, amount]:
            call = ToolRequestPart(name="transfer", ref="t1", input={"to": to, "amount": float(amount)})
            return ModelResponse(message=Message(role="model", content=[call]))
        case _:
            return ModelResponse(message=Message.model("hello"))


def bank(store: SessionStore | None = None, **options: Any) -> PromptAgent:
    """The bank agent (edits allowed, so the policy decides which)."""
    return PromptAgent(
        "bank", ScriptedModel([_plan] * 100), tools=[transfer], store=store, allow_replaced_input=True, **options
    )


def build_agents(store: SessionStore) -> list[PromptAgent]:
    """For ``--agents policy_bank:build_agents``."""
    return [bank(store)]


PEOPLE = {p["id"]: p for p in (ALICE, BOB, CAROL, DAVE, MALLORY)}


def who(info: Any) -> dict[str, Any]:
    """The test deployment's context hook: ``X-User`` names a person of :data:`PEOPLE` (their roles with them)."""
    from interlock.errors import UnauthenticatedError

    user = info.headers.get("x-user")
    if user not in PEOPLE:
        raise UnauthenticatedError("sign in: send X-User naming a known person")
    return {"identity": PEOPLE[user]}


BALANCE = {"acme": 100_000.0}
"""What :data:`guarded_transfer`'s recheck reads: the world as it is when the approval lands."""


def _still_covered(req: Transfer, ctx: ToolContext[Any]) -> str | None:
    if BALANCE["acme"] < req.amount:
        return f"the balance ({BALANCE['acme']:g}) no longer covers {req.amount:g}"
    return None


@tool(policy=TREASURY, recheck=_still_covered, name="transfer")
async def guarded_transfer(req: Transfer, ctx: ToolContext[Any], approval: Approval | None) -> str:
    """Move money if the balance still covers it when approved."""
    if approval is None:
        ctx.interrupt({"to": req.to, "amount": req.amount})
    if not approval.approved:
        return "transfer cancelled"
    _count(req)
    return f"sent {req.amount:g} to {req.to}"


def guarded_bank(store: SessionStore | None = None) -> PromptAgent:
    """The bank with :data:`guarded_transfer`: an approval whose balance no longer holds is asked again."""
    return PromptAgent("bank", ScriptedModel([_plan] * 100), tools=[guarded_transfer], store=store)


@tool(policy=TREASURY, expires_in=3600, name="transfer")
async def timed_transfer(req: Transfer, ctx: ToolContext[Any], approval: Approval | None) -> str:
    """Move money; treasury approves within the hour."""
    if approval is None:
        ctx.interrupt({"to": req.to, "amount": req.amount})
    _count(req)
    return "sent"


def timed_bank(store: SessionStore | None = None) -> PromptAgent:
    """The bank whose transfers wait an hour (deadlines to extend)."""
    return PromptAgent("bank", ScriptedModel([_plan] * 100), tools=[timed_transfer], store=store)


def build_timed_agents(store: SessionStore) -> list[PromptAgent]:
    """For ``--agents policy_bank:build_timed_agents``."""
    return [timed_bank(store)]
