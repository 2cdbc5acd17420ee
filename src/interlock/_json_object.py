"""Reading JSON objects off the wire: the three checks every codec (parts, messages, the protocol) shares."""

from __future__ import annotations

import json
import json.encoder
from collections.abc import Callable
from typing import Any, TypeGuard

from .errors import InvalidArgumentError


def json_encoder(
    *, ensure_ascii: bool, separators: tuple[str, str], sort_keys: bool = False, allow_nan: bool = True
) -> Callable[[object], str]:
    """``json.dumps(value, ...)`` with these options as a function, its text the same, built once.

    Straight to the json module's C encoder, as ``json.dumps`` ends up, without the Python
    layers above it and the encoder object ``json.dumps`` builds per call. Built without the
    map of objects being encoded that finds a cycle (shared, it would not be safe across
    threads): a cyclic value, or one nested too deep, raises ``ValueError`` through the
    recursion limit instead. ``TypeError`` for a value with no JSON form, as ``json.dumps``.
    """
    python = json.JSONEncoder(
        ensure_ascii=ensure_ascii, separators=separators, sort_keys=sort_keys, allow_nan=allow_nan
    )
    make: Any = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # pragma: no cover - CPython has the C encoder
        return python.encode
    quote = json.encoder.encode_basestring_ascii if ensure_ascii else json.encoder.encode_basestring
    item, key = separators
    chunks = make(None, python.default, quote, None, key, item, sort_keys, False, allow_nan)

    def encode(value: object) -> str:
        try:
            return "".join(chunks(value, 0))
        except RecursionError:
            raise ValueError("Circular reference detected, or a value nested too deep to encode") from None

    return encode


def new_dict() -> dict[Any, Any]:
    """An empty dict, as a dataclass field's ``default_factory``.

    A parameterised alias (``dict[str, Any]``) as the factory would cost a generic-alias call
    per object built; the field's declared type is what type checkers read.
    """
    return {}


def new_list() -> list[Any]:
    """An empty list, as a dataclass field's ``default_factory`` (see :func:`new_dict`)."""
    return []


def is_object(value: object) -> TypeGuard[dict[str, Any]]:
    """``value`` is a JSON object: a dict (decoded JSON has string keys; interlock writes only those)."""
    return isinstance(value, dict)


def is_array(value: object) -> TypeGuard[list[Any]]:
    """``value`` is a JSON array (a list)."""
    return isinstance(value, list)


def json_object(value: object, what: str) -> dict[str, Any]:
    """``value`` as a JSON object; raises :class:`InvalidArgumentError` naming ``what`` otherwise."""
    if not is_object(value):
        raise InvalidArgumentError(f"{what} must be a JSON object, got {type(value).__name__}")
    return value


def unknown_keys(d: dict[str, Any], known: tuple[str, ...]) -> dict[str, Any]:
    """The keys of ``d`` a codec does not model (kept in ``extra`` for a lossless round trip)."""
    return {k: v for k, v in d.items() if k not in known}


def optional_object(d: dict[str, Any], key: str) -> dict[str, Any] | None:
    """``d[key]`` as a JSON object, or ``None`` when it is absent or ``null``."""
    value = d.get(key)
    return None if value is None else json_object(value, key)


def put_present(d: dict[str, Any], key: str, value: object) -> None:
    """Set ``d[key]`` unless ``value`` is ``None`` (Genkit omits absent optional fields)."""
    if value is not None:
        d[key] = value
