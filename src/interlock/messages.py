"""Messages: a role and a list of parts."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from .parts import Part, ReasoningPart, TextPart, ToolRequestPart, ToolResponsePart

__all__ = ["Message", "Role"]

Role: TypeAlias = Literal["system", "user", "model", "tool"]
"""Who wrote a message."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Message:
    """One message of a conversation.

    Messages are values: the runtime never changes one in place, it replaces it. That
    lets snapshots share messages instead of copying the whole history every turn.
    """

    role: Role | str
    """``system``, ``user``, ``model`` or ``tool`` (unknown roles are kept as given)."""
    content: list[Part] = field(default_factory=list[Part])
    """The parts, in order."""
    metadata: dict[str, Any] | None = None
    """Free-form metadata (a resumed tool message carries ``resumed``)."""
    extra: dict[str, Any] = field(default_factory=dict[str, Any], repr=False)
    """Unknown wire keys, kept for a lossless round trip."""

    @classmethod
    def user(cls, text: str) -> Message:
        """A user message with one text part."""
        return cls(role="user", content=[TextPart(text=text)])

    @classmethod
    def model(cls, text: str) -> Message:
        """A model message with one text part."""
        return cls(role="model", content=[TextPart(text=text)])

    @classmethod
    def system(cls, text: str) -> Message:
        """A system message with one text part."""
        return cls(role="system", content=[TextPart(text=text)])

    @property
    def text(self) -> str:
        """All text parts joined."""
        return "".join(p.text for p in self.content if isinstance(p, TextPart))

    @property
    def reasoning(self) -> str:
        """All reasoning parts joined."""
        return "".join(p.reasoning for p in self.content if isinstance(p, ReasoningPart))

    @property
    def tool_requests(self) -> list[ToolRequestPart]:
        """The tool request parts, in order."""
        return [p for p in self.content if isinstance(p, ToolRequestPart)]

    @property
    def tool_responses(self) -> list[ToolResponsePart]:
        """The tool response parts, in order."""
        return [p for p in self.content if isinstance(p, ToolResponsePart)]

    @property
    def interrupts(self) -> list[ToolRequestPart]:
        """Tool requests that paused the turn and wait for an answer."""
        return [p for p in self.content if isinstance(p, ToolRequestPart) and p.is_interrupt]
