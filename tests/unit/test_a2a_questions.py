"""An A2A task's questions as interrupts, and the answers to them as the task's next message's parts."""

from __future__ import annotations

from a2a.helpers import get_data_parts, get_text_parts, new_data_part, new_text_part
from a2a.types import Message, Role

from interlock import metadata as md
from interlock.http._a2a_questions import answer_parts, question_for, questions
from interlock.inbox._answers import answer_schema
from interlock.interrupts import Decision
from interlock.parts import ToolRequestPart

SCHEMA = answer_schema(
    {
        "respond": {"output_schema": {"type": "string"}},
        "approve": {"payload_schema": {"type": "object", "properties": {"approved": {"type": "boolean"}}}},
        "reject": {"payload_schema": None, "reason": True},
    }
)


def status(*parts: object) -> Message:
    return Message(message_id="s", role=Role.ROLE_AGENT, parts=list(parts))  # type: ignore[arg-type]


def surfaced(part: ToolRequestPart, agent: str) -> ToolRequestPart:
    meta = {
        **(part.metadata or {}),
        md.AGENT_PATH: [agent],
        md.SURFACED_FROM: {"name": f"delegate_to_{agent}", "ref": "d1"},
    }
    return ToolRequestPart(name=part.name, ref=part.ref, input=part.input, metadata=meta)


def test_the_extensions_entries_become_interrupts_with_their_schema_and_token() -> None:
    entry = {"tool": "transfer", "ref": "t1", "input": {"to": "a"}, "interrupt": {"message": "ok?"}}
    entry |= {"answerSchema": SCHEMA, "decisions": ["respond", "approve", "reject"], "resumeToken": "tok"}
    [part] = questions("banker", status(new_text_part("asks"), new_data_part({"interrupts": [entry]})))
    assert (part.name, part.ref, part.input, part.meta(md.INTERRUPT)) == (
        "transfer",
        "t1",
        {"to": "a"},
        {"message": "ok?"},
    )
    assert md.resume_token(part) == "tok"
    question = question_for("banker", surfaced(part, "banker"))
    assert question is not None and not question.is_interrupt_only
    assert question.definition.output_schema == {"type": "string"}
    assert question.resume_schema == {"type": "object", "properties": {"approved": {"type": "boolean"}}}
    assert question_for("other", surfaced(part, "banker")) is None

    approve = Decision.restart({"approved": True}, decision="approve").answer(part)
    [sent] = answer_parts([approve], extension=True)
    assert get_data_parts([sent]) == [
        {"answers": {"t1": {"decision": "approve", "payload": {"approved": True}, "resumeToken": "tok"}}}
    ]
    deny = Decision.respond("no", decision="deny").answer(part)
    assert get_data_parts(answer_parts([deny], extension=True)) == [
        {"answers": {"t1": {"decision": "reject", "output": "no", "resumeToken": "tok"}}}
    ]


def test_a_plain_a2a_question_is_free_text_answered_as_text() -> None:
    [part] = questions("bookings", status(new_text_part("Which reference?")))
    assert (part.name, part.meta(md.INTERRUPT)) == ("bookings", {"message": "Which reference?"})
    question = question_for("bookings", surfaced(part, "bookings"))
    assert question is not None and question.is_interrupt_only
    assert question.definition.output_schema == {"type": "string"}
    answer = Decision.respond("BK-1").answer(part)
    assert get_text_parts(answer_parts([answer], extension=False)) == ["BK-1"]
