"""Content parts: the pieces a message is made of.

Parts are frozen dataclasses with snake_case fields. Each kind has a ``kind`` literal,
and every part may carry ``metadata`` and ``custom`` dictionaries. Keys the wire format
has that we do not model are kept in ``extra`` so a part survives a JSON round trip
unchanged (see :mod:`interlock._wire`).

Interrupt bookkeeping lives in ``metadata`` exactly as Genkit stores it:
``interrupt``, ``pendingOutput``, ``resolvedInterrupt``, ``resumed``, ``replacedInput``,
``interruptResponse`` and ``source``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Self, TypeAlias, TypeVar

from ._json_object import json_object, new_dict, optional_object, put_present, unknown_keys
from ._keys import INTERRUPT
from .errors import InvalidArgumentError
from .records._evolve import evolver, fast_init

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
    "part_from_json",
    "part_to_json",
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
    extra: dict[str, Any] = field(default_factory=new_dict, repr=False)
    """Unknown wire keys, kept so the part round-trips unchanged."""

    @property
    def is_interrupt(self) -> bool:
        """True when this part paused the turn and still waits for an answer (only a tool request can).

        Every part kind has it, so ``[p for p in message.content if p.is_interrupt]`` reads any message.
        """
        return False

    def meta(self, key: str, default: object = None) -> Any:
        """One metadata value, or ``default``."""
        return self.metadata.get(key, default) if self.metadata else default

    def to_json(self) -> dict[str, Any]:
        """This part as Genkit's camelCase JSON; :meth:`from_json` reads it back unchanged."""
        return part_to_json(self)

    @classmethod
    def from_json(cls, data: object) -> Self:
        """A part of this kind read from Genkit JSON (e.g. ``ToolRequestPart.from_json(...)``).

        Raises :class:`~interlock.errors.InvalidArgumentError` when ``data`` is not a part,
        or is a part of another kind (:func:`part_from_json` reads any kind).
        """
        part = part_from_json(data)
        if not isinstance(part, cls):
            raise InvalidArgumentError(f"expected a {cls.__name__}, got a {type(part).__name__}")
        return part


@fast_init
@dataclass(frozen=True, kw_only=True, slots=True)
class TextPart(_Base):
    """Plain text."""

    text: str
    kind: Literal["text"] = "text"


@fast_init
@dataclass(frozen=True, kw_only=True, slots=True)
class ReasoningPart(_Base):
    """A model's reasoning text."""

    reasoning: str
    kind: Literal["reasoning"] = "reasoning"


@fast_init
@dataclass(frozen=True, kw_only=True, slots=True)
class MediaPart(_Base):
    """Media by URL (``data:`` or ``https:``)."""

    url: str
    content_type: str | None = None
    media_extra: dict[str, Any] = field(default_factory=new_dict, repr=False)
    """Unknown keys inside the wire ``media`` object."""
    kind: Literal["media"] = "media"


@fast_init
@dataclass(frozen=True, kw_only=True, slots=True)
class ToolRequestPart(_Base):
    """A model's request to run a tool.

    ``ref`` correlates the request with its response (a provider call id).
    """

    name: str
    ref: str | None = None
    input: Json = None
    partial: bool | None = None
    request_extra: dict[str, Any] = field(default_factory=new_dict, repr=False)
    """Unknown keys inside the wire ``toolRequest`` object."""
    kind: Literal["tool_request"] = "tool_request"

    @property
    def is_interrupt(self) -> bool:
        """True when this request paused the turn and still waits for an answer."""
        value = self.metadata.get(INTERRUPT) if self.metadata else None
        return value is not None and value is not False


@fast_init
@dataclass(frozen=True, kw_only=True, slots=True)
class ToolResponsePart(_Base):
    """A tool's output, answering the request with the same ``name`` and ``ref``."""

    name: str
    ref: str | None = None
    output: Json = None
    content: list[Part] | None = None
    response_extra: dict[str, Any] = field(default_factory=new_dict, repr=False)
    """Unknown keys inside the wire ``toolResponse`` object."""
    kind: Literal["tool_response"] = "tool_response"


@fast_init
@dataclass(frozen=True, kw_only=True, slots=True)
class DataPart(_Base):
    """Structured data."""

    data: Json
    kind: Literal["data"] = "data"


@fast_init
@dataclass(frozen=True, kw_only=True, slots=True)
class CustomPart(_Base):
    """A provider-specific part; ``value`` is the wire ``custom`` object."""

    value: dict[str, Any]
    kind: Literal["custom"] = "custom"


@fast_init
@dataclass(frozen=True, kw_only=True, slots=True)
class ResourcePart(_Base):
    """A reference to a resource by URI."""

    uri: str
    resource_extra: dict[str, Any] = field(default_factory=new_dict, repr=False)
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
    return _evolve(part, metadata=meta or None)


_EVOLVERS: dict[type[Any], Callable[..., Any]] = {}


def _evolve(part: _P, **changes: Any) -> _P:
    """``dataclasses.replace`` for parts (they have no ``__post_init__``), without its walk over the fields."""
    evolve = _EVOLVERS.get(type(part))
    if evolve is None:
        evolve = _EVOLVERS[type(part)] = evolver(type(part))
    return evolve(part, **changes)


_COMMON = ("metadata", "custom")
_KINDS = ("text", "media", "toolRequest", "toolResponse", "reasoning", "data", "resource")


def _text(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise InvalidArgumentError(f"a part's {what!r} must be a string, got {type(value).__name__}")
    return value


def part_from_json(data: object) -> Part:
    """Read one part of any kind from Genkit JSON (``{"text": ...}``, ``{"toolRequest": {...}}``, ...).

    Raises :class:`~interlock.errors.InvalidArgumentError` for what is not a part.
    """
    d = json_object(data, "a part")
    common: dict[str, Any] = {"metadata": optional_object(d, "metadata")}
    kind = next((k for k in _KINDS if d.get(k) is not None), None)
    if kind is None and "data" in d:
        kind = "data"  # a data part may hold null; it is written as {"data": null}
    if kind is None and isinstance(d.get("custom"), dict):
        return CustomPart(value=d["custom"], metadata=common["metadata"], extra=unknown_keys(d, _COMMON))
    common["custom"] = optional_object(d, "custom")
    if kind is None:
        raise InvalidArgumentError(f"unknown part kind with keys {sorted(d)!r}; expected one of {list(_KINDS)!r}")
    common["extra"] = unknown_keys(d, (*_COMMON, kind))
    body = d[kind]
    if kind == "text":
        return TextPart(text=_text(body, "text"), **common)
    if kind == "reasoning":
        return ReasoningPart(reasoning=_text(body, "reasoning"), **common)
    if kind == "data":
        return DataPart(data=body, **common)
    b = json_object(body, kind)
    if kind == "toolRequest":
        return ToolRequestPart(
            name=_text(b.get("name", ""), "toolRequest.name"),
            ref=b.get("ref"),
            input=b.get("input"),
            partial=b.get("partial"),
            request_extra=unknown_keys(b, ("name", "ref", "input", "partial")),
            **common,
        )
    if kind == "toolResponse":
        content = b.get("content")
        return ToolResponsePart(
            name=_text(b.get("name", ""), "toolResponse.name"),
            ref=b.get("ref"),
            output=b.get("output"),
            content=None if content is None else [part_from_json(p) for p in content],
            response_extra=unknown_keys(b, ("name", "ref", "output", "content")),
            **common,
        )
    if kind == "media":
        return MediaPart(
            url=_text(b.get("url", ""), "media.url"),
            content_type=b.get("contentType"),
            media_extra=unknown_keys(b, ("url", "contentType")),
            **common,
        )
    return ResourcePart(uri=_text(b.get("uri", ""), "resource.uri"), resource_extra=unknown_keys(b, ("uri",)), **common)


def _body(part: _Base) -> tuple[str, Any]:
    if isinstance(part, TextPart):
        return "text", part.text
    if isinstance(part, ToolRequestPart):
        b: dict[str, Any] = {"name": part.name}
        put_present(b, "ref", part.ref)
        put_present(b, "input", part.input)
        put_present(b, "partial", part.partial)
        return "toolRequest", b | part.request_extra
    if isinstance(part, ToolResponsePart):
        b = {"name": part.name}
        put_present(b, "ref", part.ref)
        put_present(b, "output", part.output)
        if part.content is not None:
            b["content"] = [part_to_json(p) for p in part.content]
        return "toolResponse", b | part.response_extra
    if isinstance(part, ReasoningPart):
        return "reasoning", part.reasoning
    if isinstance(part, MediaPart):
        b = {"url": part.url}
        put_present(b, "contentType", part.content_type)
        return "media", b | part.media_extra
    if isinstance(part, DataPart):
        return "data", part.data
    if isinstance(part, ResourcePart):
        return "resource", {"uri": part.uri} | part.resource_extra
    if isinstance(part, CustomPart):
        return "custom", part.value
    raise InvalidArgumentError(f"{type(part).__name__} is not a part interlock can write")


def part_to_json(part: _Base) -> dict[str, Any]:
    """Write one part as Genkit's camelCase JSON (``part.to_json()`` does the same)."""
    key, body = _body(part)
    d: dict[str, Any] = {key: body}
    if part.metadata is not None:
        d["metadata"] = part.metadata
    if part.custom is not None and not isinstance(part, CustomPart):
        d["custom"] = part.custom
    if part.extra:
        d.update(part.extra)
    return d
