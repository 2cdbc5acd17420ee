"""Interrupts on the wire: finding them, reading their data, validating resumes, planning them.

:func:`validate_resume` is the one check every resume goes through (the tool loop and
custom agents alike). :func:`plan_resume` runs it and the tools' schemas once, before
anything executes or is claimed, and returns the :class:`ResumePlan` the tool loop
carries out without validating again; a refused resume changes nothing and the interrupt
stays pending.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeVar, cast

from .. import metadata as md
from .._json import check_json, check_part, type_name
from .._json_object import is_array, is_object, new_list
from ..errors import InvalidArgumentError, ResumeError, UsageError
from ..messages import Message
from ..parts import Part, ToolRequestPart, ToolResponsePart
from ..records._evolve import fast_init
from ..tools._signature import data_as
from ._decisions import DecisionLabel, decision_of
from ._policy import AnswerPolicy, policy_for

if TYPE_CHECKING:
    from ..tools._tool import Tool


T = TypeVar("T")


@dataclass(frozen=True, kw_only=True, slots=True)
class Resume:
    """Answers to the interrupts of a paused turn.

    Attributes:
        respond: tool responses that supply a paused call's output (the tool does not run).
        restart: tool requests that run a paused call again; ``metadata.resumed`` carries
            the resume payload to the tool.
        metadata: recorded as ``metadata.resumed`` on the tool message the resume creates.
    """

    respond: list[ToolResponsePart] = field(default_factory=new_list)
    restart: list[ToolRequestPart] = field(default_factory=new_list)
    metadata: Any = None

    def __bool__(self) -> bool:
        return bool(self.respond or self.restart)


@fast_init
@dataclass(frozen=True, kw_only=True, slots=True)
class PlannedCall:
    """How one tool request of the paused message is carried out by a resume.

    Attributes:
        index: the request's position in the paused message's content.
        request: the request as history has it.
        verb: ``"respond"`` (the output is supplied), ``"restart"`` (the tool runs again)
            or ``"pending"`` (it finished in the paused turn; its parked output is reused).
        response: a respond's entry, its output validated against the tool's schema.
        restart: a restart's entry, as sent.
        value: a restart's input, validated (what the tool runs with).
        payload: a restart's typed resume payload (``None`` for none).
        original_input: the recorded original input (differs from ``restart.input``
            only for a revised restart, which records it as ``replacedInput``).
        decision: ``"approve"``/``"deny"`` from an explicit decision or the tool's
            declared rule, else ``None``.
        policy: the answer policy the call was asked under (:mod:`interlock.interrupts._policy`;
            ``None``: the tool has none, or it is unknown here).
        input_replaced: whether a restart's input differs from the request's, compared once by
            :func:`plan_resume` (``None``: :attr:`replaced` compares them when read).
    """

    index: int
    request: ToolRequestPart
    verb: Literal["respond", "restart", "pending"]
    response: ToolResponsePart | None = None
    restart: ToolRequestPart | None = None
    value: Any = None
    payload: Any = None
    original_input: Any = None
    decision: DecisionLabel | None = None
    policy: AnswerPolicy | None = None
    input_replaced: bool | None = None

    @property
    def replaced(self) -> bool:
        """True for a restart whose input differs from the request's."""
        if self.input_replaced is not None:
            return self.input_replaced
        return self.restart is not None and not json_equal(self.restart.input, self.request.input)


@fast_init
@dataclass(frozen=True, kw_only=True, slots=True)
class ResumePlan:
    """A resume validated against the history it continues: what the tool loop carries out.

    Built once, before anything runs or is claimed, by the agent's ``check_resume``
    (:func:`plan_resume`); the tool loop consumes it without validating again.

    Attributes:
        resume: the resume as given.
        calls: one entry per tool request of the paused message that the resume carries
            out (answered, or parked and reused), in message order.
        schemas_checked: the calls' inputs, payloads and outputs were validated against
            the tools (a plan built without tools is checked by the loop that runs it).
    """

    resume: Resume
    calls: tuple[PlannedCall, ...] = ()
    schemas_checked: bool = False


def is_interrupt(part: Part) -> bool:
    """True when ``part`` is a tool request that paused its turn and waits for an answer."""
    return isinstance(part, ToolRequestPart) and part.is_interrupt


def interrupt_as(tp: type[T], part: Part) -> T:
    """The interrupt data of ``part`` validated as ``tp`` (a pydantic model, dataclass, TypedDict, ...).

    Raises :class:`~interlock.errors.InvalidArgumentError`: ``part`` is no paused tool request,
    or its data does not fit ``tp`` (naming each field).
    """
    if not isinstance(part, ToolRequestPart) or not part.is_interrupt:
        what = f"tool request {part.name!r}" if isinstance(part, ToolRequestPart) else type_name(part)
        raise InvalidArgumentError(
            f"{what} is not an interrupted tool request (not waiting for an answer): "
            "interrupt_as reads one of output.interrupts"
        )
    return data_as(tp, part.meta(md.INTERRUPT), part.name)


def pending_interrupts(messages: Sequence[Message]) -> list[ToolRequestPart]:
    """The interrupts that wait for an answer: those of the last message, when it is a model message."""
    if not messages or messages[-1].role != "model":
        return []
    return messages[-1].interrupts


def _same_type(a: object, b: object) -> bool:
    return type(a) is type(b)


def json_equal(a: object, b: Any) -> bool:
    """Semantic JSON equality: key order ignored, ``1 == 1.0``, ``True != 1``, ``None != missing``."""
    if isinstance(a, bool) or isinstance(b, bool):
        return _same_type(a, b) and cast(bool, a == b)
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if is_object(a) and is_object(b):
        return a.keys() == b.keys() and all(json_equal(v, b[k]) for k, v in a.items())
    if is_array(a) and is_array(b):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    x: object = a
    y: object = b
    return _same_type(x, y) and x == y


def _label(kind: str, name: str, ref: str | None) -> str:
    return f"resume.{kind} references tool {name!r}" + (f" (ref: {ref})" if ref else "")


def _find(message: Message, name: str, ref: str | None) -> ToolRequestPart | None:
    for part in reversed(message.content):
        if isinstance(part, ToolRequestPart) and part.name == name and (part.ref or None) == (ref or None):
            return part
    return None


def _locate(kind: str, name: str, ref: str | None, latest: Message | None, earlier: list[Message]) -> ToolRequestPart:
    found = _find(latest, name, ref) if latest else None
    if found is not None:
        return found
    if any(_find(m, name, ref) for m in earlier):
        raise ResumeError(
            f"{_label(kind, name, ref)} from an earlier turn which is no longer pending; "
            "only tool requests from the most recent model response can be resumed."
        )
    raise ResumeError(f"{_label(kind, name, ref)} which was not found in session history.")


def _check_pending(kind: str, part: ToolRequestPart) -> None:
    if not part.is_interrupt:
        raise ResumeError(
            f"{_label(kind, part.name, part.ref)} which is not waiting for an answer "
            "(it already ran in the paused turn); only interrupted tool requests can be resumed."
        )


def validate_resume(resume: Resume, history: Sequence[Message], *, allow_replaced_input: bool = False) -> None:
    """Check a resume against the history it would continue; raise :class:`ResumeError` if it does not fit.

    Rules: entries must name a tool request (name and ref) of the most recent model
    message that is still interrupted; refs from an earlier turn are refused as stale,
    refs that never existed as not found; a restart must carry the original input unless
    ``allow_replaced_input`` (callers you do not trust must never get that); an approval
    marker (``toolApproved``) is a JSON bool; one entry per request; and every
    interrupted request must be answered.
    """
    model_messages = [m for m in history if m.role == "model"]
    latest = model_messages[-1] if model_messages else None
    earlier = model_messages[-2::-1]
    seen: set[tuple[str, str | None]] = set()
    for entry in resume.restart:
        original = _locate("restart", entry.name, entry.ref, latest, earlier)
        _check_pending("restart", original)
        _check_approval(entry)
        if not json_equal(entry.input, original.input):
            _check_replaced(entry, original, allow_replaced_input)
        _once(seen, entry.name, entry.ref)
    for response in resume.respond:
        _check_pending("respond", _locate("respond", response.name, response.ref, latest, earlier))
        _once(seen, response.name, response.ref)
    if latest is not None and history and history[-1] is latest:
        for part in latest.interrupts:
            if (part.name, part.ref or None) not in seen:
                raise ResumeError(
                    f"Unresolved tool request '{part.name}#{part.ref or ''}' was not handled by the 'resume' "
                    "argument. You must supply replies or restarts for all interrupted tool requests."
                )


def _check_approval(entry: ToolRequestPart) -> None:
    """An approval marker in ``resumed`` is a JSON bool: ``"yes"``, ``1`` or ``"no"`` is refused, not read."""
    resumed = entry.meta(md.RESUMED)
    if not is_object(resumed):
        return
    said = {key: resumed[key] for key in (md.APPROVAL, md.APPROVAL_SNAKE) if key in resumed}
    label = f"resume.restart for tool {entry.name!r}" + (f" (ref: {entry.ref})" if entry.ref else "")
    for key, value in said.items():
        if not isinstance(value, bool):
            raise ResumeError(
                f"{label} has metadata.resumed.{key} = {value!r}; an approval is true or false (a JSON bool)"
            )
    if len(set(said.values())) > 1:
        raise ResumeError(f"{label} both approves and denies the call; send one {md.APPROVAL} marker")


def _check_replaced(entry: ToolRequestPart, original: ToolRequestPart, allowed: bool) -> None:
    """A revised restart must be allowed and name the recorded original (Genkit's rule)."""
    label = f"resume.restart for tool {entry.name!r}" + (f" (ref: {entry.ref})" if entry.ref else "")
    if not allowed:
        raise ResumeError(
            f"{label} has modified inputs that do not match the original tool request in session history. "
            "Restart inputs must exactly match the interrupted tool request."
        )
    recorded = original.meta(md.REPLACED_INPUT, original.input)
    claimed = entry.metadata or {}
    if md.REPLACED_INPUT not in claimed or not json_equal(claimed[md.REPLACED_INPUT], recorded):
        raise ResumeError(
            f"{label} replaces the input but its metadata.{md.REPLACED_INPUT} is "
            + ("missing" if md.REPLACED_INPUT not in claimed else "not the recorded original")
            + "; it must equal the original input the session history recorded for that request."
        )


def _once(seen: set[tuple[str, str | None]], name: str, ref: str | None) -> None:
    key = (name, ref or None)
    if key in seen:
        raise ResumeError(
            f"resume has more than one entry for tool {name!r}"
            + (f" (ref: {ref})" if ref else "")
            + "; answer each interrupted request exactly once."
        )
    seen.add(key)


def plan_resume(
    resume: Resume,
    history: Sequence[Message],
    tools: Sequence[Tool[Any, Any, Any]] = (),
    *,
    allow_replaced_input: bool = False,
) -> ResumePlan:
    """Validate ``resume`` against ``history`` (and ``tools``' schemas) once, into the plan the loop runs.

    Raises :class:`ResumeError` or a tool's :class:`~interlock.ToolInputError` /
    :class:`~interlock.ToolOutputError` (all INVALID_ARGUMENT) before anything runs. A
    respond to a middleware hold is a note to the model, so it skips the output schema.
    """
    validate_resume(resume, history, allow_replaced_input=allow_replaced_input)
    by_name = {t.name: t for t in tools}
    latest = next((m for m in reversed(history) if m.role == "model"), None)
    calls: list[PlannedCall] = []
    for i, part in enumerate(latest.content if latest else ()):
        if not isinstance(part, ToolRequestPart):
            continue
        found = _answering(by_name, part)
        if part.metadata and md.PENDING_OUTPUT in part.metadata:
            calls.append(PlannedCall(index=i, request=part, verb="pending"))
        elif (response := _entry_for(resume.respond, part)) is not None:
            if found is not None and not md.is_hold(part) and not md.is_in_doubt(part):  # notes, not outputs
                found.validate_respond(response.output)
            policy = None if found is None else policy_for(found.policies, part)
            calls.append(
                PlannedCall(
                    index=i,
                    request=part,
                    verb="respond",
                    response=response,
                    decision=decision_of(response),
                    policy=policy,
                )
            )
        elif (restart := _entry_for(resume.restart, part)) is not None:
            calls.append(_plan_restart(i, part, restart, found))
    return ResumePlan(resume=resume, calls=tuple(calls), schemas_checked=bool(tools))


def _answering(by_name: dict[str, Tool[Any, Any, Any]], part: ToolRequestPart) -> Tool[Any, Any, Any] | None:
    """The tool whose schemas an answer to ``part`` must fit (``None``: checked where it goes, a sub-agent's)."""
    src = md.surfaced_from(part)
    if src is None:
        return by_name.get(part.name)
    asker = by_name.get(str(src.get("name")))
    return None if asker is None else asker.question(part)  # a question of the call's own (an MCP tool's)


def _entry_for(entries: Sequence[ToolRequestPart] | Sequence[ToolResponsePart], part: ToolRequestPart) -> Any:
    return next((e for e in entries if e.name == part.name and (e.ref or None) == (part.ref or None)), None)


def _plan_restart(
    i: int, part: ToolRequestPart, restart: ToolRequestPart, tool: Tool[Any, Any, Any] | None
) -> PlannedCall:
    value, payload = restart.input, None
    decision = decision_of(restart)
    if tool is not None and tool.is_interrupt_only and not md.is_hold(part):
        raise ResumeError(
            f"resume.restart for tool {tool.name!r}" + (f" (ref: {part.ref})" if part.ref else "") + " cannot run "
            "it: it is an interrupt-only tool (it has no body, so a restart would only pause again); answer it "
            "with resume.respond, whose output is the answer"
        )
    if tool is not None:
        value = tool.validate_input(restart.input)
        payload = tool.validate_resume(restart.meta(md.RESUMED))
        if decision is None and payload is not None and tool.approval is not None:
            decision = _declared(tool, payload)
    return PlannedCall(
        index=i,
        request=part,
        verb="restart",
        restart=restart,
        value=value,
        payload=payload,
        original_input=part.meta(md.REPLACED_INPUT, part.input),
        decision=decision,
        policy=None if tool is None else policy_for(tool.policies, part),
        input_replaced=not json_equal(restart.input, part.input),
    )


def _declared(tool: Tool[Any, Any, Any], payload: object) -> DecisionLabel:
    assert tool.approval is not None
    try:
        approved = tool.approval(payload)
    except Exception as exc:
        raise UsageError(f"the approval rule of tool {tool.name!r} failed on its resume payload: {exc}") from exc
    return "approve" if approved else "deny"


def check_resume_shape(resume: object, where: str = "resume") -> None:
    """Check that ``resume`` is a :class:`~interlock.Resume` of the right parts, all holding JSON."""
    if not isinstance(resume, Resume):
        raise InvalidArgumentError(f"{where} must be a Resume(respond=[...], restart=[...]), not {type_name(resume)}")
    for name, kind, hint in (
        ("respond", ToolResponsePart, "call.respond(output)"),
        ("restart", ToolRequestPart, "call.restart(payload)"),
    ):
        parts: Any = getattr(resume, name)
        if not is_array(parts):
            raise InvalidArgumentError(
                f"{where}.{name} must be a list of {kind.__name__} (e.g. [{hint}]), not {type_name(parts)}"
            )
        for index, part in enumerate(parts):
            label = f"{where}.{name}[{index}]"
            if not isinstance(part, kind):
                raise InvalidArgumentError(
                    f"{label} must be a {kind.__name__} (build it with {hint}), not {type_name(part)}"
                )
            check_part(part, label)
    check_json(resume.metadata, f"{where}.metadata")
