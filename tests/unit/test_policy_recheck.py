"""Consent that cannot go stale: a tool's recheck runs when an approval lands, before the body; a failure re-asks."""

from __future__ import annotations

import pytest
from policy_bank import ALICE, BALANCE, BOB, CAROL, RUNS, guarded_bank

from interlock import SessionStore
from interlock.inbox._inbox import Approve, Inbox, Reject


@pytest.fixture(autouse=True)
def _world() -> None:
    RUNS.clear()
    BALANCE["acme"] = 100_000.0


async def test_a_recheck_that_turns_false_re_asks_and_the_tool_does_not_run(
    store: SessionStore, caplog: pytest.LogCaptureFixture
) -> None:
    agent = guarded_bank(store)
    inbox = Inbox(store, agents=[agent])
    out = await agent.run("pay bob 500", context={"identity": ALICE})
    (asked,) = out.interrupts
    BALANCE["acme"] = 100.0  # the world changed between the question and the approval
    with caplog.at_level("WARNING", logger="interlock.tools"):
        again = await inbox.answer(out.snapshot_id or "", Approve(), identity=BOB)
    assert again.finish_reason == "interrupted" and again.snapshot_id != out.snapshot_id and RUNS == []
    (reasked,) = again.interrupts
    assert reasked.meta("interrupt") == asked.meta("interrupt")
    assert reasked.meta("reasked")["reason"] == "the balance (100) no longer covers 500"
    assert reasked.meta("answerPolicy")["requester"] == "alice"  # still alice's request: bob may answer it again
    assert any("asked again: its approval went stale" in r.getMessage() for r in caplog.records)
    (entry,) = await inbox.audit(out.session_id or "")
    assert entry.by == BOB and entry.finish_reason == "interrupted"  # the approval that was re-asked, audited
    (pending,) = await inbox.pending()
    assert pending.snapshot_id == again.snapshot_id

    BALANCE["acme"] = 1_000.0
    done = await inbox.answer(again.snapshot_id or "", Approve(), identity=CAROL)
    assert done.finish_reason == "stop" and RUNS == [{"to": "bob", "amount": 500.0}]


async def test_a_deny_and_a_recheck_that_holds_run_as_before(store: SessionStore) -> None:
    agent = guarded_bank(store)
    inbox = Inbox(store, agents=[agent])
    out = await agent.run("pay bob 500", context={"identity": ALICE})
    BALANCE["acme"] = 0.0
    denied = await inbox.answer(out.snapshot_id or "", Reject(), identity=BOB)
    assert "transfer cancelled" in denied.text and RUNS == []
    BALANCE["acme"] = 1_000.0
    out = await agent.run("pay carol 500", context={"identity": ALICE})
    done = await inbox.answer(out.snapshot_id or "", Approve(), identity=BOB)
    assert done.finish_reason == "stop" and RUNS == [{"to": "carol", "amount": 500.0}]
