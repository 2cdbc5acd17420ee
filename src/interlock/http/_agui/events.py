"""A turn as AG-UI 1.0 events: chunks, state, pauses and refusals become ``ag_ui.core`` event models.

:class:`Events` follows one run. Model text streams as ``TEXT_MESSAGE_START/CONTENT/END``
(one message per Genkit message index); a tool request (streamed by the model, or the paused
requests a pausing turn streams last) as ``TOOL_CALL_START/ARGS/END`` under its ref; a tool
response as ``TOOL_CALL_RESULT``; custom-state patches as ``STATE_SNAPSHOT`` (a turn's first,
which replaces the document) and ``STATE_DELTA`` (JSON Patch). Every open message or call is
closed before the run ends, as AG-UI's clients require.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from ag_ui.core import (
    BaseEvent,
    Interrupt,
    RunErrorEvent,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunStartedEvent,
    StateDeltaEvent,
    StateSnapshotEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)

from ... import metadata as md
from ..._engine.io import StreamChunk
from ...errors import InterlockError
from ...inbox._items import PendingInterrupt
from ...messages import Message
from ...models import ModelChunk
from ...parts import TextPart, ToolRequestPart, ToolResponsePart
from ...records._sessions import CustomPatch
from .._service import Acceptance, expires_at

PROTOCOL_VERSION = "1.0"


def _json_text(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def call_id(ref: str | None, tool: str) -> str:
    """The AG-UI id of a tool call and of its interrupt: the call's ref (its tool name without one)."""
    return ref or tool


def run_error(error: InterlockError) -> RunErrorEvent:
    """A refusal or failure as ``RUN_ERROR``: the canonical status as ``code``, the message as is."""
    return RunErrorEvent(message=error.message, code=error.status)


class Events:
    """The AG-UI events of one run, built as the turn streams (see the module's docs)."""

    def __init__(self, thread_id: str, run_id: str) -> None:
        self.thread_id = thread_id
        self.run_id = run_id
        self._text: str | None = None
        self._text_key: tuple[str | None, Any] | None = None
        self._calls: set[str] = set()
        self._patched = False
        self._said = False
        self.client = False
        """A client-managed agent's run: its state is the whole session, sent once at the end."""

    def started(self) -> RunStartedEvent:
        return RunStartedEvent(thread_id=self.thread_id, run_id=self.run_id, protocol_version=PROTOCOL_VERSION)

    def chunk(self, chunk: StreamChunk) -> list[BaseEvent]:
        """The events one stream chunk stands for (artifacts and turn ends stand for none)."""
        if isinstance(chunk, CustomPatch):
            return self._patch(chunk)
        if not isinstance(chunk, ModelChunk):
            return []
        out: list[BaseEvent] = []
        for part in chunk.content:
            if isinstance(part, TextPart) and part.text and chunk.role != "tool":
                out += self._say(part.text, (chunk.role, chunk.index))
            elif isinstance(part, ToolRequestPart):
                out += self._close_text() + self._request(part)
                self._said = False
            elif isinstance(part, ToolResponsePart):
                out += self._close_text() + self._response(part)
                self._said = False
        return out

    def _say(self, text: str, key: tuple[str | None, Any]) -> list[BaseEvent]:
        out: list[BaseEvent] = []
        if self._text is not None and self._text_key != key:
            out += self._close_text()
        if self._text is None:
            self._text, self._text_key = str(uuid.uuid4()), key
            out.append(TextMessageStartEvent(message_id=self._text, role="assistant"))
        self._said = True
        return [*out, TextMessageContentEvent(message_id=self._text, delta=text)]

    def _close_text(self) -> list[BaseEvent]:
        if self._text is None:
            return []
        ended = TextMessageEndEvent(message_id=self._text)
        self._text = self._text_key = None
        return [ended]

    def _request(self, part: ToolRequestPart) -> list[BaseEvent]:
        ident = call_id(part.ref, part.name)
        if ident in self._calls or part.partial:
            return []
        self._calls.add(ident)
        return [
            ToolCallStartEvent(tool_call_id=ident, tool_call_name=part.name),
            ToolCallArgsEvent(tool_call_id=ident, delta=_json_text(part.input)),
            ToolCallEndEvent(tool_call_id=ident),
        ]

    def _response(self, part: ToolResponsePart) -> list[BaseEvent]:
        ident = call_id(part.ref, part.name)
        out: list[BaseEvent] = []
        if ident not in self._calls:  # a call the model did not stream, or one a resume answered
            self._calls.add(ident)
            out.append(ToolCallStartEvent(tool_call_id=ident, tool_call_name=part.name))
            out.append(ToolCallEndEvent(tool_call_id=ident))
        content = part.output if isinstance(part.output, str) else _json_text(part.output)
        return [*out, ToolCallResultEvent(message_id=str(uuid.uuid4()), tool_call_id=ident, content=content)]

    def _patch(self, patch: CustomPatch) -> list[BaseEvent]:
        if self.client:
            return []
        ops = patch.ops
        if len(ops) == 1 and ops[0].get("op") == "replace" and ops[0].get("path") == "":
            self._patched = True
            return [StateSnapshotEvent(snapshot=ops[0].get("value"))]
        if not self._patched:  # a delta against a document the client may not have: send nothing partial
            return []
        return [StateDeltaEvent.model_validate({"delta": ops})]

    def state(self, custom: Any) -> list[BaseEvent]:
        """The session's custom state at the end of the run, when no patch already sent it."""
        if self._patched and not self.client:
            return []
        return [StateSnapshotEvent(snapshot=custom if custom is not None else {})]

    def reply(self, message: Message | None) -> list[BaseEvent]:
        """The turn's last reply as one text message, when the model did not stream it (a non-streaming model)."""
        if self._said or message is None or message.role != "model" or not message.text:
            return self._close_text()
        return [*self._say(message.text, ("reply", None)), *self._close_text()]

    def finished(self) -> list[BaseEvent]:
        """``RUN_FINISHED`` of a run that completed."""
        return [*self._close_text(), RunFinishedEvent(thread_id=self.thread_id, run_id=self.run_id)]

    def paused(self, interrupts: list[Interrupt]) -> list[BaseEvent]:
        """``RUN_FINISHED`` whose outcome lists what the run waits for."""
        outcome = RunFinishedInterruptOutcome(interrupts=interrupts)
        return [*self._close_text(), RunFinishedEvent(thread_id=self.thread_id, run_id=self.run_id, outcome=outcome)]

    def failed(self, error: InterlockError) -> list[BaseEvent]:
        """``RUN_ERROR``, after closing what is open (a client refuses a run that ends mid-message otherwise)."""
        return [*self._close_text(), run_error(error)]


def interrupt_of(item: PendingInterrupt, accepts: Acceptance, answers: Mapping[str, Any]) -> Interrupt:
    """One pending interrupt as AG-UI's ``Interrupt``: id, what is asked, the answer's schema, deadline, metadata."""
    reason, message = _asked(item, accepts)
    at: datetime | None = expires_at(item)
    token = md.resume_token(item.part)
    metadata: dict[str, Any] = {
        "tool": item.tool,
        "input": item.input,
        md.INTERRUPT: item.data,
        "snapshotId": item.snapshot_id,
        "answer": accepts.decision,
        "answers": dict(answers),
    }
    if token is not None:
        metadata[md.RESUME_TOKEN] = token
    return Interrupt(
        id=call_id(item.ref, item.tool),
        reason=reason,
        message=message,
        tool_call_id=call_id(item.ref, item.tool),
        response_schema=accepts.schema if accepts.schema is not None else {},
        expires_at=at.isoformat() if at is not None else None,
        metadata=metadata,
    )


def _asked(item: PendingInterrupt, accepts: Acceptance) -> tuple[str, str]:
    """The reason code and the sentence a person reads."""
    if item.in_doubt:
        return "in_doubt", (
            f"The call to {item.tool} may or may not have taken effect: resolve it to run it again, "
            "or cancel it to skip it"
        )
    if item.is_hold:
        return "tool_approval", f"Approve the call to {item.tool}? Resolve it to run it, cancel it to deny it"
    if accepts.decision == "respond":
        return "input_required", f"{item.tool} asks for an answer: resolve it with the answer as payload"
    return "input_required", f"{item.tool} waits for input: resolve it with the payload it asks for, or cancel it"
