"""An MCP server's questions as interlock interrupts, and their answers as the MCP call's ``inputResponses``.

A ``tools/call`` that answers an ``InputRequiredResult`` (MCP 2026-07-28, multi round-trip
requests) pauses its interlock call the way a paused sub-agent pauses a delegation call
(:mod:`interlock._engine.surfacing`): the call's interrupt data is a :class:`Pause` whose
interrupts are the server's questions, one per input request, named after the tool, ref'd by
the request's key, with the elicitation's parameters as their data (``mode``, ``message``,
``requestedSchema``, or ``url``). The server's ``requestState`` rides in the pause's state.
So the snapshot keeps both, each question is surfaced as an interrupt of its own, and the
answers to them come back to the call as one restart (:func:`forwarded`).

:class:`Question` is the tool that answers one surfaced question: its output schema and
resume schema are the requested schema (the inbox renders a form of it), and an answer is
checked against it before anything is claimed (strictly: JSON types as declared, unknown
keys refused). An answer becomes an ``ElicitResult``: a respond's output or a restart's
payload is ``accept`` with that content; a denial (a respond or a restart marked ``deny``,
the inbox's reject) is ``decline``.
"""

from __future__ import annotations

from typing import Any, NoReturn

from mcp_types import ElicitRequest, ElicitRequestFormParams, ElicitRequestURLParams, ElicitResult, InputRequiredResult

from .. import metadata as md
from .._engine.surfacing import Pause, forwarded
from .._json_object import is_object
from ..errors import ToolError, ToolInputError, ToolOutputError, UsageError
from ..interrupts._decisions import decision_of
from ..models import ToolDefinition
from ..models._chat_template import schema_errors
from ..parts import ToolRequestPart, ToolResponsePart
from ..tools._signature import Signature
from ..tools._tool import Tool

REQUEST_STATE = "requestState"
"""The key of the server's ``requestState`` in the pause's state."""


def pause_for(name: str, arguments: dict[str, Any], result: InputRequiredResult) -> Pause:
    """The pause of call ``name(arguments)`` on ``result``: one question per input request.

    Raises :class:`~interlock.errors.ToolError` for an input request interlock does not
    answer (sampling, roots): only elicitations pause for a person.
    """
    questions: list[ToolRequestPart] = []
    for key, request in sorted((result.input_requests or {}).items()):
        if not isinstance(request, ElicitRequest):
            raise ToolError(
                f"the MCP server asked tool {name!r}'s caller for {request.method} ({key!r}); interlock answers "
                "elicitation requests only",
                tool=name,
            )
        data = request.params.model_dump(mode="json", by_alias=True, exclude_none=True)
        data.pop("_meta", None)
        questions.append(ToolRequestPart(name=name, ref=key, input=arguments, metadata={md.INTERRUPT: data}))
    return Pause(agent=name, state={REQUEST_STATE: result.request_state}, interrupts=tuple(questions))


def answers_of(resumed: dict[str, Any]) -> tuple[dict[str, ElicitResult], str | None]:
    """A restart's payload (the answers to the call's questions) as ``inputResponses``, and the ``requestState``."""
    pause, resume = forwarded(resumed)
    asked = {q.ref or "": q for q in pause.interrupts}
    responses: dict[str, ElicitResult] = {}
    for entry in [*resume.respond, *resume.restart]:
        key = entry.ref or ""
        if key in asked:
            responses[key] = _result(entry, asked[key])
    state: Any = (pause.state or {}).get(REQUEST_STATE)
    return responses, state if isinstance(state, str) else None


def _result(entry: ToolRequestPart | ToolResponsePart, asked: ToolRequestPart) -> ElicitResult:
    """One answer as the server gets it: a denial or no content declines; a URL question is accepted bare."""
    if decision_of(entry) == "deny":
        return ElicitResult(action="decline")
    if _mode(asked) == "url":
        return _accepted(None)
    content: Any = entry.output if isinstance(entry, ToolResponsePart) else md.without_approval(entry.meta(md.RESUMED))
    if not is_object(content):  # none (a respond of null, a bare restart): declined
        return ElicitResult(action="decline")
    return _accepted(content)


def _accepted(content: dict[str, Any] | None) -> ElicitResult:
    return ElicitResult(action="accept", content=content)


def _mode(part: ToolRequestPart) -> str:
    data = part.meta(md.INTERRUPT)
    return str(data.get("mode", "form")) if is_object(data) else "form"


def question_data(part: ToolRequestPart) -> ElicitRequestFormParams | ElicitRequestURLParams | None:
    """The elicitation a surfaced question carries (its interrupt data), or ``None`` for any other part."""
    data = part.meta(md.INTERRUPT)
    if not is_object(data):
        return None
    try:
        if data.get("mode") == "url":
            return ElicitRequestURLParams.model_validate(data)
        return ElicitRequestFormParams.model_validate(data)
    except ValueError:
        return None


def _never(*_: object) -> NoReturn:
    raise UsageError("an MCP server's question is answered, never run")


_SIGNATURE = Signature(
    input_type=dict[str, Any],
    output_type=Any,
    resume_type=dict[str, Any],
    takes_input=False,
    takes_ctx=False,
    takes_resume=False,
)


class Question(Tool[dict[str, Any], Any, dict[str, Any]]):
    """The tool that answers one question an MCP server asked (it never runs): its schema is the requested one."""

    def __init__(self, name: str, asked: ElicitRequestFormParams | ElicitRequestURLParams) -> None:
        super().__init__(
            _never,
            name=name,
            description=asked.message,
            input_type=dict[str, Any],
            output_type=Any,
            resume_type=dict[str, Any],
            signature=_SIGNATURE,
        )
        self.asked = asked
        self.schema: dict[str, Any] | None = None
        if isinstance(asked, ElicitRequestFormParams):
            self.schema = dict(asked.requested_schema)
        self.definition = ToolDefinition(name=name, description=asked.message, output_schema=self.schema)

    @property
    def resume_schema(self) -> dict[str, Any] | None:
        return self.schema

    def validate_respond(self, output: object) -> Any:
        """``None`` (declined), or the content the requested schema asks for; raises :class:`ToolOutputError`."""
        problems = self._problems(output)
        if problems:
            raise ToolOutputError(self._message("the answer", problems), tool=self.name, details=problems)
        return output

    def validate_resume(self, resumed: object) -> Any:
        """A restart's payload: declined (a denial), or the content; raises :class:`ToolInputError`."""
        if md.approval(resumed) is False:
            return None
        payload = md.without_approval(resumed)
        problems = self._problems(None if payload is True else payload)
        if problems:
            raise ToolInputError(self._message("the resume payload", problems), tool=self.name, details=problems)
        return payload

    def _problems(self, content: object) -> list[str]:
        if content is None or self.schema is None:
            return []
        if not is_object(content):
            return [f"$: {content!r} is not an object"]
        return schema_errors(content, {**self.schema, "additionalProperties": False})

    def _message(self, what: str, problems: list[str]) -> str:
        return (
            f"{what} to the MCP server's question {self.asked.message!r} (tool {self.name!r}) does not fit its "
            f"requested schema: {'; '.join(problems)} (answers are checked strictly: JSON types as declared, "
            "unknown keys refused; send none, or deny, to decline)"
        )


def question_for(name: str, part: ToolRequestPart) -> Question | None:
    """The :class:`Question` that answers ``part``, a question surfaced from a call of the MCP tool ``name``."""
    if md.surfaced_from(part) is None or md.agent_path(part)[-1:] != (name,):
        return None
    asked = question_data(part)
    return None if asked is None else Question(name, asked)
