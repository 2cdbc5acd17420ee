"""Interrupts in the stream: a turn that pauses streams its paused requests last, before its turn end.

Server-managed agents send them as a ``role: "tool"`` model chunk (as Genkit JS and Go do);
client-managed ones as a ``role: "model"`` chunk with the paused message's index, so a client
that rebuilds history from chunks (Genkit's Python client) keeps it exact. ``ModelChunk.interrupts``
collects them, from a local connection and from :class:`RemoteAgent` alike.
"""

from __future__ import annotations

from http_helpers import serve
from pydantic import BaseModel

from interlock import InMemoryStore, Message, PromptAgent, RemoteAgent, Resume, ToolContext, tool
from interlock._engine.io import StreamChunk, TurnEnd
from interlock.agents._host import Host
from interlock.http._server import AgentServer
from interlock.interrupts._tokens import TokenSigner
from interlock.models import ModelChunk
from interlock.parts import TextPart, ToolRequestPart
from interlock.testing import ScriptedModel


class Transfer(BaseModel):
    to: str
    amount: int


class Approval(BaseModel):
    approved: bool


@tool
async def transfer_money(req: Transfer, ctx: ToolContext[Approval], approval: Approval | None) -> str:
    """Move money; asks first."""
    if approval is None:
        ctx.interrupt({"to": req.to, "amount": req.amount})
    return "sent" if approval.approved else "refused"


@tool
def balance(account: str) -> str:
    """Read a balance (runs at once)."""
    return f"{account}: 100"


def pausing_model() -> ScriptedModel:
    """Streams some text, then asks for a transfer and a balance in one message."""
    asks = Message(
        role="model",
        content=[
            TextPart(text="Checking."),
            ToolRequestPart(name="transfer_money", ref="t1", input={"to": "bob", "amount": 25}),
            ToolRequestPart(name="balance", ref="b1", input="main"),
        ],
    )
    return ScriptedModel([asks, "done"], chunks=[[ModelChunk(content=[TextPart(text="Checking.")])]])


def interrupts_of(chunks: list[StreamChunk]) -> list[ToolRequestPart]:
    return [p for c in chunks if isinstance(c, ModelChunk) for p in c.interrupts]


async def test_a_local_connection_streams_the_interrupts_last() -> None:
    agent = PromptAgent(
        "banker",
        pausing_model(),
        tools=[transfer_money, balance],
        store=InMemoryStore(),
        host=Host(resume_tokens=TokenSigner({"k1": b"x" * 32})),
    )
    conn = agent.connect()
    await conn.send("send bob 25")
    await conn.close()
    chunks = [c async for c in conn]
    out = await conn.output()
    assert out.finish_reason == "interrupted"
    *_, last_model, end = chunks
    assert isinstance(last_model, ModelChunk) and last_model.role == "tool"
    assert end == TurnEnd(snapshot_id=out.snapshot_id, finish_reason="interrupted")
    # only the paused request (not its finished sibling), as committed: with its resume token
    assert interrupts_of(chunks) == last_model.content == out.interrupts
    (paused,) = last_model.interrupts
    assert paused.name == "transfer_money" and isinstance(paused.meta("resumeToken"), str)
    # the streamed part answers the turn as is
    call = transfer_money.interrupted(paused)
    assert call is not None and call.input == Transfer(to="bob", amount=25)
    done = await agent.run(resume=Resume(restart=[call.restart(Approval(approved=True))]), snapshot_id=out.snapshot_id)
    assert done.text == "done"


async def test_a_finished_turn_streams_no_interrupts() -> None:
    agent = PromptAgent("banker", ScriptedModel(["hi"]), tools=[balance], store=InMemoryStore())
    chunks: list[StreamChunk] = []
    out = await agent.run("hello", on_chunk=chunks.append)
    assert out.finish_reason == "stop"
    assert interrupts_of(chunks) == []
    assert [type(c).__name__ for c in chunks] == ["TurnEnd"]


async def test_client_managed_agents_fold_the_interrupts_into_the_paused_message() -> None:
    agent = PromptAgent("banker", pausing_model(), tools=[transfer_money, balance])
    chunks: list[StreamChunk] = []
    out = await agent.run("send bob 25", on_chunk=chunks.append)
    model_chunks = [c for c in chunks if isinstance(c, ModelChunk)]
    text, interrupts = model_chunks
    assert text.role == interrupts.role == "model"
    assert interrupts.index == text.index == 0, "the same message as the streamed text"
    assert interrupts.interrupts == out.interrupts
    assert out.state is not None and out.state.messages[-1].interrupts == out.interrupts


async def test_remote_agent_streams_the_interrupts() -> None:
    store = InMemoryStore()
    agent = PromptAgent("banker", pausing_model(), tools=[transfer_money, balance], store=store)
    async with serve(AgentServer([agent])) as base, RemoteAgent(f"{base}/banker") as remote:
        chunks: list[StreamChunk] = []
        out = await remote.run("send bob 25", on_chunk=chunks.append)
        assert out.finish_reason == "interrupted"
        streamed = interrupts_of(chunks)
        assert streamed == out.interrupts and [p.ref for p in streamed] == ["t1"]
        tool_chunks = [c for c in chunks if isinstance(c, ModelChunk) and c.role == "tool"]
        assert [c.interrupts for c in tool_chunks] == [streamed]
        call = transfer_money.interrupted(streamed[0])
        assert call is not None
        done = await remote.run(
            resume=Resume(restart=[call.restart(Approval(approved=False))]), snapshot_id=out.snapshot_id
        )
        assert done.text == "done"
        snap = await agent.get_snapshot(done.snapshot_id)
        assert snap is not None and snap.state is not None
        assert snap.state.messages[2].tool_responses[0].output == "refused"
