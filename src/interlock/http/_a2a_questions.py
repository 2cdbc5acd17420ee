"""An A2A task's input-required status as interlock interrupts, and the answers to them as the task's next message.

A remote A2A agent (:class:`~interlock.http.A2AAgent`) that goes ``TASK_STATE_INPUT_REQUIRED``
pauses its delegation call like any sub-agent (:mod:`interlock._engine.surfacing`): its
output is ``interrupted``, with one interrupt per question, and the delegation's
:class:`~interlock._engine.surfacing.Pause` keeps the task's id (``snapshotId``) and context
(``sessionId``) in the snapshot. With interlock's interrupts extension (the status message's
DataPart ``{"interrupts": [...]}``) each entry is an interrupt of its own, with the remote's
tool, ref, input, data and resume token, and its answer schema; without it the status
text is one free-text question whose answer is a string.

:class:`Question` is the tool that answers one of them (it never runs): its output and resume
schemas are the remote's, so an answer that does not fit is refused before anything is sent
(the inbox renders its form from them). :func:`answer_parts` turns the answers into the
message's parts: a DataPart ``{"answers": {ref: answer}}`` with the extension, a text part
otherwise.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, NoReturn, cast

from a2a.types import Message as A2AMessage
from a2a.types import Part as A2APart

from .. import metadata as md
from .._json_object import is_object
from ..errors import InvalidArgumentError, ToolInputError, ToolOutputError, UsageError
from ..inbox._answers import answer_schema
from ..interrupts._decisions import decision_of
from ..models import ToolDefinition
from ..models._chat_template import schema_errors
from ..parts import ToolRequestPart, ToolResponsePart
from ..tools._signature import Signature
from ..tools._tool import Tool
from ._a2a.tasks import data_part, from_value, text_part

A2A = "a2a"
"""The metadata key of a question's record: the remote's answer schema, decisions, and whether it is free text."""
FREE_TEXT_REF = "input"
"""The ref of the one question of a task whose agent does not speak the extension."""


def interlock_entries(message: A2AMessage | None) -> list[dict[str, Any]] | None:
    """The extension's interrupt entries of an input-required status message; ``None`` without the extension."""
    if message is None:
        return None
    for part in message.parts:
        value = from_value(part.data) if part.HasField("data") else None
        if is_object(value) and isinstance(value.get("interrupts"), list):
            entries: list[Any] = value["interrupts"]
            return [dict(e) for e in entries if is_object(e)]
    return None


def text_of(parts: Sequence[A2APart]) -> str:
    """The text parts of ``parts``, joined."""
    return "\n".join(p.text for p in parts if p.HasField("text"))


def questions(agent: str, message: A2AMessage | None) -> tuple[ToolRequestPart, ...]:
    """The interrupts an input-required task's status ``message`` asks (at least one)."""
    entries = interlock_entries(message)
    if entries:
        return tuple(_entry_question(e) for e in entries)
    text = text_of(message.parts) if message is not None else ""
    asked = text or f"The A2A agent {agent!r} needs more input."
    schema = answer_schema({"respond": {"output_schema": {"type": "string"}}})
    record = {"free": True, "answerSchema": schema, "decisions": ["respond"]}
    data = {"message": asked}
    return (ToolRequestPart(name=agent, ref=FREE_TEXT_REF, input={}, metadata={md.INTERRUPT: data, A2A: record}),)


def _entry_question(entry: Mapping[str, Any]) -> ToolRequestPart:
    tool, ref = str(entry.get("tool") or "input"), entry.get("ref")
    data: Any = entry.get(md.INTERRUPT)
    record: dict[str, Any] = {
        "free": False,
        "answerSchema": entry.get("answerSchema"),
        "decisions": entry.get("decisions") or [],
        "deadline": entry.get("deadline"),
    }
    meta: dict[str, Any] = {md.INTERRUPT: data if data not in (None, False) else True, A2A: record}
    if isinstance(entry.get(md.RESUME_TOKEN), str):
        meta[md.RESUME_TOKEN] = entry[md.RESUME_TOKEN]
    return ToolRequestPart(
        name=tool, ref=ref if isinstance(ref, str) and ref else tool, input=entry.get("input"), metadata=meta
    )


# answers ---------------------------------------------------------------------------------------


def answer_parts(entries: Sequence[ToolRequestPart | ToolResponsePart], extension: bool) -> list[A2APart]:
    """The parts of the message answering the task: its DataPart of answers, or the free-text answer."""
    if extension:
        return [data_part({"answers": {e.ref or e.name: _answer(e) for e in entries}})]
    if len(entries) != 1 or not isinstance(entries[0], ToolResponsePart):
        raise InvalidArgumentError("an A2A agent without interlock's extension takes one answer, as text (respond)")
    output: Any = entries[0].output
    return [text_part(output if isinstance(output, str) else json.dumps(output))]


def _answer(entry: ToolRequestPart | ToolResponsePart) -> dict[str, Any]:
    """One resume entry as the extension's answer object (``docs/a2a.md``)."""
    answer: dict[str, Any]
    if isinstance(entry, ToolResponsePart):
        denied = decision_of(entry) == "deny"
        answer = {"decision": "reject" if denied else "respond", "output": entry.output}
    else:
        resumed = entry.meta(md.RESUMED)
        approval = md.approval(resumed)
        decision = "approve" if approval is True else "reject" if approval is False else "restart"
        answer = {"decision": decision}
        payload = md.without_approval(resumed)
        if payload is not None and payload is not True:
            answer["payload"] = payload
    reason = entry.meta(md.REASON)
    if isinstance(reason, str) and answer["decision"] == "reject":
        answer["reason"] = reason
    token = md.resume_token(entry)
    if token is not None:
        answer[md.RESUME_TOKEN] = token
    return answer


# the tool that answers one question ------------------------------------------------------------


def _never(*_: object) -> NoReturn:
    raise UsageError("an A2A agent's question is answered, never run")


_SIGNATURE = Signature(
    input_type=Any, output_type=Any, resume_type=Any, takes_input=False, takes_ctx=False, takes_resume=False
)


def _schemas(answer_schema: Any) -> dict[str, Any]:
    """``{decision: schema of what it carries}``, read off the extension's ``answerSchema`` (one way per decision)."""
    ways: Any = answer_schema.get("oneOf", [answer_schema]) if is_object(answer_schema) else []
    found: dict[str, Any] = {}
    listed: list[Any] = cast(list[Any], ways) if isinstance(ways, list) else []
    for way in listed:
        props: Any = way.get("properties") if is_object(way) else None
        decision: Any = props.get("decision") if is_object(props) else None
        name: Any = decision.get("const") if is_object(decision) else None
        if isinstance(name, str) and is_object(props):
            carried: Any = props.get("output" if name == "respond" else "payload")
            found[name] = carried or None
    return found


class Question(Tool[Any, Any, Any]):
    """The tool that answers one question of a remote A2A task (it never runs): the remote's schemas are its own."""

    def __init__(self, part: ToolRequestPart, record: Mapping[str, Any]) -> None:
        schemas = _schemas(record.get("answerSchema"))
        decisions: Any = record.get("decisions")
        only_respond = cast(list[Any], decisions) == ["respond"] if isinstance(decisions, list) else False
        data = part.meta(md.INTERRUPT)
        about = data.get("message") or data.get("question") if is_object(data) else None
        description = str(about or f"answer {part.name!r} of the A2A agent")
        super().__init__(
            None if only_respond else _never,
            name=part.name,
            description=description,
            input_type=Any,
            output_type=Any,
            resume_type=Any,
            signature=_SIGNATURE,
        )
        self.output_schema: dict[str, Any] | None = schemas.get("respond")
        self.payload_schema: dict[str, Any] | None = schemas.get("approve") or schemas.get("restart")
        self.definition = ToolDefinition(name=part.name, description=description, output_schema=self.output_schema)

    @property
    def resume_schema(self) -> dict[str, Any] | None:
        return self.payload_schema

    def validate_input(self, raw: object) -> Any:
        return raw

    def validate_respond(self, output: object) -> Any:
        """The answer, checked against the remote's output schema; raises :class:`ToolOutputError`."""
        problems = schema_errors(output, self.output_schema) if self.output_schema else []
        if problems:
            raise ToolOutputError(self._message("the answer", problems), tool=self.name, details=problems)
        return output

    def validate_resume(self, resumed: object) -> Any:
        """A restart's payload, checked against the remote's payload schema; raises :class:`ToolInputError`."""
        payload = md.without_approval(resumed)
        if payload is None or payload is True:
            return None
        problems = schema_errors(payload, self.payload_schema) if self.payload_schema else []
        if problems:
            raise ToolInputError(self._message("the resume payload", problems), tool=self.name, details=problems)
        return payload

    def _message(self, what: str, problems: list[str]) -> str:
        return (
            f"{what} to {self.name!r} does not fit the answer schema its A2A agent declared: "
            f"{'; '.join(problems)} (nothing was sent to the agent)"
        )


def question_for(agent: str, part: ToolRequestPart) -> Question | None:
    """The :class:`Question` answering ``part``, a question the A2A agent ``agent`` asked and delegation surfaced."""
    record = part.meta(A2A)
    if not is_object(record) or md.agent_path(part)[-1:] != (agent,):
        return None
    return Question(part, record)
