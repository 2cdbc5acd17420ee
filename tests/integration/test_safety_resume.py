"""Issue 8, the resume path: seed fidelity (observations 9, 10), the truthful audit (12), one pipeline.

Every test here failed before the fix it names.
"""

from __future__ import annotations

import pathlib
import re
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel
from test_inbox import Desk
from where import ROOT

from interlock import InMemoryStore, Message, PromptAgent, Resume, ToolContext, ToolRequestPart, ToolResponsePart, tool
from interlock.errors import ResumeError
from interlock.inbox._inbox import Inbox
from interlock.interrupts._plan import validate_resume
from interlock.stores.sqlite import SQLiteStore
from interlock.testing import ScriptedModel
from interlock.tools._middleware import approve, deny, is_hold, tool_approval

SRC = ROOT / "src" / "interlock"


class Transfer(BaseModel):
    to: str
    amount: float


class Confirmation(BaseModel):
    approved: bool


def call(name: str, ref: str = "r1", **args: Any) -> Message:
    return Message(role="model", content=[ToolRequestPart(name=name, ref=ref, input=args)])


def make_transfer(log: list[str]) -> Any:
    @tool
    async def transfer(req: Transfer, ctx: ToolContext[Any], confirmation: Confirmation | None) -> str:
        """Move money."""
        if confirmation is None:
            ctx.interrupt(req)
        log.append(f"{req.to}:{req.amount:g}:{confirmation.approved}")
        return "sent" if confirmation.approved else "cancelled"

    return transfer


def restart_part(input: Any, **metadata: Any) -> ToolRequestPart:
    return ToolRequestPart(name="transfer", ref="r1", input=input, metadata=metadata)


# ------------------------------------------------------------------ observation 9: the recorded original


async def paused_bank(log: list[str], *, script: list[Any] | None = None) -> tuple[PromptAgent, Any, str]:
    transfer = make_transfer(log)
    model = ScriptedModel(script or [call("transfer", to="bob", amount=25), "done"])
    agent = PromptAgent("bank", model, tools=[transfer], store=InMemoryStore(), allow_replaced_input=True)
    out = await agent.run("pay bob")
    assert out.finish_reason == "interrupted" and out.snapshot_id is not None
    return agent, transfer, out.snapshot_id


@pytest.mark.parametrize(
    "metadata",
    [
        {"resumed": {"approved": True}},  # no recorded original at all
        {"resumed": {"approved": True}, "replacedInput": {"to": "bob", "amount": 1}},  # a forged one
        {"resumed": {"approved": True}, "replacedInput": None},
    ],
    ids=["missing", "forged", "null"],
)
async def test_a_revised_restart_must_carry_the_recorded_original(metadata: dict[str, Any]) -> None:
    log: list[str] = []
    agent, transfer, snap = await paused_bank(log)
    revised = restart_part({"to": "bob", "amount": 20}, **metadata)
    bad = await agent.run(resume=Resume(restart=[revised]), snapshot_id=snap, raise_on_error=False)
    assert bad.error is not None and bad.error.status == "INVALID_ARGUMENT" and "replacedInput" in bad.error.message
    assert log == []
    # the interrupt is still pending, and the honest revision goes through
    call_ = transfer.interrupted((await agent.pending_interrupts(snap))[0])
    good = call_.restart_with_input(Transfer(to="bob", amount=20), Confirmation(approved=True))
    done = await agent.run(resume=Resume(restart=[good]), snapshot_id=snap)
    assert done.finish_reason == "stop" and log == ["bob:20:True"]


def test_validate_resume_checks_the_recorded_original() -> None:
    paused = Message(
        role="model",
        content=[
            ToolRequestPart(name="transfer", ref="r1", input={"to": "bob", "amount": 25}, metadata={"interrupt": True})
        ],
    )
    history = [Message.user("pay bob"), paused]
    forged = restart_part({"to": "eve", "amount": 25}, resumed=True, replacedInput={"to": "eve", "amount": 25})
    with pytest.raises(ResumeError, match="replacedInput") as raised:
        validate_resume(Resume(restart=[forged]), history, allow_replaced_input=True)
    assert raised.value.status == "INVALID_ARGUMENT"
    honest = restart_part({"to": "eve", "amount": 25}, resumed=True, replacedInput={"amount": 25.0, "to": "bob"})
    validate_resume(Resume(restart=[honest]), history, allow_replaced_input=True)


async def test_a_second_revision_must_name_the_first_original() -> None:
    """After a revised restart paused again, the recorded original is the first one, not the revision."""
    log: list[str] = []
    count = {"n": 0}

    @tool
    async def transfer(req: Transfer, ctx: ToolContext[Any], confirmation: Confirmation | None) -> str:
        """Move money; asks twice."""
        count["n"] += 1
        if confirmation is None or count["n"] < 3:
            ctx.interrupt(req)
        log.append(f"{req.to}:{req.amount:g}")
        return "sent"

    agent = PromptAgent(
        "bank",
        ScriptedModel([call("transfer", to="bob", amount=25), "done"]),
        tools=[transfer],
        store=InMemoryStore(),
        allow_replaced_input=True,
    )
    out = await agent.run("pay bob")
    first = transfer.interrupted(out.interrupts[0])
    assert first is not None
    again = await agent.run(
        resume=Resume(restart=[first.restart_with_input(Transfer(to="bob", amount=20), Confirmation(approved=True))]),
        snapshot_id=out.snapshot_id,
    )
    assert again.finish_reason == "interrupted"
    assert again.interrupts[0].meta("replacedInput") == {"to": "bob", "amount": 25}
    claiming_revision = restart_part(
        {"to": "bob", "amount": 10}, resumed={"approved": True}, replacedInput={"to": "bob", "amount": 20}
    )
    bad = await agent.run(
        resume=Resume(restart=[claiming_revision]), snapshot_id=again.snapshot_id, raise_on_error=False
    )
    assert bad.error is not None and bad.error.status == "INVALID_ARGUMENT"
    second = transfer.interrupted(again.interrupts[0])
    assert second is not None
    done = await agent.run(
        resume=Resume(restart=[second.restart_with_input(Transfer(to="bob", amount=10), Confirmation(approved=True))]),
        snapshot_id=again.snapshot_id,
    )
    assert done.finish_reason == "stop" and log == ["bob:10"]


async def test_a_forged_original_is_refused_over_http() -> None:
    from http_helpers import serve

    from interlock.http._client import RemoteAgent
    from interlock.http._server import AgentServer

    log: list[str] = []
    agent, _, snap = await paused_bank(log)
    forged = restart_part(
        {"to": "eve", "amount": 900}, resumed={"approved": True}, replacedInput={"to": "eve", "amount": 900}
    )
    async with serve(AgentServer([agent])) as base, RemoteAgent(f"{base}/bank") as remote:
        out = await remote.run(resume=Resume(restart=[forged]), snapshot_id=snap, raise_on_error=False)
    assert out.error is not None and out.error.status == "INVALID_ARGUMENT" and log == []


# ------------------------------------------------------------------ observation 10: true, false, and holds


async def test_a_true_payload_reaches_a_bool_typed_tool() -> None:
    seen: list[Any] = []

    @tool
    async def launch(req: dict[str, Any], ctx: ToolContext[Any], go: bool | None) -> str:
        """Launch, once a person says yes."""
        if go is None:
            ctx.interrupt({"question": "launch?"})
        seen.append(go)
        return "launched" if go else "held back"

    agent = PromptAgent("ops", ScriptedModel([call("launch"), "done"]), tools=[launch], store=InMemoryStore())
    out = await agent.run("launch")
    claimed = launch.interrupted(out.interrupts[0])
    assert claimed is not None
    done = await agent.run(resume=Resume(restart=[claimed.restart(True)]), snapshot_id=out.snapshot_id)
    assert done.finish_reason == "stop" and seen == [True]


async def test_a_bare_true_is_still_no_payload_for_a_model_typed_tool() -> None:
    log: list[str] = []
    agent, transfer, snap = await paused_bank(log, script=[call("transfer", to="bob", amount=25), "done"])
    bare = transfer.interrupted((await agent.pending_interrupts(snap))[0]).restart()
    assert bare.meta("resumed") is True
    again = await agent.run(resume=Resume(restart=[bare]), snapshot_id=snap)
    assert again.finish_reason == "interrupted" and log == []


@pytest.mark.parametrize("data", [False, 0, ""])
async def test_falsy_interrupt_data_is_refused_where_it_is_raised(data: Any) -> None:
    @tool
    def ask(req: dict[str, Any], ctx: ToolContext[Any]) -> str:
        """Asks."""
        ctx.interrupt(data)

    out = await PromptAgent("a", ScriptedModel([call("ask"), "done"]), tools=[ask]).run("go", raise_on_error=False)
    assert out.finish_reason == "failed" and out.error is not None
    assert out.error.status == "FAILED_PRECONDITION" and "interrupt" in out.error.message


def held(name: str, data: Any) -> ToolRequestPart:
    return ToolRequestPart(name=name, ref="r1", input={}, metadata={"interrupt": data})


def test_hold_detection_agrees_with_claiming() -> None:
    @tool
    def delete_file(req: dict[str, Any], ctx: ToolContext[Any]) -> str:
        """Delete."""
        return "deleted"

    genkit_hold = held("delete_file", {"message": "Tool not in approved list: delete_file"})
    assert is_hold(genkit_hold) and delete_file.interrupted(genkit_hold) is None
    own = held("delete_file", {"toolApproval": True, "why": "the tool asks itself"})
    assert not is_hold(own) and delete_file.interrupted(own) is not None
    other = held("delete_file", {"message": "Tool not in approved list: something_else"})
    assert not is_hold(other) and delete_file.interrupted(other) is not None


# ------------------------------------------------------------------ observation 12: the audit says what was decided


async def test_an_ordinary_restart_is_recorded_verbatim_not_as_a_rejection(tmp_path: pathlib.Path) -> None:
    log: list[str] = []
    transfer = make_transfer(log)
    async with SQLiteStore(tmp_path / "s.db") as store:
        agent = PromptAgent(
            "bank", ScriptedModel([call("transfer", to="bob", amount=25), "done"]), tools=[transfer], store=store
        )
        out = await agent.run("pay bob")
        restart = transfer.interrupted(out.interrupts[0]).restart(Confirmation(approved=True))
        done = await agent.run(
            resume=Resume(restart=[restart]), snapshot_id=out.snapshot_id, context={"identity": "alice"}
        )
        assert log == ["bob:25:True"]
        snap = await store.load(done.snapshot_id or "")
        assert snap is not None and snap.metadata is not None
        record = snap.metadata["resume"]
        assert record["by"] == "alice" and record["respond"] == []
        assert record["restart"] == [{"name": "transfer", "ref": "r1", "decision": None, "payload": {"approved": True}}]
        [entry] = await Inbox(store).audit(done.session_id or "")
    [answer] = entry.restart
    assert answer.kind == "restart" and answer.decision is None and answer.approved is None
    assert answer.payload == {"approved": True}


async def test_the_inbox_records_its_explicit_decisions(tmp_path: pathlib.Path) -> None:
    async with SQLiteStore(tmp_path / "s.db") as store:
        desk = Desk(store)
        inbox = Inbox(store, agents=list(desk.agents.values()))
        yes = await desk.start("bank", "pay bob 1")
        no = await desk.start("bank", "pay bob 2")
        note = await desk.start("bank", "pay bob 3")
        hold_yes = await desk.start("ops", "delete a.txt")
        hold_no = await desk.start("ops", "delete b.txt")
        asked = await desk.start("helpdesk", "ask which account")
        await inbox.approve(yes.snapshot_id or "", identity="alice")
        await inbox.reject(no.snapshot_id or "", identity="bob")
        await inbox.reject(note.snapshot_id or "", output="refused by the back office", identity="bo")
        await inbox.approve(hold_yes.snapshot_id or "", identity="ops")
        await inbox.reject(hold_no.snapshot_id or "", identity="ops")
        await inbox.respond(asked.snapshot_id or "", {"answer": "savings"}, identity="carol")

        async def only(out: Any) -> Any:
            [entry] = await inbox.audit(out.session_id or "")
            [answer] = entry.restart + entry.respond
            return entry.by, answer.kind, answer.decision, answer.payload, answer.output

        assert await only(yes) == ("alice", "restart", "approve", {"approved": True}, None)
        assert await only(no) == ("bob", "restart", "deny", {"approved": False}, None)
        assert await only(note) == ("bo", "respond", "deny", None, "refused by the back office")
        assert await only(hold_yes) == ("ops", "restart", "approve", None, None)
        by, kind, decision, _, output = await only(hold_no)
        assert (by, kind, decision) == ("ops", "respond", "deny") and "not approved" in str(output)
        assert await only(asked) == ("carol", "respond", None, None, {"answer": "savings"})


async def test_hold_approve_and_deny_are_recorded_as_such() -> None:
    store = InMemoryStore()

    @tool
    def delete_file(input: dict[str, Any]) -> str:
        return "deleted"

    model = ScriptedModel([call("delete_file", path="a"), "done", call("delete_file", ref="r2", path="b"), "ok"])
    agent = PromptAgent("fs", model, tools=[delete_file], middleware=[tool_approval()], store=store)
    out = await agent.run("clean a")
    done = await agent.run(resume=Resume(restart=[approve(out.interrupts[0], why="fine")]), snapshot_id=out.snapshot_id)
    snap = await store.load(done.snapshot_id or "")
    assert snap is not None and snap.metadata is not None
    assert snap.metadata["resume"]["restart"] == [
        {"name": "delete_file", "ref": "r1", "decision": "approve", "payload": {"why": "fine"}}
    ]
    out = await agent.run("clean b", snapshot_id=done.snapshot_id)
    done = await agent.run(resume=Resume(respond=[deny(out.interrupts[0], "no")]), snapshot_id=out.snapshot_id)
    snap = await store.load(done.snapshot_id or "")
    assert snap is not None and snap.metadata is not None
    assert snap.metadata["resume"]["respond"] == [
        {"name": "delete_file", "ref": "r2", "decision": "deny", "output": "no"}
    ]


async def test_a_plain_respond_is_recorded_with_its_output() -> None:
    store = InMemoryStore()
    log: list[str] = []
    transfer = make_transfer(log)
    agent = PromptAgent(
        "bank", ScriptedModel([call("transfer", to="bob", amount=5), "ok"]), tools=[transfer], store=store
    )
    out = await agent.run("pay bob")
    answer = transfer.interrupted(out.interrupts[0]).respond("sent by the back office")
    done = await agent.run(resume=Resume(respond=[answer]), snapshot_id=out.snapshot_id)
    snap = await store.load(done.snapshot_id or "")
    assert snap is not None and snap.metadata is not None
    assert snap.metadata["resume"]["respond"] == [
        {"name": "transfer", "ref": "r1", "decision": None, "output": "sent by the back office"}
    ]
    assert log == []


def test_old_records_are_read_without_guessing() -> None:
    from interlock.inbox._inbox import AuditEntry
    from interlock.records._sessions import SessionState, Snapshot

    old = {
        "by": "x",
        "at": None,
        "respond": [{"name": "t", "ref": None}],
        "restart": [{"name": "t", "ref": "a", "approved": True}, {"name": "t", "ref": "b", "approved": False}],
    }
    snap = Snapshot(snapshot_id="s", session_id="q", parent_id="p", state=SessionState(), metadata={"resume": old})
    entry = AuditEntry.from_snapshot(snap)
    assert entry is not None
    assert [(a.ref, a.decision) for a in entry.restart] == [("a", "approve"), ("b", None)]
    assert [a.decision for a in entry.respond] == [None]


def test_sessions_show_never_calls_an_ordinary_restart_rejected(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import asyncio

    import interlock.cli._inbox  # noqa: F401  # pyright: ignore[reportUnusedImport]
    from interlock.cli import main

    db = tmp_path / "s.db"
    log: list[str] = []

    async def go() -> str:
        transfer = make_transfer(log)
        async with SQLiteStore(db) as store:
            agent = PromptAgent(
                "bank", ScriptedModel([call("transfer", to="bob", amount=25), "done"]), tools=[transfer], store=store
            )
            out = await agent.run("pay bob")
            restart = transfer.interrupted(out.interrupts[0]).restart(Confirmation(approved=True))
            await agent.run(
                resume=Resume(restart=[restart]), snapshot_id=out.snapshot_id, context={"identity": "alice"}
            )
            return out.session_id or ""

    session = asyncio.run(go())
    assert main(["sessions", "show", session, "--store", str(db)]) == 0
    out = capsys.readouterr().out
    assert "rejected" not in out and "alice: restarted transfer#r1" in out


# ------------------------------------------------------------------ one pipeline, one vocabulary


async def test_a_resume_is_validated_once(monkeypatch: pytest.MonkeyPatch) -> None:
    import interlock.interrupts._plan as interrupts
    from interlock._engine.loop import check_resume, generate
    from interlock.tools._tool import Tool

    log: list[str] = []
    transfer = make_transfer(log)
    first = await generate(
        ScriptedModel([call("transfer", to="bob", amount=5)]), [Message.user("pay")], tools=[transfer]
    )
    restart = transfer.interrupted(first.interrupts[0]).restart(Confirmation(approved=True))
    counts = {"resume": 0, "payload": 0, "input": 0}
    real_validate = interrupts.validate_resume
    real_payload: Callable[..., Any] = Tool[Any, Any, Any].validate_resume
    real_input: Callable[..., Any] = Tool[Any, Any, Any].validate_input

    def counting_validate(*a: Any, **kw: Any) -> None:
        counts["resume"] += 1
        return real_validate(*a, **kw)

    def counting_payload(self: Any, resumed: Any) -> Any:
        counts["payload"] += 1
        return real_payload(self, resumed)

    def counting_input(self: Any, raw: Any) -> Any:
        counts["input"] += 1
        return real_input(self, raw)

    monkeypatch.setattr(interrupts, "validate_resume", counting_validate)
    monkeypatch.setattr(Tool, "validate_resume", counting_payload)
    monkeypatch.setattr(Tool, "validate_input", counting_input)
    resume = Resume(restart=[restart])
    plan = check_resume(resume, first.messages, [transfer])
    assert plan.resume is resume and [(c.verb, c.request.ref) for c in plan.calls] == [("restart", "r1")]
    await generate(ScriptedModel(["paid"]), first.messages, tools=[transfer], plan=plan)
    assert counts == {"resume": 1, "payload": 1, "input": 1} and log == ["bob:5:True"]
    # a direct caller's resume= builds the plan itself, once
    counts.update(resume=0, payload=0, input=0)
    await generate(ScriptedModel(["paid"]), first.messages, tools=[transfer], resume=resume)
    assert counts == {"resume": 1, "payload": 1, "input": 1}


async def test_the_plan_reaches_the_loop_through_the_agent() -> None:
    log: list[str] = []
    transfer = make_transfer(log)
    agent = PromptAgent("bank", ScriptedModel([call("transfer", to="bob", amount=5), "ok"]), tools=[transfer])
    out = await agent.run("pay")
    resume = Resume(restart=[transfer.interrupted(out.interrupts[0]).restart(Confirmation(approved=False))])
    assert out.state is not None
    plan = agent.check_resume(resume, out.state.messages)
    [planned] = plan.calls
    assert planned.verb == "restart" and planned.payload == Confirmation(approved=False)
    assert planned.value == Transfer(to="bob", amount=5)


def test_the_metadata_keys_are_spelled_in_one_module() -> None:
    keys = [
        "interrupt",
        "resumed",
        "pendingOutput",
        "resolvedInterrupt",
        "replacedInput",
        "interruptResponse",
        "toolApproved",
        "tool_approved",
        "toolApproval",
        "reclaimedFrom",
        "effectInDoubt",
        "traceContext",
    ]
    pattern = re.compile("[\"'](" + "|".join(keys) + ")[\"']")
    found = [
        f"{path.relative_to(SRC)}:{n}: {line.strip()}"
        for path in sorted(SRC.rglob("*.py"))
        if path.name != "_keys.py" and path.parent.name != "testing"  # the test kit holds wire-format fixtures
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert found == []


def test_one_decision_type_under_every_verb() -> None:
    from interlock.interrupts._decisions import Decision

    @tool
    def t(req: dict[str, Any], ctx: ToolContext[Any], payload: dict[str, Any] | None) -> str:
        """T."""
        return "x"

    part = held("t", {"why": "asks"})
    claimed = t.interrupted(part)
    assert claimed is not None
    assert claimed.restart({"a": 1}) == Decision.restart({"a": 1}).answer(part)
    assert claimed.respond("x") == Decision.respond("x").answer(part)
    assert approve(part) == Decision.approve().answer(part)
    assert deny(part, "no") == Decision.deny("no").answer(part)
    denied = Decision.restart({"approved": False}, decision="deny").answer(part)
    assert isinstance(denied, ToolRequestPart) and denied.meta("resumed") == {"approved": False, "toolApproved": False}
    assert t.validate_resume(denied.meta("resumed")) == {"approved": False}  # the tool never sees the marker
    note = Decision.deny("no").answer(part)
    assert isinstance(note, ToolResponsePart) and note.meta("interruptResponse") == {"decision": "deny"}


async def test_a_rule_the_tool_declares_labels_an_ordinary_restart() -> None:
    from interlock._engine.commit import audit_record
    from interlock._engine.loop import check_resume, generate

    @tool(approval=lambda c: c.approved)
    async def transfer(req: Transfer, ctx: ToolContext[Any], confirmation: Confirmation | None) -> str:
        """Move money."""
        if confirmation is None:
            ctx.interrupt(req)
        return "sent" if confirmation.approved else "cancelled"

    first = await generate(
        ScriptedModel([call("transfer", to="bob", amount=5)]), [Message.user("pay")], tools=[transfer]
    )
    claimed = transfer.interrupted(first.interrupts[0])
    assert claimed is not None
    for answer, label in ((True, "approve"), (False, "deny")):
        resume = Resume(restart=[claimed.restart(Confirmation(approved=answer))])
        plan = check_resume(resume, first.messages, [transfer])
        record = audit_record(resume, {"identity": "alice"}, plan=plan)
        assert record["restart"] == [
            {"name": "transfer", "ref": "r1", "decision": label, "payload": {"approved": answer}}
        ]
        assert audit_record(resume, {})["restart"][0]["decision"] is None  # without the plan, no guess


async def test_the_stored_audit_uses_the_rule_the_tool_declares() -> None:
    @tool(approval=lambda c: c.approved)
    async def transfer(req: Transfer, ctx: ToolContext[Any], confirmation: Confirmation | None) -> str:
        """Move money."""
        if confirmation is None:
            ctx.interrupt(req)
        return "sent" if confirmation.approved else "cancelled"

    store = InMemoryStore()
    model = ScriptedModel([call("transfer", to="bob", amount=5), "done"])
    agent = PromptAgent("bank", model, tools=[transfer], store=store)
    paused = await agent.run("pay bob")
    claimed = transfer.interrupted(paused.interrupts[0])
    assert claimed is not None and paused.snapshot_id and paused.session_id
    resume = Resume(restart=[claimed.restart(Confirmation(approved=True))])
    done = await agent.run(resume=resume, snapshot_id=paused.snapshot_id, context={"identity": "alice"})
    assert done.finish_reason == "stop", done.error
    [entry] = await Inbox(store, agents=[agent]).audit(paused.session_id)
    assert entry.by == "alice" and [a.decision for a in entry.restart] == ["approve"]
