"""Content parts: the pieces a message is made of.

Parts are frozen dataclasses with snake_case fields. Each kind has a ``kind`` literal,
and every part may carry ``metadata`` and ``custom`` dictionaries. Keys the wire format
has that we do not model are kept in ``extra`` so a part survives a JSON round trip
unchanged (see :mod:`interlock.wire`).

Interrupt bookkeeping lives in ``metadata`` exactly as Genkit stores it:
``interrupt``, ``pendingOutput``, ``resolvedInterrupt``, ``resumed``, ``replacedInput``,
``interruptResponse`` and ``source``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Literal, TypeAlias, TypeVar

from .metadata import INTERRUPT

__all__ = [
    "CustomPart",
    "DataPart",
    "MediaPart",
    "Part",
    "ReasoningPart",
    "ResourcePart",
    "TextPart",
    "ToolRequestPart",
    "ToolResponsePart",
    "with_metadata",
]

Json: TypeAlias = Any
"""Any JSON value (dict, list, str, int, float, bool or None)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class _Base:
    metadata: dict[str, Any] | None = None
    """Free-form metadata; interrupt bookkeeping keys live here."""
    custom: dict[str, Any] | None = None
    """Provider-specific data."""
    extra: dict[str, Any] = field(default_factory=dict[str, Any], repr=False)
    """Unknown wire keys, kept so the part round-trips unchanged."""

    def meta(self, key: str, default: Any = None) -> Any:
        """One metadata value, or ``default``."""
        return self.metadata.get(key, default) if self.metadata else default


@dataclass(frozen=True, kw_only=True, slots=True)
class TextPart(_Base):
    """Plain text."""

    text: str
    kind: Literal["text"] = "text"


@dataclass(frozen=True, kw_only=True, slots=True)
class ReasoningPart(_Base):
    """A model's reasoning text."""

    reasoning: str
    kind: Literal["reasoning"] = "reasoning"


@dataclass(frozen=True, kw_only=True, slots=True)
class MediaPart(_Base):
    """Media by URL (``data:`` or ``https:``)."""

    url: str
    content_type: str | None = None
    media_extra: dict[str, Any] = field(default_factory=dict[str, Any], repr=False)
    """Unknown keys inside the wire ``media`` object."""
    kind: Literal["media"] = "media"


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolRequestPart(_Base):
    """A model's request to run a tool.

    ``ref`` correlates the request with its response (a provider call id).
    """

    name: str
    ref: str | None = None
    input: Json = None
    partial: bool | None = None
    request_extra: dict[str, Any] = field(default_factory=dict[str, Any], repr=False)
    """Unknown keys inside the wire ``toolRequest`` object."""
    kind: Literal["tool_request"] = "tool_request"

    @property
    def is_interrupt(self) -> bool:
        """True when this request paused the turn and still waits for an answer."""
        value = self.metadata.get(INTERRUPT) if self.metadata else None
        return value is not None and value is not False


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolResponsePart(_Base):
    """A tool's output, answering the request with the same ``name`` and ``ref``."""

    name: str
    ref: str | None = None
    output: Json = None
    content: list[Part] | None = None
    response_extra: dict[str, Any] = field(default_factory=dict[str, Any], repr=False)
    """Unknown keys inside the wire ``toolResponse`` object."""
    kind: Literal["tool_response"] = "tool_response"


@dataclass(frozen=True, kw_only=True, slots=True)
class DataPart(_Base):
    """Structured data."""

    data: Json
    kind: Literal["data"] = "data"


@dataclass(frozen=True, kw_only=True, slots=True)
class CustomPart(_Base):
    """A provider-specific part; ``value`` is the wire ``custom`` object."""

    value: dict[str, Any]
    kind: Literal["custom"] = "custom"


@dataclass(frozen=True, kw_only=True, slots=True)
class ResourcePart(_Base):
    """A reference to a resource by URI."""

    uri: str
    resource_extra: dict[str, Any] = field(default_factory=dict[str, Any], repr=False)
    """Unknown keys inside the wire ``resource`` object."""
    kind: Literal["resource"] = "resource"


_P = TypeVar("_P", bound=_Base)

Part: TypeAlias = (
    TextPart | ReasoningPart | MediaPart | ToolRequestPart | ToolResponsePart | DataPart | CustomPart | ResourcePart
)
"""Any content part."""


def with_metadata(part: _P, *, drop: tuple[str, ...] = (), **values: Any) -> _P:
    """A copy of ``part`` with metadata keys set (``values``) and removed (``drop``).

    Metadata dictionaries are never mutated in place: history shares parts between
    snapshots, so a change always makes a new part.
    """
    meta = dict(part.metadata or {})
    for key in drop:
        meta.pop(key, None)
    meta.update(values)
    return replace(part, metadata=meta or None)
