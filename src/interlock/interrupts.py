"""Interrupts on the wire: finding them, reading their data, and validating resumes.

:func:`validate_resume` is the one check every resume goes through (the tool loop and
custom agents alike). It runs before anything executes, so a refused resume changes
nothing and the interrupt stays pending.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

from pydantic import TypeAdapter

from .errors import ResumeError
from .messages import Message
from .parts import Part, ToolRequestPart, ToolResponsePart

__all__ = [
    "Resume",
    "ResumePlan",
    "interrupt_as",
    "is_interrupt",
    "json_equal",
    "pending_interrupts",
    "validate_resume",
]

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

    respond: list[ToolResponsePart] = field(default_factory=list[ToolResponsePart])
    restart: list[ToolRequestPart] = field(default_factory=list[ToolRequestPart])
    metadata: Any = None

    def __bool__(self) -> bool:
        return bool(self.respond or self.restart)


@dataclass(frozen=True, kw_only=True, slots=True)
class ResumePlan:
    """A resume validated against the history it continues: what the tool loop carries out.

    Built once, before anything runs or is claimed, by the agent's ``check_resume``; the
    tool loop consumes it without validating again.
    """

    resume: Resume


def is_interrupt(part: Part) -> bool:
    """True when ``part`` is a tool request that paused its turn and waits for an answer."""
    return isinstance(part, ToolRequestPart) and part.is_interrupt


def interrupt_as(tp: type[T], part: Part) -> T:
    """The interrupt data of ``part`` validated as ``tp`` (a pydantic model, dataclass, TypedDict, ...)."""
    if not isinstance(part, ToolRequestPart) or not part.is_interrupt:
        raise ValueError(f"{part!r} is not an interrupted tool request")
    return TypeAdapter(tp).validate_python(part.meta("interrupt"))


def pending_interrupts(messages: Sequence[Message]) -> list[ToolRequestPart]:
    """The interrupts that wait for an answer: those of the last message, when it is a model message."""
    if not messages or messages[-1].role != "model":
        return []
    return messages[-1].interrupts


def _same_type(a: object, b: object) -> bool:
    return type(a) is type(b)


def json_equal(a: Any, b: Any) -> bool:
    """Semantic JSON equality: key order ignored, ``1 == 1.0``, ``True != 1``, ``None != missing``."""
    if isinstance(a, bool) or isinstance(b, bool):
        return _same_type(a, b) and cast(bool, a == b)
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        da, db = cast(dict[str, Any], a), cast(dict[str, Any], b)
        return da.keys() == db.keys() and all(json_equal(v, db[k]) for k, v in da.items())
    if isinstance(a, list) and isinstance(b, list):
        la: list[Any] = cast(list[Any], a)
        lb: list[Any] = cast(list[Any], b)
        return len(la) == len(lb) and all(json_equal(x, y) for x, y in zip(la, lb, strict=True))
    x: object = cast(object, a)
    y: object = cast(object, b)
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
    ``allow_replaced_input`` (callers you do not trust must never get that); one entry
    per request; and every interrupted request must be answered.
    """
    model_messages = [m for m in history if m.role == "model"]
    latest = model_messages[-1] if model_messages else None
    earlier = model_messages[-2::-1]
    seen: set[tuple[str, str | None]] = set()
    for entry in resume.restart:
        original = _locate("restart", entry.name, entry.ref, latest, earlier)
        _check_pending("restart", original)
        if not allow_replaced_input and not json_equal(entry.input, original.input):
            raise ResumeError(
                f"resume.restart for tool {entry.name!r}"
                + (f" (ref: {entry.ref})" if entry.ref else "")
                + " has modified inputs that do not match the original tool request in session history. "
                "Restart inputs must exactly match the interrupted tool request."
            )
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


def _once(seen: set[tuple[str, str | None]], name: str, ref: str | None) -> None:
    key = (name, ref or None)
    if key in seen:
        raise ResumeError(
            f"resume has more than one entry for tool {name!r}"
            + (f" (ref: {ref})" if ref else "")
            + "; answer each interrupted request exactly once."
        )
    seen.add(key)
