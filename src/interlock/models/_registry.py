"""One registry from ``provider/model`` names to models.

``resolve_model("openai/gpt-4o-mini", base_url=...)`` splits the name at the first
``/``, finds the provider's factory and calls ``factory("gpt-4o-mini", **options)``.
Factories are looked up, in order, among those given to :func:`register_provider`, the
``interlock.models`` entry point group (how third-party packages add providers), and the
built-in providers (so resolving works before the package's own entry points are
installed). Provider modules are imported only when first resolved, so a missing SDK
raises its ``ImportError`` (naming the extra to install) at that point and not before.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from importlib.metadata import EntryPoint, entry_points
from typing import Any, TypeAlias, cast

from ..errors import InvalidArgumentError
from ._base import Model

ModelFactory: TypeAlias = Callable[..., Model]
"""Builds a model: ``factory(model_id, **options) -> Model``."""

GROUP = "interlock.models"
"""The entry point group providers register under."""

_BUILTIN: dict[str, str] = {
    "openai": "interlock.models.openai:openai_model",
    "openai-compatible": "interlock.models.openai:compatible_model",
    "ollama": "interlock.models.openai:ollama_model",
    "anthropic": "interlock.models.anthropic:AnthropicModel",
    "gemini": "interlock.models.gemini:gemini_model",
    "googleai": "interlock.models.gemini:googleai_model",
}
"""Built-in providers as ``module:attribute``, imported on first use."""

_registered: dict[str, ModelFactory] = {}


def register_provider(prefix: str, factory: ModelFactory) -> None:
    """Make ``prefix/<model>`` names resolve through ``factory`` (overriding any other source)."""
    if not prefix or "/" in prefix:
        raise InvalidArgumentError(f"a provider prefix must be non-empty and contain no '/': {prefix!r}")
    _registered[prefix] = factory


def providers() -> list[str]:
    """Every known provider prefix, sorted."""
    return sorted({*_registered, *_entry_points(), *_BUILTIN})


def resolve_model(name: str, **options: Any) -> Model:
    """The model named ``provider/model``, built with ``options`` (``base_url``, ``api_key``, ...).

    Raises:
        InvalidArgumentError: the name has no provider prefix, or the provider is unknown.
        ImportError: the provider's optional SDK is not installed (the message names the extra).
    """
    prefix, sep, model_id = name.partition("/")
    if not sep or not prefix or not model_id:
        raise InvalidArgumentError(f"expected a model name like 'provider/model', got {name!r}")
    return _factory(prefix, name)(model_id, **options)


def _factory(prefix: str, name: str) -> ModelFactory:
    if prefix in _registered:
        return _registered[prefix]
    found = _entry_points().get(prefix)
    if found is not None:
        return cast(ModelFactory, found.load())
    target = _BUILTIN.get(prefix)
    if target is None:
        raise InvalidArgumentError(
            f"unknown model provider {prefix!r} in {name!r}; known providers: {', '.join(providers())}"
        )
    module, _, attribute = target.partition(":")
    return cast(ModelFactory, getattr(importlib.import_module(module), attribute))


def _entry_points() -> dict[str, EntryPoint]:
    return {ep.name: ep for ep in entry_points(group=GROUP)}
