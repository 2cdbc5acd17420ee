"""Gemini (Google AI), through the official ``google-genai`` SDK.

Needs ``pip install 'interlock[gemini]'``. System messages become the
``system_instruction``; tools are function declarations with their JSON Schema as
``parametersJsonSchema``; tool results go back as ``functionResponse`` parts.

Gemini may return function calls without ids. Those get refs by position within the
response (``"0"``, ``"1"``, ...), and such positional refs are never sent back as ids:
the answer is matched to its call by name and order, as Gemini expects. Thought parts
map to :class:`ReasoningPart`, and ``thoughtSignature`` is kept in part metadata (as
Genkit does) so it can be returned with the next request.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import AsyncIterator, Sequence
from typing import Any, Protocol, cast

import pydantic

from .._json_object import is_object
from ..errors import InterlockError, InvalidArgumentError, UnauthenticatedError
from ..messages import Message
from ..parts import CustomPart, DataPart, MediaPart, Part, ReasoningPart, TextPart, ToolRequestPart, ToolResponsePart
from ._base import ChunkCallback, FinishReason, ModelChunk, ModelRequest, ModelResponse, ToolDefinition, Usage
from ._retry import (
    OwnsClient,
    RetryPolicy,
    call_with_retries,
    data_url,
    http_error,
    json_text,
    missing_extra,
    transport_error,
)

try:
    from google import genai
    from google.genai import errors as genai_errors
    from google.genai import types
except ImportError as _exc:  # pragma: no cover - exercised by blocking the import in tests
    raise missing_extra("google-genai", "gemini") from _exc

__all__ = ["GeminiModel", "gemini_model", "googleai_model"]

_FINISH: dict[str, FinishReason] = {
    "STOP": "stop",
    "MAX_TOKENS": "length",
    **dict.fromkeys(
        ["SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY", "MODEL_ARMOR"], "blocked"
    ),
}
_RENAMED = {
    "temperature": "temperature",
    "maxOutputTokens": "max_output_tokens",
    "topP": "top_p",
    "topK": "top_k",
    "stopSequences": "stop_sequences",
}
_MODES = {"auto": "AUTO", "required": "ANY", "none": "NONE"}
_SIGNATURE = "thoughtSignature"


class _Models(Protocol):
    """The two SDK calls we make, typed without the SDK's optional (PIL) input types."""

    async def generate_content(
        self, *, model: str, contents: list[types.Content], config: types.GenerateContentConfig
    ) -> types.GenerateContentResponse: ...

    async def generate_content_stream(
        self, *, model: str, contents: list[types.Content], config: types.GenerateContentConfig
    ) -> AsyncIterator[types.GenerateContentResponse]: ...


class GeminiModel(OwnsClient):
    """A Gemini model behind the Gemini Developer API.

    Args:
        model: the model id, e.g. ``"gemini-2.5-flash"``.
        api_key: the key; ``GEMINI_API_KEY`` or ``GOOGLE_API_KEY`` when omitted.
        base_url: the API root (``https://generativelanguage.googleapis.com`` when omitted).
        api_version: the API version path segment; ``v1beta`` (as Genkit uses) has every feature mapped here.
        client: a ``genai.Client`` to use instead of building one (it is not closed by us).
        provider: the name prefix, used in :attr:`name` and in error messages.
        max_retries: retries after a 429 or 5xx, with exponential backoff from ``retry_delay`` seconds.
        timeout: seconds before a request fails with ``DEADLINE_EXCEEDED``.
    """

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        api_version: str = "v1beta",
        client: genai.Client | None = None,
        provider: str = "googleai",
        max_retries: int = 2,
        retry_delay: float = 0.5,
        timeout: float | None = None,
        default_headers: dict[str, str] | None = None,
    ) -> None:
        self.model = model
        self.provider = provider
        self.retry = RetryPolicy(max_retries=max_retries, initial_delay=retry_delay)
        self._owns_client = client is None
        if client is None:
            key = api_key or os.environ.get("GEMINI_API_KEY") or os.environ.get("GOOGLE_API_KEY")
            if not key:
                raise UnauthenticatedError(f"no API key for {provider!r}: set GEMINI_API_KEY or pass api_key=")
            options = types.HttpOptions(
                base_url=base_url,
                api_version=api_version,
                headers=default_headers,
                timeout=None if timeout is None else int(timeout * 1000),
                retry_options=types.HttpRetryOptions(attempts=1),  # ours are the only retries
            )
            client = genai.Client(api_key=key, http_options=options)
        self.client = client

    @property
    def name(self) -> str:
        return f"{self.provider}/{self.model}"

    async def _close_client(self) -> None:
        await self.client.aio.aclose()
        self.client.close()

    async def generate(self, request: ModelRequest, *, on_chunk: ChunkCallback | None = None) -> ModelResponse:
        config = dict(request.config or {})
        model = config.pop("version", None) or self.model
        contents = _contents(request.messages)
        settings = _config(request, config)
        fold = _Fold(on_chunk)
        models = cast(_Models, self.client.aio.models)

        async def attempt() -> ModelResponse:
            fold.reset()
            if on_chunk is None:
                await fold.add(await models.generate_content(model=model, contents=contents, config=settings))
            else:
                async for chunk in await models.generate_content_stream(
                    model=model, contents=contents, config=settings
                ):
                    await fold.add(chunk)
            return fold.response()

        return await call_with_retries(
            attempt, policy=self.retry, map_error=self._map_error, may_retry=lambda: not fold.emitted
        )

    def _map_error(self, exc: Exception) -> InterlockError | None:
        if isinstance(exc, genai_errors.APIError):
            message = exc.message or str(exc)
            details: object = getattr(exc, "details", None)
            bad_key = "API_KEY_INVALID" in json.dumps(details, default=str)
            return http_error(exc.code, message, provider=self.provider, cls=UnauthenticatedError if bad_key else None)
        return transport_error(self.provider, exc)


def gemini_model(model: str, **options: Any) -> GeminiModel:
    """The ``gemini/<model>`` provider."""
    options.setdefault("provider", "gemini")
    return GeminiModel(model, **options)


def googleai_model(model: str, **options: Any) -> GeminiModel:
    """The ``googleai/<model>`` provider (Genkit's name for the same API)."""
    return GeminiModel(model, **options)


def _config(request: ModelRequest, config: dict[str, Any]) -> types.GenerateContentConfig:
    settings: dict[str, Any] = {_RENAMED.get(k, k): v for k, v in config.items() if v is not None}
    settings["automatic_function_calling"] = {"disable": True}
    system = "\n\n".join(m.text for m in request.messages if m.role == "system")
    if system:
        settings["system_instruction"] = system
    if request.tools:
        settings["tools"] = [types.Tool(function_declarations=[_declaration(t) for t in request.tools])]
        if request.tool_choice is not None:
            settings["tool_config"] = {"function_calling_config": {"mode": _MODES[request.tool_choice]}}
    output = request.output or {}
    if output.get("format") == "json" and output.get("constrained") is not False:
        settings["response_mime_type"] = "application/json"
        if output.get("schema") is not None:
            settings["response_json_schema"] = output["schema"]
    try:
        return types.GenerateContentConfig.model_validate(settings)
    except pydantic.ValidationError as exc:
        raise InvalidArgumentError(f"invalid Gemini config: {exc}") from exc


def _declaration(tool: ToolDefinition) -> types.FunctionDeclaration:
    return types.FunctionDeclaration(
        name=tool.name, description=tool.description or None, parameters_json_schema=tool.input_schema
    )


def _signature(part: Part) -> bytes | None:
    value = part.meta(_SIGNATURE)
    return base64.b64decode(value) if isinstance(value, str) else None


def _positional(requests: Sequence[ToolRequestPart], index: int) -> bool:
    return requests[index].ref == str(index)


def _contents(messages: list[Message]) -> list[types.Content]:
    """Messages as Gemini contents; consecutive turns of one role are merged."""
    ids: dict[tuple[str, str | None], str | None] = {}
    out: list[types.Content] = []
    for message in messages:
        if message.role == "system":
            continue
        if message.role == "model":
            requests = message.tool_requests
            for index, request in enumerate(requests):
                ids[(request.name, request.ref)] = None if _positional(requests, index) else request.ref
            role, parts = "model", [_model_part(p, ids) for p in message.content]
        elif message.role in ("user", "tool"):
            role, parts = "user", [_user_part(p, ids) for p in message.content]
        else:
            raise InvalidArgumentError(f"the Gemini format has no role {message.role!r}")
        kept = [p for p in parts if p is not None]
        if out and out[-1].role == role:
            out[-1].parts = [*(out[-1].parts or []), *kept]
        elif kept:
            out.append(types.Content(role=role, parts=kept))
    return out


def _model_part(part: Part, ids: dict[tuple[str, str | None], str | None]) -> types.Part | None:
    signature = _signature(part)
    if isinstance(part, TextPart):
        return types.Part(text=part.text, thought_signature=signature)
    if isinstance(part, ReasoningPart):  # thoughts are only worth returning with their signature
        return types.Part(text=part.reasoning, thought=True, thought_signature=signature) if signature else None
    if isinstance(part, ToolRequestPart):
        call = types.FunctionCall(name=part.name, args=part.input or {}, id=ids.get((part.name, part.ref)))
        return types.Part(function_call=call, thought_signature=signature)
    return _user_part(part, ids)


def _user_part(part: Part, ids: dict[tuple[str, str | None], str | None]) -> types.Part | None:
    if isinstance(part, TextPart):
        return types.Part(text=part.text)
    if isinstance(part, DataPart):
        return types.Part(text=json_text(part.data))
    if isinstance(part, MediaPart):
        inline = data_url(part.url)
        if inline is not None:
            return types.Part(inline_data=types.Blob(mime_type=part.content_type or inline[0], data=inline[1]))
        return types.Part(file_data=types.FileData(file_uri=part.url, mime_type=part.content_type))
    if isinstance(part, ToolResponsePart):
        output = part.output
        if output is None and part.content:
            output = Message(role="tool", content=part.content).text
        response = output if is_object(output) else {"output": output}
        key = (part.name, part.ref)
        call_id = ids[key] if key in ids else (None if part.ref is None or part.ref.isdigit() else part.ref)
        return types.Part(function_response=types.FunctionResponse(name=part.name, id=call_id, response=response))
    return None


class _Fold:
    """Folds one response, or the chunks of a stream, into a :class:`ModelResponse`."""

    def __init__(self, on_chunk: ChunkCallback | None) -> None:
        self.on_chunk = on_chunk
        self.reset()

    def reset(self) -> None:
        self.emitted = False
        self.parts: list[Part] = []
        self.calls = 0
        self.finish: str | None = None
        self.finish_message: str | None = None
        self.usage: types.GenerateContentResponseUsageMetadata | None = None
        self.raw: types.GenerateContentResponse | None = None

    async def add(self, chunk: types.GenerateContentResponse) -> None:
        self.raw = chunk
        self.usage = chunk.usage_metadata or self.usage
        feedback = chunk.prompt_feedback
        if feedback is not None and feedback.block_reason is not None:
            self.finish = "SAFETY"
            self.finish_message = feedback.block_reason_message or str(feedback.block_reason.value)
        if not chunk.candidates:
            return
        candidate = chunk.candidates[0]
        if candidate.finish_reason is not None:
            self.finish = str(candidate.finish_reason.value)
            self.finish_message = candidate.finish_message or self.finish_message
        for raw in candidate.content.parts or [] if candidate.content else []:
            part = self._part(raw)
            self.parts.append(part)
            if self.on_chunk is not None and isinstance(part, TextPart | ReasoningPart):
                self.emitted = True
                result = self.on_chunk(ModelChunk(content=[part]))
                if result is not None:
                    await result

    def _part(self, raw: types.Part) -> Part:
        meta = {_SIGNATURE: base64.b64encode(raw.thought_signature).decode()} if raw.thought_signature else None
        if raw.function_call is not None:
            call = raw.function_call
            ref = call.id or str(self.calls)
            self.calls += 1
            return ToolRequestPart(name=call.name or "", ref=ref, input=call.args or {}, metadata=meta)
        if raw.text is not None:
            if raw.thought:
                return ReasoningPart(reasoning=raw.text, metadata=meta)
            return TextPart(text=raw.text, metadata=meta)
        if raw.inline_data is not None and raw.inline_data.data is not None:
            mime = raw.inline_data.mime_type or "application/octet-stream"
            url = f"data:{mime};base64,{base64.b64encode(raw.inline_data.data).decode()}"
            return MediaPart(url=url, content_type=mime, metadata=meta)
        if raw.file_data is not None and raw.file_data.file_uri:
            return MediaPart(url=raw.file_data.file_uri, content_type=raw.file_data.mime_type, metadata=meta)
        return CustomPart(value=raw.model_dump(mode="json", by_alias=True, exclude_none=True), metadata=meta)

    def response(self) -> ModelResponse:
        return ModelResponse(
            message=Message(role="model", content=_merge_text(self.parts)),
            finish_reason=_FINISH.get(self.finish or "", "other"),
            finish_message=self.finish_message,
            usage=_usage(self.usage),
            raw=self.raw,
        )


def _merge_text(parts: list[Part]) -> list[Part]:
    """Join streamed text (and thought) pieces that follow each other into one part."""
    out: list[Part] = []
    for part in parts:
        last = out[-1] if out else None
        if isinstance(part, TextPart) and isinstance(last, TextPart):
            meta = {**(last.metadata or {}), **(part.metadata or {})} or None
            out[-1] = TextPart(text=last.text + part.text, metadata=meta)
        elif isinstance(part, ReasoningPart) and isinstance(last, ReasoningPart):
            meta = {**(last.metadata or {}), **(part.metadata or {})} or None
            out[-1] = ReasoningPart(reasoning=last.reasoning + part.reasoning, metadata=meta)
        else:
            out.append(part)
    return [p for p in out if not (isinstance(p, TextPart) and not p.text and not p.metadata)]


def _usage(usage: types.GenerateContentResponseUsageMetadata | None) -> Usage | None:
    if usage is None:
        return None
    custom = {
        key: value
        for key, value in (
            ("thoughtsTokens", usage.thoughts_token_count),
            ("cachedContentTokens", usage.cached_content_token_count),
        )
        if value
    }
    return Usage(
        input_tokens=usage.prompt_token_count,
        output_tokens=usage.candidates_token_count,
        total_tokens=usage.total_token_count,
        custom=custom or None,
    )
