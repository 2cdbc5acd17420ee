from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest
from pydantic import BaseModel

from interlock import (
    AgentInput,
    AgentResult,
    CustomAgent,
    InMemoryStore,
    Message,
    PromptAgent,
    Resume,
    TextPart,
    ToolContext,
    ToolRequestPart,
    TurnContext,
    tool,
)
from interlock._engine.invocation import SessionRunner
from interlock._engine.io import TurnEnd
from interlock.agents._host import Host
from interlock.errors import FailedPreconditionError, InvalidArgumentError, UsageError
from interlock.models import ModelChunk
from interlock.records._sessions import EXPIRY, Artifact, CustomPatch, SessionState, Snapshot, utcnow
from interlock.testing import ScriptedModel
from interlock.tools._middleware import approve, deny, is_hold, tool_approval


def call(name: str, ref: str = "r1", **args: Any) -> Message:
    return Message(role="model", content=[ToolRequestPart(name=name, ref=ref, input=args)])


class Transfer(BaseModel):
    to: str
    amount: float


class Approval(BaseModel):
    approved: bool


def make_transfer(log: list[str]) -> Any:
    @tool
    async def transfer(req: Transfer, ctx: ToolContext[Any], approval: Approval | None) -> str:
        """Move money."""
        if approval is None:
            ctx.interrupt({"to": req.to, "amount": req.amount})
        log.append(f"{req.to}:{req.amount}:{approval.approved}")
        return "sent" if approval.approved else "cancelled"

    return transfer


# ---------------------------------------------------------------- init misuse is thrown


async def test_state_sent_to_store_agent_raises() -> None:
    agent = PromptAgent("a", ScriptedModel(["hi"]), store=InMemoryStore())
    with pytest.raises(UsageError, match="Cannot send 'state' to agent 'a'") as info:
        await agent.run("hello", state=SessionState())
    assert info.value.status == "FAILED_PRECONDITION"


@pytest.mark.parametrize("kw", [{"session_id": "s"}, {"snapshot_id": "x"}])
async def test_ids_sent_to_client_agent_raise(kw: dict[str, Any]) -> None:
    agent = PromptAgent("a", ScriptedModel(["hi"]))
    with pytest.raises(UsageError, match="has no store configured"):
        await agent.run("hello", **kw)


async def test_snapshot_of_another_session_raises_invalid_argument() -> None:
    agent = PromptAgent("a", ScriptedModel(["one", "two"]), store=InMemoryStore())
    first = await agent.run("hi", session_id="mine")
    with pytest.raises(InvalidArgumentError, match="does not belong to session theirs"):
        await agent.run("again", snapshot_id=first.snapshot_id, session_id="theirs")


async def test_missing_input_is_refused() -> None:
    agent = PromptAgent("a", ScriptedModel(["hi"]))
    with pytest.raises(InvalidArgumentError, match="message or resume is required"):
        await agent.run()


# ---------------------------------------------------------------- graceful failures


async def test_failed_turn_returns_last_good_state_client_managed() -> None:
    @tool
    def boom(input: dict[str, Any]) -> str:
        raise RuntimeError("disk full")

    agent = PromptAgent("a", ScriptedModel(["first", call("boom")]), tools=[boom])
    first = await agent.run("one")
    assert first.state is not None
    out = await agent.run("two", state=first.state, raise_on_error=False)
    assert out.finish_reason == "failed"
    assert out.error is not None and out.error.status == "INTERNAL" and "disk full" in out.error.message
    assert out.state is not None
    assert [m.text for m in out.state.messages] == ["one", "first"]
    assert out.state.session_id == first.state.session_id


async def test_failed_turn_points_at_last_good_snapshot() -> None:
    store = InMemoryStore()
    agent = PromptAgent("a", ScriptedModel(["first"]), store=store)
    first = await agent.run("one")
    out = await agent.run("two", snapshot_id=first.snapshot_id, raise_on_error=False)  # the script has no second answer
    assert out.finish_reason == "failed"
    assert out.snapshot_id == first.snapshot_id
    assert len(await store.list()) == 1
    with pytest.raises(Exception, match="call 2 has none"):
        out.raise_for_error()


async def test_failure_stops_later_inputs_and_ends_turn_with_failed() -> None:
    agent = PromptAgent("a", ScriptedModel([]))
    conn = agent.connect()
    await conn.send("one")
    await conn.send("two")
    await conn.close()
    chunks = [c async for c in conn]
    assert chunks == [TurnEnd(finish_reason="failed")]
    assert (await conn.output()).finish_reason == "failed"


async def test_unresumable_and_missing_snapshots_fail_gracefully() -> None:
    store = InMemoryStore()
    agent = PromptAgent("a", ScriptedModel([]), store=store)
    out = await agent.run("x", snapshot_id="nope", raise_on_error=False)
    assert out.error is not None and out.error.status == "NOT_FOUND"
    await store.save("p", lambda _: _pending("p", "s"))
    out = await agent.run("x", snapshot_id="p", raise_on_error=False)
    assert out.error is not None and "is not resumable (status: pending)" in out.error.message


def _pending(snapshot_id: str, session_id: str) -> Any:
    from interlock import Snapshot

    return Snapshot(snapshot_id=snapshot_id, session_id=session_id, status="pending", heartbeat_at=utcnow())


# ---------------------------------------------------------------- transforms


async def test_state_transform_redacts_output_and_snapshots() -> None:
    def redact(state: SessionState) -> SessionState:
        custom: dict[str, Any] = state.custom or {}
        state.custom = {k: v for k, v in custom.items() if k != "secret"}
        return state

    async def fn(runner: SessionRunner) -> AgentResult | None:
        async def turn(_: AgentInput, __: TurnContext) -> None:
            runner.session.set_custom({"secret": "s3", "public": 1})

        await runner.run(turn)
        return None

    client = CustomAgent("c", fn, host=Host(state_transform=redact))
    conn = client.connect()
    await conn.send("go")
    await conn.close()
    chunks = [c async for c in conn]
    out = await conn.output()
    assert out.state is not None and out.state.custom == {"public": 1}
    assert chunks[0] == CustomPatch(ops=[{"op": "replace", "path": "", "value": {"public": 1}}])
    server = CustomAgent("s", fn, store=InMemoryStore(), host=Host(state_transform=redact))
    out = await server.run("go")
    snap = await server.get_snapshot(out.snapshot_id)
    assert snap is not None and snap.state is not None and snap.state.custom == {"public": 1}
    assert server.store is not None and out.snapshot_id is not None
    raw = await server.store.load(out.snapshot_id)
    assert raw is not None and raw.state is not None and raw.state.custom["secret"] == "s3"


async def test_chunk_transform_rewrites_and_drops() -> None:
    def only_text(chunk: Any) -> Any:
        if isinstance(chunk, ModelChunk):
            return ModelChunk(role=chunk.role, index=chunk.index, content=[TextPart(text=chunk.text.upper())])
        return None

    model = ScriptedModel(["hello"], chunks=[[ModelChunk(content=[TextPart(text="hel")])]])
    agent = PromptAgent("a", model, host=Host(chunk_transform=only_text))
    seen: list[Any] = []
    await agent.run("x", on_chunk=seen.append)
    assert seen == [ModelChunk(content=[TextPart(text="HEL")], index=0)]


async def test_failing_chunk_transform_fails_closed() -> None:
    def broken(chunk: Any) -> Any:
        raise RuntimeError("transform broke")

    model = ScriptedModel(["hello"], chunks=[[ModelChunk(content=[TextPart(text="secret")])]])
    out = await PromptAgent("a", model, host=Host(chunk_transform=broken)).run("x", raise_on_error=False)
    assert out.finish_reason == "failed" and out.error is not None and "transform broke" in out.error.message


# ---------------------------------------------------------------- interrupts across agent objects


async def test_interrupt_recovered_and_resumed_by_a_fresh_agent() -> None:
    store = InMemoryStore()
    log: list[str] = []
    transfer = make_transfer(log)
    first = PromptAgent("bank", ScriptedModel([call("transfer", to="bob", amount=5)]), tools=[transfer], store=store)
    out = await first.run("pay bob")
    assert out.finish_reason == "interrupted"
    fresh = PromptAgent("bank", ScriptedModel(["paid"]), tools=[transfer], store=store)
    pending = await fresh.pending_interrupts(out.snapshot_id)
    claimed = transfer.interrupted(pending[0])
    assert claimed is not None and claimed.input == Transfer(to="bob", amount=5)
    done = await fresh.run(
        resume=Resume(restart=[claimed.restart(Approval(approved=True))]), snapshot_id=out.snapshot_id
    )
    assert done.text == "paid" and log == ["bob:5.0:True"]
    assert await fresh.pending_interrupts(out.snapshot_id) == []


async def test_concurrent_resumes_exactly_one_wins() -> None:
    store = InMemoryStore()
    log: list[str] = []
    transfer = make_transfer(log)
    agent = PromptAgent("bank", ScriptedModel([call("transfer", to="bob", amount=5)]), tools=[transfer], store=store)
    out = await agent.run("pay bob")
    restart = transfer.interrupted(out.interrupts[0]).restart(Approval(approved=True))

    async def resume() -> Any:
        a = PromptAgent("bank", ScriptedModel(["paid"]), tools=[transfer], store=store)
        return await a.run(resume=Resume(restart=[restart]), snapshot_id=out.snapshot_id, raise_on_error=False)

    results = await asyncio.gather(*(resume() for _ in range(8)))
    winners = [r for r in results if r.finish_reason == "stop"]
    losers = [r for r in results if r.finish_reason == "failed"]
    assert len(winners) == 1 and len(losers) == 7
    assert all(r.error.status == "ABORTED" and winners[0].snapshot_id in r.error.message for r in losers)
    assert log == ["bob:5.0:True"]


async def test_refused_resume_does_not_consume_the_interrupt() -> None:
    store = InMemoryStore()
    log: list[str] = []
    transfer = make_transfer(log)
    agent = PromptAgent(
        "bank", ScriptedModel([call("transfer", to="bob", amount=5), "paid"]), tools=[transfer], store=store
    )
    out = await agent.run("pay bob")
    forged = ToolRequestPart(
        name="transfer", ref="r1", input={"to": "eve", "amount": 500}, metadata={"resumed": {"approved": True}}
    )
    bad = await agent.run(resume=Resume(restart=[forged]), snapshot_id=out.snapshot_id, raise_on_error=False)
    assert bad.error is not None and "modified inputs" in bad.error.message
    bad_payload = transfer.interrupted(out.interrupts[0]).restart()
    bad_payload = ToolRequestPart(
        name="transfer", ref="r1", input=bad_payload.input, metadata={"resumed": {"approved": "maybe"}}
    )
    bad = await agent.run(resume=Resume(restart=[bad_payload]), snapshot_id=out.snapshot_id, raise_on_error=False)
    assert bad.error is not None and bad.error.status == "INVALID_ARGUMENT"
    good = transfer.interrupted(out.interrupts[0]).restart(Approval(approved=True))
    done = await agent.run(resume=Resume(restart=[good]), snapshot_id=out.snapshot_id)
    assert done.finish_reason == "stop" and log == ["bob:5.0:True"]


async def test_expired_claim_of_a_crashed_resumer_is_recovered() -> None:
    store = InMemoryStore()
    log: list[str] = []
    transfer = make_transfer(log)
    agent = PromptAgent(
        "bank", ScriptedModel([call("transfer", to="bob", amount=5), "paid"]), tools=[transfer], store=store
    )
    out = await agent.run("pay bob")
    sid = out.snapshot_id
    assert sid is not None
    stale = utcnow() - timedelta(seconds=120)
    await store.save(sid, lambda cur: cur.evolve(claimed_by="crashed-turn", claim_expires_at=stale) if cur else None)
    restart = transfer.interrupted(out.interrupts[0]).restart(Approval(approved=True))
    done = await agent.run(resume=Resume(restart=[restart]), snapshot_id=sid)
    assert done.finish_reason == "stop"
    parent = await store.load(sid)
    assert parent is not None and parent.claimed_by == done.snapshot_id
    assert parent.metadata is not None and parent.metadata["reclaimedFrom"] == "crashed-turn"


async def test_fresh_claim_blocks_a_second_resume() -> None:
    store = InMemoryStore()
    transfer = make_transfer([])
    agent = PromptAgent(
        "bank", ScriptedModel([call("transfer", to="bob", amount=5), "paid"]), tools=[transfer], store=store
    )
    out = await agent.run("pay bob")
    sid = out.snapshot_id
    assert sid is not None
    await store.save(
        sid,
        lambda cur: (
            cur.evolve(claimed_by="running-turn", claim_expires_at=utcnow() + timedelta(seconds=60)) if cur else None
        ),
    )
    restart = transfer.interrupted(out.interrupts[0]).restart(Approval(approved=True))
    lost = await agent.run(resume=Resume(restart=[restart]), snapshot_id=sid, raise_on_error=False)
    assert lost.error is not None and lost.error.status == "ABORTED" and "running-turn" in lost.error.message


# ---------------------------------------------------------------- tool approval middleware


async def test_tool_approval_holds_approves_and_records_who() -> None:
    store = InMemoryStore()
    ran: list[str] = []

    @tool
    def delete_file(input: dict[str, Any]) -> str:
        ran.append(input["path"])
        return "deleted"

    @tool
    def list_files(input: dict[str, Any]) -> list[str]:
        return ["a.txt"]

    model = ScriptedModel([call("list_files"), call("delete_file", ref="r2", path="a.txt"), "done"])
    agent = PromptAgent(
        "fs", model, tools=[delete_file, list_files], middleware=[tool_approval(["list_files"])], store=store
    )
    out = await agent.run("clean up")
    assert out.finish_reason == "interrupted" and ran == []
    hold = out.interrupts[0]
    assert is_hold(hold) and delete_file.interrupted(hold) is None
    unapproved = ToolRequestPart(name="delete_file", ref="r2", input={"path": "a.txt"}, metadata={"resumed": True})
    again = await agent.run(resume=Resume(restart=[unapproved]), snapshot_id=out.snapshot_id)
    assert again.finish_reason == "interrupted" and ran == []
    done = await agent.run(
        resume=Resume(restart=[approve(hold)]), snapshot_id=again.snapshot_id, context={"identity": "alice"}
    )
    assert done.text == "done" and ran == ["a.txt"]
    snap = await store.load(done.snapshot_id or "")
    assert snap is not None and snap.metadata is not None
    assert snap.metadata["resume"]["by"] == "alice"
    assert snap.metadata["resume"]["restart"] == [
        {"name": "delete_file", "ref": "r2", "decision": "approve", "payload": None}
    ]


async def test_denied_hold_never_runs_the_tool() -> None:
    ran: list[str] = []

    class Out(BaseModel):
        ok: bool

    @tool
    def wipe(input: dict[str, Any]) -> Out:
        ran.append("wipe")
        return Out(ok=True)

    agent = PromptAgent(
        "a",
        ScriptedModel([call("wipe"), "ok, not wiping"]),
        tools=[wipe],
        middleware=[tool_approval()],
        store=InMemoryStore(),
    )
    out = await agent.run("wipe it")
    done = await agent.run(resume=Resume(respond=[deny(out.interrupts[0])]), snapshot_id=out.snapshot_id)
    assert done.text == "ok, not wiping" and ran == []


# ---------------------------------------------------------------- detach, heartbeat, abort


async def test_detach_heartbeats_and_completes() -> None:
    release = asyncio.Event()

    async def fn(runner: SessionRunner) -> AgentResult | None:
        async def turn(_: AgentInput, __: TurnContext) -> None:
            await release.wait()
            runner.session.add_artifacts(Artifact(name="report", parts=[TextPart(text="ok")]))

        await runner.run(turn)
        return None

    agent = CustomAgent("bg", fn, store=InMemoryStore(), host=Host(heartbeat_interval=0.02))
    out = await agent.run("work", detach=True)
    assert out.finish_reason == "detached" and out.snapshot_id
    first = await agent.get_snapshot(out.snapshot_id)
    assert first is not None and first.status == "pending"
    await asyncio.sleep(0.1)
    later = await agent.get_snapshot(out.snapshot_id)
    assert later is not None and later.heartbeat_at is not None and first.heartbeat_at is not None
    assert later.heartbeat_at > first.heartbeat_at
    release.set()
    final = await agent.wait(out.snapshot_id, timeout=2)
    assert final.status == "completed" and final.heartbeat_at is None
    assert final.state is not None and final.state.artifacts[0].name == "report"


async def test_stale_heartbeat_reads_expired_and_blocks_session_resume() -> None:
    store = InMemoryStore()
    agent = PromptAgent("a", ScriptedModel(["x"]), store=store)
    old = utcnow() - timedelta(seconds=90)
    await store.save("p", lambda _: _pending("p", "s").evolve(heartbeat_at=old))
    snap = await agent.get_snapshot("p")
    assert snap is not None and snap.status == "expired"
    await store.save("q", lambda _: _pending("q", "t"))
    out = await agent.run("hi", session_id="t", raise_on_error=False)
    assert out.error is not None and out.error.status == "FAILED_PRECONDITION" and "still running" in out.error.message


async def test_abort_cancels_the_background_task_promptly() -> None:
    cancelled = asyncio.Event()

    async def fn(runner: SessionRunner) -> AgentResult | None:
        async def turn(_: AgentInput, __: TurnContext) -> None:
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                cancelled.set()
                raise

        await runner.run(turn)
        return None

    agent = CustomAgent("bg", fn, store=InMemoryStore())
    out = await agent.run("work", detach=True)
    assert out.snapshot_id is not None
    await asyncio.sleep(0.02)
    assert await agent.abort(out.snapshot_id) == "pending"
    await asyncio.wait_for(cancelled.wait(), timeout=1)
    await asyncio.sleep(0.05)
    snap = await agent.get_snapshot(out.snapshot_id)
    assert snap is not None and snap.status == "aborted"
    assert await agent.abort(out.snapshot_id) == "aborted"
    assert await agent.abort("missing") is None


async def test_detach_without_store_raises() -> None:
    agent = PromptAgent("a", ScriptedModel(["x"]))
    with pytest.raises(UsageError, match="Detach is only supported when a session store is provided"):
        await agent.run("x", detach=True)


# ---------------------------------------------------------------- sessions


async def test_session_id_resume_walks_back_over_a_failed_leaf() -> None:
    store = InMemoryStore()
    agent = PromptAgent("a", ScriptedModel(["one", "two"]), store=store)
    first = await agent.run("1", session_id="s")
    from interlock import Snapshot
    from interlock.records._sessions import ErrorInfo

    failed = Snapshot(
        snapshot_id="f",
        session_id="s",
        parent_id=first.snapshot_id,
        status="failed",
        error=ErrorInfo(status="INTERNAL", message="x"),
    )
    await store.save("f", lambda _: failed)
    out = await agent.run("2", session_id="s")
    snap = await agent.get_snapshot(out.snapshot_id)
    assert snap is not None and snap.parent_id == first.snapshot_id


async def test_branching_session_can_be_refused() -> None:
    store = InMemoryStore(reject_branching=True)
    agent = PromptAgent("a", ScriptedModel(["r", "a", "b"]), store=store)
    root = await agent.run("root", session_id="s")
    await agent.run("a", snapshot_id=root.snapshot_id)
    await agent.run("b", snapshot_id=root.snapshot_id)
    with pytest.raises(FailedPreconditionError, match="branching"):
        await agent.get_snapshot(session_id="s")


async def test_tools_see_the_live_session_and_stream_custom_patches() -> None:
    @tool
    def remember(input: dict[str, Any], ctx: ToolContext[Any]) -> str:
        def add_fact(c: Any) -> dict[str, Any]:
            before: dict[str, Any] = c or {}
            return {**before, "fact": input["fact"]}

        assert ctx.session is not None
        ctx.session.update_custom(add_fact)
        return "noted"

    agent = PromptAgent("a", ScriptedModel([call("remember", fact="sky is blue"), "ok"]), tools=[remember])
    seen: list[Any] = []
    out = await agent.run("remember this", on_chunk=seen.append)
    assert out.state is not None and out.state.custom == {"fact": "sky is blue"}
    assert CustomPatch(ops=[{"op": "replace", "path": "", "value": {"fact": "sky is blue"}}]) in seen


def test_run_sync() -> None:
    out = PromptAgent("a", ScriptedModel(["hi there"])).run_sync("hello")
    assert out.text == "hi there" and out.finish_reason == "stop"


async def test_aborting_a_detached_resume_gives_the_interrupt_back() -> None:
    store = InMemoryStore()
    started = asyncio.Event()
    log: list[str] = []

    class Slow(BaseModel):
        approved: bool

    @tool
    async def slow_transfer(req: Transfer, ctx: ToolContext[Any], ok: Slow | None) -> str:
        """Pauses, then (once approved) takes a long time."""
        if ok is None:
            ctx.interrupt({"to": req.to})
        started.set()
        await asyncio.sleep(60)
        log.append("sent")
        return "sent"

    agent = PromptAgent(
        "bank", ScriptedModel([call("slow_transfer", to="bob", amount=5)]), tools=[slow_transfer], store=store
    )
    out = await agent.run("pay bob")
    restart = slow_transfer.interrupted(out.interrupts[0]).restart(Slow(approved=True))  # pyright: ignore[reportOptionalMemberAccess]
    bg = await agent.run(resume=Resume(restart=[restart]), snapshot_id=out.snapshot_id, detach=True)
    await asyncio.wait_for(started.wait(), timeout=2)
    assert bg.snapshot_id is not None and await agent.abort(bg.snapshot_id) == "pending"
    parent = None
    for _ in range(100):
        parent = await store.load(out.snapshot_id or "")
        if parent is not None and parent.claimed_by is None:
            break
        await asyncio.sleep(0.01)
    assert parent is not None and parent.claimed_by is None and log == []
    assert len(await agent.pending_interrupts(out.snapshot_id)) == 1


async def test_wait_wakes_on_the_store_and_when_a_heartbeat_goes_stale() -> None:
    store = InMemoryStore()
    agent = PromptAgent("waiter", ScriptedModel([]), store=store)
    soon_stale = utcnow() - EXPIRY + timedelta(seconds=0.3)  # no write follows: only the clock settles it
    await store.save(
        "p", lambda _: Snapshot(snapshot_id="p", session_id="s", status="pending", heartbeat_at=soon_stale)
    )
    await store.save("q", lambda _: Snapshot(snapshot_id="q", session_id="s", status="pending", heartbeat_at=utcnow()))

    stale = await agent.wait("p", timeout=5)

    assert stale.status == "expired"
    waiting = asyncio.ensure_future(agent.wait("q", timeout=5, interval=60))  # a poll this slow would miss it
    await asyncio.sleep(0.05)
    await store.save("q", lambda cur: cur.evolve(status="completed") if cur else None)
    done = await asyncio.wait_for(waiting, 1)
    assert done.status == "completed"


@pytest.mark.parametrize("instructions", [None, "be brief"])
async def test_history_reaches_the_model_without_being_shared_with_it(instructions: str | None) -> None:
    model = ScriptedModel(["one", "two"])
    agent = PromptAgent("chat", model, instructions=instructions, store=InMemoryStore())
    first = await agent.run("hi")
    model.requests[0].messages.append(Message.user("a model that keeps and changes its request"))

    second = await agent.run("again", session_id=first.session_id)

    system = [Message.system(instructions)] if instructions else []
    stored = [Message.user("hi"), Message.model("one"), Message.user("again")]
    assert [m.text for m in model.requests[1].messages] == [m.text for m in [*system, *stored]]
    snap = await agent.store.latest(second.session_id or "") if agent.store else None
    assert snap is not None and snap.state is not None
    assert [m.text for m in snap.state.messages] == ["hi", "one", "again", "two"]


async def test_the_turn_queue_hands_items_over_in_order_and_survives_a_cancelled_wait() -> None:
    from interlock._engine.io import Waiting

    queue: Waiting[int] = Waiting()
    queue.put_nowait(1)
    assert not queue.empty() and await queue.get() == 1 and queue.empty()
    reader = asyncio.ensure_future(queue.get())
    await asyncio.sleep(0)  # the reader waits
    queue.put_nowait(2)
    queue.put_nowait(3)
    assert await reader == 2 and await queue.get() == 3
    waiting = asyncio.ensure_future(queue.get())
    await asyncio.sleep(0)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    queue.put_nowait(4)  # nobody waits now: kept for the next reader
    assert await queue.get() == 4
