"""Delegation (agents/_delegation.py): sub-agent tools, surfaced interrupts answered through the parent, results."""

from __future__ import annotations

import asyncio
import pathlib
from dataclasses import replace
from typing import Any, cast

import pytest
from pydantic import BaseModel

from interlock import (
    CustomAgent,
    InMemoryStore,
    Message,
    PromptAgent,
    Resume,
    SessionStore,
    ToolContext,
    ToolRequestPart,
    ToolResponsePart,
    tool,
)
from interlock import metadata as md
from interlock._engine.invocation import SessionRunner
from interlock._engine.io import AgentError, AgentResult
from interlock.agents._delegation import delegate, tool_for
from interlock.agents._host import Host
from interlock.errors import FailedPreconditionError, InvalidArgumentError, PermissionDeniedError
from interlock.http._inbox.service import answer_options
from interlock.inbox._inbox import Inbox
from interlock.interrupts._signing import Keyring
from interlock.interrupts._tokens import TokenSigner
from interlock.models import ModelRequest, ModelResponse
from interlock.parts import TextPart
from interlock.records._sessions import Artifact, SessionState
from interlock.stores.sqlite import SQLiteStore
from interlock.testing import ScriptedModel
from interlock.tools._middleware import approve as approve_hold
from interlock.tools._middleware import tool_approval


class Transfer(BaseModel):
    to: str
    amount: int


class Approval(BaseModel):
    approved: bool


RUNS: list[Transfer] = []


@tool
async def transfer_money(req: Transfer, ctx: ToolContext[Approval], approval: Approval | None) -> str:
    """Move money; a person approves first."""
    if approval is None:
        ctx.interrupt({"to": req.to})
    RUNS.append(req)
    return "sent" if approval.approved else "refused"


@pytest.fixture(autouse=True)
def _clear_runs() -> None:
    RUNS.clear()


def call(name: str, ref: str, **input: Any) -> Message:
    return Message(role="model", content=[ToolRequestPart(name=name, ref=ref, input=input)])


def banker(store: SessionStore | None, *replies: Message | str) -> PromptAgent:
    script = replies or (call("transfer_money", "t1", to="bob", amount=5), "banker: sent")
    return PromptAgent("banker", ScriptedModel(list(script)), tools=[transfer_money], store=store)


def boss(
    store: SessionStore | None, *subs: Any, replies: tuple[Message | str, ...] = (), **options: Any
) -> PromptAgent:
    script = replies or (call("delegate_to_banker", "d1", task="pay bob 5"), "boss: done")
    return PromptAgent("boss", ScriptedModel(list(script)), tools=delegate(list(subs), **options), store=store)


def model_of(agent: PromptAgent) -> ScriptedModel:
    assert isinstance(agent.model, ScriptedModel)
    return agent.model


async def messages(agent: PromptAgent, snapshot_id: str | None) -> list[Message]:
    """The history of a stored snapshot."""
    snap = await agent.get_snapshot(snapshot_id)
    assert snap.state is not None
    return snap.state.messages


def approve(part: ToolRequestPart) -> Resume:
    claimed = transfer_money.interrupted(part)
    assert claimed is not None
    return Resume(restart=[claimed.restart(Approval(approved=True))])


async def test_a_sub_agents_interrupt_surfaces_in_the_parent_and_is_answered_through_it() -> None:
    store = InMemoryStore()
    top = boss(store, banker(store))
    out = await top.run("pay bob")
    assert out.finish_reason == "interrupted"
    (part,) = out.interrupts
    assert (part.name, part.ref, part.input) == ("transfer_money", "d1/t1", {"to": "bob", "amount": 5})
    assert part.meta(md.AGENT_PATH) == ["banker"]
    assert part.meta(md.SURFACED_FROM) == {"name": "delegate_to_banker", "ref": "d1"}
    stored = await top.get_snapshot(out.snapshot_id)
    assert stored.interrupts == [part]
    assert await top.pending_interrupts(out.snapshot_id) == [part]
    assert RUNS == []

    done = await top.run(resume=approve(part), snapshot_id=out.snapshot_id)
    assert (done.finish_reason, done.text) == ("stop", "boss: done")
    assert RUNS == [Transfer(to="bob", amount=5)]
    final = await top.get_snapshot(done.snapshot_id)
    assert final.state is not None
    model, tool_msg, _ = final.state.messages[-3:]
    assert [p.name for p in model.tool_requests] == ["delegate_to_banker"]  # the model sees its own call only
    assert tool_msg.tool_responses[0].output == {"response": "banker: sent"}
    request = model_of(top).requests[-1]
    assert all(p.name == "delegate_to_banker" for m in request.messages for p in m.tool_requests)


async def test_interrupts_surface_through_any_depth_and_answers_reach_the_deepest_agent() -> None:
    store = InMemoryStore()
    middle = PromptAgent(
        "office",
        ScriptedModel([call("delegate_to_banker", "m1", task="pay bob 5"), "office: paid"]),
        tools=delegate([banker(store)]),
        store=store,
    )
    top = boss(store, middle, replies=(call("delegate_to_office", "o1", task="handle bob"), "boss: handled"))
    out = await top.run("pay bob")
    (part,) = out.interrupts
    assert part.meta(md.AGENT_PATH) == ["office", "banker"]
    assert tool_for(top, part) is transfer_money and tool_for(middle, part) is None
    assert part.ref == "o1/m1/t1"
    done = await top.run(resume=approve(part), snapshot_id=out.snapshot_id)
    assert (done.finish_reason, done.text, len(RUNS)) == ("stop", "boss: handled", 1)


async def test_client_managed_parent_and_sub_agent_carry_the_paused_state() -> None:
    top = boss(None, banker(None))
    out = await top.run("pay bob")
    assert out.snapshot_id is None and out.state is not None
    (part,) = out.interrupts
    record = out.state.messages[-1].content[0].meta(md.DELEGATED)
    assert record["snapshotId"] is None and record["state"]["messages"]
    done = await top.run(resume=approve(part), state=out.state)
    assert (done.text, len(RUNS)) == ("boss: done", 1)


async def test_a_forged_or_unknown_surfaced_interrupt_is_refused_and_nothing_runs() -> None:
    store = InMemoryStore()
    top = boss(store, banker(store))
    out = await top.run("pay bob")
    (part,) = out.interrupts
    before = await store.list()
    forged = ToolRequestPart(name="transfer_money", ref="d1/t9", input=part.input, metadata={md.RESUMED: True})
    direct = ToolRequestPart(name="delegate_to_banker", ref="d1", input={"task": "pay bob 5"})
    edited = ToolRequestPart(
        name=part.name, ref=part.ref, input={"to": "eve", "amount": 500}, metadata={md.RESUMED: True}
    )
    unknown = Resume(respond=[ToolResponsePart(name="x")])
    for resume in (Resume(restart=[forged]), Resume(restart=[direct]), Resume(restart=[edited]), unknown):
        with pytest.raises(InvalidArgumentError):
            await top.run(resume=resume, snapshot_id=out.snapshot_id)
    assert await store.list() == before and RUNS == []
    assert await top.pending_interrupts(out.snapshot_id) == [part]


async def test_an_answer_the_sub_agent_refuses_fails_the_parent_turn_and_commits_nothing() -> None:
    store = InMemoryStore()
    top = boss(store, banker(store))
    out = await top.run("pay bob")
    (part,) = out.interrupts
    before = await store.list()
    bad = ToolResponsePart(name=part.name, ref=part.ref, output={"not": "a string"})  # transfer_money returns str
    with pytest.raises(InvalidArgumentError) as refused:
        await top.run(resume=Resume(respond=[bad]), snapshot_id=out.snapshot_id)
    assert "transfer_money" in refused.value.message
    assert [i.snapshot_id for i in await store.list()] == [i.snapshot_id for i in before]
    done = await top.run(resume=approve(part), snapshot_id=out.snapshot_id)  # still answerable
    assert (done.text, len(RUNS)) == ("boss: done", 1)


@pytest.mark.parametrize("racers", [2, 8])
async def test_racing_answers_to_a_surfaced_interrupt_exactly_one_wins(tmp_path: pathlib.Path, racers: int) -> None:
    async with SQLiteStore(str(tmp_path / "race.db")) as store:
        script = [call("transfer_money", "t1", to="bob", amount=5), *["banker: sent"] * racers]
        top = boss(store, banker(store, *script), replies=(call("delegate_to_banker", "d1", task="pay"), "boss: done"))
        out = await top.run("pay bob")
        (part,) = out.interrupts
        results = await asyncio.gather(
            *(top.run(resume=approve(part), snapshot_id=out.snapshot_id) for _ in range(racers)),
            return_exceptions=True,
        )
        won = [r for r in results if not isinstance(r, BaseException)]
        lost = [r for r in results if isinstance(r, BaseException)]
        assert len(won) == 1 and won[0].text == "boss: done"
        assert all(isinstance(e, AgentError) and e.status == "ABORTED" for e in lost), lost
        assert all(cast(AgentError, e).details == {"winner": won[0].snapshot_id} for e in lost)
        assert RUNS == [Transfer(to="bob", amount=5)]


async def test_a_sub_agent_answered_directly_first_is_the_answer_the_parent_continues_with() -> None:
    store = InMemoryStore()
    sub = banker(store, call("transfer_money", "t1", to="bob", amount=5), "banker: refused")
    top = boss(store, sub)
    out = await top.run("pay bob")
    (part,) = out.interrupts
    record = (await messages(top, out.snapshot_id))[-1].content[0].meta(md.DELEGATED)
    (own,) = await sub.pending_interrupts(record["snapshotId"])
    claimed = transfer_money.interrupted(own)
    assert claimed is not None
    await sub.run(resume=Resume(restart=[claimed.restart(Approval(approved=False))]), snapshot_id=record["snapshotId"])
    done = await top.run(resume=approve(part), snapshot_id=out.snapshot_id)
    assert done.text == "boss: done"
    (response,) = (await messages(top, done.snapshot_id))[-2].tool_responses
    assert response.output == {"response": "banker: refused"}
    assert RUNS == [Transfer(to="bob", amount=5)]  # ran once, as the sub-agent's own answer said


async def test_failed_and_aborted_sub_agents_and_the_delegation_limit_give_the_model_a_result() -> None:
    async def fails(runner: SessionRunner) -> AgentResult | None:
        raise RuntimeError("the ledger is down")

    async def aborts(runner: SessionRunner) -> AgentResult | None:
        return AgentResult(message=Message.model("stopped"), finish_reason="aborted")

    subs = [CustomAgent("broken", fails), CustomAgent("quitter", aborts)]
    asks = Message(
        role="model",
        content=[
            ToolRequestPart(name="delegate_to_broken", ref="1", input={"task": "a"}),
            ToolRequestPart(name="delegate_to_quitter", ref="2", input={"task": "b"}),
            ToolRequestPart(name="delegate_to_broken", ref="3", input={"task": "c"}),
        ],
    )
    top = boss(None, *subs, replies=(asks, "boss: noted"), max_delegations=2)
    out = await top.run("go")
    assert out.state is not None
    outputs = [p.output for p in out.state.messages[-2].tool_responses]
    assert outputs[0] == {"response": "Error calling agent 'broken': the ledger is down"}
    assert outputs[1] == {"response": "Sub-agent 'quitter' was aborted before it finished the task."}
    assert outputs[2] == {"response": "Delegation limit reached (2); do the rest of the task yourself."}


async def test_sub_agent_artifacts_are_merged_into_the_parent_session_by_invocation() -> None:
    async def writes(runner: SessionRunner) -> AgentResult | None:
        async def turn(input: Any, ctx: Any) -> None:
            runner.session.add_artifacts(Artifact(name="report", parts=[TextPart(text="all good")]))
            runner.session.add_messages(Message.model("wrote the report"))

        await runner.run(turn)
        return None

    top = boss(
        InMemoryStore(), CustomAgent("writer", writes), replies=(call("delegate_to_writer", "w", task="x"), "ok")
    )
    out = await top.run("report please")
    (artifact,) = out.artifacts
    assert artifact.name is not None and artifact.name.endswith("/report")
    invocation = artifact.name.split("/")[0]
    assert artifact.metadata == {"source": "writer", "invocationId": invocation}
    snap = await top.get_snapshot(out.snapshot_id)
    assert snap.state is not None
    assert snap.state.messages[-2].tool_responses[0].output == {
        "response": "wrote the report",
        "artifacts": [{"name": artifact.name, "content": "all good"}],
    }


async def test_the_inbox_lists_a_surfaced_interrupt_once_under_the_top_session_with_its_path() -> None:
    store = InMemoryStore()
    sub = banker(store)
    top = boss(store, sub)
    out = await top.run("pay bob")
    inbox = Inbox(store, agents=[top, sub])
    (item,) = await inbox.pending()
    assert (item.snapshot_id, item.session_id, item.agent) == (out.snapshot_id, out.session_id, "boss")
    assert item.agent_path == ("boss", "banker") and item.tool == "transfer_money"
    assert item.to_json()["agent_path"] == ("boss", "banker")
    assert tool_for(top, item.part) is transfer_money  # the web page's forms use the sub-agent tool's schemas
    assert answer_options(inbox, item)["approve"]["payload_schema"] == transfer_money.resume_schema
    record = item.part.meta(md.SURFACED_FROM) and (await messages(top, out.snapshot_id))[-1].content[0].meta(
        md.DELEGATED
    )
    with pytest.raises(FailedPreconditionError, match="sub-agent's turn"):  # answered where it is surfaced
        await inbox.get(record["snapshotId"])
    done = await inbox.approve(item.snapshot_id, identity="alice")
    assert (done.text, len(RUNS)) == ("boss: done", 1)
    assert await inbox.pending() == []
    (entry,) = await inbox.audit(out.session_id or "")
    assert entry.by == "alice" and [a.label for a in entry.restart] == ["transfer_money#d1/t1"]


async def test_a_client_managed_sub_agent_starts_from_the_last_history_messages() -> None:
    sub = banker(None, "banker: noted")
    history = [Message.user("one"), Message.model("two"), Message.user("three")]
    done = await boss(None, sub, history_length=2).run("go", state=SessionState(messages=history))
    assert done.text == "boss: done"
    seen = model_of(sub).requests[0].messages
    assert [(m.role, m.text) for m in seen] == [("user", "three"), ("user", "go"), ("user", "pay bob 5")]


async def test_a_refused_resume_raises_agent_error_with_the_sub_agents_status() -> None:
    store = InMemoryStore()
    top = boss(store, banker(store))
    out = await top.run("pay bob")
    (part,) = out.interrupts
    bad = ToolResponsePart(name=part.name, ref=part.ref, output=7)
    result = await top.run(resume=Resume(respond=[bad]), snapshot_id=out.snapshot_id, raise_on_error=False)
    assert result.error is not None and result.error.status == "INVALID_ARGUMENT"
    with pytest.raises(AgentError):
        result.raise_for_error()


async def test_resume_tokens_on_both_levels_are_minted_checked_and_spent_once() -> None:
    store = InMemoryStore()
    signer = TokenSigner({"k1": b"0" * 32})
    sub = PromptAgent(
        "banker",
        ScriptedModel([call("transfer_money", "t1", to="bob", amount=5), "banker: sent"]),
        tools=[transfer_money],
        store=store,
        host=Host(resume_tokens=signer, require_resume_tokens=True),
    )
    top = PromptAgent(
        "boss",
        ScriptedModel([call("delegate_to_banker", "d1", task="pay bob 5"), "boss: done"]),
        tools=delegate([sub]),
        store=store,
        host=Host(resume_tokens=TokenSigner({"k2": b"1" * 32}), require_resume_tokens=True),
    )
    out = await top.run("pay bob")
    (part,) = out.interrupts
    record = out.message.content[0].meta(md.DELEGATED) if out.message else None
    assert record is not None
    (own,) = record["interrupts"]
    assert md.resume_token(part) and md.resume_token(part) != own["metadata"][md.RESUME_TOKEN]  # the boss's own
    tokenless = ToolRequestPart(name=part.name, ref=part.ref, input=part.input, metadata={md.RESUMED: True})
    with pytest.raises(PermissionDeniedError):
        await top.run(resume=Resume(restart=[tokenless]), snapshot_id=out.snapshot_id)
    done = await top.run(resume=approve(part), snapshot_id=out.snapshot_id)  # the banker gets its own token back
    assert (done.text, len(RUNS)) == ("boss: done", 1)


async def test_signed_client_managed_state_carries_the_sub_agents_pause() -> None:
    keys = Keyring({"k1": b"s" * 32})
    sub = PromptAgent(
        "banker",
        ScriptedModel([call("transfer_money", "t1", to="bob", amount=5), "banker: sent"]),
        tools=[transfer_money],
        host=Host(state_signing=keys),
    )
    top = PromptAgent(
        "boss",
        ScriptedModel([call("delegate_to_banker", "d1", task="pay bob 5"), "boss: done"]),
        tools=delegate([sub]),
        host=Host(state_signing=Keyring({"k2": b"t" * 32})),
    )
    out = await top.run("pay bob")
    assert out.state is not None
    (part,) = out.interrupts
    paused = out.state.messages[-1]
    call_part = paused.content[0]
    forged_record = {**call_part.meta(md.DELEGATED), "state": None, "snapshotId": "someone-elses"}
    forged = replace(
        paused,
        content=[
            replace(call_part, metadata={**(call_part.metadata or {}), md.DELEGATED: forged_record}),
            *paused.content[1:],
        ],
    )
    tampered = replace(out.state, messages=[*out.state.messages[:-1], forged])
    with pytest.raises(PermissionDeniedError):  # a record the orchestrator did not write: nothing runs
        await top.run(resume=approve(part), state=tampered)
    done = await top.run(resume=approve(part), state=out.state)
    assert (done.text, len(RUNS)) == ("boss: done", 1)


async def test_two_paused_delegations_and_an_own_interrupt_are_answered_in_one_resume() -> None:
    store = InMemoryStore()
    alice = banker(store, call("transfer_money", "t1", to="alice", amount=1), "alice: sent")
    alice.name = "alice_bank"
    bob = banker(store, call("transfer_money", "t1", to="bob", amount=2), "bob: sent")
    bob.name = "bob_bank"
    asks = Message(
        role="model",
        content=[
            ToolRequestPart(name="delegate_to_alice_bank", ref="1", input={"task": "pay alice"}),
            ToolRequestPart(name="delegate_to_bob_bank", ref="2", input={"task": "pay bob"}),
            ToolRequestPart(name="transfer_money", ref="3", input={"to": "carol", "amount": 3}),
        ],
    )
    top = PromptAgent(
        "boss",
        ScriptedModel([asks, "boss: all three"]),
        tools=[*delegate([alice, bob]), transfer_money],
        store=store,
    )
    out = await top.run("pay everyone")
    assert sorted((p.name, p.ref, tuple(md.agent_path(p))) for p in out.interrupts) == [
        ("transfer_money", "1/t1", ("alice_bank",)),
        ("transfer_money", "2/t1", ("bob_bank",)),
        ("transfer_money", "3", ()),
    ]
    with pytest.raises(InvalidArgumentError, match="Unresolved"):  # every one must be answered
        await top.run(resume=approve(out.interrupts[0]), snapshot_id=out.snapshot_id)
    entries = [approve(p).restart[0] for p in out.interrupts]
    done = await top.run(resume=Resume(restart=entries), snapshot_id=out.snapshot_id)
    assert done.text == "boss: all three"
    assert sorted(r.to for r in RUNS) == ["alice", "bob", "carol"]
    outputs = [r.output for r in (await messages(top, done.snapshot_id))[-2].tool_responses]
    assert outputs == [{"response": "alice: sent"}, {"response": "bob: sent"}, "sent"]


async def test_a_sub_agent_snapshot_gone_is_the_delegations_error_result_not_a_stuck_turn() -> None:
    sub = banker(InMemoryStore())
    top = boss(InMemoryStore(), sub)
    out = await top.run("pay bob")
    (part,) = out.interrupts
    sub.store = InMemoryStore()  # the sub-agent's store lost its snapshots (a restarted in-memory server, say)
    done = await top.run(resume=approve(part), snapshot_id=out.snapshot_id)
    assert done.text == "boss: done" and RUNS == []
    (response,) = (await messages(top, done.snapshot_id))[-2].tool_responses
    assert cast(dict[str, str], response.output)["response"].startswith("Error calling agent 'banker': Snapshot ")


async def test_a_respond_through_the_parent_answers_the_sub_agents_call_without_running_it() -> None:
    store = InMemoryStore()
    sub = banker(store)
    top = boss(store, sub)
    out = await top.run("pay bob")
    claimed = transfer_money.interrupted(out.interrupts[0])
    assert claimed is not None
    done = await top.run(
        resume=Resume(respond=[claimed.respond("sent by the back office")]), snapshot_id=out.snapshot_id
    )
    assert done.text == "boss: done" and RUNS == []
    (seen,) = [m for m in model_of(sub).requests[-1].messages if m.role == "tool"]
    assert seen.tool_responses[0].output == "sent by the back office"


async def test_a_sub_agent_that_pauses_again_pauses_the_parent_again_with_the_new_interrupt() -> None:
    store = InMemoryStore()
    top = boss(store, banker(store))
    out = await top.run("pay bob")
    claimed = transfer_money.interrupted(out.interrupts[0])
    assert claimed is not None
    again = await top.run(resume=Resume(restart=[claimed.restart()]), snapshot_id=out.snapshot_id)  # no approval
    assert again.finish_reason == "interrupted" and RUNS == []
    (part,) = again.interrupts
    assert (part.name, part.ref, part.meta(md.AGENT_PATH)) == ("transfer_money", "d1/t1", ["banker"])
    record = (await messages(top, again.snapshot_id))[-1].content[0].meta(md.DELEGATED)
    assert (
        record["snapshotId"] != (await messages(top, out.snapshot_id))[-1].content[0].meta(md.DELEGATED)["snapshotId"]
    )
    done = await top.run(resume=approve(part), snapshot_id=again.snapshot_id)
    assert (done.text, len(RUNS)) == ("boss: done", 1)


async def test_a_sub_agents_approval_hold_surfaces_as_a_hold_and_approve_lets_it_run() -> None:
    store = InMemoryStore()

    @tool
    def balance(req: dict[str, Any]) -> int:
        """The balance (held: not in the allow list)."""
        RUNS.append(Transfer(to="balance", amount=0))
        return 42

    sub = PromptAgent(
        "banker",
        ScriptedModel([call("balance", "b1"), "banker: 42"]),
        tools=[balance],
        middleware=[tool_approval([])],
        store=store,
    )
    top = boss(store, sub)
    out = await top.run("what is my balance")
    (part,) = out.interrupts
    assert md.is_hold(part) and balance.interrupted(part) is None  # a hold, as in the sub-agent
    done = await top.run(resume=Resume(restart=[approve_hold(part)]), snapshot_id=out.snapshot_id)
    assert done.text == "boss: done" and len(RUNS) == 1


async def test_aborting_the_delegating_turn_stops_the_sub_agents_turn_and_commits_nothing_there() -> None:
    store = InMemoryStore()
    started, release, stopped = asyncio.Event(), asyncio.Event(), asyncio.Event()

    async def slow(request: ModelRequest) -> ModelResponse:
        started.set()
        try:
            await release.wait()
        except asyncio.CancelledError:
            stopped.set()
            raise
        return ModelResponse(message=Message.model("banker: finally"), finish_reason="stop")

    sub = PromptAgent("banker", ScriptedModel([slow]), store=store)
    top = boss(store, sub)
    out = await top.run("pay bob", detach=True)
    await asyncio.wait_for(started.wait(), 10)
    assert await top.abort(str(out.snapshot_id)) == "pending"
    await asyncio.wait_for(stopped.wait(), 10)  # the abort reached the banker's model call
    release.set()  # had the banker's turn run on, it would commit now
    await asyncio.sleep(0.2)
    assert (await top.get_snapshot(out.snapshot_id)).status == "aborted"
    assert [i.agent for i in await store.list()] == ["boss"]  # the banker's turn was stopped: no snapshot
