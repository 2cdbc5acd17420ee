"""The one rule for "is this a JSON value", and the checks of caller input built on it.

:func:`check_json` is the only place that decides whether a value may travel and be
stored: dicts with string keys, lists, strings without lone surrogates, finite numbers
(integers within a double's range), booleans and ``None``, nested at most
:data:`MAX_DEPTH` levels. Everything that takes a free-form value from a caller (resume
payloads and outputs, metadata, custom state, messages, HTTP bodies) and every value a
tool returns goes through it, so a bad value is refused at the edge with
``INVALID_ARGUMENT``, before anything runs, instead of failing later when it is stored
or sent.

The structural checks (:func:`check_part`, :func:`check_message`, :func:`~interlock.interrupts.check_resume_shape`)
catch wrong Python types (a dict where a part belongs, a single part instead of a list)
with the same error.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
from typing import Any, cast

from .errors import InvalidArgumentError
from .messages import Message
from .parts import (
    CustomPart,
    DataPart,
    MediaPart,
    ReasoningPart,
    ResourcePart,
    TextPart,
    ToolRequestPart,
    ToolResponsePart,
)

MAX_DEPTH = 128
"""Deepest nesting of lists and objects a JSON value may have."""
_MAX_INT_BITS = 1024
"""Integers beyond a double's range (about 1.8e308) are refused: JSON readers turn them into infinity."""
_SURROGATE = re.compile("[\ud800-\udfff]")
_KINDS = "dicts with string keys, lists, strings, finite numbers, booleans and None"
_PART_TYPES = (
    TextPart,
    ReasoningPart,
    MediaPart,
    ToolRequestPart,
    ToolResponsePart,
    DataPart,
    CustomPart,
    ResourcePart,
)
_STR_FIELDS = ("text", "reasoning", "url", "uri", "name")
_OPT_STR_FIELDS = ("ref", "content_type")
_DICT_FIELDS = ("metadata", "custom", "value")


_Trail = tuple[Any, ...] | None
"""A path inside a value as a linked list ``(parent, key)``, formatted only for an error."""


def type_name(value: object) -> str:
    """``"a dict"``, ``"an int"``: a value's type for an error message."""
    name = type(value).__name__
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"


def _path(where: str, trail: _Trail) -> str:
    keys: list[Any] = []
    while trail is not None:
        trail, key = trail
        keys.append(key)
    parts = [
        f"[{k}]" if isinstance(k, int) else f".{k}" if k.isidentifier() else f"[{str(k)[:40]!r}]"
        for k in reversed(keys)
    ]
    return where + "".join(parts)


def _refuse(where: str, trail: _Trail, why: str) -> InvalidArgumentError:
    return InvalidArgumentError(f"{_path(where, trail)} is not a JSON value: {why}; use only {_KINDS}")


def _check_str(text: str, where: str, trail: _Trail) -> None:
    found = _SURROGATE.search(text)
    if found is not None:
        code = f"U+{ord(found.group()):04X}"
        raise _refuse(where, trail, f"the string holds a lone surrogate ({code}), which is not valid Unicode")


def check_json(value: object, where: str) -> None:
    """Raise :class:`~interlock.errors.InvalidArgumentError` unless ``value`` is a JSON value.

    ``where`` names the value for the message (``"resume.respond[0].output"``); the
    message adds the path to the offending item. Iterative, so any depth is safe to check.
    """
    if value is None or _plain(value, 0):
        return
    _check_json(value, where)


_SHALLOW = 16
"""Nesting that :func:`_plain` checks by recursion; a deeper value takes the iterative walk."""


def _plain(value: Any, depth: int) -> bool:
    """Whether ``value`` is certainly JSON (the same rules, of exact types, no path kept); ``False``: walk it again.

    The common values (small documents of exact ``dict``/``list``/``str``/number types) are
    answered here, without the iterative walk's stack and path; anything else, including
    every refusal, is left to it, so that its message names the offending item. (``value`` is
    typed ``Any``: each branch has checked its exact type, and a ``cast`` would be a call.)
    """
    kind: type[object] = type(value)  # pyright: ignore[reportUnknownVariableType]
    if kind is str:
        return value.isascii() or _SURROGATE.search(value) is None
    if kind is dict:
        if depth >= _SHALLOW:
            return False
        for key, item in value.items():
            if type(key) is not str or not (key.isascii() or _SURROGATE.search(key) is None):
                return False
            if item is not None and not _plain(item, depth + 1):
                return False
        return True
    if kind is list:
        if depth >= _SHALLOW:
            return False
        for item in value:
            if item is not None and not _plain(item, depth + 1):
                return False
        return True
    if kind is int:
        return value.bit_length() <= _MAX_INT_BITS
    if kind is float:
        return math.isfinite(value)
    return kind is bool or value is None


def _check_json(value: object, where: str) -> None:
    """:func:`check_json`'s walk: iterative (any depth), keeping the path for the message."""
    stack: list[tuple[object, _Trail, int]] = [(value, None, 0)]
    while stack:
        item, trail, depth = stack.pop()
        if item is None or isinstance(item, bool):
            continue
        if isinstance(item, str):
            _check_str(item, where, trail)
        elif isinstance(item, int):
            if item.bit_length() > _MAX_INT_BITS:
                raise _refuse(where, trail, "the integer is too large (beyond about 1.8e308)")
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise _refuse(where, trail, f"{item!r} is not a finite number")
        elif isinstance(item, (dict, list)):
            if depth >= MAX_DEPTH:
                raise _refuse(where, trail, f"it is nested deeper than {MAX_DEPTH} levels")
            if isinstance(item, list):
                for index, element in enumerate(cast(list[Any], item)):
                    stack.append((element, (trail, index), depth + 1))
                continue
            for key, element in cast(dict[Any, Any], item).items():
                if not isinstance(key, str):
                    raise _refuse(where, trail, f"the key {key!r} is {type_name(key)}, not a string")
                _check_str(key, where, (trail, key))
                stack.append((element, (trail, key), depth + 1))
        else:
            raise _refuse(where, trail, f"it is {type_name(item)}")


_SKIP, _PARTS, _STR, _OPT_STR, _BOOL, _OBJECT, _JSON = range(7)


@functools.cache
def _part_rules(kind: type) -> tuple[tuple[str, int], ...]:
    """How :func:`check_part` checks each field of a part type (worked out once per type)."""
    rules: list[tuple[str, int]] = []
    for f in dataclasses.fields(kind):
        name = f.name
        if name == "kind":
            rule = _SKIP
        elif name == "content" and issubclass(kind, ToolResponsePart):
            rule = _PARTS
        elif name in _STR_FIELDS:
            rule = _STR
        elif name in _OPT_STR_FIELDS:
            rule = _OPT_STR
        elif name == "partial":
            rule = _BOOL
        elif name in _DICT_FIELDS or name.endswith("extra"):
            rule = _OBJECT
        else:
            rule = _JSON
        rules.append((name, rule))
    return tuple(rules)


def check_part(part: object, where: str) -> None:
    """Check that ``part`` is a :data:`~interlock.parts.Part` whose fields all hold JSON."""
    if not isinstance(part, _PART_TYPES):
        raise InvalidArgumentError(f"{where} must be a part (TextPart, ToolRequestPart, ...), not {type_name(part)}")
    for name, rule in _part_rules(type(part)):
        value: Any = getattr(part, name)
        if rule == _SKIP or (value is None and rule != _STR):  # None is JSON, and every field but a name may be it
            continue
        if rule == _OBJECT and _is_empty_dict(value):
            continue
        if (rule == _JSON or (rule == _OBJECT and value.__class__ is dict)) and _plain(value, 0):
            continue  # certainly JSON: no label to build
        label = f"{where}.{name}"
        if rule == _PARTS:
            check_parts(value, label)
        elif rule == _STR or rule == _OPT_STR:
            if not isinstance(value, str):
                raise InvalidArgumentError(f"{label} must be a string, not {type_name(value)}")
            _check_str(value, label, None)
        elif rule == _BOOL:
            if not isinstance(value, bool):
                raise InvalidArgumentError(f"{label} must be a boolean or None")
        elif rule == _OBJECT:
            check_object(value, label)
        else:
            check_json(value, label)


def _is_empty_dict(value: object) -> bool:
    return type(value) is dict and not value


def check_reply(message: Message, where: str) -> None:
    """Check that a model's reply holds only JSON values (a lone surrogate would fail its store).

    The reply's parts are typed by the model adapter that built them, so their shape is not
    checked again (:func:`check_part` does that for callers); only the values they carry are.
    """
    for index, part in enumerate(message.content):
        if isinstance(part, TextPart):
            text: tuple[str, Any] = ("text", part.text)
        elif isinstance(part, ReasoningPart):
            text = ("reasoning", part.reasoning)
        elif isinstance(part, ToolRequestPart):
            text = ("name", part.name)
            if not _plain(part.input, 0):
                check_json(part.input, f"{where}.content[{index}].input")
        else:
            check_part(part, f"{where}.content[{index}]")
            continue
        if type(text[1]) is not str or not _plain(text[1], 0):  # labelled only when it may be refused
            _check_str(text[1], f"{where}.content[{index}].{text[0]}", None)
        for name, value in (("metadata", part.metadata), ("custom", part.custom), ("extra", part.extra)):
            if value and not _plain(value, 0):
                check_json(value, f"{where}.content[{index}].{name}")
    if message.metadata and not _plain(message.metadata, 0):
        check_json(message.metadata, f"{where}.metadata")


def _check_list(value: object, where: str) -> None:
    if not isinstance(value, list):
        raise InvalidArgumentError(f"{where} must be a list, not {type_name(value)}")


def check_parts(parts: object, where: str) -> None:
    """Check a list of parts (see :func:`check_part`)."""
    _check_list(parts, where)
    for index, part in enumerate(cast(list[Any], parts)):
        check_part(part, f"{where}[{index}]")


def check_object(value: object, where: str) -> None:
    """Check an optional JSON object (``None`` or a dict holding JSON)."""
    if value is None or _is_empty_dict(value):
        return
    if not isinstance(value, dict):
        raise InvalidArgumentError(f"{where} must be a dict or None, not {type_name(value)}")
    check_json(cast(object, value), where)


def check_message(message: object, where: str) -> None:
    """Check that ``message`` is a :class:`~interlock.Message` of valid parts holding JSON."""
    if not isinstance(message, Message):
        raise InvalidArgumentError(
            f"{where} must be a Message (or a string for a user message), not {type_name(message)}"
        )
    m: Any = message  # the fields are typed, but a caller may have put anything in them
    if not isinstance(m.role, str):
        raise InvalidArgumentError(f"{where}.role must be a string (system, user, model or tool)")
    check_parts(m.content, f"{where}.content")
    check_object(m.metadata, f"{where}.metadata")
    check_object(m.extra, f"{where}.extra")


def check_messages(messages: object, where: str) -> None:
    """Check a list of messages (see :func:`check_message`)."""
    _check_list(messages, where)
    for index, message in enumerate(cast(list[Any], messages)):
        check_message(message, f"{where}[{index}]")
