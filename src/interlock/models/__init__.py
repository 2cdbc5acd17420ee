"""The model seam: a small Protocol, its request and response types.

A model takes a :class:`ModelRequest` and returns a :class:`ModelResponse`. Streaming is
optional: when the caller passes ``on_chunk``, a model that can stream calls it with each
:class:`ModelChunk` before returning the full response; a model that cannot simply
ignores it.
"""

from ._base import ChunkCallback, FinishReason, Model, ModelChunk, ModelRequest, ModelResponse, ToolDefinition, Usage
from ._registry import ModelFactory, register_provider, resolve_model

__all__ = [
    "ChunkCallback",
    "FinishReason",
    "Model",
    "ModelChunk",
    "ModelFactory",
    "ModelRequest",
    "ModelResponse",
    "ToolDefinition",
    "Usage",
    "register_provider",
    "resolve_model",
]
