"""Parts and messages serialise themselves (camelCase wire JSON), so a paused request can go through
a queue of your own and come back to be claimed and answered as is."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from pydantic import BaseModel
from test_wire import domain_messages, json_messages, parts_strategy

from interlock import InMemoryStore, Message, PromptAgent, Resume, ToolContext, tool
from interlock.agents._host import Host
from interlock.errors import InvalidArgumentError
from interlock.interrupts._tokens import TokenSigner
from interlock.messages import message_from_json
from interlock.parts import (
    CustomPart,
    DataPart,
    MediaPart,
    Part,
    ReasoningPart,
    ResourcePart,
    TextPart,
    ToolRequestPart,
    ToolResponsePart,
    part_from_json,
)
from interlock.testing import ScriptedModel

EXAMPLES: list[tuple[Part, dict[str, Any]]] = [
    (TextPart(text="hi", metadata={"k": 1}), {"text": "hi", "metadata": {"k": 1}}),
    (ReasoningPart(reasoning="hmm"), {"reasoning": "hmm"}),
    (MediaPart(url="data:,x", content_type="text/plain"), {"media": {"url": "data:,x", "contentType": "text/plain"}}),
    (
        ToolRequestPart(name="pay", ref="r1", input={"to": "bob"}, metadata={"interrupt": True}),
        {"toolRequest": {"name": "pay", "ref": "r1", "input": {"to": "bob"}}, "metadata": {"interrupt": True}},
    ),
    (
        ToolResponsePart(name="pay", ref="r1", output="ok"),
        {"toolResponse": {"name": "pay", "ref": "r1", "output": "ok"}},
    ),
    (DataPart(data=None), {"data": None}),
    (CustomPart(value={"x": 1}), {"custom": {"x": 1}}),
    (ResourcePart(uri="file:///a", extra={"later": True}), {"resource": {"uri": "file:///a"}, "later": True}),
]


@pytest.mark.parametrize(("part", "wire"), EXAMPLES, ids=[type(p).__name__ for p, _ in EXAMPLES])
def test_each_kind_writes_camel_case_json_and_reads_it_back(part: Part, wire: dict[str, Any]) -> None:
    assert part.to_json() == wire
    assert type(part).from_json(json.loads(json.dumps(part.to_json()))) == part
    assert part_from_json(wire) == part


def test_from_json_refuses_another_kind_and_what_is_not_a_part() -> None:
    with pytest.raises(InvalidArgumentError, match="expected a ToolRequestPart, got a TextPart"):
        ToolRequestPart.from_json({"text": "hi"})
    for bad in ({"nope": 1}, [1], "text", {"toolRequest": "x"}):
        with pytest.raises(InvalidArgumentError):
            part_from_json(bad)
    with pytest.raises(InvalidArgumentError, match="role"):
        Message.from_json({"content": []})


@given(parts_strategy)
def test_any_part_round_trips_through_its_own_methods(part: Part) -> None:
    assert type(part).from_json(json.loads(json.dumps(part.to_json()))) == part


@given(domain_messages)
def test_any_message_round_trips_through_its_own_methods(message: Message) -> None:
    assert Message.from_json(json.loads(json.dumps(message.to_json()))) == message


@given(json_messages())
def test_wire_messages_read_and_write_back_unchanged(wire: dict[str, Any]) -> None:
    assert message_from_json(wire).to_json() == Message.from_json(wire).to_json()
    assert Message.from_json(Message.from_json(wire).to_json()) == Message.from_json(wire)


class Transfer(BaseModel):
    to: str
    amount: int


class Approval(BaseModel):
    approved: bool


@tool
async def transfer_money(req: Transfer, ctx: ToolContext[Approval], approval: Approval | None) -> str:
    """Move money; asks first."""
    if approval is None:
        ctx.interrupt({"to": req.to})
    return "sent" if approval.approved else "refused"


async def test_an_interrupt_goes_through_a_queue_and_is_claimed_as_is() -> None:
    """The paused request, its resume token included, survives a JSON queue; the answer built from it resumes."""
    asks = Message(
        role="model", content=[ToolRequestPart(name="transfer_money", ref="t1", input={"to": "bob", "amount": 5})]
    )
    agent = PromptAgent(
        "banker",
        ScriptedModel([asks, "done"]),
        tools=[transfer_money],
        store=InMemoryStore(),
        host=Host(resume_tokens=TokenSigner({"k1": b"q" * 32}), require_resume_tokens=True),
    )
    paused = await agent.run("send bob 5")
    queue: list[str] = [json.dumps({"snapshot": paused.snapshot_id, "part": p.to_json()}) for p in paused.interrupts]
    item = json.loads(queue.pop())
    part = ToolRequestPart.from_json(item["part"])
    assert part == paused.interrupts[0] and isinstance(part.meta("resumeToken"), str)
    call = transfer_money.interrupted(part)
    assert call is not None and call.input == Transfer(to="bob", amount=5)
    answer = call.restart(Approval(approved=True))
    sent = json.loads(json.dumps(answer.to_json()))  # the answer may travel too
    done = await agent.run(resume=Resume(restart=[ToolRequestPart.from_json(sent)]), snapshot_id=item["snapshot"])
    assert done.text == "done"
    state = (await agent.get_snapshot(done.snapshot_id)).state
    assert state is not None and state.messages[2].tool_responses[0].output == "sent"
