"""The metadata keys of interrupt state, spelled once (Genkit's wire names), and the rules that read them.

A paused turn is just history, in Genkit's format:

========================  ===================================================================
key                       where, and what it means
========================  ===================================================================
``interrupt``             tool request: the call paused the turn; the value is its data
``pendingOutput``         tool request: a sibling that finished in a paused turn, parked
``resumed``               restart entry (and the tool message a resume adds): the payload
``replacedInput``         tool request: the original input a revised restart replaced
``resolvedInterrupt``     tool request: the data of an interrupt that got its answer
``interruptResponse``     respond entry: it answers an interrupt (``True`` or a dict)
``source``                tool response: ``"pending"`` for a parked output reused
``toolApproved``          in ``resumed``: an explicit approval (``true``) or denial (``false``)
``reason``                restart entry: a rejection's reason the tool's resume payload has no field for
``toolApproval``          in a hold's interrupt data: our marker of a middleware hold
``reclaimedFrom``         snapshot: the turn whose lapsed claim a resume took over
``effectInDoubt``         in an interrupt's data: the journal cannot tell whether the call took effect
``resumeToken``           tool request (interrupt) and the resume entry answering it: its signed token
``consumedTokens``        snapshot: the nonces of the resume tokens its committed answer used
``traceContext``          snapshot: the W3C trace context of the turn that wrote it (a resume links to it)
``deadline``              tool request (interrupt): ``{expiresAt, onExpire}``, its deadline and policy
``expired``               in a respond entry's ``interruptResponse``: the deadline policy that answered it
``escalated``             snapshot: ``{tool#ref: {at, group}}``, escalations a passed deadline applied
``delegated``             tool request (a delegation call): where its sub-agent paused; its interrupts follow it
``agentPath``             tool request (a surfaced interrupt): the sub-agents it came through, down to its tool's
``surfacedFrom``          tool request (a surfaced interrupt): ``{name, ref}`` of the delegation call it belongs to
``delegatedBy``           snapshot (and a sub-agent's context): ``{sessionId}`` of the session that delegated it
``handoff``               pending snapshot: the input and context a worker runs it with (``_engine.handoff``)
========================  ===================================================================

A delegation call (:mod:`interlock.agents._delegation`) whose sub-agent paused is kept in the paused
message as the call, marked ``delegated`` (not ``interrupt``: it is not answered itself),
followed by the sub-agent's interrupts *surfaced*: the same tool requests with a ref made
unique in this message, ``agentPath`` and ``surfacedFrom`` (:mod:`interlock._engine.surfacing`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ._json_object import is_array, is_object
from .errors import UsageError

if TYPE_CHECKING:
    from .parts import Part, ToolRequestPart

__all__ = [
    "APPROVAL",
    "APPROVAL_SNAKE",
    "DECISION",
    "HOLD",
    "IN_DOUBT",
    "INTERRUPT",
    "INTERRUPT_RESPONSE",
    "PENDING",
    "PENDING_OUTPUT",
    "REASON",
    "RECLAIMED_FROM",
    "REQUEUED",
    "RESUME_TOKEN",
    "CONSUMED_TOKENS",
    "AGENT_PATH",
    "DEADLINE",
    "DELEGATED",
    "DELEGATED_BY",
    "ESCALATED",
    "EXPIRED",
    "REPLACED_INPUT",
    "RESOLVED_INTERRUPT",
    "RESUMED",
    "SOURCE",
    "SURFACED_FROM",
    "TRACE_CONTEXT",
    "agent_path",
    "approval",
    "deadline_of",
    "expired_by",
    "hold_data",
    "hold_message",
    "interrupt_value",
    "is_hold",
    "is_in_doubt",
    "resume_token",
    "surfaced_from",
    "with_resume_token",
    "without_approval",
]

INTERRUPT = "interrupt"
"""Tool request: the call paused its turn; the value is the interrupt data (``True`` when none)."""
PENDING_OUTPUT = "pendingOutput"
"""Tool request: the output of a call that finished in a paused turn, parked so it never runs twice."""
RESUMED = "resumed"
"""Restart entry: the resume payload (``True`` for none); tool message: the resume's metadata."""
REPLACED_INPUT = "replacedInput"
"""Tool request: the original input that a revised restart replaced (the recorded original)."""
RESOLVED_INTERRUPT = "resolvedInterrupt"
"""Tool request: the data of an interrupt that was answered."""
INTERRUPT_RESPONSE = "interruptResponse"
"""Respond entry: marks it as the answer to an interrupt (``True``, or a dict of notes)."""
SOURCE = "source"
"""Tool response: where an output came from (:data:`PENDING` for a parked one)."""
PENDING = "pending"
"""The :data:`SOURCE` of a parked output reused by a resume."""
APPROVAL = "toolApproved"
"""In ``resumed``: ``true`` approves a call (a hold lets it through), ``false`` denies it explicitly."""
APPROVAL_SNAKE = "tool_approved"
"""The same approval, as Genkit's Python clients spell it."""
HOLD = "toolApproval"
"""In a hold's interrupt data: marks our own middleware holds (detection does not depend on it)."""
DECISION = "decision"
"""In a respond entry's ``interruptResponse`` dict: ``"approve"`` or ``"deny"``, an explicit decision."""
IN_DOUBT = "effectInDoubt"
"""In an interrupt's data: the effect journal paused this call because an earlier attempt may have taken effect."""
RECLAIMED_FROM = "reclaimedFrom"
REASON = "reason"
"""Snapshot metadata: the turn whose lapsed claim a resume took over."""
HANDOFF = "handoff"
"""Pending snapshot metadata: ``{"input": AgentInput JSON, "context": {...}, "named": snapshot id}`` for a worker."""
REQUEUED = "requeued"
"""Pending snapshot metadata: how many times a worker's sweeper re-enqueued its orphaned hand-off."""
RESUME_TOKEN = "resumeToken"
"""Interrupted tool request: its server-minted resume token (``interrupts/_tokens.py``); an answer carries it back."""
CONSUMED_TOKENS = "consumedTokens"
"""Snapshot metadata: the nonces of the resume tokens spent by the answer committed to it (single use)."""

TRACE_CONTEXT = "traceContext"
"""Snapshot metadata: the W3C trace context (``{"traceparent": ...}``) of the turn that wrote it."""
DEADLINE = "deadline"
"""Interrupted tool request: ``{"expiresAt": ISO 8601, "onExpire": policy}`` (:mod:`interlock.tools._expiry`)."""
EXPIRED = "expired"
"""In a respond entry's ``interruptResponse`` dict: the policy (``reject``/``respond``) of a passed deadline."""
ESCALATED = "escalated"
"""Snapshot metadata: ``{"tool#ref": {"at", "group"}}``, the escalations of passed deadlines (each applied once)."""

DELEGATED = "delegated"
"""Tool request: a delegation call whose sub-agent paused: ``{agent, sessionId, snapshotId | state, interrupts}``.

In a paused delegation tool's interrupt data while the tool loop works on it; on the call in the
stored (and output) message, with the sub-agent's interrupts surfaced after it.
"""
AGENT_PATH = "agentPath"
"""Surfaced interrupt: the names of the sub-agents it came through, from this agent's own sub-agent down."""
SURFACED_FROM = "surfacedFrom"
"""Surfaced interrupt: ``{"name", "ref"}`` of the delegation call in the same message that it belongs to."""
DELEGATED_BY = "delegatedBy"
"""Snapshot metadata (from the sub-agent's context): ``{"sessionId"}`` of the session whose delegation ran it.

The inbox lists such a snapshot's interrupts once, surfaced under the delegating session.
"""

_HOLD_PREFIX = "Tool not in approved list: "


def hold_message(tool: str) -> str:
    """The message of a hold on ``tool``, exactly as Genkit writes it."""
    return _HOLD_PREFIX + tool


def hold_data(tool: str) -> dict[str, Any]:
    """The interrupt data of a hold placed by tool-approval middleware."""
    return {"message": hold_message(tool), HOLD: True}


def is_hold(part: Part) -> bool:
    """True when ``part`` is a call held by tool-approval middleware, not paused by the tool itself.

    The one rule (middleware, ``Tool.interrupted()``, the inbox and the tool loop use it):
    a pending interrupt whose data is a dict whose ``message`` is
    ``"Tool not in approved list: <the part's tool name>"``, Genkit's format.
    """
    if part.kind != "tool_request" or not part.is_interrupt:
        return False
    data = part.meta(INTERRUPT)
    return is_object(data) and data.get("message") == hold_message(part.name)


def approval(resumed: object) -> bool | None:
    """The explicit approval a restart's ``resumed`` carries: ``True``, ``False``, or ``None`` (none)."""
    if not is_object(resumed):
        return None
    r = resumed
    if r.get(APPROVAL) is True or r.get(APPROVAL_SNAKE) is True:
        return True
    if r.get(APPROVAL) is False or r.get(APPROVAL_SNAKE) is False:
        return False
    return None


def without_approval(resumed: object) -> Any:
    """``resumed`` without the approval marker (what the tool sees); ``None`` when nothing is left."""
    if not is_object(resumed):
        return resumed
    r = resumed
    if APPROVAL not in r and APPROVAL_SNAKE not in r:
        return r
    return {k: v for k, v in r.items() if k not in (APPROVAL, APPROVAL_SNAKE)} or None


def interrupt_value(data: object) -> Any:
    """The ``metadata.interrupt`` value for interrupt ``data`` (JSON): ``True`` for none.

    Falsy data (``false``, ``0``, ``""``) is refused: Genkit clients read a falsy
    ``interrupt`` as "not paused", which would leave a turn no one can answer.
    """
    if data is None or data == {}:
        return True
    if data is False or data == "" or (isinstance(data, (int, float)) and data == 0):
        raise UsageError(
            f"interrupt data {data!r} reads as 'not interrupted' on the wire; "
            "interrupt with None (no data), True, or a value that is not false, 0 or an empty string"
        )
    return data


def is_in_doubt(part: Part) -> bool:
    """True when ``part`` is a call the effect journal paused: an earlier attempt may or may not have taken effect."""
    if part.kind != "tool_request" or not part.is_interrupt:
        return False
    data = part.meta(INTERRUPT)
    return is_object(data) and data.get(IN_DOUBT) is True


def resume_token(part: Part) -> str | None:
    """The resume token ``part`` carries (an interrupt, or the resume entry answering it), or ``None``."""
    token = part.meta(RESUME_TOKEN)
    return token if isinstance(token, str) else None


def with_resume_token(part: ToolRequestPart, token: str) -> ToolRequestPart:
    """``part`` carrying ``token`` as its resume token (an answer link's, in place of the stored one)."""
    return replace(part, metadata={**(part.metadata or {}), RESUME_TOKEN: token})


def deadline_of(part: Part) -> dict[str, Any] | None:
    """The deadline a pending interrupt carries (``{"expiresAt", "onExpire"}``), or ``None``."""
    if part.kind != "tool_request" or not part.is_interrupt:
        return None
    found = part.meta(DEADLINE)
    return found if is_object(found) else None


def expired_by(entry: Part) -> str | None:
    """The deadline policy a respond entry says answered it (``interruptResponse.expired``), or ``None``."""
    note = entry.meta(INTERRUPT_RESPONSE) if entry.kind == "tool_response" else None
    said = note.get(EXPIRED) if is_object(note) else None
    return said if isinstance(said, str) else None


def surfaced_from(part: Part) -> dict[str, Any] | None:
    """The delegation call (``{"name", "ref"}``) a surfaced interrupt belongs to, or ``None`` for any other part."""
    found = part.meta(SURFACED_FROM) if part.kind == "tool_request" else None
    return found if is_object(found) else None


def agent_path(part: Part) -> tuple[str, ...]:
    """The sub-agents a surfaced interrupt came through (``()`` for an agent's own interrupt)."""
    found = part.meta(AGENT_PATH) if surfaced_from(part) is not None else None
    if not is_array(found):
        return ()
    return tuple(name for name in found if isinstance(name, str))
