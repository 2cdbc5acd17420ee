"""The public test kit: scripted models for tests, docs and demos, and the store conformance suite.

:class:`ScriptedModel` answers each call with the next scripted response (streaming
the scripted chunks first) and records every request it received. :class:`EchoModel`
replies with the last user message.

:func:`check_store` runs :data:`STORE_CHECKS`, the contract every
:class:`~interlock.stores.SessionStore` must meet, against a store of your own (the
suite lives in :mod:`interlock.testing._stores`, one part per capability Protocol:
``check_snapshot_store`` for the core, ``check_journal_store``, ...).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, TypeAlias

from ..errors import ModelError
from ..messages import Message
from ..models import ChunkCallback, ModelChunk, ModelRequest, ModelResponse
from ..parts import TextPart
from ._stores import (
    STORE_CHECKS,
    StoreCheck,
    StoreFactory,
    check_journal_store,
    check_snapshot_store,
    check_store,
    store_factory,
)

__all__ = [
    "STORE_CHECKS",
    "EchoModel",
    "Script",
    "ScriptedModel",
    "StoreCheck",
    "StoreFactory",
    "check_journal_store",
    "check_snapshot_store",
    "check_store",
    "store_factory",
]

Script: TypeAlias = "ModelResponse | Message | str | Callable[[ModelRequest], ModelResponse | Awaitable[ModelResponse]]"
"""One scripted answer: a response, a message, a text, or a function of the request."""


def _as_response(item: ModelResponse | Message | str) -> ModelResponse:
    if isinstance(item, ModelResponse):
        return item
    if isinstance(item, Message):
        return ModelResponse(message=item, finish_reason="stop")
    return ModelResponse(message=Message.model(item), finish_reason="stop")


class ScriptedModel:
    """A model that plays a script: the i-th call streams ``chunks[i]`` then returns ``responses[i]``.

    Attributes:
        requests: every request received, in order.
    """

    def __init__(
        self,
        responses: Iterable[Script] = (),
        *,
        chunks: Sequence[Sequence[ModelChunk]] = (),
        name: str = "test/scripted",
    ) -> None:
        self._responses: list[Script] = list(responses)
        self._chunks: list[Sequence[ModelChunk]] = list(chunks)
        self._name = name
        self.requests: list[ModelRequest] = []

    @property
    def name(self) -> str:
        return self._name

    def add(self, response: Script, *, chunks: Sequence[ModelChunk] = ()) -> None:
        """Append one answer (and the chunks streamed before it) to the script."""
        while len(self._chunks) < len(self._responses):
            self._chunks.append(())
        self._responses.append(response)
        self._chunks.append(chunks)

    @property
    def remaining(self) -> int:
        """How many scripted answers are left."""
        return len(self._responses) - len(self.requests)

    async def generate(self, request: ModelRequest, *, on_chunk: ChunkCallback | None = None) -> ModelResponse:
        index = len(self.requests)
        self.requests.append(request)
        if index >= len(self._responses):
            raise ModelError(
                f"{self._name}: the script has {len(self._responses)} responses; call {index + 1} has none"
            )
        if on_chunk is not None and index < len(self._chunks):
            for chunk in self._chunks[index]:
                result = on_chunk(chunk)
                if inspect.isawaitable(result):
                    await result
        item = self._responses[index]
        if callable(item):
            produced: Any = item(request)
            if inspect.isawaitable(produced):
                produced = await produced
            return _as_response(produced)
        return _as_response(item)


class EchoModel:
    """Replies ``"Echo: <last user text>"``, streaming it in two chunks."""

    def __init__(self, *, name: str = "test/echo") -> None:
        self._name = name

    @property
    def name(self) -> str:
        return self._name

    async def generate(self, request: ModelRequest, *, on_chunk: ChunkCallback | None = None) -> ModelResponse:
        last = next((m.text for m in reversed(request.messages) if m.role == "user"), "")
        if on_chunk is not None:
            for piece in ("Echo: ", last):
                result = on_chunk(ModelChunk(role="model", index=0, content=[TextPart(text=piece)]))
                if inspect.isawaitable(result):
                    await result
        return ModelResponse(message=Message.model(f"Echo: {last}"), finish_reason="stop")


# Store conformance ---------------------------------------------------------------------------
