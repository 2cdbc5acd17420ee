"""The chat handle and errors that raise, local and remote alike (one implementation over the agent interface)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from http_helpers import serve
from pydantic import BaseModel

from interlock import InMemoryStore, Message, PromptAgent, RemoteAgent, ToolContext, tool
from interlock._engine.io import AgentError, AgentFinishReason, StreamChunk, TurnEnd
from interlock.agents._host import Host
from interlock.agents._interface import AgentAPI
from interlock.errors import InvalidArgumentError, NotFoundError, SnapshotNotFoundError
from interlock.http._server import AgentServer
from interlock.interrupts._signing import Keyring
from interlock.models import ModelChunk
from interlock.parts import ToolRequestPart
from interlock.records._sessions import SnapshotStatus
from interlock.testing import ScriptedModel


class Transfer(BaseModel):
    to: str
    amount: int


class Approval(BaseModel):
    approved: bool


RUNS: list[tuple[Transfer, Approval]] = []


@tool
async def transfer_money(req: Transfer, ctx: ToolContext[Approval], approval: Approval | None) -> str:
    """Move money; asks first."""
    if approval is None:
        ctx.interrupt({"to": req.to})
    RUNS.append((req, approval))
    return "sent" if approval.approved else "refused"


def ask(ref: str = "t1") -> Message:
    return Message(
        role="model", content=[ToolRequestPart(name="transfer_money", ref=ref, input={"to": "bob", "amount": 5})]
    )


def banker(store: InMemoryStore | None, *replies: Message | str, **options: Any) -> PromptAgent:
    return PromptAgent("banker", ScriptedModel(list(replies)), tools=[transfer_money], store=store, **options)


@pytest_asyncio.fixture(params=["local", "remote"])
async def wrap(request: pytest.FixtureRequest) -> AsyncIterator[Any]:
    """``wrap(agent)`` gives the agent itself (local) or a RemoteAgent for it served by uvicorn (remote)."""
    RUNS.clear()
    served: list[PromptAgent] = []
    if request.param == "local":

        def local(agent: PromptAgent) -> AgentAPI:
            return agent

        yield local
        return

    class Late:
        """An ASGI app serving whatever agents the test builds, once it has built them."""

        async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
            await AgentServer(served)(scope, receive, send)

    remotes: list[RemoteAgent] = []
    async with serve(Late()) as base:

        def remote(agent: PromptAgent) -> AgentAPI:
            served.append(agent)
            mode = "server" if agent.store is not None else "client"
            remotes.append(RemoteAgent(f"{base}/{agent.name}", state_management=mode))
            return remotes[-1]

        yield remote
        for r in remotes:
            await r.aclose()


async def test_a_chat_tracks_the_snapshot_through_an_interrupt(wrap: Any) -> None:
    agent = wrap(banker(InMemoryStore(), ask(), "done", "anything else?"))
    chat = agent.chat()
    assert (chat.snapshot_id, chat.interrupts, chat.last) == (None, [], None)
    paused = await chat.send("send bob 5")
    assert paused.finish_reason == AgentFinishReason.INTERRUPTED == "interrupted"
    assert chat.snapshot_id == paused.snapshot_id and chat.session_id == paused.session_id
    (part,) = chat.interrupts
    call = transfer_money.interrupted(part)
    assert call is not None and call.input == Transfer(to="bob", amount=5)
    done = await chat.resume(restart=[call.restart(Approval(approved=True))])
    assert done.text == "done" and chat.interrupts == [] and chat.snapshot_id == done.snapshot_id
    after = await chat.send("thanks")
    assert after.text == "anything else?" and after.session_id == paused.session_id
    snap = await agent.get_snapshot(after.snapshot_id)
    assert snap.parent_id == done.snapshot_id and snap.status == SnapshotStatus.COMPLETED
    assert snap.state is not None and [m.role for m in snap.state.messages] == [
        "user", "model", "tool", "model", "user", "model"
    ]  # fmt: skip
    assert RUNS == [(Transfer(to="bob", amount=5), Approval(approved=True))]


async def test_a_chat_tracks_client_managed_state(wrap: Any) -> None:
    agent = wrap(banker(None, ask(), "done", "bye", host=Host(state_signing=Keyring({"k1": b"k" * 32}))))
    chat = agent.chat()
    paused = await chat.send("send bob 5")
    assert chat.snapshot_id is None and chat.state is not None and chat.state == paused.state
    call = transfer_money.interrupted(chat.interrupts[0])
    assert call is not None
    await chat.resume(respond=[call.respond("sent by the back office")])
    after = await chat.send("bye")
    assert after.text == "bye" and chat.state is not None
    assert [m.role for m in chat.state.messages] == ["user", "model", "tool", "model", "user", "model"]
    assert RUNS == [], "a respond does not run the tool"


async def test_a_refused_resume_raises_with_the_output_and_the_interrupt_stays(wrap: Any) -> None:
    agent = wrap(banker(InMemoryStore(), ask(), "done"))
    chat = agent.chat()
    paused = await chat.send("send bob 5")
    (part,) = chat.interrupts
    stray = ToolRequestPart(name="transfer_money", ref="nope", input=part.input, metadata={"resumed": True})
    with pytest.raises(AgentError) as raised:
        await chat.resume(restart=[stray])
    error = raised.value
    assert isinstance(error, InvalidArgumentError), "also an instance of its status's class"
    assert error.status == "INVALID_ARGUMENT" and "not found in session history" in error.message
    assert error.output.finish_reason == "failed" and error.snapshot_id == paused.snapshot_id
    assert chat.snapshot_id == paused.snapshot_id and chat.interrupts == [part]
    call = transfer_money.interrupted(chat.interrupts[0])
    assert call is not None
    done = await chat.resume(restart=[call.restart(Approval(approved=False))])
    assert done.text == "done" and RUNS == [(Transfer(to="bob", amount=5), Approval(approved=False))]


async def test_raise_on_error_false_returns_the_failed_output(wrap: Any) -> None:
    agent = wrap(banker(InMemoryStore(), ask()))
    paused = await agent.run("send bob 5")
    stray = ToolRequestPart(name="transfer_money", ref="nope", input={}, metadata={"resumed": True})
    chat = agent.chat(snapshot_id=paused.snapshot_id, raise_on_error=False)
    out = await chat.resume(restart=[stray])
    assert out.finish_reason == "failed" and out.error is not None and out.error.status == "INVALID_ARGUMENT"
    assert chat.last is out and chat.snapshot_id == paused.snapshot_id
    from_run = await agent.run("hi", snapshot_id="typo", raise_on_error=False)
    assert from_run.error is not None and from_run.error.status == "NOT_FOUND"
    with pytest.raises(NotFoundError) as raised:
        await agent.run("hi", snapshot_id="typo")
    assert isinstance(raised.value, AgentError) and raised.value.output.finish_reason == "failed"


async def test_streaming_turns_track_the_chat_and_stream_the_interrupt(wrap: Any) -> None:
    agent = wrap(banker(InMemoryStore(), ask(), "done"))
    chat = agent.chat()
    turn = chat.send_stream("send bob 5")
    chunks: list[StreamChunk] = [c async for c in turn]
    paused = await turn.output()
    assert await turn.output() == paused, "asking again gives the same output"
    streamed = [p for c in chunks if isinstance(c, ModelChunk) for p in c.interrupts]
    assert streamed == chat.interrupts == paused.interrupts
    assert chunks[-1] == TurnEnd(snapshot_id=paused.snapshot_id, finish_reason="interrupted")
    call = transfer_money.interrupted(streamed[0])
    assert call is not None
    seen: list[StreamChunk] = []
    done = await chat.resume(restart=[call.restart(Approval(approved=True))], on_chunk=seen.append)
    assert done.text == "done" and isinstance(seen[-1], TurnEnd) and chat.snapshot_id == done.snapshot_id


async def test_load_chat_continues_a_stored_snapshot_from_another_agent_object(wrap: Any) -> None:
    store = InMemoryStore()
    first = await wrap(banker(store, ask())).run("send bob 5")
    again = wrap(banker(store, "done", "more"))
    chat = await again.load_chat(snapshot_id=first.snapshot_id)
    assert chat.snapshot is not None and chat.snapshot.snapshot_id == first.snapshot_id
    assert chat.interrupts == first.interrupts
    call = transfer_money.interrupted(chat.interrupts[0])
    assert call is not None
    assert (await chat.resume(restart=[call.restart(Approval(approved=True))])).text == "done"
    by_session = await again.load_chat(session_id=first.session_id)
    assert by_session.interrupts == [] and by_session.snapshot_id == chat.snapshot_id
    assert (await by_session.send("more?")).text == "more"
    with pytest.raises(SnapshotNotFoundError):
        await again.load_chat(snapshot_id="typo")


async def test_missing_snapshots_are_not_found(wrap: Any) -> None:
    agent = wrap(banker(InMemoryStore(), ask(), "done"))
    for lookup in (agent.get_snapshot("typo"), agent.pending_interrupts("typo"), agent.get_latest_snapshot("typo")):
        with pytest.raises(SnapshotNotFoundError) as raised:
            await lookup
        assert raised.value.status == "NOT_FOUND"
    paused = await agent.run("send bob 5")
    assert [p.ref for p in await agent.pending_interrupts(paused.snapshot_id)] == ["t1"]
    call = transfer_money.interrupted(paused.interrupts[0])
    assert call is not None
    await agent.chat(snapshot_id=paused.snapshot_id).resume(restart=[call.restart(Approval(approved=True))])
    assert await agent.pending_interrupts(paused.snapshot_id) == [], "answered: it waits on nothing"


async def test_bad_chat_input_is_refused_before_anything_runs() -> None:
    store = InMemoryStore()
    agent = banker(store, "never")
    chat = agent.chat()
    with pytest.raises(InvalidArgumentError, match="chat.resume"):
        chat.send_stream(None)
    with pytest.raises(InvalidArgumentError, match="at least one"):
        await chat.resume()
    with pytest.raises(InvalidArgumentError):
        await chat.send(12345)  # pyright: ignore[reportArgumentType]
    assert await store.list() == [] and chat.last is None
