"""The inbox's answers (:class:`Approve`, :class:`Reject`, :class:`Respond`) and the resume entries they become.

The rules are in :mod:`interlock.inbox._inbox`'s docs; :func:`entry` applies them to one call.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TypeAlias, cast

from .. import metadata as md
from .._json_object import is_object
from ..agents._agent import PromptAgent
from ..agents._delegation import tool_for
from ..errors import InvalidArgumentError, UsageError
from ..interrupts._decisions import Decision, DecisionLabel
from ..parts import ToolRequestPart, ToolResponsePart
from ..tools._context import to_json
from ..tools._middleware import approve as approve_hold
from ..tools._middleware import deny as deny_hold
from ..tools._tool import Tool

if TYPE_CHECKING:
    from ._items import PendingInterrupt, ResumableAgent


@dataclass(frozen=True, slots=True)
class Approve:
    """Approve a call; ``payload`` (default ``{"approved": true}``) is the restart's resume payload.

    An in-doubt call is run again with the same idempotency key; ``payload`` defaults to
    the payload it had.
    """

    payload: Any = None


@dataclass(frozen=True, slots=True)
class Reject:
    """Reject a call: restart with ``payload`` (default ``{"approved": false}``), or respond with ``output``.

    An in-doubt call is skipped: it is answered with ``output`` (default :func:`skip_note`)
    and does not run again. ``reason`` (text) is what the model is told: the message of a
    held or in-doubt call's note, ``payload["reason"]`` of a tool's own interrupt.
    """

    payload: Any = None
    output: Any = None
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class Restart:
    """Run the call again with ``payload`` as its resume payload, without an approve/deny label.

    A held call only runs when approved (use :class:`Approve`); an in-doubt call runs
    again as :class:`Approve` runs it.
    """

    payload: Any = None


@dataclass(frozen=True, slots=True)
class Edit:
    """Approve the call with a revised ``input`` (and ``payload``, as :class:`Approve`).

    Only agents built with ``allow_replaced_input=True`` take it; the input is validated
    against the tool's input schema like any restart. An in-doubt call cannot be edited.
    """

    input: Any
    payload: Any = None


@dataclass(frozen=True, slots=True)
class Respond:
    """Answer a call with ``output``; the tool does not run (an in-doubt call is marked done with it)."""

    output: Any


Answer: TypeAlias = Approve | Reject | Respond | Restart | Edit
"""One decision on one interrupt."""


def skip_note(item: PendingInterrupt) -> dict[str, Any]:
    """What the model sees for an in-doubt call a person rejected: it was skipped, not run again."""
    return {
        "skipped": True,
        "message": (
            f"The call to {item.tool} was skipped: an earlier attempt may or may not have taken effect, "
            "and it was not run again."
        ),
    }


def match_all(
    snapshot_id: str, items: list[PendingInterrupt], answers: Answer | Mapping[str, Answer]
) -> list[tuple[PendingInterrupt, Answer]]:
    """Pair every interrupt with its answer: one for all, or by ref (or tool name)."""
    if isinstance(answers, (Approve, Reject, Respond, Restart, Edit)):
        return [(item, answers) for item in items]
    keys = {i.ref for i in items if i.ref} | {i.tool for i in items}
    unknown = [k for k in answers if k not in keys]
    if unknown:
        raise InvalidArgumentError(f"snapshot {snapshot_id} has no interrupt with ref or tool {', '.join(unknown)}")
    pairs: list[tuple[PendingInterrupt, Answer]] = []
    for item in items:
        answer = answers.get(item.ref) if item.ref and item.ref in answers else answers.get(item.tool)
        if answer is None:
            raise UsageError(
                f"no answer for {item.label}: a resume must answer every interrupt of snapshot {snapshot_id}"
            )
        pairs.append((item, answer))
    return pairs


def entry(item: PendingInterrupt, answer: Answer, agent: ResumableAgent) -> ToolRequestPart | ToolResponsePart:
    """The resume entry that carries ``answer`` to ``item`` (the rules are in the inbox's module docs)."""
    part = item.part
    if item.in_doubt:
        return _in_doubt(item, answer)
    found = tool_for(agent, part) if isinstance(agent, PromptAgent) else None
    note: str | None = None
    if isinstance(answer, Reject) and answer.reason is not None:
        note = None if item.is_hold or _takes_reason(found) else answer.reason
        answer = _with_reason(item, answer, into_payload=note is None)
    if isinstance(answer, Respond) or (isinstance(answer, Reject) and answer.output is not None and not item.is_hold):
        label: DecisionLabel | None = "deny" if isinstance(answer, Reject) else None
        return Decision.respond(to_json(answer.output), decision=label).answer(part)
    if isinstance(answer, Restart) and item.is_hold:
        raise UsageError(f"{item.label} is held for approval: it runs only when approved (approve, or edit)")
    if item.is_hold and not isinstance(answer, Edit):
        if isinstance(answer, (Approve, Restart)):
            return approve_hold(part, **_payload_dict(answer.payload, item))
        if answer.payload is not None:
            raise UsageError(f"{item.label} is held for approval: a rejection never runs it, so it takes no payload")
        return deny_hold(part, None if answer.output is None else to_json(answer.output))
    if found is not None and found.is_interrupt_only:
        raise UsageError(f"tool {item.tool!r} never runs (it only asks); answer {item.label} with respond")
    if isinstance(answer, Restart):
        return Decision.restart(None if answer.payload is None else to_json(answer.payload)).answer(part)
    approved = isinstance(answer, (Approve, Edit))
    payload: Any = {"approved": approved} if answer.payload is None else to_json(answer.payload)
    if item.is_hold:
        payload = _payload_dict(answer.payload, item)
    if isinstance(answer, Edit):
        return Decision.restart(payload, input=to_json(answer.input), decision="approve").answer(part)
    denied = Decision.restart(payload, decision="approve" if approved else "deny").answer(part)
    return denied if note is None else replace(denied, metadata={**(denied.metadata or {}), md.REASON: note})


def _takes_reason(tool: Tool[Any, Any, Any] | None) -> bool:
    """Whether a rejection's reason may ride in the tool's resume payload (strict answers refuse unknown keys)."""
    if tool is None or tool.lax_answers:
        return True
    schema = tool.resume_schema or {}
    properties: Any = schema.get("properties")
    return (is_object(properties) and "reason" in properties) or bool(schema.get("additionalProperties"))


def _with_reason(item: PendingInterrupt, answer: Reject, *, into_payload: bool = True) -> Reject:
    """A rejection's ``reason`` as the note a held or in-doubt call gets, or in a tool's own restart payload.

    A tool whose resume payload has no ``reason`` field gets the reason as the entry's
    ``metadata.reason`` instead (``into_payload=False``): the audit keeps it either way.
    """
    given: Any = answer.payload
    if answer.output is not None or (given is not None and not isinstance(given, dict)):
        raise UsageError(f"a rejection of {item.label} takes a reason, or an output or payload of its own; not both")
    if item.is_hold:
        return Reject(output={"denied": True, "message": answer.reason})
    if item.in_doubt:
        return Reject(output={"skipped": True, "message": answer.reason})
    base: Any = {"approved": False} if given is None else to_json(given)
    if not into_payload:
        return Reject(payload=base)
    return Reject(payload={**cast(dict[str, Any], base), "reason": answer.reason})


def _in_doubt(item: PendingInterrupt, answer: Answer) -> ToolRequestPart | ToolResponsePart:
    """Approve: run it again (the payload it had); respond: it did happen; reject: skip it."""
    part = item.part
    if isinstance(answer, Edit):
        raise UsageError(
            f"{item.label} is in doubt: it runs again as it was (approve), or is answered (respond) or skipped "
            "(reject); a revised input would be another call"
        )
    if isinstance(answer, Reject) and answer.reason is not None:
        answer = _with_reason(item, answer)
    if isinstance(answer, Respond):
        return Decision.respond(to_json(answer.output)).answer(part)
    if isinstance(answer, Reject):
        if answer.payload is not None:
            raise UsageError(
                f"{item.label} is in doubt: a rejection skips it (it does not run again), so it takes no payload; "
                "give --output for the note the model sees, or approve to run it again"
            )
        note = skip_note(item) if answer.output is None else to_json(answer.output)
        return Decision.respond(note, decision="deny").answer(part)
    data: Any = item.data
    had: Any = data.get(md.RESUMED) if is_object(data) else None
    payload: Any = had if answer.payload is None else to_json(answer.payload)
    if payload is True:  # a bare restart: the runtime uses the payload the call had
        payload = None
    return Decision.restart(payload, decision="approve").answer(part)


def _payload_dict(payload: object, item: PendingInterrupt) -> dict[str, Any]:
    value: Any = {} if payload is None else to_json(payload)
    if not is_object(value):
        raise InvalidArgumentError(f"the approval of hold {item.label} takes a JSON object as payload, not {value!r}")
    return value


# an answer read from JSON, and the schema of one (every surface's) --------------------------------

DECISIONS = ("approve", "reject", "respond", "restart", "edit")
"""The decisions an answer names, in the order they are offered."""
ANSWER_KEYS = ("decision", "ref", "tool", "payload", "output", "input", "reason", "resume_token")
"""The fields of an answer object (:func:`parse_answer`)."""


_CARRIES = {"payload_schema": "payload", "output_schema": "output", "input_schema": "input"}


def answer_schema(options: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The JSON Schema of an answer object (:func:`parse_answer`) that ``options`` allow (``_options.answer_options``).

    One alternative per decision: ``{"decision": <it>}`` with the field it carries (``output``
    for respond, ``payload`` for the others, ``input`` for edit) under that option's schema,
    ``reason`` (text) for reject, and ``resume_token`` (text).
    """
    ways: list[dict[str, Any]] = []
    for decision, option in options.items():
        props: dict[str, Any] = {"decision": {"const": decision}, "resume_token": {"type": "string"}}
        required = ["decision"]
        for key, field in _CARRIES.items():
            if key in option:
                props[field] = option[key] if option[key] is not None else {}
        if decision == "respond":
            required.append("output")
        if decision == "edit":
            required.append("input")
        if option.get("reason"):
            props["reason"] = {"type": "string"}
        ways.append({"type": "object", "properties": props, "required": required, "additionalProperties": False})
    return ways[0] if len(ways) == 1 else {"oneOf": ways}


@dataclass(frozen=True, kw_only=True, slots=True)
class AnswerRequest:
    """A parsed answer: the decision, which call, and the resume token it carries."""

    answer: Answer
    decision: str
    ref: str | None
    tool: str | None
    token: str | None


def parse_answer(body: Mapping[str, Any]) -> AnswerRequest:
    """``{"decision": ..., ...}`` as an answer; INVALID_ARGUMENT for a missing or wrong field."""
    unknown = sorted(set(body) - set(ANSWER_KEYS))
    if unknown:
        raise InvalidArgumentError(f"unknown field {unknown[0]!r}; an answer takes {', '.join(ANSWER_KEYS)}")
    decision = body.get("decision")
    if decision not in DECISIONS:
        raise InvalidArgumentError(f"decision must be one of {', '.join(DECISIONS)}, not {decision!r}")
    text = {k: _text(body, k) for k in ("ref", "tool", "reason", "resume_token")}
    payload, output = body.get("payload"), body.get("output")
    if decision == "respond" and "output" not in body:
        raise InvalidArgumentError("a respond answer needs an 'output' (the call's result)")
    if decision == "edit" and "input" not in body:
        raise InvalidArgumentError("an edit answer needs an 'input' (the revised tool input)")
    built: Answer
    if decision == "approve":
        built = Approve(payload)
    elif decision == "reject":
        built = Reject(payload, output, reason=text["reason"])
    elif decision == "respond":
        built = Respond(output)
    elif decision == "restart":
        built = Restart(payload)
    else:
        built = Edit(body.get("input"), payload)
    return AnswerRequest(
        answer=built, decision=cast(str, decision), ref=text["ref"], tool=text["tool"], token=text["resume_token"]
    )


def _text(body: Mapping[str, Any], key: str) -> str | None:
    value = body.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise InvalidArgumentError(f"'{key}' must be a string, not {type(value).__name__}")
    return value
