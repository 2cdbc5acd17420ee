"""OpenAI-compatible Chat Completions, through the official ``openai`` SDK.

One adapter covers OpenAI itself and the servers that speak its wire format: Ollama,
vLLM, LM Studio and the llama.cpp server. Point ``base_url`` at them (the ``ollama``
provider defaults to ``http://127.0.0.1:11434/v1``). Needs ``pip install 'interlock[openai]'``.

Mapping: system, user, model and tool messages become ``system``, ``user``,
``assistant`` and ``tool`` messages; tool calls become :class:`ToolRequestPart` with the
call id as ``ref``, and each :class:`ToolResponsePart` goes back as a ``tool`` message
keyed by ``tool_call_id``. Servers that return reasoning (``reasoning_content`` or
``reasoning``, as vLLM, DeepSeek and Ollama do) give :class:`ReasoningPart`.
"""

from __future__ import annotations

import json
import os
from typing import Any, Literal

from .._json_object import is_object
from ..errors import InterlockError, InvalidArgumentError, ModelError, UnauthenticatedError
from ..messages import Message
from ..parts import DataPart, MediaPart, Part, ReasoningPart, TextPart, ToolRequestPart, ToolResponsePart
from ._base import ChunkCallback, FinishReason, ModelChunk, ModelRequest, ModelResponse, ToolDefinition, Usage
from ._retry import (
    OwnsClient,
    RetryPolicy,
    call_with_retries,
    connection_error,
    http_error,
    json_text,
    missing_extra,
    retry_after_seconds,
    timeout_error,
)

try:
    import openai
    from openai.types import CompletionUsage
    from openai.types.chat import ChatCompletion, ChatCompletionChunk, ChatCompletionMessage
except ImportError as _exc:  # pragma: no cover - exercised by blocking the import in tests
    raise missing_extra("openai", "openai") from _exc

__all__ = ["OpenAIModel", "compatible_model", "ollama_model", "openai_model"]

OLLAMA_BASE_URL = "http://127.0.0.1:11434/v1"

_FINISH: dict[str, FinishReason] = {
    "stop": "stop",
    "tool_calls": "stop",
    "function_call": "stop",
    "length": "length",
    "content_filter": "blocked",
}
_RENAMED = {"temperature": "temperature", "topP": "top_p", "stopSequences": "stop"}


class OpenAIModel(OwnsClient):
    """A chat model behind an OpenAI-compatible ``/chat/completions`` endpoint.

    Args:
        model: the provider's model id, e.g. ``"gpt-4o-mini"`` or ``"llama3.2"``.
        base_url: the API root (``https://api.openai.com/v1`` when omitted).
        api_key: the key; ``OPENAI_API_KEY`` when omitted.
        client: an ``AsyncOpenAI`` to use instead of building one (it is not closed by us).
        provider: the name prefix, used in :attr:`name` and in error messages.
        max_retries: retries after a 429 or 5xx, with exponential backoff from ``retry_delay`` seconds.
        timeout: seconds before a request fails with ``DEADLINE_EXCEEDED``.
        max_tokens_field: where ``maxOutputTokens`` goes; older compatible servers only know ``max_tokens``.
        stream_usage: ask for usage in streamed responses (``stream_options.include_usage``).
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        client: openai.AsyncOpenAI | None = None,
        provider: str = "openai",
        max_retries: int = 2,
        retry_delay: float = 0.5,
        timeout: float | None = None,
        max_tokens_field: Literal["max_completion_tokens", "max_tokens"] = "max_completion_tokens",
        stream_usage: bool = True,
        default_headers: dict[str, str] | None = None,
    ) -> None:
        self.model = model
        self.provider = provider
        self.retry = RetryPolicy(max_retries=max_retries, initial_delay=retry_delay)
        self._max_tokens_field = max_tokens_field
        self._stream_usage = stream_usage
        self._owns_client = client is None
        if client is None:
            key = api_key or os.environ.get("OPENAI_API_KEY")
            if not key:
                raise UnauthenticatedError(f"no API key for {provider!r}: set OPENAI_API_KEY or pass api_key=")
            options: dict[str, Any] = {} if timeout is None else {"timeout": timeout}
            client = openai.AsyncOpenAI(
                api_key=key, base_url=base_url, max_retries=0, default_headers=default_headers, **options
            )
        self.client = client

    @property
    def name(self) -> str:
        return f"{self.provider}/{self.model}"

    async def _close_client(self) -> None:
        await self.client.close()

    async def generate(self, request: ModelRequest, *, on_chunk: ChunkCallback | None = None) -> ModelResponse:
        params = self._params(request)
        if on_chunk is None:
            completion = await call_with_retries(
                lambda: self.client.chat.completions.create(**params, stream=False),
                policy=self.retry,
                map_error=self._map_error,
            )
            return _response(completion)
        stream = _Stream(on_chunk)
        if self._stream_usage:
            params["stream_options"] = {"include_usage": True}

        async def attempt() -> ModelResponse:
            stream.reset()
            chunks = await self.client.chat.completions.create(**params, stream=True)
            async with chunks:
                async for chunk in chunks:
                    await stream.add(chunk)
            return stream.response()

        return await call_with_retries(
            attempt, policy=self.retry, map_error=self._map_error, may_retry=lambda: not stream.emitted
        )

    def _params(self, request: ModelRequest) -> dict[str, Any]:
        config = dict(request.config or {})
        params: dict[str, Any] = {"model": config.pop("version", None) or self.model}
        params["messages"] = [m for message in request.messages for m in _to_openai(message)]
        if request.tools:
            params["tools"] = [_tool(t) for t in request.tools]
            if request.tool_choice is not None:
                params["tool_choice"] = request.tool_choice
        fmt = _response_format(request.output)
        if fmt is not None:
            params["response_format"] = fmt
        extra: dict[str, Any] = {}
        for key, value in config.items():
            if value is None:
                continue
            if key in _RENAMED:
                params[_RENAMED[key]] = value
            elif key == "maxOutputTokens":
                params[self._max_tokens_field] = value
            elif key == "topK":
                extra["top_k"] = value  # not OpenAI's; vLLM, llama.cpp and LM Studio accept it
            else:
                extra[key] = value  # provider-native options pass through unchanged
        if extra:
            params["extra_body"] = extra
        return params

    def _map_error(self, exc: Exception) -> InterlockError | None:
        if isinstance(exc, openai.APITimeoutError):
            return timeout_error(self.provider, exc)
        if isinstance(exc, openai.APIConnectionError):
            return connection_error(self.provider, exc)
        if isinstance(exc, openai.APIStatusError):
            retry_after = retry_after_seconds(exc.response.headers)
            return http_error(exc.status_code, _error_message(exc), provider=self.provider, retry_after=retry_after)
        if isinstance(exc, openai.APIError):  # e.g. an error event inside a stream
            return ModelError(f"{self.provider} failed: {exc.message}", details={"provider": self.provider})
        return None


def openai_model(model: str, **options: Any) -> OpenAIModel:
    """The ``openai/<model>`` provider."""
    return OpenAIModel(model, **options)


def compatible_model(model: str, **options: Any) -> OpenAIModel:
    """The ``openai-compatible/<model>`` provider: any server, ``base_url`` required, key optional."""
    if "base_url" not in options and "client" not in options:
        raise InvalidArgumentError("the 'openai-compatible' provider needs base_url=")
    options.setdefault("api_key", os.environ.get("OPENAI_API_KEY") or "unused")
    options.setdefault("provider", "openai-compatible")
    options.setdefault("max_tokens_field", "max_tokens")
    return OpenAIModel(model, **options)


def ollama_model(model: str, **options: Any) -> OpenAIModel:
    """The ``ollama/<model>`` provider: a local Ollama server's OpenAI-compatible API."""
    options.setdefault("base_url", os.environ.get("OLLAMA_BASE_URL") or OLLAMA_BASE_URL)
    options.setdefault("api_key", "ollama")
    options.setdefault("provider", "ollama")
    options.setdefault("max_tokens_field", "max_tokens")
    return OpenAIModel(model, **options)


def _error_message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if is_object(body):
        error = body.get("error", body)
        if is_object(error):
            message = error.get("message")
            if isinstance(message, str):
                return message
    return exc.message


def _tool(tool: ToolDefinition) -> dict[str, Any]:
    function: dict[str, Any] = {"name": tool.name, "parameters": tool.input_schema or {"type": "object"}}
    if tool.description:
        function["description"] = tool.description
    return {"type": "function", "function": function}


def _response_format(output: dict[str, Any] | None) -> dict[str, Any] | None:
    if not output or output.get("format") != "json" or output.get("constrained") is False:
        return None
    schema = output.get("schema")
    if schema is None:
        return {"type": "json_object"}
    return {"type": "json_schema", "json_schema": {"name": "output", "schema": schema}}


def _to_openai(message: Message) -> list[dict[str, Any]]:
    role = message.role
    if role == "system":
        return [{"role": "system", "content": message.text}]
    if role == "user":
        return [{"role": "user", "content": _user_content(message.content)}]
    if role == "model":
        return [_assistant(message)]
    if role == "tool":
        return [
            {"role": "tool", "tool_call_id": p.ref or p.name, "content": _tool_output(p)}
            for p in message.content
            if isinstance(p, ToolResponsePart)
        ]
    raise InvalidArgumentError(f"the OpenAI chat format has no role {role!r}")


def _user_content(parts: list[Part]) -> str | list[dict[str, Any]]:
    if len(parts) == 1 and isinstance(parts[0], TextPart):
        return parts[0].text
    content: list[dict[str, Any]] = []
    for part in parts:
        if isinstance(part, TextPart):
            content.append({"type": "text", "text": part.text})
        elif isinstance(part, DataPart):
            content.append({"type": "text", "text": json_text(part.data)})
        elif isinstance(part, MediaPart):
            content.append(_media(part))
    return content


def _media(part: MediaPart) -> dict[str, Any]:
    if part.content_type == "application/pdf" or part.url.startswith("data:application/pdf"):
        return {"type": "file", "file": {"file_data": part.url, "filename": "document.pdf"}}
    return {"type": "image_url", "image_url": {"url": part.url}}


def _assistant(message: Message) -> dict[str, Any]:
    text = "".join(p.text for p in message.content if isinstance(p, TextPart))
    out: dict[str, Any] = {"role": "assistant", "content": text or None}
    calls = [
        {
            "id": p.ref or p.name,
            "type": "function",
            "function": {"name": p.name, "arguments": json.dumps(p.input if p.input is not None else {})},
        }
        for p in message.content
        if isinstance(p, ToolRequestPart)
    ]
    if calls:
        out["tool_calls"] = calls
        if not text:
            del out["content"]  # optional beside tool_calls; llama-cpp-python's server rejects a null content
    return out


def _tool_output(part: ToolResponsePart) -> str:
    if part.output is None and part.content:
        return Message(role="tool", content=part.content).text
    return json_text(part.output)


def _arguments(raw: str | None) -> Any:
    if not raw:
        return {}
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


def _reasoning(extra: dict[str, Any] | None) -> str | None:
    if not extra:
        return None
    value = extra.get("reasoning_content") or extra.get("reasoning")
    return value if isinstance(value, str) and value else None


def _usage(usage: CompletionUsage | None) -> Usage | None:
    if usage is None:
        return None
    reasoning = usage.completion_tokens_details.reasoning_tokens if usage.completion_tokens_details else None
    cached = usage.prompt_tokens_details.cached_tokens if usage.prompt_tokens_details else None
    custom = {key: value for key, value in (("reasoningTokens", reasoning), ("cachedInputTokens", cached)) if value}
    return Usage(
        input_tokens=usage.prompt_tokens,
        output_tokens=usage.completion_tokens,
        total_tokens=usage.total_tokens,
        custom=custom or None,
    )


def _finish(reason: str | None, refusal: str | None) -> FinishReason | str:
    if refusal:
        return "blocked"
    return _FINISH.get(reason or "", "other")


def _parts(message: ChatCompletionMessage) -> list[Part]:
    parts: list[Part] = []
    reasoning = _reasoning(message.model_extra)
    if reasoning:
        parts.append(ReasoningPart(reasoning=reasoning))
    if message.content:
        parts.append(TextPart(text=message.content))
    for call in message.tool_calls or []:
        if call.type == "function":
            parts.append(
                ToolRequestPart(name=call.function.name, ref=call.id, input=_arguments(call.function.arguments))
            )
    return parts


def _response(completion: ChatCompletion) -> ModelResponse:
    if not completion.choices:
        return ModelResponse(message=Message(role="model"), finish_reason="other", usage=_usage(completion.usage))
    choice = completion.choices[0]
    refusal = choice.message.refusal
    return ModelResponse(
        message=Message(role="model", content=_parts(choice.message)),
        finish_reason=_finish(choice.finish_reason, refusal),
        finish_message=refusal,
        usage=_usage(completion.usage),
        raw=completion,
    )


class _Stream:
    """Folds streamed chunks into one response, passing text and reasoning deltas on."""

    def __init__(self, on_chunk: ChunkCallback) -> None:
        self.on_chunk = on_chunk
        self.reset()

    def reset(self) -> None:
        self.emitted = False
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.refusal: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.finish: str | None = None
        self.usage: CompletionUsage | None = None

    async def add(self, chunk: ChatCompletionChunk) -> None:
        if chunk.usage is not None:
            self.usage = chunk.usage
        for choice in chunk.choices[:1]:
            delta = choice.delta
            self.finish = choice.finish_reason or self.finish
            if delta.refusal:
                self.refusal.append(delta.refusal)
            for call in delta.tool_calls or []:
                index = call.index if isinstance(call.index, int) else len(self.calls)  # pyright: ignore[reportUnnecessaryIsInstance]
                slot = self.calls.setdefault(index, {"id": None, "name": "", "arguments": []})
                slot["id"] = call.id or slot["id"]
                if call.function is not None:
                    name = call.function.name
                    if name and name != slot["name"]:  # llama-cpp-python repeats the whole name in every delta
                        slot["name"] += name
                    slot["arguments"].append(call.function.arguments or "")
            reasoning = _reasoning(delta.model_extra)
            if reasoning:
                self.reasoning.append(reasoning)
                await self._emit(ReasoningPart(reasoning=reasoning))
            if delta.content:
                self.text.append(delta.content)
                await self._emit(TextPart(text=delta.content))

    async def _emit(self, part: Part) -> None:
        self.emitted = True
        result = self.on_chunk(ModelChunk(content=[part]))
        if result is not None:
            await result

    def response(self) -> ModelResponse:
        parts: list[Part] = []
        if self.reasoning:
            parts.append(ReasoningPart(reasoning="".join(self.reasoning)))
        if self.text:
            parts.append(TextPart(text="".join(self.text)))
        for _, slot in sorted(self.calls.items()):
            parts.append(
                ToolRequestPart(name=slot["name"], ref=slot["id"], input=_arguments("".join(slot["arguments"])))
            )
        refusal = "".join(self.refusal) or None
        return ModelResponse(
            message=Message(role="model", content=parts),
            finish_reason=_finish(self.finish, refusal),
            finish_message=refusal,
            usage=_usage(self.usage),
        )
