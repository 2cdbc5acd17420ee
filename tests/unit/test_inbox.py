"""The approval inbox over a real SQLite store: listing, filters, answers, the audit trail.

The agents below are also what the CLI tests load: ``--agents test_inbox:build_agents``.
"""

from __future__ import annotations

import asyncio
import pathlib
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest
from pydantic import BaseModel

from interlock import (
    Agent,
    AgentOutput,
    ClaimConflictError,
    Message,
    PromptAgent,
    SessionStore,
    Snapshot,
    ToolContext,
    ToolRequestPart,
    interrupt_tool,
    tool,
)
from interlock.errors import (
    AbortedError,
    FailedPreconditionError,
    InvalidArgumentError,
    SnapshotNotFoundError,
    UnavailableError,
    UnimplementedError,
    UsageError,
)
from interlock.inbox._inbox import Approve, Inbox, Reject, Respond
from interlock.models import ModelRequest, ModelResponse
from interlock.records._sessions import utcnow
from interlock.stores._urls import open_store
from interlock.stores.sqlite import SQLiteStore
from interlock.testing import ScriptedModel
from interlock.tools._middleware import tool_approval

# ------------------------------------------------------------------------------ the agents


class Transfer(BaseModel):
    to: str
    amount: float


class TransferCheck(BaseModel):
    to: str
    amount: float


class Approval(BaseModel):
    approved: bool
    note: str | None = None


class FileRequest(BaseModel):
    path: str


class Question(BaseModel):
    question: str


class Reply(BaseModel):
    answer: str


@tool
async def transfer(req: Transfer, ctx: ToolContext[Any], approval: Approval | None) -> str:
    """Move money; asks a person first."""
    if approval is None:
        ctx.interrupt(TransferCheck(to=req.to, amount=req.amount))
    verdict = f"sent {req.amount:g} to {req.to}" if approval.approved else "transfer cancelled"
    return verdict + (f" ({approval.note})" if approval.note else "")


@tool
def delete_file(req: FileRequest) -> str:
    """Delete a file (held for approval by the ops agent's middleware)."""
    return f"deleted {req.path}"


ask_user = interrupt_tool(
    "ask_user", input=Question, output=Reply, description="Ask the user.", data=lambda q: {"question": q.question}
)


def call(name: str, ref: str = "r1", **args: Any) -> ToolRequestPart:
    return ToolRequestPart(name=name, ref=ref, input=args)


def plan(request: ModelRequest) -> ModelResponse:
    """The scripted model: the user's first word picks the tool; after the tools it reports their outputs."""
    last = request.messages[-1]
    if last.role == "tool":
        return ModelResponse(message=Message.model("done: " + "; ".join(str(r.output) for r in last.tool_responses)))
    words = last.text.split()
    match words:
        case ["pay", to, amount]:
            parts = [call("transfer", to=to, amount=float(amount))]
        case ["pay-two", a, b]:
            parts = [call("transfer", "r1", to=a, amount=1.0), call("transfer", "r2", to=b, amount=2.0)]
        case ["delete", path]:
            parts = [call("delete_file", path=path)]
        case ["ask", *question]:
            parts = [call("ask_user", question=" ".join(question))]
        case _:
            return ModelResponse(message=Message.model("hello"))
    return ModelResponse(message=Message(role="model", content=list(parts)))


def build_agents(store: SessionStore) -> list[Agent]:
    """The agents of the inbox tests, over ``store`` (the CLI's ``--agents test_inbox:build_agents``)."""
    model = lambda: ScriptedModel([plan] * 50)  # noqa: E731
    return [
        PromptAgent("bank", model(), tools=[transfer], store=store),
        PromptAgent("ops", model(), tools=[delete_file], middleware=[tool_approval()], store=store),
        PromptAgent("helpdesk", model(), tools=[ask_user], store=store),
    ]


class Desk:
    """The agents by name, plus a helper that starts a paused session."""

    def __init__(self, store: SessionStore) -> None:
        self.store = store
        self.agents = {a.name: a for a in build_agents(store)}

    async def start(self, agent: str, text: str, tenant: str | None = None) -> AgentOutput:
        out = await self.agents[agent].run(text, context={"tenant": tenant})
        assert out.error is None, out.error
        return out


@pytest.fixture
async def store(tmp_path: pathlib.Path) -> AsyncIterator[SQLiteStore]:
    async with SQLiteStore(tmp_path / "sessions.db") as s:
        yield s


@pytest.fixture
def desk(store: SQLiteStore) -> Desk:
    return Desk(store)


@pytest.fixture
def inbox(desk: Desk) -> Inbox:
    return Inbox(desk.store, agents=list(desk.agents.values()))


# ------------------------------------------------------------------------------ listing


async def test_pending_lists_every_waiting_interrupt_oldest_first(desk: Desk, inbox: Inbox) -> None:
    pay = await desk.start("bank", "pay bob 25")
    held = await desk.start("ops", "delete a.txt")
    asked = await desk.start("helpdesk", "ask which account")
    await desk.start("bank", "hi there")  # finished: nothing to answer

    items = await inbox.pending()
    assert [(i.snapshot_id, i.agent, i.tool) for i in items] == [
        (pay.snapshot_id, "bank", "transfer"),
        (held.snapshot_id, "ops", "delete_file"),
        (asked.snapshot_id, "helpdesk", "ask_user"),
    ]
    first = items[0]
    assert first.session_id == pay.session_id and first.ref == "r1" and not first.is_hold
    assert first.input == {"to": "bob", "amount": 25.0}
    assert first.data_as(TransferCheck) == TransferCheck(to="bob", amount=25)
    assert timedelta(0) <= first.age < timedelta(seconds=30)
    assert items[1].is_hold and items[1].label == "delete_file#r1"
    assert items[2].data == {"question": "which account"}
    json = first.to_json()
    assert json["snapshot_id"] == pay.snapshot_id and json["is_hold"] is False and "part" not in json


async def test_pending_filters_by_agent_tool_tenant_and_age(desk: Desk, inbox: Inbox) -> None:
    await desk.start("bank", "pay bob 25")
    await desk.start("ops", "delete a.txt")
    acme = await desk.start("bank", "pay carol 7", tenant="acme")

    assert [i.agent for i in await inbox.pending(agent="ops")] == ["ops"]
    assert [i.tool for i in await inbox.pending(tool="transfer")] == ["transfer"]
    assert await inbox.pending(agent="nobody") == []
    tenant_items = await inbox.pending(tenant="acme")
    assert [(i.snapshot_id, i.tenant) for i in tenant_items] == [(acme.snapshot_id, "acme")]

    later = utcnow() + timedelta(hours=1)
    assert len(await inbox.pending(older_than=timedelta(minutes=30), now=later)) == 2
    assert await inbox.pending(older_than=timedelta(minutes=90), now=later) == []
    assert len(await inbox.pending(newer_than=timedelta(minutes=90), now=later)) == 2
    assert await inbox.pending(newer_than=timedelta(minutes=30), now=later) == []


class CountingStore(SQLiteStore):
    """A real SQLite store that counts the snapshot reads an inbox makes."""

    reads: list[str]

    async def load(self, snapshot_id: str, *, tenant: str | None = None) -> Snapshot | None:
        self.reads.append("load")
        return await super().load(snapshot_id, tenant=tenant)

    async def list(self, **filters: Any) -> Any:
        self.reads.append("list")
        return await super().list(**filters)


async def test_pending_pages_from_the_index_and_loads_no_snapshot(tmp_path: pathlib.Path) -> None:
    store = CountingStore(tmp_path / "counted.db")
    store.reads = []
    async with store:
        desk = Desk(store)
        inbox = Inbox(store, agents=list(desk.agents.values()))
        started = [await desk.start("bank", f"pay bob {n}") for n in range(5)]
        await desk.start("bank", "hi there")
        store.reads.clear()
        first = await inbox.pending(limit=2)
        rest = await inbox.pending(after=first[-1].position)
        newest = await inbox.pending(newest_first=True, limit=1)
        assert [i.snapshot_id for i in first + rest] == [o.snapshot_id for o in started]
        assert [i.snapshot_id for i in newest] == [started[-1].snapshot_id]
        assert store.reads == []  # the index holds all a listing shows
        assert started[0].snapshot_id is not None
        await inbox.get(started[0].snapshot_id)
        assert store.reads == ["load"]  # the snapshot itself; the index says the session did not go on


async def test_get_refuses_snapshots_that_wait_on_nothing(desk: Desk, inbox: Inbox) -> None:
    done = await desk.start("bank", "hi there")
    with pytest.raises(SnapshotNotFoundError, match="no pending interrupt with snapshot id nope"):
        await inbox.get("nope")
    with pytest.raises(FailedPreconditionError, match="finished with 'stop'"):
        await inbox.get(done.snapshot_id or "")
    paused = await desk.start("bank", "pay bob 1", tenant="acme")
    with pytest.raises(SnapshotNotFoundError, match="in tenant 'other'"):
        await inbox.get(paused.snapshot_id or "", tenant="other")


# ------------------------------------------------------------------------------ answering


async def test_approve_runs_the_tool_records_who_and_empties_the_inbox(desk: Desk, inbox: Inbox) -> None:
    paused = await desk.start("bank", "pay bob 25")
    before = utcnow()
    out = await inbox.approve(paused.snapshot_id or "", identity="alice")
    assert out.text == "done: sent 25 to bob" and out.finish_reason == "stop"
    assert await inbox.pending() == []

    [entry] = await inbox.audit(paused.session_id or "")
    assert entry.snapshot_id == out.snapshot_id and entry.parent_id == paused.snapshot_id
    assert entry.by == "alice" and entry.agent == "bank" and entry.finish_reason == "stop"
    assert entry.at is not None and before <= entry.at <= utcnow()
    assert [(a.name, a.ref, a.approved) for a in entry.restart] == [("transfer", "r1", True)]
    assert entry.respond == []
    assert entry.to_json()["restart"] == [
        {"kind": "restart", "name": "transfer", "ref": "r1", "decision": "approve", "payload": {"approved": True}}
        | {"output": None}
    ]


async def test_a_second_answer_fails_aborted(desk: Desk, inbox: Inbox) -> None:
    paused = await desk.start("bank", "pay bob 25")
    snapshot_id = paused.snapshot_id or ""
    await inbox.approve(snapshot_id, identity="alice")
    with pytest.raises(AbortedError, match=f"no pending interrupt with snapshot id {snapshot_id}") as raised:
        await inbox.approve(snapshot_id, identity="bob")
    assert raised.value.status == "ABORTED"
    with pytest.raises(AbortedError):
        await inbox.reject(snapshot_id, identity="bob")
    assert [e.by for e in await inbox.audit(paused.session_id or "")] == ["alice"]


async def test_racing_approvals_resume_exactly_once(desk: Desk, inbox: Inbox) -> None:
    paused = await desk.start("bank", "pay bob 25")
    results = await asyncio.gather(
        *(inbox.approve(paused.snapshot_id or "", identity=name) for name in ("alice", "bob", "carol")),
        return_exceptions=True,
    )
    won = [r for r in results if isinstance(r, AgentOutput)]
    lost = [r for r in results if isinstance(r, BaseException)]
    assert len(won) == 1 and len(lost) == 2 and all(isinstance(e, AbortedError) for e in lost)
    assert len(await inbox.audit(paused.session_id or "")) == 1


async def test_reject_restarts_the_tool_with_approved_false(desk: Desk, inbox: Inbox) -> None:
    paused = await desk.start("bank", "pay bob 25")
    out = await inbox.reject(paused.snapshot_id or "", identity="alice")
    assert out.text == "done: transfer cancelled"
    [entry] = await inbox.audit(paused.session_id or "")
    assert [(a.name, a.approved) for a in entry.restart] == [("transfer", False)] and entry.by == "alice"


async def test_reject_with_an_output_responds_instead(desk: Desk, inbox: Inbox) -> None:
    paused = await desk.start("bank", "pay bob 25")
    out = await inbox.reject(paused.snapshot_id or "", output="refused by the back office", identity="bo")
    assert out.text == "done: refused by the back office"
    [entry] = await inbox.audit(paused.session_id or "")
    assert entry.restart == [] and [(a.kind, a.name, a.decision) for a in entry.respond] == [
        ("respond", "transfer", "deny")
    ]


async def test_typed_payloads_reach_the_tool(desk: Desk, inbox: Inbox) -> None:
    paused = await desk.start("bank", "pay bob 25")
    out = await inbox.approve(paused.snapshot_id or "", payload=Approval(approved=True, note="ok by alice"))
    assert out.text == "done: sent 25 to bob (ok by alice)"


async def test_held_calls_are_approved_or_denied_through_the_middleware(desk: Desk, inbox: Inbox) -> None:
    approved = await desk.start("ops", "delete a.txt")
    denied = await desk.start("ops", "delete b.txt")
    out = await inbox.approve(approved.snapshot_id or "", identity="ops-lead")
    assert out.text == "done: deleted a.txt"
    out = await inbox.reject(denied.snapshot_id or "", identity="ops-lead")
    assert "was not approved" in out.text and "deleted" not in out.text
    [yes] = await inbox.audit(approved.session_id or "")
    [no] = await inbox.audit(denied.session_id or "")
    assert [(a.name, a.approved) for a in yes.restart] == [("delete_file", True)] and yes.by == "ops-lead"
    assert [a.name for a in no.respond] == ["delete_file"] and no.restart == []
    with pytest.raises(UsageError, match="takes no payload"):
        await inbox.reject((await desk.start("ops", "delete c.txt")).snapshot_id or "", payload={"x": 1})


async def test_respond_answers_an_interrupt_only_tool(desk: Desk, inbox: Inbox) -> None:
    paused = await desk.start("helpdesk", "ask which account")
    with pytest.raises(UsageError, match="never runs"):
        await inbox.approve(paused.snapshot_id or "")
    out = await inbox.respond(paused.snapshot_id or "", Reply(answer="savings"), tool="ask_user", identity="carol")
    assert out.text == "done: {'answer': 'savings'}"
    [entry] = await inbox.audit(paused.session_id or "")
    assert entry.by == "carol" and [a.name for a in entry.respond] == ["ask_user"]


async def test_a_refused_answer_leaves_the_interrupt_pending(desk: Desk, inbox: Inbox) -> None:
    paused = await desk.start("helpdesk", "ask which account")
    with pytest.raises(InvalidArgumentError, match="output for tool 'ask_user' is invalid"):
        await inbox.respond(paused.snapshot_id or "", {"wrong": 1})
    with pytest.raises(InvalidArgumentError, match="none matches ref 'r9'"):
        await inbox.respond(paused.snapshot_id or "", {"answer": "x"}, ref="r9")
    assert [i.snapshot_id for i in await inbox.pending()] == [paused.snapshot_id]


async def test_several_interrupts_are_answered_together(desk: Desk, inbox: Inbox) -> None:
    paused = await desk.start("bank", "pay-two bob carol")
    snapshot_id = paused.snapshot_id or ""
    assert [i.label for i in await inbox.get(snapshot_id)] == ["transfer#r1", "transfer#r2"]
    with pytest.raises(UsageError, match="waits on transfer#r1, transfer#r2; a resume answers all of them"):
        await inbox.approve(snapshot_id)
    with pytest.raises(UsageError, match="answer_all"):
        await inbox.approve(snapshot_id, ref="r1")
    with pytest.raises(UsageError, match="no answer for transfer#r2"):
        await inbox.answer_all(snapshot_id, {"r1": Approve()})
    with pytest.raises(InvalidArgumentError, match="no interrupt with ref or tool r7"):
        await inbox.answer_all(snapshot_id, {"r7": Approve()})
    out = await inbox.answer_all(snapshot_id, {"r1": Approve(), "r2": Reject()}, identity="dana")
    assert out.text == "done: sent 1 to bob; transfer cancelled"
    [entry] = await inbox.audit(paused.session_id or "")
    assert [(a.ref, a.approved) for a in entry.restart] == [("r1", True), ("r2", False)]


async def test_answer_all_with_one_answer_for_every_call(desk: Desk, inbox: Inbox) -> None:
    paused = await desk.start("bank", "pay-two bob carol")
    out = await inbox.answer_all(paused.snapshot_id or "", Respond("skipped"))
    assert out.text == "done: skipped; skipped"


async def test_tenants_answer_and_audit_in_their_own_scope(desk: Desk, inbox: Inbox) -> None:
    paused = await desk.start("bank", "pay bob 3", tenant="acme")
    with pytest.raises(SnapshotNotFoundError):
        await inbox.approve(paused.snapshot_id or "")
    out = await inbox.approve(paused.snapshot_id or "", identity="erin", tenant="acme")
    assert out.text == "done: sent 3 to bob"
    assert await inbox.audit(paused.session_id or "") == []
    [entry] = await inbox.audit(paused.session_id or "", tenant="acme")
    assert entry.by == "erin"


async def test_an_audit_lists_every_resume_of_a_session_in_time_order(desk: Desk, inbox: Inbox) -> None:
    paused = await desk.start("bank", "pay bob 1")
    first = await inbox.approve(paused.snapshot_id or "", identity="alice")
    again = await desk.agents["bank"].run("pay carol 2", snapshot_id=first.snapshot_id)
    await inbox.reject(again.snapshot_id or "", identity="bob")
    entries = await inbox.audit(paused.session_id or "")
    assert [(e.by, e.parent_id) for e in entries] == [("alice", paused.snapshot_id), ("bob", again.snapshot_id)]


async def claim(store: SessionStore, snapshot_id: str, holder: str, age: timedelta) -> None:
    """Mark ``snapshot_id`` as claimed by turn ``holder`` ``age`` ago with a 60 s lease.

    As a resumer does, then crashes.
    """

    def take(cur: Snapshot | None) -> Snapshot | None:
        assert cur is not None
        return cur.evolve(claimed_by=holder, claim_expires_at=utcnow() - age + timedelta(seconds=60))

    await store.save(snapshot_id, take)


async def test_a_claim_in_progress_hides_the_interrupt(desk: Desk, inbox: Inbox) -> None:
    paused = await desk.start("bank", "pay bob 4")
    await claim(desk.store, paused.snapshot_id or "", "turn-in-flight", timedelta(seconds=1))
    assert await inbox.pending() == []
    with pytest.raises(ClaimConflictError, match="is being answered \\(claimed by turn turn-in-flight\\)") as raised:
        await inbox.approve(paused.snapshot_id or "")
    assert raised.value.winner == "turn-in-flight" and raised.value.status == "ABORTED"


async def test_an_abandoned_claim_waits_again_and_is_taken_over(desk: Desk, inbox: Inbox) -> None:
    paused = await desk.start("bank", "pay bob 4")
    await claim(desk.store, paused.snapshot_id or "", "crashed-turn", timedelta(minutes=5))
    assert [i.snapshot_id for i in await inbox.pending()] == [paused.snapshot_id]
    out = await inbox.approve(paused.snapshot_id or "", identity="alice")
    assert out.text == "done: sent 4 to bob"
    parent = await desk.store.load(paused.snapshot_id or "")
    assert parent is not None and parent.claimed_by == out.snapshot_id
    assert (parent.metadata or {}).get("reclaimedFrom") == "crashed-turn"


# ------------------------------------------------------------------------------ agents and stores


async def test_a_missing_agent_is_a_usage_error_naming_it(desk: Desk) -> None:
    paused = await desk.start("bank", "pay bob 1")
    inbox = Inbox(desk.store, agents={"ops": desk.agents["ops"]})
    with pytest.raises(UsageError, match=r"agent 'bank'.*it has: 'ops'.*agents=\[\.\.\.\].*--agents module:attr"):
        await inbox.approve(paused.snapshot_id or "")
    assert len(await inbox.pending()) == 1  # nothing was consumed


def test_agent_names_must_be_unique(store: SQLiteStore) -> None:
    agents = build_agents(store)
    with pytest.raises(UsageError, match="two agents are named 'bank'"):
        Inbox(store, agents=[agents[0], agents[0]])


async def test_an_inbox_without_a_store_cannot_list() -> None:
    with pytest.raises(UnimplementedError, match="no call that lists snapshots"):
        await Inbox(None).pending()


async def test_open_store_opens_sqlite_urls_and_refuses_unknown_schemes(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "s.db"
    with pytest.raises(InvalidArgumentError, match="no SQLite store at"):
        open_store(str(path), must_exist=True)
    async with open_store(f"sqlite:///{path}") as opened:
        assert await opened.list() == []
    assert path.exists()
    async with open_store(str(path), must_exist=True) as opened:
        assert await opened.list() == []
    with pytest.raises(InvalidArgumentError, match="unknown store URL scheme 'redis'"):
        open_store("redis://localhost/0")
    with pytest.raises(InvalidArgumentError, match="expected sqlite:///"):
        open_store("sqlite://nope.db")
    with pytest.raises(UnavailableError, match="is unreachable"):  # a PostgresStore, whose server is not there
        async with open_store("postgresql://postgres@127.0.0.1:1/db"):
            pass
