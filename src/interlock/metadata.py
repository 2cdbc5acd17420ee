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
``answerPolicy``          tool request (interrupt): ``{name, digest, requester, quorum}``, who may answer it
``reasked``               tool request (interrupt): ``{reason, at}``, an approval its tool's recheck found stale
``warned``                snapshot: ``{tool#ref: {at, expiresAt}}``, the expiry warnings sent (once per deadline)
``extended``              snapshot: ``{tool#ref: [{by, at, from, to}]}``, the deadline extensions, audited
``votes``                 snapshot: ``{tool#ref: [{by, at, decision, digest}]}``, the quorum votes cast so far
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
from ._keys import (
    AGENT_PATH as AGENT_PATH,
)
from ._keys import (
    APPROVAL as APPROVAL,
)
from ._keys import (
    APPROVAL_SNAKE as APPROVAL_SNAKE,
)
from ._keys import (
    CONSUMED_TOKENS as CONSUMED_TOKENS,
)
from ._keys import (
    DEADLINE as DEADLINE,
)
from ._keys import (
    DECISION as DECISION,
)
from ._keys import (
    DELEGATED as DELEGATED,
)
from ._keys import (
    DELEGATED_BY as DELEGATED_BY,
)
from ._keys import (
    ESCALATED as ESCALATED,
)
from ._keys import (
    EXPIRED as EXPIRED,
)
from ._keys import (
    EXTENDED as EXTENDED,
)
from ._keys import (
    HANDOFF as HANDOFF,
)
from ._keys import (
    HOLD as HOLD,
)
from ._keys import (
    IN_DOUBT as IN_DOUBT,
)
from ._keys import (
    INTERRUPT as INTERRUPT,
)
from ._keys import (
    INTERRUPT_RESPONSE as INTERRUPT_RESPONSE,
)
from ._keys import (
    PENDING as PENDING,
)
from ._keys import (
    PENDING_OUTPUT as PENDING_OUTPUT,
)
from ._keys import (
    POLICY as POLICY,
)
from ._keys import (
    REASKED as REASKED,
)
from ._keys import (
    REASON as REASON,
)
from ._keys import (
    RECLAIMED_FROM as RECLAIMED_FROM,
)
from ._keys import (
    REPLACED_INPUT as REPLACED_INPUT,
)
from ._keys import (
    REQUEUED as REQUEUED,
)
from ._keys import (
    RESOLVED_INTERRUPT as RESOLVED_INTERRUPT,
)
from ._keys import (
    RESUME_TOKEN as RESUME_TOKEN,
)
from ._keys import (
    RESUMED as RESUMED,
)
from ._keys import (
    SOURCE as SOURCE,
)
from ._keys import (
    SURFACED_FROM as SURFACED_FROM,
)
from ._keys import (
    TRACE_CONTEXT as TRACE_CONTEXT,
)
from ._keys import (
    VOTES as VOTES,
)
from ._keys import (
    WARNED as WARNED,
)
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
    "POLICY",
    "REASKED",
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
    "VOTES",
    "WARNED",
    "EXTENDED",
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
