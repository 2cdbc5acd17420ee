"""Quorum answer policies: k approvals from distinct permitted identities, recorded durably, resume once.

The bank's transfers above 10 000 need two treasury approvals (``policy_bank.TREASURY``). The
bodies run on every store the ``store`` fixture gives (memory and SQLite here; PostgreSQL in
``integration/test_policy_quorum_postgres.py``).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from policy_bank import ALICE, BOB, CAROL, DAVE, RUNS, TREASURY, bank

from interlock import AgentOutput, PromptAgent, SessionStore
from interlock.errors import AbortedError, PermissionDeniedError
from interlock.inbox._inbox import Approve, Inbox, Reject


@pytest.fixture(autouse=True)
def _runs() -> None:
    RUNS.clear()


async def _big(agent: PromptAgent) -> AgentOutput:
    out = await agent.run("pay bob 25000", context={"identity": ALICE})
    assert out.finish_reason == "interrupted" and out.interrupts[0].meta("answerPolicy")["quorum"] == 2
    return out


async def _row(store: SessionStore, out: AgentOutput) -> Any:
    snap = await store.load(out.snapshot_id or "")
    assert snap is not None
    return snap.version, snap.claimed_by, snap.metadata


def _votes(row: Any) -> list[tuple[str, str]]:
    meta: dict[str, Any] = row[2] or {}
    votes: dict[str, Any] = meta.get("votes", {})
    return [(v["by"], v["decision"]) for v in votes.get("transfer#t1", [])]


async def test_two_approvals_resume_once_and_the_votes_are_kept(store: SessionStore) -> None:
    agent = bank(store)
    inbox = Inbox(store, agents=[agent])
    out = await _big(agent)
    sid = out.snapshot_id or ""
    first = await inbox.answer(sid, Approve(), identity=BOB)
    assert first.finish_reason == "interrupted" and first.snapshot_id == sid and RUNS == []
    row = await _row(store, out)
    assert _votes(row) == [("bob", "approve")] and row[1] is None
    assert [i.snapshot_id for i in await inbox.pending()] == [sid]  # still waiting, on the same snapshot
    (vote,) = row[2]["votes"]["transfer#t1"]
    assert vote["digest"] == TREASURY.digest and vote["at"]

    with pytest.raises(PermissionDeniedError) as again:
        await inbox.answer(sid, Approve(), identity=BOB)
    assert again.value.details["reason"] == "already_voted" and await _row(store, out) == row

    done = await inbox.answer(sid, Approve(), identity=CAROL)
    assert done.finish_reason == "stop" and RUNS == [{"to": "bob", "amount": 25000.0}]
    assert _votes(await _row(store, out)) == [("bob", "approve"), ("carol", "approve")]
    with pytest.raises(AbortedError):
        await inbox.answer(sid, Approve(), identity=DAVE)
    assert len(RUNS) == 1
    audit = await inbox.audit(out.session_id or "")
    named = [(e.by if isinstance(e.by, str) else e.by["id"], e.restart) for e in audit]
    assert [(by, [(a.kind, a.decision, a.policy) for a in answers]) for by, answers in named] == [
        ("bob", [("vote", "approve", TREASURY.digest)]),
        ("carol", [("vote", "approve", TREASURY.digest)]),
        ("carol", [("restart", "approve", TREASURY.digest)]),
    ]


async def test_a_deny_before_the_quorum_ends_the_call_without_the_tool(store: SessionStore) -> None:
    agent = bank(store)
    inbox = Inbox(store, agents=[agent])
    out = await _big(agent)
    await inbox.answer(out.snapshot_id or "", Approve(), identity=BOB)
    done = await inbox.answer(out.snapshot_id or "", Reject(), identity=CAROL)
    assert done.finish_reason == "stop" and "transfer cancelled" in done.text and RUNS == []


async def test_the_requester_and_non_members_cannot_vote(store: SessionStore) -> None:
    agent = bank(store)
    inbox = Inbox(store, agents=[agent])
    out = await _big(agent)
    before = await _row(store, out)
    stranger: dict[str, Any] = {"id": "x", "roles": []}
    for who, reason in ((ALICE, "requester_cannot_approve"), (stranger, "not_permitted")):
        with pytest.raises(PermissionDeniedError) as refused:
            await inbox.answer(out.snapshot_id or "", Approve(), identity=who)
        assert refused.value.details["reason"] == reason
    assert await _row(store, out) == before and RUNS == []


async def test_racing_voters_resume_exactly_once(store: SessionStore) -> None:
    agent = bank(store)
    inbox = Inbox(store, agents=[agent])
    out = await _big(agent)
    results = await asyncio.gather(
        *(inbox.answer(out.snapshot_id or "", Approve(), identity=who) for who in (BOB, CAROL, DAVE)),
        return_exceptions=True,
    )
    finished = [r for r in results if isinstance(r, AgentOutput) and r.finish_reason == "stop"]
    assert len(finished) == 1 and len(RUNS) == 1
    assert all(isinstance(r, (AgentOutput, AbortedError)) for r in results), results
