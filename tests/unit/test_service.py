"""The protocol seam (``interlock.http._service``) driven directly, as an MCP, AG-UI or A2A adapter would.

start → pause → pending → resume → read with a :class:`Caller` carrying identity and tenant;
another tenant's caller sees NOT_FOUND; racing resumes have one winner (ABORTED for the others).
"""

from __future__ import annotations

import asyncio
import pathlib
import re
from collections.abc import AsyncIterator
from typing import Any

import pytest
from pydantic import BaseModel

from interlock import AgentOutput, Message, PromptAgent, ToolContext, ToolRequestPart, tool
from interlock._engine.io import AgentError, AgentInit, AgentInput
from interlock.errors import AbortedError, InvalidArgumentError, NotFoundError, SnapshotNotFoundError
from interlock.http._service import AgentService, Caller, RunningTurn, ServedAgents
from interlock.inbox._inbox import Approve, Inbox
from interlock.interrupts._plan import Resume
from interlock.models import ModelRequest, ModelResponse
from interlock.stores.sqlite import SQLiteStore
from interlock.testing import ScriptedModel

RUNS: list[str] = []


class Payment(BaseModel):
    to: str
    amount: float


class Approval(BaseModel):
    approved: bool


@tool
async def pay(req: Payment, ctx: ToolContext[Any], approval: Approval | None) -> str:
    """Pay someone; asks a person first."""
    if approval is None:
        ctx.interrupt({"to": req.to, "amount": req.amount})
    RUNS.append(req.to)
    return f"paid {req.to}" if approval.approved else "not paid"


def plan(request: ModelRequest) -> ModelResponse:
    last = request.messages[-1]
    if last.role == "tool":
        return ModelResponse(message=Message.model("done: " + "; ".join(str(r.output) for r in last.tool_responses)))
    call = ToolRequestPart(name="pay", ref="p1", input={"to": last.text, "amount": 5.0})
    return ModelResponse(message=Message(role="model", content=[call]))


ALICE = Caller(identity="alice", tenant="acme", extra={"channel": "test"})
MALLORY = Caller(identity="mallory", tenant="globex")


@pytest.fixture
async def service(tmp_path: pathlib.Path) -> AsyncIterator[AgentService]:
    RUNS.clear()
    async with SQLiteStore(tmp_path / "sessions.db") as store:
        agent = PromptAgent("bank", ScriptedModel([plan] * 40), tools=[pay], store=store)
        yield ServedAgents({"payments": agent})


async def finish(turn: RunningTurn) -> AgentOutput:
    async for _ in turn:
        pass
    return await turn.output()


async def paused(service: AgentService, to: str = "bob") -> AgentOutput:
    turn = await service.start("payments", AgentInput(message=Message.user(to)), AgentInit(), caller=ALICE)
    out = await finish(turn)
    assert out.finish_reason == "interrupted", out
    return out


def test_caller_round_trips_the_agent_context() -> None:
    context = {"identity": {"sub": "u1"}, "tenant": "acme", "scopes": ["pay"]}
    caller = Caller.of(context)
    assert (caller.identity, caller.tenant, dict(caller.extra)) == ({"sub": "u1"}, "acme", {"scopes": ["pay"]})
    assert caller.context() == context
    assert Caller().context() == {}


async def test_start_pause_pending_resume_read(service: AgentService) -> None:
    assert service.names() == ["payments"]
    assert service.describe("payments").state_management == "server"
    out = await paused(service)
    sid = out.snapshot_id or ""

    [item] = await service.pending("payments", snapshot_id=sid, caller=ALICE)
    assert (item.tool, item.ref, item.input, item.tenant) == ("pay", "p1", {"to": "bob", "amount": 5.0}, "acme")
    assert [i.snapshot_id for i in await service.pending("payments", session_id=out.session_id, caller=ALICE)] == [sid]

    resumed = await finish(await service.resume("payments", sid, Approve({"approved": True}), caller=ALICE))
    assert resumed.error is None and resumed.text == "done: paid bob" and RUNS == ["bob"]
    assert await service.pending("payments", snapshot_id=sid, caller=ALICE) == []

    latest = await service.read("payments", session_id=out.session_id, caller=ALICE)
    assert latest.snapshot_id == resumed.snapshot_id and latest.status == "completed"
    record = (latest.metadata or {})["resume"]
    assert record["by"] == "alice"  # the caller's identity is who answered, in the audit record
    settled = await service.wait("payments", snapshot_id=resumed.snapshot_id, timeout=5.0, caller=ALICE)
    assert settled.snapshot_id == resumed.snapshot_id


async def test_another_tenant_cannot_read_list_or_resume(service: AgentService) -> None:
    out = await paused(service)
    sid = out.snapshot_id or ""
    for attempt in (
        service.read("payments", snapshot_id=sid, caller=MALLORY),
        service.read("payments", session_id=out.session_id, caller=MALLORY),
        service.pending("payments", snapshot_id=sid, caller=MALLORY),
        service.wait("payments", snapshot_id=sid, timeout=1.0, caller=MALLORY),
        service.resume("payments", sid, Approve({"approved": True}), caller=MALLORY),
    ):
        with pytest.raises(SnapshotNotFoundError):
            await attempt
    assert await service.abort("payments", sid, caller=MALLORY) is None
    # a resume sent as the engine's own input (Genkit's respond/restart parts) is refused the same way
    call = pay.interrupted(out.interrupts[0])
    assert call is not None
    restart = call.restart(Approval(approved=True))
    turn = await service.start(
        "payments", AgentInput(resume=_resume(restart)), AgentInit(snapshot_id=sid), caller=MALLORY
    )
    with pytest.raises(AgentError) as refused:
        (await finish(turn)).raise_for_error()
    assert refused.value.status == "NOT_FOUND"
    assert RUNS == [] and len(await service.pending("payments", snapshot_id=sid, caller=ALICE)) == 1


async def test_racing_resumes_have_one_winner(service: AgentService) -> None:
    out = await paused(service, "carol")
    sid = out.snapshot_id or ""

    async def answer() -> AgentOutput:
        turn = await service.resume("payments", sid, {"p1": Approve({"approved": True})}, caller=ALICE)
        return (await finish(turn)).raise_for_error()

    results = await asyncio.gather(*(answer() for _ in range(8)), return_exceptions=True)
    won = [r for r in results if isinstance(r, AgentOutput)]
    lost = [r for r in results if not isinstance(r, AgentOutput)]
    assert len(won) == 1 and won[0].text == "done: paid carol"
    assert len(lost) == 7 and all(isinstance(e, AbortedError) for e in lost), lost
    assert all(re.search(r"already answered by alice|is being answered \(turn", str(e)) for e in lost), lost
    assert RUNS == ["carol"]
    with pytest.raises(AbortedError, match=f"snapshot {sid} was already answered by alice at ") as late:
        await answer()
    assert late.value.details["answered_by"] == "alice"
    inbox = Inbox(_agent(service).store, agents=[_agent(service)])
    assert len(await inbox.audit(out.session_id or "", tenant="acme")) == 1


async def test_options_are_the_answers_the_inbox_offers_with_the_tools_schemas(service: AgentService) -> None:
    out = await paused(service)
    [item] = await service.pending("payments", snapshot_id=out.snapshot_id, caller=ALICE)
    options = service.options("payments", item)
    assert list(options) == ["approve", "reject", "respond", "restart"]
    assert options["restart"]["payload_schema"] == pay.resume_schema
    assert options["respond"]["output_schema"] == pay.definition.output_schema


async def test_refusals_before_any_agent_work(service: AgentService) -> None:
    with pytest.raises(NotFoundError, match="no agent named 'nobody'"):
        await service.start("nobody", AgentInput(message=Message.user("x")), AgentInit(), caller=ALICE)
    with pytest.raises(InvalidArgumentError, match="needs a 'message'"):
        await service.start("payments", AgentInput(), AgentInit(), caller=ALICE)
    with pytest.raises(InvalidArgumentError, match="a snapshot_id or a session_id"):
        await service.pending("payments", caller=ALICE)


def _agent(service: AgentService) -> PromptAgent:
    assert isinstance(service, ServedAgents)
    found = service.agents["payments"]
    assert isinstance(found, PromptAgent)
    return found


def _resume(restart: ToolRequestPart) -> Resume:
    return Resume(restart=[restart])
