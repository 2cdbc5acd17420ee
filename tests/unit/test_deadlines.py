"""Deadlines on a real SQLite store: each policy applies once, is audited, and reports an event."""

from __future__ import annotations

import asyncio
import pathlib
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from typing import Any

import pytest
from notify_app import POLICIES, bank

from interlock import Message, Part, PromptAgent, ToolContext, ToolRequestPart, ToolResponsePart, tool
from interlock import metadata as md
from interlock.errors import ToolOutputError, UsageError
from interlock.inbox._inbox import Inbox
from interlock.notify._deadlines import IDENTITY, sweep
from interlock.records._outbox import DEADLINE, WEBHOOK, new_event
from interlock.records._sessions import utcnow
from interlock.stores.sqlite import SQLiteStore
from interlock.testing import ScriptedModel
from interlock.tools._expiry import OnExpire

WAIT = 0.4  # the deadline the tests give their interrupts, in seconds


@pytest.fixture
async def store(tmp_path: pathlib.Path) -> AsyncIterator[SQLiteStore]:
    async with SQLiteStore(tmp_path / "bank.db") as s:
        yield s


async def _types(store: SQLiteStore) -> list[str]:
    return [e.type for e in await store.outbox_events(channel=WEBHOOK)]


async def _after_deadline() -> None:
    await asyncio.sleep(WAIT + 0.2)


@pytest.mark.parametrize("tenant", [None, "acme"])
async def test_reject_answers_once_with_a_note_and_an_audit_record(
    store: SQLiteStore, tmp_path: pathlib.Path, tenant: str | None
) -> None:
    log = tmp_path / "log"
    agent = bank(store, log=log, expires_in=WAIT, on_expire=POLICIES["reject"])
    out = await agent.run("pay bob 5", context={"tenant": tenant})
    assert out.finish_reason == "interrupted"
    deadline = md.deadline_of(out.interrupts[0])
    note = "No one approved in time."
    assert deadline is not None and deadline["onExpire"] == {"policy": "reject", "note": note, "output": note}
    assert datetime.fromisoformat(deadline["expiresAt"]) - utcnow() <= timedelta(seconds=WAIT)
    assert await sweep(store, [agent]) == []  # not due yet: nothing happens
    await _after_deadline()

    done = await sweep(store, [agent])

    assert [(d.result, d.policy) for d in done] == [("applied", "reject")]
    latest = await store.latest(out.session_id or "", tenant=tenant)
    assert latest is not None and latest.finish_reason == "stop" and latest.state is not None
    tool_msg = latest.state.messages[-2]
    assert [p.output for p in tool_msg.content if isinstance(p, ToolResponsePart)] == [
        note
    ]  # the tool's output is a string: the note's message
    assert "transfer" not in log.read_text()  # the tool never ran
    record: Any = (latest.metadata or {})["resume"]
    assert record["by"] == IDENTITY
    assert record["respond"][0]["decision"] == "deny" and record["respond"][0]["expired"] == "reject"
    audit = await Inbox(store).audit(out.session_id or "", tenant=tenant)
    assert [(e.by, e.respond[0].decision) for e in audit] == [(IDENTITY, "deny")]
    assert await _types(store) == ["interrupt.created", "interrupt.expired"]
    expired = (await store.outbox_events(channel=WEBHOOK))[1]
    assert expired.tenant == tenant and expired.data["policy"] == "reject" and expired.data["by"] == IDENTITY
    assert await sweep(store, [agent]) == []  # applied once: the timer is done
    assert [e.status for e in await store.outbox_events(channel=DEADLINE)] == ["done"]


async def test_respond_answers_with_the_default(store: SQLiteStore, tmp_path: pathlib.Path) -> None:
    log = tmp_path / "log"
    agent = bank(store, log=log, expires_in=WAIT, on_expire=POLICIES["respond"])
    out = await agent.run("pay bob 5")
    await _after_deadline()

    done = await sweep(store, [agent])

    assert [(d.result, d.policy) for d in done] == [("applied", "respond")]
    latest = await store.latest(out.session_id or "")
    assert latest is not None and latest.state is not None
    responses = latest.state.messages[-2].content
    assert [p.output for p in responses if isinstance(p, ToolResponsePart)] == ["declined by default"]
    assert latest.state.messages[-1].text == "tool said: ['declined by default']"
    assert "transfer" not in log.read_text()
    record: Any = (latest.metadata or {})["resume"]
    assert record["respond"][0]["expired"] == "respond" and record["respond"][0]["decision"] is None


async def test_escalate_notifies_the_group_once_and_keeps_waiting(store: SQLiteStore) -> None:
    agent = bank(store, expires_in=WAIT, on_expire=POLICIES["escalate"])
    out = await agent.run("pay bob 5")
    await _after_deadline()

    done = await sweep(store, [])  # an escalation resumes nothing: no agent needed

    assert [(d.result, d.policy) for d in done] == [("applied", "escalate")]
    events = await store.outbox_events(channel=WEBHOOK)
    assert [e.type for e in events] == ["interrupt.created", "interrupt.escalated"]
    escalated = events[1]
    assert escalated.group == "managers" and escalated.data["snapshotId"] == out.snapshot_id
    assert escalated.data["resumeToken"] == md.resume_token(out.interrupts[0])  # the new group can answer
    snap = await store.load(out.snapshot_id or "")
    assert snap is not None and (snap.metadata or {})[md.ESCALATED]["transfer#t1"]["group"] == "managers"
    waiting = await Inbox(store).pending()
    assert [i.snapshot_id for i in waiting] == [out.snapshot_id]  # still waits for a person
    assert await sweep(store, []) == []


async def test_an_answer_before_the_deadline_leaves_nothing_to_apply(store: SQLiteStore) -> None:
    agent = bank(store, expires_in=WAIT, on_expire=POLICIES["reject"])
    out = await agent.run("pay bob 5")
    await Inbox(store, agents=[agent]).approve(out.snapshot_id or "", identity="alice")
    await _after_deadline()

    done = await sweep(store, [agent])

    assert [d.result for d in done] == ["answered"]
    audit = await Inbox(store).audit(out.session_id or "")
    assert [e.by for e in audit] == ["alice"]
    assert await _types(store) == ["interrupt.created", "interrupt.answered"]


async def test_an_unknown_agent_is_retried_later(store: SQLiteStore) -> None:
    agent = bank(store, expires_in=WAIT, on_expire=POLICIES["reject"])
    await agent.run("pay bob 5")
    await _after_deadline()

    done = await sweep(store, [], retry_base=30)

    assert [d.result for d in done] == ["failed"] and "--agents" in done[0].message
    (timer,) = await store.outbox_events(channel=DEADLINE)
    assert timer.status == "pending" and timer.attempts == 1 and timer.due > utcnow() + timedelta(seconds=20)


async def test_the_interrupt_s_own_deadline_wins(store: SQLiteStore) -> None:
    @tool(expires_in=3600, on_expire=OnExpire.escalate("ops"))
    async def ask(q: str, ctx: ToolContext[Any]) -> str:
        """Ask someone."""
        ctx.interrupt({"q": q}, expires_in=timedelta(seconds=60))

    call = Message(role="model", content=[ToolRequestPart(name="ask", ref="a", input="why?")])
    agent = PromptAgent("asker", ScriptedModel([call]), tools=[ask], store=store)
    out = await agent.run("go")
    deadline = md.deadline_of(out.interrupts[0])
    assert deadline is not None and deadline["onExpire"] == {"policy": "escalate", "group": "ops"}
    left = datetime.fromisoformat(deadline["expiresAt"]) - utcnow()
    assert timedelta(seconds=50) < left <= timedelta(seconds=60)


def test_bad_declarations_are_refused() -> None:
    async def body(q: str) -> str:
        return q

    with pytest.raises(UsageError, match="positive"):
        tool(expires_in=-1)(body)
    with pytest.raises(UsageError, match="OnExpire"):
        tool(expires_in=5, on_expire="reject")(body)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="group"):
        OnExpire.escalate("")
    with pytest.raises(ToolOutputError):
        tool(expires_in=5, on_expire=OnExpire.respond({"not": "a string"}))(body)


async def test_a_turn_with_two_deadlines_is_answered_once_when_both_passed(store: SQLiteStore) -> None:
    @tool(expires_in=WAIT, on_expire=OnExpire.respond("skipped"))
    async def ping(host: str, ctx: ToolContext[Any]) -> str:
        """Ping a host, once someone agrees."""
        ctx.interrupt({"host": host}, expires_in=WAIT * (2 if host == "b" else 1))

    calls: list[Part] = [ToolRequestPart(name="ping", ref=r, input=r) for r in ("a", "b")]
    agent = PromptAgent(
        "pinger", ScriptedModel([Message(role="model", content=calls), "done"]), tools=[ping], store=store
    )
    out = await agent.run("ping both")
    assert [md.deadline_of(p) is not None for p in out.interrupts] == [True, True]
    await _after_deadline()  # a's deadline passed, b's not yet: a resume must answer both

    first = await sweep(store, [agent])

    assert [(d.ref, d.result) for d in first] == [("a", "later")]
    assert first[0].retry_at is not None and first[0].retry_at > utcnow()
    await asyncio.sleep(WAIT)
    second = await sweep(store, [agent])
    assert sorted(d.result for d in second) == ["answered", "applied"]  # one applied both, the other found it done
    latest = await store.latest(out.session_id or "")
    assert latest is not None and latest.state is not None and latest.state.messages[-1].text == "done"
    audit = await Inbox(store).audit(out.session_id or "")
    assert [[a.output for a in e.respond] for e in audit] == [["skipped", "skipped"]]  # one resume, both answered


async def test_a_timer_for_a_missing_snapshot_is_done(store: SQLiteStore) -> None:
    stray = new_event(DEADLINE, "deadline.due", {"snapshotId": "nope", "tool": "transfer", "ref": None}, tenant=None)
    await store.save_all([], events=[stray])

    done = await sweep(store, [])

    assert [(d.snapshot_id, d.result) for d in done] == [("nope", "answered")]
    assert [e.status for e in await store.outbox_events(channel=DEADLINE)] == ["done"]
