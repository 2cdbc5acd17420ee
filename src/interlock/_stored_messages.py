"""Messages and parts built from a store's own JSON: the load path's fast reader.

A store writes a history with :func:`~interlock.messages.messages_to_json` from messages
that were checked when they entered (wire input goes through the full readers in
:mod:`interlock.messages` and :mod:`interlock.parts`), so a stored row holds canonical JSON
of valid messages. Reading one back need not pay for the frozen dataclasses' ``__init__``
(a call and ``object.__setattr__`` per field, about two thirds of the cost): the common
shapes are built here by setting each slot directly, after the cheap type checks of the
values stored. Anything else (unknown keys, another shape, a wrong type: a damaged row, or
JSON written by another version) goes to the full readers, so the result is exactly theirs
and a damaged row fails as it always did, with their :class:`~interlock.errors.InvalidArgumentError`.
"""

from __future__ import annotations

from collections.abc import Callable
from types import MemberDescriptorType
from typing import Any

from ._json_object import unknown_keys
from .messages import Message, message_from_json, messages_from_json
from .parts import DataPart, Part, ReasoningPart, TextPart, ToolRequestPart, ToolResponsePart, part_from_json

Setter = Callable[[object, object], None]


def _slot(cls: type, name: str) -> Setter:
    """The setter of a slot of ``cls`` (bypasses a frozen dataclass's ``__setattr__``)."""
    for klass in cls.__mro__:
        found: object = vars(klass).get(name)
        if found is not None:
            if not isinstance(found, MemberDescriptorType):
                raise TypeError(f"{cls.__name__}.{name} is not a slot (the class must be a slots dataclass)")
            return found.__set__
    raise TypeError(f"{cls.__name__} has no field {name!r}")


_new = object.__new__
_DICT: type[Any] = dict  # compared with ``type(value) is``: exact (parsed JSON), and cheaper than isinstance
_LIST: type[Any] = list
_META, _CUSTOM, _EXTRA = (_slot(TextPart, n) for n in ("metadata", "custom", "extra"))
_ROLE, _CONTENT, _MSG_META, _MSG_EXTRA = (_slot(Message, n) for n in ("role", "content", "metadata", "extra"))
_TEXT, _TEXT_KIND = _slot(TextPart, "text"), _slot(TextPart, "kind")
_REASONING, _REASONING_KIND = _slot(ReasoningPart, "reasoning"), _slot(ReasoningPart, "kind")
_DATA, _DATA_KIND = _slot(DataPart, "data"), _slot(DataPart, "kind")
_REQUEST = tuple(_slot(ToolRequestPart, n) for n in ("name", "ref", "input", "partial", "request_extra", "kind"))
_RESPONSE = tuple(_slot(ToolResponsePart, n) for n in ("name", "ref", "output", "content", "response_extra", "kind"))
_REQUEST_KEYS = ("name", "ref", "input", "partial")
_RESPONSE_KEYS = ("name", "ref", "output", "content")


def stored_messages(data: Any) -> list[Message]:
    """The messages of a stored history (a JSON array as parsed); the full readers' result, faster.

    Raises :class:`~interlock.errors.InvalidArgumentError` for what is not messages, as
    :func:`~interlock.messages.messages_from_json` does.
    """
    if type(data) is not _LIST:
        return messages_from_json(data)  # raises: not a list
    return [_message(m) for m in data]


def stored_part(data: Any) -> Part:
    """A stored part (as parsed): :func:`~interlock.parts.part_from_json`'s result, faster."""
    return _part(data)


def _message(d: Any) -> Message:
    if type(d) is not _DICT:
        return message_from_json(d)
    role, content, meta = d.get("role"), d.get("content"), d.get("metadata")
    if (
        type(role) is not str
        or type(content) is not _LIST
        or len(d) != (3 if "metadata" in d else 2)
        or (meta is not None and type(meta) is not _DICT)
    ):
        return message_from_json(d)
    m = _new(Message)
    _ROLE(m, role)
    _CONTENT(m, [_part(content[0])] if len(content) == 1 else [_part(p) for p in content])
    _MSG_META(m, meta)
    _MSG_EXTRA(m, {})
    return m


def _part(d: Any) -> Part:
    if type(d) is not _DICT or not d:
        return part_from_json(d)
    key = next(iter(d))  # written first (see part_to_json)
    body = d[key]
    if len(d) == 1:
        meta = custom = None
    else:
        meta, custom = d.get("metadata"), d.get("custom")
        if (
            len(d) != 1 + ("metadata" in d) + ("custom" in d)
            or (meta is not None and type(meta) is not _DICT)
            or (custom is not None and type(custom) is not _DICT)
        ):
            return part_from_json(d)  # extra keys, a custom part, a damaged part
    if body is None:
        return part_from_json(d)  # data: null, or a damaged part
    p: Any
    if key == "text" and type(body) is str:
        p = _new(TextPart)
        _TEXT(p, body)
        _TEXT_KIND(p, "text")
    elif key == "toolRequest" and type(body) is _DICT and type(body.get("name", "")) is str:
        p = _tool(ToolRequestPart, _REQUEST, _REQUEST_KEYS, body, body.get("partial"))
    elif key == "toolResponse" and type(body) is _DICT and type(body.get("name", "")) is str:
        content = body.get("content")
        if content is not None and type(content) is not _LIST:
            return part_from_json(d)
        parts = None if content is None else [_part(c) for c in content]
        p = _tool(ToolResponsePart, _RESPONSE, _RESPONSE_KEYS, body, parts)
    elif key == "reasoning" and type(body) is str:
        p = _new(ReasoningPart)
        _REASONING(p, body)
        _REASONING_KIND(p, "reasoning")
    elif key == "data":
        p = _new(DataPart)
        _DATA(p, body)
        _DATA_KIND(p, "data")
    else:
        return part_from_json(d)  # media, resource, or a damaged part
    _META(p, meta)
    _CUSTOM(p, custom)
    _EXTRA(p, {})
    return p


def _tool(
    cls: type[ToolRequestPart | ToolResponsePart],
    setters: tuple[Setter, ...],
    keys: tuple[str, ...],
    body: dict[str, Any],
    last: object,
) -> ToolRequestPart | ToolResponsePart:
    """A tool request or response part, but for the fields all parts have; ``last``: its ``partial`` or ``content``."""
    set_name, set_ref, set_value, set_last, set_extra, set_kind = setters
    p = _new(cls)
    set_name(p, body.get("name", ""))
    set_ref(p, body.get("ref"))
    set_value(p, body.get(keys[2]))
    set_last(p, last)
    known = ("name" in body) + ("ref" in body) + (keys[2] in body) + (keys[3] in body)
    set_extra(p, {} if len(body) == known else unknown_keys(body, keys))
    set_kind(p, "tool_request" if cls is ToolRequestPart else "tool_response")
    return p
