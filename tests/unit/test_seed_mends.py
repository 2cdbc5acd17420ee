"""Seed fidelity: small mends a seed-by-seed audit found (each failed before its fix)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel
from where import ROOT

from interlock import (
    Inbox,
    InterruptedCall,
    Message,
    PromptAgent,
    Resume,
    SessionStore,
    TextPart,
    ToolRequestPart,
    interrupt_tool,
)
from interlock import metadata as md
from interlock.errors import InvalidArgumentError
from interlock.interrupts._plan import interrupt_as
from interlock.parts import DataPart, MediaPart, ReasoningPart, ToolResponsePart
from interlock.testing import ScriptedModel

DOCS = ROOT / "docs"


class Question(BaseModel):
    text: str


class Answer(BaseModel):
    account: str


ask = interrupt_tool(
    "ask", input=Question, output=Answer, description="Ask which account.", data=lambda q: {"text": q.text}
)
ASK = Message(
    role="model", content=[TextPart(text="let me ask"), ToolRequestPart(name="ask", ref="q1", input={"text": "Which?"})]
)


def _claimed(part: ToolRequestPart) -> InterruptedCall[Question, Answer, None]:
    call = ask.interrupted(part)
    assert call is not None
    return call


async def _paused(store: SessionStore) -> Any:
    agent = PromptAgent("asker", ScriptedModel([ASK, "thanks"]), tools=[ask], store=store)
    out = await agent.run("which account?")
    assert out.finish_reason == "interrupted", out
    return agent, out


async def test_every_part_kind_answers_is_interrupt(store: SessionStore) -> None:
    _agent, out = await _paused(store)
    message = out.message
    assert message is not None
    assert [p.is_interrupt for p in message.content] == [False, True]  # the Go seed's loop, on any part
    others = [
        TextPart(text="t"),
        ReasoningPart(reasoning="r"),
        MediaPart(url="data:,x"),
        DataPart(data={}),
        ToolResponsePart(name="ask", ref="q1", output={}),
    ]
    assert not any(p.is_interrupt for p in others)


async def test_a_paused_snapshot_is_completed_with_finish_reason_interrupted(store: SessionStore) -> None:
    _agent, out = await _paused(store)
    snap = await store.load(out.snapshot_id)
    assert snap is not None and snap.status == "completed" and snap.finish_reason == "interrupted"
    for page in ("concepts/interrupts.md", "concepts/snapshots.md"):
        text = (DOCS / page).read_text()
        assert "status `interrupted`" not in text and "`interrupted`, `completed`" not in text, page


async def test_interrupt_as_and_data_as_raise_invalid_argument_naming_the_field(store: SessionStore) -> None:
    agent, out = await _paused(store)
    [part] = out.interrupts

    class Wants(BaseModel):
        amount: int

    with pytest.raises(InvalidArgumentError, match="'amount'"):
        interrupt_as(Wants, part)
    with pytest.raises(InvalidArgumentError, match="not waiting for an answer|interrupted tool request"):
        interrupt_as(Wants, TextPart(text="x"))
    with pytest.raises(InvalidArgumentError, match="'amount'"):
        _claimed(part).data_as(Wants)
    [item] = await Inbox(store, agents=[agent]).pending()
    with pytest.raises(InvalidArgumentError, match="'amount'"):
        item.data_as(Wants)


async def test_a_model_reply_with_a_lone_surrogate_is_refused_on_every_store(store: SessionStore) -> None:
    agent = PromptAgent("echo", ScriptedModel(["bad \ud800 text"]), store=store)
    first = await PromptAgent("echo", ScriptedModel(["hello"]), store=store).run("hi")
    assert first.session_id is not None
    before = await store.latest(first.session_id)
    out = await agent.run("again", session_id=first.session_id, raise_on_error=False)
    assert out.error is not None and out.error.status == "INVALID_ARGUMENT", out.error
    assert "model's reply" in out.error.message and "U+D800" in out.error.message
    after = await store.latest(first.session_id)
    assert after is not None and before is not None and after.snapshot_id == before.snapshot_id


async def test_restarting_an_interrupt_only_tool_is_refused_saying_respond(store: SessionStore) -> None:
    agent, out = await _paused(store)
    [part] = out.interrupts
    before = await store.load(out.snapshot_id)
    restart = Resume(restart=[ToolRequestPart(name="ask", ref="q1", input=part.input, metadata={md.RESUMED: True})])
    again = await agent.run(resume=restart, snapshot_id=out.snapshot_id, raise_on_error=False)
    assert again.error is not None and again.error.status == "INVALID_ARGUMENT", again
    assert "interrupt-only" in again.error.message and "respond" in again.error.message
    assert await store.load(out.snapshot_id) == before
    answered = Resume(respond=[_claimed(part).respond(Answer(account="main"))])
    done = await agent.run(resume=answered, snapshot_id=out.snapshot_id)
    assert done.finish_reason == "stop"


async def test_a_message_with_a_resume_is_failed_precondition_as_genkit_answers(store: SessionStore) -> None:
    agent, out = await _paused(store)
    [part] = out.interrupts
    answered = Resume(respond=[_claimed(part).respond(Answer(account="main"))])
    both = await agent.run("and this", resume=answered, snapshot_id=out.snapshot_id, raise_on_error=False)
    assert both.error is not None and both.error.status == "FAILED_PRECONDITION", both
