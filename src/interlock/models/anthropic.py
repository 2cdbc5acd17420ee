"""Anthropic Messages, through the official ``anthropic`` SDK.

Needs ``pip install 'interlock[anthropic]'``. System messages become the ``system``
parameter; tool calls are ``tool_use`` blocks whose ``id`` is the :class:`ToolRequestPart`
``ref``, and each :class:`ToolResponsePart` goes back as a ``tool_result`` block keyed by
``tool_use_id``. Extended thinking maps to :class:`ReasoningPart`; its ``signature`` (or
a redacted block's ``data``) is kept in ``custom`` so the block can be sent back intact.
"""

from __future__ import annotations

import inspect
from typing import Any, cast

from .._json_object import is_object
from ..errors import InterlockError, InvalidArgumentError, ModelError
from ..messages import Message
from ..parts import CustomPart, DataPart, MediaPart, Part, ReasoningPart, TextPart, ToolRequestPart, ToolResponsePart
from ._base import ChunkCallback, FinishReason, ModelChunk, ModelRequest, ModelResponse, ToolDefinition, Usage
from ._retry import (
    OwnsClient,
    RetryPolicy,
    call_with_retries,
    connection_error,
    data_url,
    http_error,
    json_text,
    missing_extra,
    retry_after_seconds,
    timeout_error,
)

try:
    import anthropic
    from anthropic.types import Message as AnthropicMessage
except ImportError as _exc:  # pragma: no cover - exercised by blocking the import in tests
    raise missing_extra("anthropic", "anthropic") from _exc


_FINISH: dict[str, FinishReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "blocked",
}
_SAMPLING = {"temperature": "temperature", "topP": "top_p", "topK": "top_k"}
"""Sampling options; recent SDKs dropped them as arguments, so they travel in the body as-is."""
_ERROR_TYPES = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "overloaded_error": 529,
}
"""HTTP status per error ``type``, for errors that arrive inside a 200 stream."""
_TOOL_CHOICE = {"auto": {"type": "auto"}, "required": {"type": "any"}, "none": {"type": "none"}}


class AnthropicModel(OwnsClient):
    """A Claude model behind the Anthropic Messages API.

    Args:
        model: the model id, e.g. ``"claude-sonnet-4-6"``.
        api_key: the key; the SDK reads ``ANTHROPIC_API_KEY`` when omitted.
        base_url: the API root (``https://api.anthropic.com`` when omitted).
        client: an ``AsyncAnthropic`` to use instead of building one (it is not closed by us).
        max_tokens: the output limit when the request config has no ``maxOutputTokens``.
        max_retries: retries after a 429, 5xx or 529, with exponential backoff from ``retry_delay`` seconds.
        timeout: seconds before a request fails with ``DEADLINE_EXCEEDED``.
    """

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        client: anthropic.AsyncAnthropic | None = None,
        max_tokens: int = 4096,
        max_retries: int = 2,
        retry_delay: float = 0.5,
        timeout: float | None = None,
        default_headers: dict[str, str] | None = None,
    ) -> None:
        self.model = model
        self.max_tokens = max_tokens
        self.retry = RetryPolicy(max_retries=max_retries, initial_delay=retry_delay)
        self._owns_client = client is None
        if client is None:
            options: dict[str, Any] = {} if timeout is None else {"timeout": timeout}
            client = anthropic.AsyncAnthropic(
                api_key=api_key, base_url=base_url, max_retries=0, default_headers=default_headers, **options
            )
        self.client = client

    @property
    def name(self) -> str:
        return f"anthropic/{self.model}"

    async def _close_client(self) -> None:
        await self.client.close()

    async def generate(self, request: ModelRequest, *, on_chunk: ChunkCallback | None = None) -> ModelResponse:
        params = self._params(request)
        if on_chunk is None:

            async def create() -> AnthropicMessage:
                # no ``stream`` argument: an explicit ``false`` would be sent on the wire
                return cast(AnthropicMessage, await self.client.messages.create(**params))

            return _response(await call_with_retries(create, policy=self.retry, map_error=_map_error))
        emitted = False

        async def emit(part: Part) -> None:
            nonlocal emitted
            emitted = True
            result = on_chunk(ModelChunk(content=[part]))
            if inspect.isawaitable(result):
                await result

        async def attempt() -> ModelResponse:
            async with self.client.messages.stream(**params) as stream:
                async for event in stream:
                    if event.type == "text" and event.text:
                        await emit(TextPart(text=event.text))
                    elif event.type == "thinking" and event.thinking:
                        await emit(ReasoningPart(reasoning=event.thinking))
                return _response(await stream.get_final_message())

        return await call_with_retries(attempt, policy=self.retry, map_error=_map_error, may_retry=lambda: not emitted)

    def _params(self, request: ModelRequest) -> dict[str, Any]:
        config = dict(request.config or {})
        system = "\n\n".join(m.text for m in request.messages if m.role == "system")
        params: dict[str, Any] = {
            "model": config.pop("version", None) or self.model,
            "max_tokens": config.pop("maxOutputTokens", None) or self.max_tokens,
            "messages": _messages(request.messages),
        }
        if system:
            params["system"] = system
        if request.tools:
            params["tools"] = [_tool(t) for t in request.tools]
            if request.tool_choice is not None:
                params["tool_choice"] = _TOOL_CHOICE[request.tool_choice]
        stop = config.pop("stopSequences", None)
        if stop:
            params["stop_sequences"] = stop
        extra: dict[str, Any] = {}
        for key, value in config.items():
            if value is not None:
                extra[_SAMPLING.get(key, key)] = value  # provider-native options (thinking, ...) pass through
        if extra:
            params["extra_body"] = extra
        return params


def _map_error(exc: Exception) -> InterlockError | None:
    if isinstance(exc, anthropic.APITimeoutError):
        return timeout_error("anthropic", exc)
    if isinstance(exc, anthropic.APIConnectionError):
        return connection_error("anthropic", exc)
    if isinstance(exc, anthropic.APIStatusError):
        kind, message = _error_body(exc.body)
        status = exc.status_code
        if status < 400:  # an error event inside a stream that started fine
            status = _ERROR_TYPES.get(kind or "", 500)
        retry_after = retry_after_seconds(exc.response.headers)
        return http_error(status, message or exc.message, provider="anthropic", retry_after=retry_after)
    if isinstance(exc, anthropic.APIError):
        return ModelError(f"anthropic failed: {exc.message}", details={"provider": "anthropic"})
    return None


def _error_body(body: object) -> tuple[str | None, str | None]:
    """``(type, message)`` from an error body ``{"type": "error", "error": {"type", "message"}}``."""
    error = body.get("error") if is_object(body) else None
    if not is_object(error):
        return None, None
    kind, message = error.get("type"), error.get("message")
    return (kind if isinstance(kind, str) else None), (message if isinstance(message, str) else None)


def _tool(tool: ToolDefinition) -> dict[str, Any]:
    out: dict[str, Any] = {"name": tool.name, "input_schema": tool.input_schema or {"type": "object"}}
    if tool.description:
        out["description"] = tool.description
    return out


def _messages(messages: list[Message]) -> list[dict[str, Any]]:
    """Messages in Anthropic's shape; consecutive turns of one role are merged."""
    out: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "system":
            continue
        if message.role in ("user", "tool"):
            role, blocks = "user", [_user_block(p) for p in message.content]
        elif message.role == "model":
            role, blocks = "assistant", [_assistant_block(p) for p in message.content]
        else:
            raise InvalidArgumentError(f"the Anthropic Messages format has no role {message.role!r}")
        content = [b for b in blocks if b is not None]
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(content)
        elif content:
            out.append({"role": role, "content": content})
    return out


def _user_block(part: Part) -> dict[str, Any] | None:
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text} if part.text else None
    if isinstance(part, DataPart):
        return {"type": "text", "text": json_text(part.data)}
    if isinstance(part, MediaPart):
        return _media(part)
    if isinstance(part, ToolResponsePart):
        output = Message(role="tool", content=part.content).text if part.output is None and part.content else None
        return {
            "type": "tool_result",
            "tool_use_id": part.ref or part.name,
            "content": output or json_text(part.output),
        }
    return None


def _media(part: MediaPart) -> dict[str, Any]:
    inline = data_url(part.url)
    content_type = part.content_type or (inline[0] if inline else "")
    kind = "document" if content_type == "application/pdf" else "image"
    if inline is None:
        return {"type": kind, "source": {"type": "url", "url": part.url}}
    data = part.url.split(",", 1)[1]
    return {"type": kind, "source": {"type": "base64", "media_type": content_type, "data": data}}


def _assistant_block(part: Part) -> dict[str, Any] | None:
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text} if part.text else None
    if isinstance(part, ToolRequestPart):
        return {"type": "tool_use", "id": part.ref or part.name, "name": part.name, "input": part.input or {}}
    if isinstance(part, ReasoningPart):
        custom = part.custom or {}
        if "redactedThinking" in custom:
            return {"type": "redacted_thinking", "data": custom["redactedThinking"]}
        if "signature" in custom:  # unsigned thinking (from another provider) would be rejected
            return {"type": "thinking", "thinking": part.reasoning, "signature": custom["signature"]}
        return None
    if isinstance(part, CustomPart) and part.value.get("type"):
        return part.value
    return None


def _part(block: Any) -> Part:
    kind = block.type
    if kind == "text":
        return TextPart(text=block.text)
    if kind == "thinking":
        return ReasoningPart(reasoning=block.thinking, custom={"signature": block.signature})
    if kind == "redacted_thinking":
        return ReasoningPart(reasoning="", custom={"redactedThinking": block.data})
    if kind == "tool_use":
        return ToolRequestPart(name=block.name, ref=block.id, input=block.input)
    return CustomPart(value=cast(dict[str, Any], block.model_dump(mode="json", exclude_none=True)))


def _usage(message: AnthropicMessage) -> Usage:
    usage = message.usage
    custom = {
        key: value
        for key, value in (
            ("cacheCreationInputTokens", usage.cache_creation_input_tokens),
            ("cacheReadInputTokens", usage.cache_read_input_tokens),
        )
        if value
    }
    return Usage(
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        total_tokens=usage.input_tokens + usage.output_tokens,
        custom=custom or None,
    )


def _response(message: AnthropicMessage) -> ModelResponse:
    reason = message.stop_reason or ""
    return ModelResponse(
        message=Message(role="model", content=[_part(block) for block in message.content]),
        finish_reason=_FINISH.get(reason, "other"),
        finish_message=None if reason in _FINISH or not reason else reason,
        usage=_usage(message),
        raw=message,
    )
