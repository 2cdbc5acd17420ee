"""The metadata keys interlock reads and writes, constants only.

A leaf: :mod:`interlock.metadata` tables the keys and holds the rules that read them; ``parts.py``
imports the one key it needs from here.
"""

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
POLICY = "answerPolicy"
"""Tool request (interrupt): ``{name, digest, requester, quorum}``, the answer policy it was asked under."""
VOTES = "votes"
"""Snapshot metadata: ``{"tool#ref": [{by, at, decision, digest}]}``, the quorum votes cast on its interrupts."""
REASKED = "reasked"
"""Tool request (interrupt): ``{reason, at}``, an approved call asked again because its tool's recheck failed."""
