"""Deadlines under answer policies: a warning before the deadline (once), and extensions by permitted people."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from typing import Any

import pytest
from policy_bank import ALICE, BOB, MALLORY, TREASURY, Approval, Transfer, _plan  # pyright: ignore[reportPrivateUsage]

from interlock import PromptAgent, SessionStore, ToolContext, tool
from interlock import metadata as md
from interlock.errors import InvalidArgumentError, PermissionDeniedError
from interlock.inbox._inbox import Inbox
from interlock.notify._deadlines import sweep
from interlock.records._outbox import DEADLINE, WEBHOOK
from interlock.testing import ScriptedModel


def _agent(store: SessionStore, *, expires_in: float, warn_before: float | None = None) -> PromptAgent:
    @tool(policy=TREASURY, expires_in=expires_in, warn_before=warn_before, name="transfer")
    async def transfer(req: Transfer, ctx: ToolContext[Any], approval: Approval | None) -> str:
        """Move money; treasury approves within the deadline."""
        if approval is None:
            ctx.interrupt({"to": req.to, "amount": req.amount})
        return "sent"

    return PromptAgent("bank", ScriptedModel([_plan] * 20), tools=[transfer], store=store)


async def _webhooks(store: SessionStore) -> list[str]:
    return [e.type for e in await store.outbox_events(channel=WEBHOOK)]


async def test_the_warning_goes_out_once_before_the_deadline(store: SessionStore) -> None:
    agent = _agent(store, expires_in=3600, warn_before=3599.7)
    out = await agent.run("pay bob 500", context={"identity": ALICE})
    deadline = md.deadline_of(out.interrupts[0])
    assert deadline is not None and deadline["warnBefore"] == 3599.7
    assert sorted(e.type for e in await store.outbox_events(channel=DEADLINE)) == ["deadline.due", "deadline.warn"]
    assert await sweep(store, [agent]) == []
    await asyncio.sleep(0.5)
    first, second = await asyncio.gather(sweep(store, [agent], holder="a"), sweep(store, [agent], holder="b"))
    assert [(d.result, d.policy) for d in first + second] == [("applied", "warn")]
    assert await sweep(store, [agent]) == []
    expiring = [e for e in await store.outbox_events(channel=WEBHOOK) if e.type == "interrupt.expiring"]
    assert len(expiring) == 1 and expiring[0].data["expiresAt"] == deadline["expiresAt"]
    snap = await store.load(out.snapshot_id or "")
    assert snap is not None and (snap.metadata or {})["warned"]["transfer#t1"]["expiresAt"] == deadline["expiresAt"]
    assert len(await Inbox(store).pending()) == 1  # still waiting


async def test_a_permitted_identity_extends_the_deadline_and_it_is_audited(store: SessionStore) -> None:
    agent = _agent(store, expires_in=0.4, warn_before=0.2)
    inbox = Inbox(store, agents=[agent])
    out = await agent.run("pay bob 500", context={"identity": ALICE})
    sid = out.snapshot_id or ""
    old = datetime.fromisoformat(md.deadline_of(out.interrupts[0])["expiresAt"])  # type: ignore[index]
    before = await store.load(sid)
    for who, reason in ((ALICE, "requester_cannot_approve"), (MALLORY, "not_permitted")):
        with pytest.raises(PermissionDeniedError) as refused:
            await inbox.extend(sid, by=timedelta(hours=1), identity=who)
        assert refused.value.details["reason"] == reason and refused.value.details["kind"] == "extend"
    assert await store.load(sid) == before
    with pytest.raises(InvalidArgumentError):
        await inbox.extend(sid, until=old - timedelta(seconds=1), identity=BOB)

    new = await inbox.extend(sid, by=timedelta(hours=1), identity=BOB)
    assert new == old + timedelta(hours=1)
    (item,) = await inbox.pending()
    assert md.deadline_of(item.part)["expiresAt"] == new.isoformat()  # type: ignore[index]
    snap = await store.load(sid)
    assert snap is not None
    (mark,) = (snap.metadata or {})["extended"]["transfer#t1"]
    assert mark["by"] == "bob" and mark["from"] == old.isoformat() and mark["to"] == new.isoformat()

    await asyncio.sleep(0.6)  # the old timers come due: the deadline moved, so nothing applies
    done = await sweep(store, [agent])
    assert sorted(d.result for d in done) == ["answered", "later"]
    assert "interrupt.expiring" not in await _webhooks(store)
    assert len(await inbox.pending()) == 1
    audit = await inbox.audit(out.session_id or "")
    assert [(e.by, [(a.kind, a.policy) for a in e.restart]) for e in audit] == [("bob", [("extend", TREASURY.digest)])]
