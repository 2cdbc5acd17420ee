"""The model seam: :class:`Model` and the request, response and chunk types it speaks."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeAlias, runtime_checkable

from .._json_object import new_dict, new_list
from ..messages import Message
from ..parts import Part, ToolRequestPart
from ..records._evolve import fast_init

FinishReason: TypeAlias = Literal["stop", "length", "blocked", "aborted", "interrupted", "other", "unknown"]
"""Why a model (or a tool-loop turn) stopped. Unknown values from providers are kept as strings."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolDefinition:
    """A tool as the model sees it: name, description and JSON Schemas."""

    name: str
    description: str = ""
    input_schema: dict[str, Any] | None = None
    output_schema: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class Usage:
    """Token counts (and anything else a provider reports, in ``custom``)."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    total_tokens: int | None = None
    custom: dict[str, Any] | None = None


@fast_init
@dataclass(frozen=True, kw_only=True, slots=True)
class ModelRequest:
    """What a model is asked: the messages, the tools it may call and its config."""

    messages: list[Message]
    tools: list[ToolDefinition] = field(default_factory=new_list)
    config: dict[str, Any] | None = None
    tool_choice: Literal["auto", "required", "none"] | None = None
    output: dict[str, Any] | None = None
    """Output constraints, e.g. ``{"format": "json", "schema": {...}}``."""


@fast_init
@dataclass(frozen=True, kw_only=True, slots=True)
class ModelResponse:
    """A model's answer."""

    message: Message
    finish_reason: FinishReason | str = "stop"
    finish_message: str | None = None
    usage: Usage | None = None
    custom: dict[str, Any] | None = None
    raw: Any = field(default=None, repr=False, compare=False)
    """The provider's raw response, for debugging; never persisted."""


@fast_init
@dataclass(frozen=True, kw_only=True, slots=True)
class ModelChunk:
    """A piece of a streamed response (Genkit's ``ModelResponseChunk``)."""

    content: list[Part]
    role: str | None = "model"
    index: int | float | None = None
    custom: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=new_dict, repr=False)

    @property
    def text(self) -> str:
        """The text in this chunk."""
        return Message(role=self.role or "model", content=self.content).text

    @property
    def interrupts(self) -> list[ToolRequestPart]:
        """The paused tool requests in this chunk (a turn that pauses streams them last, before its turn end)."""
        return [p for p in self.content if isinstance(p, ToolRequestPart) and p.is_interrupt]


ChunkCallback: TypeAlias = Callable[[ModelChunk], Awaitable[None] | None]
"""Receives stream chunks; may be sync or async."""


@runtime_checkable
class Model(Protocol):
    """Anything that answers a :class:`ModelRequest`."""

    @property
    def name(self) -> str:
        """A ``provider/model`` name, used in logs and by the registry."""
        ...

    async def generate(self, request: ModelRequest, *, on_chunk: ChunkCallback | None = None) -> ModelResponse:
        """Answer one request, streaming chunks to ``on_chunk`` when the model can."""
        ...
