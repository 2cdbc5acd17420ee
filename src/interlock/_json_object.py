"""Reading JSON objects off the wire: the three checks every codec (parts, messages, the protocol) shares."""

from __future__ import annotations

from typing import Any, cast

from .errors import InvalidArgumentError


def json_object(value: Any, what: str) -> dict[str, Any]:
    """``value`` as a JSON object; raises :class:`InvalidArgumentError` naming ``what`` otherwise."""
    if not isinstance(value, dict):
        raise InvalidArgumentError(f"{what} must be a JSON object, got {type(value).__name__}")
    return cast(dict[str, Any], value)


def unknown_keys(d: dict[str, Any], known: tuple[str, ...]) -> dict[str, Any]:
    """The keys of ``d`` a codec does not model (kept in ``extra`` for a lossless round trip)."""
    return {k: v for k, v in d.items() if k not in known}


def optional_object(d: dict[str, Any], key: str) -> dict[str, Any] | None:
    """``d[key]`` as a JSON object, or ``None`` when it is absent or ``null``."""
    value = d.get(key)
    return None if value is None else json_object(value, key)


def put_present(d: dict[str, Any], key: str, value: Any) -> None:
    """Set ``d[key]`` unless ``value`` is ``None`` (Genkit omits absent optional fields)."""
    if value is not None:
        d[key] = value
