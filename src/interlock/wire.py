"""The one place that converts between our types and Genkit's camelCase JSON.

Conversions are lossless: keys we do not model are kept in each type's ``extra``
dictionary and written back in place, so any message round-trips unchanged. ``null``
for an optional field reads as absent (Genkit omits optional fields).
"""

from __future__ import annotations

from typing import Any, cast

from .errors import InvalidArgumentError
from .messages import Message
from .parts import (
    CustomPart,
    DataPart,
    MediaPart,
    Part,
    ReasoningPart,
    ResourcePart,
    TextPart,
    ToolRequestPart,
    ToolResponsePart,
)

__all__ = [
    "message_from_json",
    "message_to_json",
    "messages_from_json",
    "messages_to_json",
    "part_from_json",
    "part_to_json",
]

_COMMON = ("metadata", "custom")
_KINDS = ("text", "media", "toolRequest", "toolResponse", "reasoning", "data", "resource")


def _obj(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InvalidArgumentError(f"{what} must be a JSON object, got {type(value).__name__}")
    return cast(dict[str, Any], value)


def _rest(d: dict[str, Any], known: tuple[str, ...]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if k not in known}


def _opt_dict(d: dict[str, Any], key: str) -> dict[str, Any] | None:
    value = d.get(key)
    return None if value is None else _obj(value, key)


def part_from_json(data: Any) -> Part:
    """Read one Genkit part (``{"text": ...}``, ``{"toolRequest": {...}}``, ...)."""
    d = _obj(data, "a part")
    common: dict[str, Any] = {"metadata": _opt_dict(d, "metadata")}
    kind = next((k for k in _KINDS if d.get(k) is not None), None)
    if kind is None and isinstance(d.get("custom"), dict):
        return CustomPart(value=d["custom"], metadata=common["metadata"], extra=_rest(d, _COMMON))
    common["custom"] = _opt_dict(d, "custom")
    if kind is None:
        raise InvalidArgumentError(f"unknown part kind with keys {sorted(d)!r}; expected one of {list(_KINDS)!r}")
    common["extra"] = _rest(d, (*_COMMON, kind))
    body = d[kind]
    if kind == "text":
        return TextPart(text=str(body), **common)
    if kind == "reasoning":
        return ReasoningPart(reasoning=str(body), **common)
    if kind == "data":
        return DataPart(data=body, **common)
    b = _obj(body, kind)
    if kind == "toolRequest":
        return ToolRequestPart(
            name=str(b.get("name", "")),
            ref=b.get("ref"),
            input=b.get("input"),
            partial=b.get("partial"),
            request_extra=_rest(b, ("name", "ref", "input", "partial")),
            **common,
        )
    if kind == "toolResponse":
        content = b.get("content")
        return ToolResponsePart(
            name=str(b.get("name", "")),
            ref=b.get("ref"),
            output=b.get("output"),
            content=None if content is None else [part_from_json(p) for p in content],
            response_extra=_rest(b, ("name", "ref", "output", "content")),
            **common,
        )
    if kind == "media":
        return MediaPart(
            url=str(b.get("url", "")),
            content_type=b.get("contentType"),
            media_extra=_rest(b, ("url", "contentType")),
            **common,
        )
    return ResourcePart(uri=str(b.get("uri", "")), resource_extra=_rest(b, ("uri",)), **common)


def _put(d: dict[str, Any], key: str, value: Any) -> None:
    if value is not None:
        d[key] = value


def _body(part: Part) -> tuple[str, Any]:
    if isinstance(part, TextPart):
        return "text", part.text
    if isinstance(part, ToolRequestPart):
        b: dict[str, Any] = {"name": part.name}
        _put(b, "ref", part.ref)
        _put(b, "input", part.input)
        _put(b, "partial", part.partial)
        return "toolRequest", b | part.request_extra
    if isinstance(part, ToolResponsePart):
        b = {"name": part.name}
        _put(b, "ref", part.ref)
        _put(b, "output", part.output)
        if part.content is not None:
            b["content"] = [part_to_json(p) for p in part.content]
        return "toolResponse", b | part.response_extra
    if isinstance(part, ReasoningPart):
        return "reasoning", part.reasoning
    if isinstance(part, MediaPart):
        b = {"url": part.url}
        _put(b, "contentType", part.content_type)
        return "media", b | part.media_extra
    if isinstance(part, DataPart):
        return "data", part.data
    if isinstance(part, ResourcePart):
        return "resource", {"uri": part.uri} | part.resource_extra
    return "custom", part.value


def part_to_json(part: Part) -> dict[str, Any]:
    """Write one part as Genkit JSON."""
    key, body = _body(part)
    d: dict[str, Any] = {key: body}
    if part.metadata is not None:
        d["metadata"] = part.metadata
    if part.custom is not None and not isinstance(part, CustomPart):
        d["custom"] = part.custom
    if part.extra:
        d.update(part.extra)
    return d


def message_from_json(data: Any) -> Message:
    """Read one Genkit message (``{"role": ..., "content": [...]}``)."""
    d = _obj(data, "a message")
    role = d.get("role")
    if not isinstance(role, str):
        raise InvalidArgumentError("a message needs a string 'role' (system, user, model or tool)")
    content: Any = d.get("content") or []
    if not isinstance(content, list):
        raise InvalidArgumentError("a message's 'content' must be a list of parts")
    return Message(
        role=role,
        content=[part_from_json(p) for p in cast(list[Any], content)],
        metadata=_opt_dict(d, "metadata"),
        extra=_rest(d, ("role", "content", "metadata")),
    )


def message_to_json(message: Message) -> dict[str, Any]:
    """Write one message as Genkit JSON."""
    d: dict[str, Any] = {"role": message.role, "content": [part_to_json(p) for p in message.content]}
    if message.metadata is not None:
        d["metadata"] = message.metadata
    if message.extra:
        d.update(message.extra)
    return d


def messages_from_json(data: Any) -> list[Message]:
    """Read a list of messages."""
    if not isinstance(data, list):
        raise InvalidArgumentError("messages must be a JSON list")
    return [message_from_json(m) for m in cast(list[Any], data)]


def messages_to_json(messages: list[Message]) -> list[dict[str, Any]]:
    """Write a list of messages."""
    return [message_to_json(m) for m in messages]
