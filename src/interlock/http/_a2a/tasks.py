"""An A2A task read from interlock's snapshots, and an A2A message read as answers.

There is no A2A task store: a task *is* snapshots (:mod:`interlock.http._task_view`, the walk
MCP's tasks use too): its id is the snapshot id of the turn that started it, and every
process sees the same task. ``contextId`` is the session id.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from a2a.types import Message, Part, Role, Task, TaskState, TaskStatus
from google.protobuf import struct_pb2
from google.protobuf.json_format import ParseDict

from ... import metadata as md
from ..._json_object import is_object
from ...errors import InvalidArgumentError
from ...inbox._answers import Answer, answer_schema, parse_answer
from ...inbox._items import PendingInterrupt
from ...records._sessions import Snapshot
from .. import _task_view
from .._service import AgentService, Caller
from .._task_view import CANCEL_NOTES
from .._task_view import is_cancel as is_cancel

EXTENSION_URI = "urn:interlock:a2a:interrupts:v1"
"""The interlock interrupts extension: what an input-required task asks, and how to answer it (``docs/a2a.md``)."""
CANCEL_NOTE = CANCEL_NOTES[0]
"""What a CancelTask answers a canceled task's paused calls with (:func:`cancel_answer`: nothing runs)."""
STATES: dict[_task_view.TaskStatus, TaskState] = {
    "working": TaskState.TASK_STATE_WORKING,
    "input_required": TaskState.TASK_STATE_INPUT_REQUIRED,
    "completed": TaskState.TASK_STATE_COMPLETED,
    "failed": TaskState.TASK_STATE_FAILED,
    "cancelled": TaskState.TASK_STATE_CANCELED,
}


@dataclass(frozen=True, kw_only=True, slots=True)
class TaskView:
    """A task as the store has it (:class:`~interlock.http._task_view.TaskView`), with its A2A state."""

    task_id: str
    current: Snapshot
    state: TaskState
    answered: Snapshot | None = None
    """The last snapshot of the task that was answered (the current one's parent in the task), if any."""
    answer_meta: Mapping[str, Any] | None = None
    """What that answer recorded (``metadata.resume``: who, when, what)."""


async def follow(service: AgentService, agent: str, task_id: str, caller: Caller) -> TaskView:
    """The task ``task_id``: from its first snapshot through every resume to the current one."""
    view = await _task_view.follow(service, agent, task_id, caller)
    return TaskView(
        task_id=view.task_id,
        current=view.current,
        state=STATES[view.status],
        answered=view.answered,
        answer_meta=view.answer_meta,
    )


def cancel_answer(options: Mapping[str, Mapping[str, Any]]) -> Answer:
    """The answer a CancelTask gives one paused call (:func:`~interlock.http._task_view.cancel_answer`)."""
    return _task_view.cancel_answer(options, CANCEL_NOTE)


# A2A values ------------------------------------------------------------------------------------


def data_part(value: Any) -> Part:
    """A DataPart holding the JSON ``value``."""
    return Part(data=ParseDict(to_jsonable(value), struct_pb2.Value()))


def text_part(text: str) -> Part:
    return Part(text=text)


def task_of(view: TaskView, pending: list[PendingInterrupt], options: list[dict[str, dict[str, Any]]]) -> Task:
    """The A2A task for ``view``; an input-required one lists ``pending`` (with their ``options``) in a DataPart."""
    snap = view.current
    message = status_message(view, pending, options)
    return Task(id=view.task_id, context_id=snap.session_id, status=TaskStatus(state=view.state, message=message))


def status_message(
    view: TaskView, pending: list[PendingInterrupt], options: list[dict[str, dict[str, Any]]]
) -> Message | None:
    """What the task's status says: the question and the interrupts, the agent's reply, or the error."""
    snap = view.current
    parts: list[Part] = []
    extensions: list[str] = []
    if view.state == TaskState.TASK_STATE_INPUT_REQUIRED and pending:
        entries = [interrupt_entry(item, opts) for item, opts in zip(pending, options, strict=True)]
        parts = [text_part(question(pending)), data_part({"interrupts": entries})]
        extensions = [EXTENSION_URI]
    elif view.state == TaskState.TASK_STATE_CANCELED:
        parts = [text_part("The task was canceled.")]
    elif snap.error is not None:
        parts = [text_part(f"{snap.error.status}: {snap.error.message}")]
    elif view.state == TaskState.TASK_STATE_COMPLETED and snap.state and snap.state.messages:
        parts = [text_part(snap.state.messages[-1].text)]
    if not parts:
        return None
    return Message(
        message_id=f"{snap.snapshot_id}:status",
        context_id=snap.session_id,
        task_id=view.task_id,
        role=Role.ROLE_AGENT,
        parts=parts,
        extensions=extensions,
    )


def question(pending: list[PendingInterrupt]) -> str:
    """The text of an input-required status: what each pending call asks, for a person or a model."""
    lines = [f"- {item.label}: {asks(item)}" for item in pending]
    head = "The agent is waiting for an answer:" if len(pending) == 1 else f"The agent waits on {len(pending)} calls:"
    return "\n".join([head, *lines])


def asks(item: PendingInterrupt) -> str:
    """One pending call's question: its interrupt data's ``message`` or ``question``, else the call itself."""
    data = item.data
    for key in ("message", "question", "prompt"):
        if is_object(data) and isinstance(data.get(key), str):
            return data[key]
    return f"{item.tool}({json.dumps(item.input, default=str)}) needs an answer"


def interrupt_entry(item: PendingInterrupt, options: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """One pending interrupt in the extension's DataPart (``docs/a2a.md`` has the schema)."""
    entry: dict[str, Any] = {
        "tool": item.tool,
        "ref": item.ref,
        "input": item.input,
        md.INTERRUPT: item.data,
        "answerSchema": answer_schema(options),
        "decisions": list(options),
        "inDoubt": item.in_doubt,
        "agentPath": list(item.agent_path),
    }
    token = md.resume_token(item.part)
    if token is not None:
        entry[md.RESUME_TOKEN] = token
    deadline = md.deadline_of(item.part)
    if deadline is not None:
        entry["deadline"] = deadline
    return entry


# answers ---------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class Answers:
    """What a message on an input-required task answers: by ref (or tool name), with resume tokens by ref."""

    answers: dict[str, Answer]
    tokens: dict[str, str]
    single: Answer | None = None
    """One answer for every call (when ``answers`` is empty)."""


def answers_of(
    message: Message, pending: list[PendingInterrupt], options: list[dict[str, dict[str, Any]]]
) -> Answers | None:
    """The answers ``message`` gives (its DataPart ``{"answers": {ref: answer}}``, or text for a string answer).

    ``None`` when it carries neither a DataPart with ``answers`` nor text. Text alone answers only a
    task waiting on one call whose answer is a string; anything else is refused naming the DataPart.
    """
    given = [from_value(p.data) for p in message.parts if p.HasField("data")]
    found = [g for g in given if is_object(g) and "answers" in g]
    if len(found) > 1:
        raise InvalidArgumentError('send one DataPart {"answers": {...}}, not several')
    if found:
        return parse_answers(found[0]["answers"])
    text = "\n".join(p.text for p in message.parts if p.HasField("text")).strip()
    if not text:
        return None
    strings = [i for i, o in zip(pending, options, strict=True) if _string_answer(o)]
    if len(pending) == 1 and strings:
        return Answers(
            answers={key_of(pending[0]): parse_answer({"decision": "respond", "output": text}).answer}, tokens={}
        )
    labels = ", ".join(i.label for i in pending) or "none"
    raise InvalidArgumentError(
        f"the task waits on {labels}: answer with a DataPart "
        '{"answers": {"<ref>": {"decision": "...", ...}}} (each interrupt\'s answerSchema says what it takes); '
        "text alone answers only a single call whose answer is a string"
    )


def parse_answers(value: object) -> Answers:
    """``{ref: answer}`` (each an answer object, :func:`interlock.inbox._answers.parse_answer`) as :class:`Answers`."""
    if not is_object(value) or not value:
        raise InvalidArgumentError('"answers" must be an object: {"<ref>": {"decision": "...", ...}}, one per call')
    answers: dict[str, Answer] = {}
    tokens: dict[str, str] = {}
    for ref, body in value.items():
        if not is_object(body):
            raise InvalidArgumentError(f'the answer to {ref!r} must be an object with a "decision"')
        fields = dict(body)
        if md.RESUME_TOKEN in fields:
            fields["resume_token"] = fields.pop(md.RESUME_TOKEN)
        parsed = parse_answer(fields)
        answers[ref] = parsed.answer
        if parsed.token:
            tokens[ref] = parsed.token
    return Answers(answers=answers, tokens=tokens)


def key_of(item: PendingInterrupt) -> str:
    """How an answer names ``item``: its ref, or its tool's name when it has none."""
    return item.ref or item.tool


def _string_answer(options: Mapping[str, Mapping[str, Any]]) -> bool:
    """Whether the call's answer is a string: it takes only a respond, whose output is text."""
    if list(options) != ["respond"]:
        return False
    schema = options["respond"].get("output_schema")
    return is_object(schema) and schema.get("type") == "string"


def from_value(value: struct_pb2.Value) -> Any:
    """A protobuf ``Value`` as JSON, whole numbers as ints (``Value`` keeps every number as a double)."""
    kind = value.WhichOneof("kind")
    if kind == "struct_value":
        return {k: from_value(v) for k, v in value.struct_value.fields.items()}
    if kind == "list_value":
        return [from_value(v) for v in value.list_value.values]
    if kind == "number_value":
        number = value.number_value
        return int(number) if number.is_integer() and abs(number) < 2**53 else number
    if kind == "string_value":
        return value.string_value
    if kind == "bool_value":
        return value.bool_value
    return None


def to_jsonable(value: Any) -> Any:
    """``value`` as plain JSON (dates and other values as text)."""
    return json.loads(json.dumps(value, default=str))
