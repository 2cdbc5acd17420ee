"""The safety core's claims, one test per observation of the safety-core issue (1-8, 11).

Each of these failed before claims became fenced leases: a lapsed holder committed, a
failed commit or an abort kept the claim, a refused input changed the stored row, claim
state disagreed between the runtime, the inbox and ``pending_interrupts``, and snapshots
were readable through any agent on the store.
"""

from __future__ import annotations

import asyncio
import pathlib
import time
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import pytest
from banking import APPROVE, PAY, Approval, Transfer

from interlock import ClaimConflictError, Inbox, InMemoryStore, PromptAgent, SessionStore, Snapshot, ToolContext, tool
from interlock._engine.commit import claim_state
from interlock.agents._host import Host
from interlock.errors import SnapshotNotFoundError, UnavailableError
from interlock.records._sessions import utcnow
from interlock.stores import JournalUpdater, TxStep, Updater
from interlock.stores.sqlite import SQLiteStore
from interlock.testing import ScriptedModel


def bank(
    store: SessionStore,
    runs: list[str],
    *,
    sleep: float = 0.0,
    sync: bool = False,
    pay: bool = False,
    idempotent: bool = False,
    **options: Any,
) -> PromptAgent:
    """A bank whose model asks for a transfer (``pay``) or says "paid"; the transfer pauses for approval."""
    if sync:

        @tool(idempotent=idempotent)
        def transfer(req: Transfer, ctx: ToolContext[Any], approval: Approval | None) -> str:
            """Move money once approved (a blocking body)."""
            if approval is None:
                ctx.interrupt({"to": req.to})
            time.sleep(sleep)
            runs.append(req.to)
            return "sent"
    else:

        @tool(idempotent=idempotent)
        async def transfer(req: Transfer, ctx: ToolContext[Any], approval: Approval | None) -> str:
            """Move money once approved."""
            if approval is None:
                ctx.interrupt({"to": req.to})
            await asyncio.sleep(sleep)
            runs.append(req.to)
            return "sent"

    return PromptAgent("bank", ScriptedModel([PAY if pay else "paid"]), tools=[transfer], store=store, **options)


async def paused(store: SessionStore, **options: Any) -> str:
    out = await bank(store, [], pay=True, **options).run("pay bob 5")
    assert out.finish_reason == "interrupted" and out.snapshot_id
    return out.snapshot_id


async def children(store: SessionStore, parent_id: str) -> list[Snapshot]:
    found = [i for i in await store.list() if i.parent_id == parent_id]
    return [s for i in found if (s := await store.load(i.snapshot_id)) is not None]


# 1. a lapsed claim never commits ------------------------------------------------------------


async def test_a_blocking_tool_longer_than_the_claim_ttl_keeps_its_claim_and_commits_alone() -> None:
    store, runs = InMemoryStore(), list[str]()
    sid = await paused(store)
    first = asyncio.ensure_future(
        bank(store, runs, sleep=3.0, sync=True, host=Host(claim_ttl=1.0)).run(resume=APPROVE, snapshot_id=sid)
    )
    await asyncio.sleep(1.8)  # past claim_ttl: the blocking body runs off the event loop, so the lease is fresh
    second = await bank(store, runs, host=Host(claim_ttl=1.0)).run(
        resume=APPROVE, snapshot_id=sid, raise_on_error=False
    )
    assert second.error is not None and second.error.status == "ABORTED"
    done = await first
    assert done.finish_reason == "stop", done.error
    assert runs == ["bob"]
    assert [c.snapshot_id for c in await children(store, sid)] == [done.snapshot_id]
    leaf = await store.latest((await store.load(sid) or Snapshot(snapshot_id="", session_id="")).session_id)
    assert leaf is not None and leaf.snapshot_id == done.snapshot_id


async def test_a_holder_whose_lease_lapsed_and_was_taken_over_cannot_commit() -> None:
    store, runs = InMemoryStore(), list[str]()
    sid = await paused(store)
    slow = bank(store, runs, sleep=1.5, host=Host(claim_ttl=0.6), idempotent=True)
    first = asyncio.ensure_future(slow.run(resume=APPROVE, snapshot_id=sid, raise_on_error=False))
    await asyncio.sleep(0.2)
    parent = await store.load(sid)
    assert parent is not None and claim_state(parent) == "held"
    holder = parent.claimed_by
    # Simulate a stalled holder: its lease is left to lapse (as under SIGSTOP), then another resume takes over.
    await store.save(sid, lambda cur: cur.evolve(claim_expires_at=utcnow() - timedelta(seconds=1)) if cur else None)
    second = await bank(store, runs, host=Host(claim_ttl=5.0), idempotent=True).run(resume=APPROVE, snapshot_id=sid)
    assert second.finish_reason == "stop", second.error
    lost = await first
    assert lost.error is not None and lost.error.status == "ABORTED", lost
    # refused by the claim fence ("lapsed"), or earlier by the effect journal, which the takeover moved on
    assert "lapsed" in lost.error.message or "took it over" in lost.error.message, lost.error
    details: dict[str, Any] = lost.error.details or {}
    assert details.get("winner") in (None, second.snapshot_id)
    kids = await children(store, sid)
    assert [c.snapshot_id for c in kids] == [second.snapshot_id]  # one commit, no branch
    after = await store.load(sid)
    assert after is not None and after.claimed_by == second.snapshot_id and after.metadata
    assert after.metadata["reclaimedFrom"] == holder


# 3. a failed commit gives the claim back ----------------------------------------------------


class FailingCommits(InMemoryStore):
    """Fails every multi-row write (a resume's fenced commit) while ``failing``."""

    failing = True

    async def save_all(
        self,
        updates: Sequence[tuple[str, Updater]],
        *,
        tenant: str | None = None,
        journal: Sequence[tuple[str, JournalUpdater]] = (),
        events: Sequence[Any] = (),
        then: Sequence[TxStep] = (),
    ) -> list[Any]:
        if self.failing and len(updates) > 1 and not any(sid.startswith("x") for sid, _ in updates):
            raise UnavailableError("disk I/O error")
        return await super().save_all(updates, tenant=tenant, journal=journal, events=events, then=then)


async def test_a_failed_commit_gives_the_claim_back_and_names_no_phantom_winner() -> None:
    store, runs = FailingCommits(), list[str]()
    sid = await paused(store)
    failed = await bank(store, runs).run(resume=APPROVE, snapshot_id=sid, raise_on_error=False)
    assert failed.error is not None and failed.error.status == "UNAVAILABLE"
    parent = await store.load(sid)
    assert parent is not None and claim_state(parent) == "free"
    assert [i.snapshot_id for i in await Inbox(store, agents=[bank(store, runs)]).pending()] == [sid]
    store.failing = False
    done = await bank(store, runs).run(resume=APPROVE, snapshot_id=sid)
    assert done.finish_reason == "stop", done.error


# 2 and 4. detached resumes: a crash or an abort never locks the interrupt -----------------


async def test_an_abort_that_lands_while_a_detached_resume_commits_gives_the_interrupt_back() -> None:
    store = InMemoryStore()
    sid = await paused(store)

    original = store.save_all
    aborted: list[str] = []

    async def save_all(
        updates: Sequence[tuple[str, Updater]],
        *,
        tenant: str | None = None,
        journal: Sequence[tuple[str, JournalUpdater]] = (),
        events: Sequence[Any] = (),
        then: Sequence[TxStep] = (),
    ) -> list[Any]:
        ids = [i for i, _ in updates]
        if len(ids) == 2 and ids[0] == sid and not aborted:  # the fenced commit: the claim first, then the row
            aborted.append(ids[1])
            assert await bank(store, []).abort(ids[1]) == "pending"
        return await original(updates, tenant=tenant, journal=journal, events=events, then=then)

    store.save_all = save_all
    runs: list[str] = []
    out = await bank(store, runs).run(resume=APPROVE, snapshot_id=sid, detach=True)
    assert out.finish_reason == "detached" and out.snapshot_id
    final = await bank(store, runs).wait(out.snapshot_id, timeout=5)
    assert final.status == "aborted"
    await asyncio.sleep(0.05)
    parent = await store.load(sid)
    assert parent is not None and claim_state(parent) == "free"
    store.save_all = original
    assert [i.snapshot_id for i in await Inbox(store, agents=[bank(store, runs)]).pending()] == [sid]


async def test_a_lapsed_detached_holder_is_taken_over_and_its_pending_row_fails() -> None:
    store, runs = InMemoryStore(), list[str]()
    sid = await paused(store)
    # A detached resumer that died: its pending row stays pending, its claim lease runs out.
    dead = "dead-detached-turn"
    parent = await store.load(sid)
    assert parent is not None
    await store.save(
        dead,
        lambda _: Snapshot(
            snapshot_id=dead,
            session_id=parent.session_id,
            parent_id=sid,
            status="pending",
            heartbeat_at=utcnow(),
            metadata={"agent": "bank"},
        ),
    )
    await store.save(sid, lambda cur: cur.evolve(claimed_by=dead, claim_expires_at=utcnow()) if cur else None)
    agent = bank(store, runs)
    assert [p.ref for p in await agent.pending_interrupts(sid)] == ["t1"]
    assert [i.snapshot_id for i in await Inbox(store, agents=[agent]).pending()] == [sid]
    # by session id too: the dead run's pending row (its heartbeat still fresh) does not block the session
    done = await agent.run(resume=APPROVE, session_id=parent.session_id)
    assert done.finish_reason == "stop", done.error
    row = await store.load(dead)
    assert row is not None and row.status == "failed" and row.error is not None and done.snapshot_id
    assert done.snapshot_id in row.error.message


# 5. a refused input changes nothing ---------------------------------------------------------


async def test_an_input_with_a_message_and_a_resume_is_refused_before_it_claims() -> None:
    store = InMemoryStore()
    sid = await paused(store)
    before = await store.load(sid)
    runs: list[str] = []
    out = await bank(store, runs).run("and also this", resume=APPROVE, snapshot_id=sid, raise_on_error=False)
    assert out.error is not None and out.error.status == "FAILED_PRECONDITION"  # as Genkit answers it
    assert "not both" in out.error.message
    assert await store.load(sid) == before and runs == []


# 6. one claim rule for pending_interrupts, locally and over HTTP -----------------------------


async def test_pending_interrupts_follow_the_claim_rule() -> None:
    store = InMemoryStore()
    sid = await paused(store)
    agent = bank(store, [])
    stale = utcnow() - timedelta(seconds=1)
    await store.save(sid, lambda cur: cur.evolve(claimed_by="died", claim_expires_at=stale) if cur else None)
    assert [p.ref for p in await agent.pending_interrupts(sid)] == ["t1"]  # lapsed: answerable again
    fresh = utcnow() + timedelta(seconds=30)
    await store.save(sid, lambda cur: cur.evolve(claimed_by="running", claim_expires_at=fresh) if cur else None)
    assert await agent.pending_interrupts(sid) == []


async def test_remote_pending_interrupts_see_the_claim(tmp_path: pathlib.Path) -> None:
    from http_helpers import serve

    from interlock import AgentServer, RemoteAgent

    store = InMemoryStore()
    agent = bank(store, [])
    agent.model = ScriptedModel([PAY, "paid"])
    async with serve(AgentServer([agent])) as base, RemoteAgent(f"{base}/bank") as remote:
        out = await remote.run("pay bob 5")
        assert out.snapshot_id
        assert [p.ref for p in await remote.pending_interrupts(out.snapshot_id)] == ["t1"]
        done = await remote.run(resume=APPROVE, snapshot_id=out.snapshot_id)
        assert done.finish_reason == "stop", done.error
        assert await remote.pending_interrupts(out.snapshot_id) == []
        snap = await remote.get_snapshot(out.snapshot_id)
        assert snap is not None and claim_state(snap) == "answered" and snap.claimed_by == done.snapshot_id


# 7. a snapshot is bound to the agent that wrote it -------------------------------------------


async def test_another_agent_on_the_same_store_cannot_read_or_answer_a_snapshot() -> None:
    store, runs = InMemoryStore(), list[str]()
    sid = await paused(store)
    other = PromptAgent("ops", ScriptedModel(["ok"]), store=store)
    thief = bank(store, runs)
    thief.name = "ops-bank"
    with pytest.raises(SnapshotNotFoundError):
        await other.get_snapshot(sid)
    with pytest.raises(SnapshotNotFoundError):
        await other.pending_interrupts(sid)
    out = await thief.run(resume=APPROVE, snapshot_id=sid, raise_on_error=False)
    assert out.error is not None and out.error.status == "NOT_FOUND" and runs == []
    parent = await store.load(sid)
    assert parent is not None
    by_session = await thief.run(resume=APPROVE, session_id=parent.session_id, raise_on_error=False)
    assert by_session.error is not None and by_session.error.status == "NOT_FOUND" and runs == []
    assert await other.abort(sid) is None
    assert parent.claimed_by is None and claim_state(parent) == "free"


# 8. an unusable store fails a fresh turn before anything runs ---------------------------------


async def test_a_missing_directory_fails_the_turn_before_the_model_runs(tmp_path: pathlib.Path) -> None:
    model = ScriptedModel(["hello"])
    store = SQLiteStore(tmp_path / "no" / "such" / "dir.db")
    try:
        out = await PromptAgent("a", model, store=store).run("hi", raise_on_error=False)
    finally:
        await store.close()
    assert out.error is not None and out.error.status not in ("INTERNAL", "UNKNOWN"), out.error
    assert model.requests == []


async def test_a_damaged_file_fails_the_turn_before_the_model_runs(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "junk.db"
    path.write_bytes(b"this is not a database" * 100)
    model = ScriptedModel(["hello"])
    store = SQLiteStore(path)
    try:
        out = await PromptAgent("a", model, store=store).run("hi", raise_on_error=False)
    finally:
        await store.close()
    assert out.error is not None and out.error.status not in ("INTERNAL", "UNKNOWN"), out.error
    assert model.requests == []
    assert path.read_bytes() == b"this is not a database" * 100


# 11. tenancy ----------------------------------------------------------------------------------


async def test_resuming_by_another_tenants_session_id_is_not_found() -> None:
    store, runs = InMemoryStore(), list[str]()
    agent = bank(store, runs)
    out = await bank(store, runs, pay=True).run("pay bob 5", context={"tenant": "acme"})
    assert out.session_id
    theirs = await agent.run(
        resume=APPROVE, session_id=out.session_id, context={"tenant": "globex"}, raise_on_error=False
    )
    assert theirs.error is not None and theirs.error.status == "NOT_FOUND" and runs == []


@pytest.mark.parametrize("make", [InMemoryStore, lambda: SQLiteStore(":memory:")])
async def test_blank_and_non_string_tenants_are_refused_alike(make: Any) -> None:
    async with _opened(make()) as store:
        agent = bank(store, [], pay=True)
        for bad in ("", 0):
            with pytest.raises(Exception) as raised:
                await agent.run("pay bob 5", context={"tenant": bad})
            assert getattr(raised.value, "status", None) == "INVALID_ARGUMENT"


class _opened:
    def __init__(self, store: Any) -> None:
        self.store = store

    async def __aenter__(self) -> Any:
        if hasattr(self.store, "setup"):
            await self.store.setup()
        return self.store

    async def __aexit__(self, *exc: object) -> None:
        if hasattr(self.store, "close"):
            await self.store.close()


def test_claim_conflict_error_is_aborted() -> None:
    assert ClaimConflictError("x").status == "ABORTED"
