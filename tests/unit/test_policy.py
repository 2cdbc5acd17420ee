"""Answer policies (interlock.interrupts._policy): who may answer, separation of duties, edits, decisions.

Each refusal is PERMISSION_DENIED with its reason, the store unchanged and the tool not run,
whether the answer comes from ``agent.run`` or the inbox (the one check in the engine's turn).
"""

from __future__ import annotations

import pathlib
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import pytest
from policy_bank import ALICE, BOB, CAROL, MALLORY, RUNS, TREASURY, bank, transfer

from interlock import AgentOutput, InMemoryStore, Message, PromptAgent, Resume, ToolRequestPart, delegate
from interlock import metadata as md
from interlock.agents._host import Host
from interlock.errors import PermissionDeniedError, UsageError
from interlock.inbox._inbox import Approve, Edit, Inbox, Reject, Respond
from interlock.interrupts import (
    AnswerPolicy,
    Decision,
    has_role,
    in_group,
    is_identity,
    may_decrease,
    one_of,
    plan_resume,
    within,
)
from interlock.interrupts._tokens import TokenSigner, check_tokens, vote_token
from interlock.interrupts._who import any_of, identity_key
from interlock.stores.sqlite import SQLiteStore
from interlock.testing import ScriptedModel


@pytest.fixture
async def store(tmp_path: pathlib.Path) -> AsyncIterator[SQLiteStore]:
    async with SQLiteStore(tmp_path / "sessions.db") as s:
        yield s


@pytest.fixture(autouse=True)
def _runs() -> None:
    RUNS.clear()


async def _state(store: SQLiteStore, out: AgentOutput) -> Any:
    assert out.snapshot_id is not None
    snap = await store.load(out.snapshot_id)
    assert snap is not None
    return (snap.version, snap.claimed_by, snap.metadata, snap.finish_reason)


async def _paused(agent: PromptAgent, text: str = "pay bob 500") -> AgentOutput:
    out = await agent.run(text, context={"identity": ALICE})
    assert out.finish_reason == "interrupted", out
    return out


def _resume(out: AgentOutput, decision: Decision) -> Resume:
    (part,) = out.interrupts
    entry = decision.answer(part)
    return Resume(restart=[entry]) if entry.kind == "tool_request" else Resume(respond=[entry])


REFUSED = [
    ("requester_cannot_approve", ALICE, Decision.approve({"approved": True})),
    ("not_permitted", MALLORY, Decision.approve({"approved": True})),
    ("not_permitted", None, Decision.approve({"approved": True})),
    ("decision_not_allowed", BOB, Decision.respond("sent 500 to bob")),
    ("decision_not_allowed", BOB, Decision.restart({"approved": True})),
    (
        "edit_not_allowed",
        BOB,
        Decision.restart({"approved": True}, input={"to": "bob", "amount": 900.0}, decision="approve"),
    ),
    (
        "edit_not_allowed",
        BOB,
        Decision.restart({"approved": True}, input={"to": "eve", "amount": 500.0}, decision="approve"),
    ),
]


@pytest.mark.parametrize(("reason", "who", "decision"), REFUSED)
async def test_local_run_refuses_with_the_reason_and_changes_nothing(
    store: SQLiteStore, reason: str, who: Any, decision: Decision
) -> None:
    agent = bank(store)
    out = await _paused(agent)
    before = await _state(store, out)
    with pytest.raises(PermissionDeniedError) as refused:
        await agent.run(resume=_resume(out, decision), snapshot_id=out.snapshot_id, context={"identity": who})
    assert refused.value.status == "PERMISSION_DENIED"
    assert refused.value.details["reason"] == reason
    assert str(refused.value).startswith(f"PERMISSION_DENIED: {reason}: ")
    assert await _state(store, out) == before
    assert RUNS == []


async def test_a_permitted_approver_and_a_narrowed_edit_go_through(store: SQLiteStore) -> None:
    agent = bank(store)
    out = await _paused(agent)
    assert out.interrupts[0].meta("answerPolicy") == {
        "name": "treasury",
        "digest": TREASURY.digest,
        "requester": "alice",
        "quorum": 1,
    }
    edit = Decision.restart({"approved": True}, input={"to": "bob", "amount": 300.0}, decision="approve")
    done = await agent.run(resume=_resume(out, edit), snapshot_id=out.snapshot_id, context={"identity": BOB})
    assert done.finish_reason == "stop" and RUNS == [{"to": "bob", "amount": 300.0}]


async def test_a_permitted_deny_goes_through_without_running(store: SQLiteStore) -> None:
    agent = bank(store)
    out = await _paused(agent)
    done = await agent.run(
        resume=_resume(out, Decision.restart({"approved": False}, decision="deny")),
        snapshot_id=out.snapshot_id,
        context={"identity": CAROL},
    )
    assert "transfer cancelled" in done.text and RUNS == []


INBOX_REFUSED = [
    ("requester_cannot_approve", ALICE, Approve()),
    ("not_permitted", MALLORY, Reject()),
    ("decision_not_allowed", BOB, Respond("sent 500 to bob")),
    ("edit_not_allowed", BOB, Edit({"to": "bob", "amount": 501})),
    ("edit_not_allowed", BOB, Edit({"to": "eve", "amount": 5})),
]


@pytest.mark.parametrize(("reason", "who", "answer"), INBOX_REFUSED)
async def test_the_inbox_refuses_the_same(store: SQLiteStore, reason: str, who: Any, answer: Any) -> None:
    agent = bank(store)
    out = await _paused(agent)
    before = await _state(store, out)
    inbox = Inbox(store, agents=[agent])
    assert out.snapshot_id is not None
    with pytest.raises(PermissionDeniedError) as refused:
        await inbox.answer(out.snapshot_id, answer, identity=who)
    assert refused.value.details["reason"] == reason
    assert await _state(store, out) == before
    assert len(await inbox.pending()) == 1 and RUNS == []
    done = await inbox.answer(out.snapshot_id, Approve(), identity=BOB)
    assert done.finish_reason == "stop" and RUNS == [{"to": "bob", "amount": 500.0}]


async def test_client_managed_state_is_checked_too() -> None:
    agent = bank()
    out = await _paused(agent)
    with pytest.raises(PermissionDeniedError, match="requester_cannot_approve"):
        await agent.run(
            resume=_resume(out, Decision.approve({"approved": True})), state=out.state, context={"identity": ALICE}
        )
    assert RUNS == []


async def test_an_answer_under_a_changed_policy_is_refused(store: SQLiteStore) -> None:
    agent = bank(store)
    out = await _paused(agent)
    changed = AnswerPolicy(name="treasury", who=has_role("treasury", "audit"))
    transfer.policies = (changed,)
    try:
        with pytest.raises(PermissionDeniedError, match="policy_changed"):
            await agent.run(
                resume=_resume(out, Decision.approve({"approved": True})),
                snapshot_id=out.snapshot_id,
                context={"identity": BOB},
            )
    finally:
        transfer.policies = (TREASURY,)
    assert RUNS == []


def test_the_identity_helpers() -> None:
    member = {"id": "x", "roles": ["a"], "groups": "g"}

    class Person:
        name = "y"
        roles = ("b",)

    assert has_role("a")(member) and not has_role("b")(member) and has_role("b")(Person())
    assert in_group("g")(member) and not in_group("g")(Person())
    assert is_identity("x")(member) and is_identity("y")(Person()) and is_identity("z")("z")
    assert any_of(has_role("zz"), is_identity("x"))(member)
    assert identity_key(member) == "x" and identity_key(None) is None and identity_key(True) is None
    assert repr(any_of(has_role("a"), in_group("g"))) == "any_of(has_role('a'), in_group('g'))"


def test_bounds() -> None:
    assert may_decrease(low=0).allows(5, 3) and not may_decrease(low=0).allows(5, 6)
    assert not may_decrease(low=0).allows(5, -1) and not may_decrease().allows(5, True)
    assert within(1, 3).allows(None, 2) and not within(1, 3).allows(2, 4)
    assert one_of("a", "b").allows("c", "a") and not one_of("a").allows("a", "c")


def test_policies_are_checked_when_declared() -> None:
    with pytest.raises(UsageError, match="quorum"):
        AnswerPolicy(quorum=0)
    with pytest.raises(UsageError, match="decisions"):
        AnswerPolicy(decisions=frozenset({"maybe"}))  # type: ignore[arg-type]
    assert AnswerPolicy(who=has_role("a")).digest != AnswerPolicy(who=has_role("b")).digest
    assert AnswerPolicy().digest == AnswerPolicy().digest


async def test_the_audit_names_the_policy_and_a_refusal_is_logged(
    store: SQLiteStore, caplog: pytest.LogCaptureFixture
) -> None:
    agent = bank(store)
    out = await _paused(agent)
    inbox = Inbox(store, agents=[agent])
    assert out.snapshot_id is not None and out.session_id is not None
    with caplog.at_level("WARNING", logger="interlock.agents"), pytest.raises(PermissionDeniedError) as refused:
        await inbox.answer(out.snapshot_id, Approve(), identity=MALLORY)
    assert refused.value.details["policy"] == TREASURY.digest and refused.value.details["kind"] == "approve"
    assert refused.value.details["identity"] == "mallory" and refused.value.details["at"]
    (logged,) = [r for r in caplog.records if r.getMessage().startswith("answer refused")]
    assert logged.getMessage() == "answer refused (not_permitted): approve of transfer#t1 by mallory"
    assert logged.__dict__["policy"] == TREASURY.digest
    await inbox.answer(out.snapshot_id, Approve(), identity=BOB)
    (entry,) = await inbox.audit(out.session_id)
    assert entry.by == BOB and [(a.decision, a.policy) for a in entry.restart] == [("approve", TREASURY.digest)]
    assert entry.to_json()["restart"][0]["policy"] == TREASURY.digest


def _token_bank(store: SQLiteStore) -> PromptAgent:
    signer = TokenSigner({"k1": b"policy-test-key-0123456789abcdef"})
    return bank(store, host=Host(resume_tokens=signer, require_resume_tokens=True))


async def test_a_token_names_the_policy_and_an_answer_under_another_is_refused(store: SQLiteStore) -> None:
    agent = _token_bank(store)
    out = await _paused(agent)
    (part,) = out.interrupts
    signer = agent.host.resume_tokens
    assert signer is not None and signer.read(md.resume_token(part)).policy == TREASURY.digest
    history = (await store.load(out.snapshot_id or "")).state.messages  # type: ignore[union-attr]
    plan = plan_resume(_resume(out, Decision.approve({"approved": True})), history, [transfer])
    other = replace(plan, calls=tuple(replace(c, policy=AnswerPolicy(name="treasury")) for c in plan.calls))
    sid, snap = out.session_id or "", out.snapshot_id
    with pytest.raises(PermissionDeniedError) as refused:
        check_tokens(agent, other, identity=BOB, session_id=sid, snapshot_id=snap)
    assert refused.value.details == {"reason": "policy_changed"}
    assert len(check_tokens(agent, plan, identity=BOB, session_id=sid, snapshot_id=snap)) == 1


async def test_a_vote_token_serves_its_voter_only(store: SQLiteStore) -> None:
    agent = _token_bank(store)
    out = await _paused(agent)
    (part,) = out.interrupts
    ids = {"session_id": out.session_id or "", "snapshot_id": out.snapshot_id or ""}
    token = vote_token(agent, part, voter=BOB, **ids)
    assert token is not None
    mine = Decision.approve({"approved": True}).answer(md.with_resume_token(part, token))
    with pytest.raises(PermissionDeniedError) as refused:
        await agent.run(resume=Resume(restart=[mine]), snapshot_id=out.snapshot_id, context={"identity": CAROL})  # type: ignore[list-item]
    assert refused.value.details == {"reason": "other-voter"} and RUNS == []
    done = await agent.run(resume=Resume(restart=[mine]), snapshot_id=out.snapshot_id, context={"identity": BOB})  # type: ignore[list-item]
    assert done.finish_reason == "stop" and len(RUNS) == 1


async def test_a_sub_agents_call_is_checked_by_the_sub_agent_under_the_same_identity() -> None:
    store = InMemoryStore()
    pay = Message(role="model", content=[ToolRequestPart(name="transfer", ref="t1", input={"to": "bob", "amount": 5})])
    hand = Message(role="model", content=[ToolRequestPart(name="delegate_to_banker", ref="d1", input={"task": "pay"})])
    banker = PromptAgent("banker", ScriptedModel([pay, "banker: sent"]), tools=[transfer], store=store)
    boss = PromptAgent("boss", ScriptedModel([hand, "boss: done"]), tools=delegate([banker]), store=store)
    out = await boss.run("pay bob", context={"identity": ALICE})
    (part,) = out.interrupts
    assert part.meta("answerPolicy")["requester"] == "alice"  # surfaced with its record
    approve = _resume(out, Decision.approve({"approved": True}))
    for who, reason in ((ALICE, "requester_cannot_approve"), (MALLORY, "not_permitted")):
        with pytest.raises(PermissionDeniedError) as refused:
            await boss.run(resume=approve, snapshot_id=out.snapshot_id, context={"identity": who})
        assert refused.value.details["reason"] == reason
    assert RUNS == [] and len(await boss.pending_interrupts(out.snapshot_id)) == 1
    done = await boss.run(resume=approve, snapshot_id=out.snapshot_id, context={"identity": BOB})
    assert done.text == "boss: done" and RUNS == [{"to": "bob", "amount": 5.0}]
