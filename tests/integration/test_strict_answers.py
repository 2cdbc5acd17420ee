"""A person's answers are validated strictly (issue 25): JSON types as declared, unknown keys refused.

Resume payloads and respond outputs: ``"yes"``, ``1`` and ``"no"`` are not booleans, an unknown
key is INVALID_ARGUMENT naming it, and nothing runs; ``lax_answers=True`` restores pydantic's lax
mode. An approval marker (``toolApproved``) is a JSON bool whatever the tool says.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from http_helpers import serve
from pydantic import BaseModel
from typing_extensions import TypedDict

from interlock import InMemoryStore, Message, PromptAgent, Resume, ToolContext, ToolRequestPart, tool
from interlock._wire import resume_to_json
from interlock.errors import InvalidArgumentError, ToolInputError, ToolOutputError
from interlock.http._server import AgentServer
from interlock.parts import ToolResponsePart
from interlock.testing import ScriptedModel
from interlock.tools._middleware import tool_approval
from interlock.tools._tool import interrupt_tool

RAN: list[Any] = []


class Pay(BaseModel):
    to: str


class Verdict(BaseModel):
    approved: bool
    limit: int | None = None
    at: datetime | None = None


class VerdictDict(TypedDict):
    approved: bool


@dataclass
class VerdictData:
    approved: bool


class Receipt(BaseModel):
    id: str
    amount: int


@tool
def pay(req: Pay, ctx: ToolContext[Verdict], verdict: Verdict | None) -> str:
    """Pay someone once a person approves."""
    if verdict is None:
        ctx.interrupt({"ask": "approve?"})
    RAN.append(verdict)
    return "paid" if verdict.approved else "refused"


@tool(name="pay", lax_answers=True)
def lax_pay(req: Pay, ctx: ToolContext[Verdict], verdict: Verdict | None) -> str:
    """The same tool, opted into lax answers."""
    if verdict is None:
        ctx.interrupt({"ask": "approve?"})
    RAN.append(verdict)
    return "paid" if verdict.approved else "refused"


@tool
def pay_typed_dict(req: Pay, verdict: VerdictDict | None) -> str:
    """A TypedDict payload."""
    return "ok"


@tool
def pay_dataclass(req: Pay, verdict: VerdictData | None) -> str:
    """A dataclass payload."""
    return "ok"


lookup = interrupt_tool("lookup", input=Pay, output=Receipt)
lax_lookup = interrupt_tool("lookup", input=Pay, output=Receipt, lax_answers=True)

NOT_BOOLS = ["yes", 1, "no", 0, "true", None]


@pytest.mark.parametrize("value", NOT_BOOLS)
def test_a_bool_field_takes_only_a_json_bool(value: Any) -> None:
    with pytest.raises(ToolInputError, match=r"field 'approved': Input should be a valid boolean.*lax_answers") as info:
        pay.validate_resume({"approved": value})
    assert info.value.status == "INVALID_ARGUMENT"
    assert pay.validate_resume({"approved": True}) == Verdict(approved=True)


def test_types_are_json_types_as_declared() -> None:
    when = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert pay.validate_resume({"approved": False, "limit": 5, "at": "2025-01-02T03:04:05Z"}) == Verdict(
        approved=False, limit=5, at=when
    )
    for bad in ({"approved": True, "limit": "5"}, {"approved": True, "limit": 5.5}, {"approved": True, "at": 5}):
        with pytest.raises(ToolInputError, match="field 'limit'|field 'at'"):
            pay.validate_resume(bad)


@pytest.mark.parametrize("strict", [pay, pay_typed_dict, pay_dataclass], ids=["model", "typeddict", "dataclass"])
def test_an_unknown_key_is_refused_naming_it(strict: Any) -> None:
    with pytest.raises(ToolInputError, match="field 'aproved'"):
        strict.validate_resume({"approved": True, "aproved": False})


def test_lax_answers_coerce_and_drop_unknown_keys() -> None:
    assert lax_pay.lax_answers and not pay.lax_answers
    assert lax_pay.validate_resume({"approved": "yes"}) == Verdict(approved=True)
    assert lax_pay.validate_resume({"approved": 1}) == Verdict(approved=True)
    assert lax_pay.validate_resume({"approved": "no", "extra": 1}) == Verdict(approved=False)


def test_respond_outputs_are_strict_unless_lax() -> None:
    for bad, field in (({"id": "r", "amount": "5"}, "amount"), ({"id": "r", "amount": 5, "ammount": 6}, "ammount")):
        with pytest.raises(ToolOutputError, match=f"field '{field}'") as info:
            lookup.validate_respond(bad)
        assert info.value.status == "INVALID_ARGUMENT"
    assert lax_lookup.validate_respond({"id": "r", "amount": "5", "x": 1}) == {"id": "r", "amount": 5}
    assert lookup.validate_respond(Receipt(id="r", amount=5)) == {"id": "r", "amount": 5}


# Through a run: refused before anything runs, the store unchanged ---------------------------------


def asking(name: str, input: Any) -> Message:
    return Message(role="model", content=[ToolRequestPart(name=name, ref="r1", input=input)])


async def paused(tool_: Any, **kw: Any) -> tuple[PromptAgent, InMemoryStore, str]:
    store = InMemoryStore()
    model = ScriptedModel([asking(tool_.name, {"to": "ann"}), "done"])
    agent = PromptAgent("bank", model, tools=[tool_], store=store, **kw)
    out = await agent.run("pay ann")
    assert out.finish_reason == "interrupted" and out.snapshot_id
    RAN.clear()
    return agent, store, out.snapshot_id


def restart(resumed: Any) -> Resume:
    return Resume(restart=[ToolRequestPart(name="pay", ref="r1", input={"to": "ann"}, metadata={"resumed": resumed})])


def respond(output: Any) -> Resume:
    return Resume(respond=[ToolResponsePart(name="lookup", ref="r1", output=output)])


async def refused(agent: PromptAgent, store: InMemoryStore, snap: str, resume: Resume) -> InvalidArgumentError:
    before = await store.list()
    with pytest.raises(InvalidArgumentError) as info:
        await agent.run(resume=resume, snapshot_id=snap)
    assert RAN == [] and await store.list() == before
    assert info.value.status == "INVALID_ARGUMENT"
    return info.value


@pytest.mark.parametrize("value", ["yes", 1, "no"])
async def test_a_run_refuses_a_coercible_approval_and_runs_nothing(value: Any) -> None:
    agent, store, snap = await paused(pay)
    error = await refused(agent, store, snap, restart({"approved": value}))
    assert "field 'approved'" in error.message
    error = await refused(agent, store, snap, restart({"approved": True, "approvedBy": "bo"}))
    assert "field 'approvedBy'" in error.message
    out = await agent.run(resume=restart({"approved": True}), snapshot_id=snap)
    assert out.finish_reason == "stop" and RAN == [Verdict(approved=True)]


async def test_a_lax_tool_runs_with_the_coerced_answer() -> None:
    agent, _, snap = await paused(lax_pay)
    out = await agent.run(resume=restart({"approved": "no", "extra": 1}), snapshot_id=snap)
    assert out.finish_reason == "stop" and RAN == [Verdict(approved=False)]


async def test_a_run_refuses_a_respond_output_of_the_wrong_types() -> None:
    agent, store, snap = await paused(lookup)
    error = await refused(agent, store, snap, respond({"id": "r", "amount": "5"}))
    assert "field 'amount'" in error.message
    await refused(agent, store, snap, respond({"id": "r", "amount": 5, "note": "x"}))
    lax_agent, _, lax_snap = await paused(lax_lookup)
    out = await lax_agent.run(resume=respond({"id": "r", "amount": "5"}), snapshot_id=lax_snap)
    assert out.finish_reason == "stop"


@pytest.mark.parametrize(
    "marker",
    [{"toolApproved": "yes"}, {"toolApproved": 1}, {"tool_approved": "true"}, {"toolApproved": None}]
    + [{"toolApproved": True, "tool_approved": False}],
)
async def test_an_approval_marker_is_a_json_bool(marker: dict[str, Any]) -> None:
    """A hold of tool-approval middleware is approved by ``toolApproved: true`` only, never ``"yes"``."""
    agent, store, snap = await paused(lax_pay, middleware=[tool_approval()])
    error = await refused(agent, store, snap, restart({"approved": True, **marker}))
    assert "metadata.resumed.tool" in error.message or "both approves and denies" in error.message


# Over HTTP: the Genkit server's result is a failed turn, INVALID_ARGUMENT, nothing run -----------------------------


@pytest.mark.parametrize(
    ("tool_", "resume", "field"),
    [
        (pay, restart({"approved": "yes"}), "approved"),
        (pay, restart({"approved": True, "sneaky": 1}), "sneaky"),
        (lookup, respond({"id": "r", "amount": True}), "amount"),
    ],
    ids=["yes-string", "unknown-key", "respond-bool-for-int"],
)
async def test_over_http_a_loose_answer_is_invalid_argument(tool_: Any, resume: Resume, field: str) -> None:
    agent, store, snap = await paused(tool_)
    before = await store.list()
    body = {"data": {"resume": resume_to_json(resume)}, "init": {"snapshotId": snap}}
    async with serve(AgentServer([agent])) as base, httpx.AsyncClient(base_url=base) as http:
        answer = await http.post("/bank", content=json.dumps(body), headers={"Content-Type": "application/json"})
    result = answer.json()["result"]  # the turn was taken up, and failed before anything ran
    assert answer.status_code == 200 and result["finishReason"] == "failed", answer.text
    assert result["error"]["status"] == "INVALID_ARGUMENT" and f"field '{field}'" in result["error"]["message"]
    assert RAN == [] and await store.list() == before
