"""What goes into an agent and what comes out: inputs, init, outputs and stream chunks."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from .effects import Effects
from .errors import error_from_status
from .interrupts import Resume, ResumePlan
from .messages import Message
from .models import ModelChunk
from .parts import ToolRequestPart
from .sessions import Artifact, CustomPatch, ErrorInfo, SessionState

__all__ = [
    "AgentFinishReason",
    "AgentInit",
    "AgentInput",
    "AgentOutput",
    "AgentResult",
    "StreamChunk",
    "TurnContext",
    "TurnEnd",
    "TurnResult",
]

AgentFinishReason: TypeAlias = Literal[
    "stop", "length", "blocked", "interrupted", "other", "unknown", "aborted", "detached", "failed"
]
"""Why an invocation (or a turn) ended: the model's reasons plus ``aborted``, ``detached`` and ``failed``."""


@dataclass(frozen=True, kw_only=True, slots=True)
class AgentInput:
    """One input of an invocation: a user message, a resume, or both; ``detach`` sends the turn to the background."""

    message: Message | None = None
    resume: Resume | None = None
    detach: bool = False


@dataclass(frozen=True, kw_only=True, slots=True)
class AgentInit:
    """Where an invocation's session comes from.

    Server-managed agents take ``snapshot_id`` and/or ``session_id`` (both: the snapshot
    must belong to the session); client-managed agents take ``state``.
    """

    session_id: str | None = None
    snapshot_id: str | None = None
    state: SessionState | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class TurnEnd:
    """Ends each turn's stream: the snapshot written (server-managed) and the turn's finish reason."""

    snapshot_id: str | None = None
    finish_reason: str | None = None


StreamChunk: TypeAlias = ModelChunk | Artifact | CustomPatch | TurnEnd
"""What an agent streams: model chunks, artifacts, custom-state patches, and one turn end per turn."""


@dataclass(frozen=True, kw_only=True, slots=True)
class AgentOutput:
    """The result of an invocation.

    A failure inside a turn does not raise: ``finish_reason`` is ``failed``, ``error``
    says why, and ``snapshot_id`` / ``state`` point at the last good state.
    """

    session_id: str | None = None
    snapshot_id: str | None = None
    state: SessionState | None = None
    message: Message | None = None
    artifacts: list[Artifact] = field(default_factory=list[Artifact])
    finish_reason: str | None = None
    error: ErrorInfo | None = None

    @property
    def text(self) -> str:
        """The text of the last message."""
        return self.message.text if self.message else ""

    @property
    def interrupts(self) -> list[ToolRequestPart]:
        """The paused tool requests when the turn was interrupted."""
        if self.finish_reason != "interrupted" or self.message is None:
            return []
        return self.message.interrupts

    def raise_for_error(self) -> AgentOutput:
        """Raise the typed error of a failed invocation; return ``self`` otherwise."""
        if self.error is not None:
            raise error_from_status(self.error.status, self.error.message, details=self.error.details)
        return self


@dataclass(frozen=True, kw_only=True, slots=True)
class TurnContext:
    """What a custom agent's turn handler knows about the turn."""

    snapshot_id: str | None
    """The id reserved for this turn's snapshot (server-managed agents)."""
    parent_snapshot_id: str | None
    turn_index: int
    context: dict[str, Any] = field(default_factory=dict[str, Any])
    plan: ResumePlan | None = None
    """The turn's resume, validated (``None`` when the input carries no resume)."""
    reclaimed_from: str | None = None
    """The turn whose lapsed claim on the resumed snapshot this turn took over (its tools may have run)."""
    effects: Effects | None = None
    """The turn's effect journal (server-managed agents): run tool bodies through it so none repeats silently."""


@dataclass(frozen=True, kw_only=True, slots=True)
class TurnResult:
    """A turn handler's optional result."""

    finish_reason: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class AgentResult:
    """A custom agent's optional result."""

    message: Message | None = None
    artifacts: list[Artifact] | None = None
    finish_reason: str | None = None
