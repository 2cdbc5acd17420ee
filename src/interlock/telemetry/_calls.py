"""The hooks around model and tool calls: ``chat {model}`` and ``execute_tool {tool}`` spans, and their logs.

Attributes follow OpenTelemetry's GenAI semantic conventions (``gen_ai.operation.name``,
``gen_ai.provider.name``, ``gen_ai.request.model``, ``gen_ai.usage.*``, ``gen_ai.tool.*``);
prompts, replies, tool arguments and results are recorded only with content capture on.
While no tracer provider is set and debug logging is off, a call costs one check.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import InterlockError, Interrupt
from ._logs import logger
from ._otel import (
    Opened,
    add_event,
    as_json,
    capture_content,
    close_span,
    elapsed_ms,
    error_type,
    fail,
    recorder,
    start,
)

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer

    from ..messages import Message
    from ..models import ChunkCallback, Model, ModelRequest, ModelResponse
    from ..parts import ToolRequestPart


_models, _tools = logger("models"), logger("tools")


def split_model_name(name: str) -> tuple[str, str]:
    """``(provider, model)`` of a ``provider/model`` name (a name without ``/`` is both)."""
    provider, slash, model = name.partition("/")
    return (provider, model) if slash and model else (name, name)


async def call_model(model: Model, request: ModelRequest, *, on_chunk: ChunkCallback | None) -> ModelResponse:
    """``model.generate(request)`` inside its ``chat`` span, logged with duration and tokens."""
    tracer = recorder()
    if tracer is None and not _models.isEnabledFor(logging.INFO):  # the common case costs nothing more
        try:
            return await model.generate(request, on_chunk=on_chunk)
        except Exception as exc:
            _log_model_failure(model, exc, None)
            raise
    provider, name = split_model_name(_model_name(model))
    started = time.perf_counter()
    opened = (
        None
        if tracer is None
        else start(tracer, f"chat {name}", _chat_attributes(provider, name, request), client=True)
    )
    try:
        response = await model.generate(request, on_chunk=on_chunk)
    except BaseException as exc:
        if opened is not None:
            fail(opened[0], error_type(exc), str(exc) or type(exc).__name__, exc)
        if isinstance(exc, Exception):
            _log_model_failure(model, exc, started)
        raise
    else:
        if opened is not None:
            _record_response(opened[0], request, response)
    finally:
        if opened is not None:
            close_span(opened)
    if _models.isEnabledFor(logging.INFO):
        usage = response.usage
        facts = {
            "provider": provider,
            "model": name,
            "input_tokens": usage.input_tokens if usage else None,
            "output_tokens": usage.output_tokens if usage else None,
            "finish_reason": str(response.finish_reason),
            "duration_ms": elapsed_ms(started),
        }
        _models.info("model call: %s/%s in %.0f ms", provider, name, facts["duration_ms"], extra=facts)
    return response


def _model_name(model: Model) -> str:
    return str(getattr(model, "name", None) or type(model).__name__)


def _log_model_failure(model: Model, exc: Exception, started: float | None) -> None:
    provider, name = split_model_name(_model_name(model))
    duration = None if started is None else elapsed_ms(started)
    _models.warning(
        "model call to %s/%s failed: %s",
        provider,
        name,
        exc,
        extra={"provider": provider, "model": name, "duration_ms": duration, "status": error_type(exc)},
    )


_REQUEST_SETTINGS = (
    ("temperature", "gen_ai.request.temperature"),
    ("maxOutputTokens", "gen_ai.request.max_tokens"),
    ("topP", "gen_ai.request.top_p"),
)
"""The model settings a ``chat`` span records: the request's config key, the attribute."""


def _chat_attributes(provider: str, name: str, request: ModelRequest) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": provider,
        "gen_ai.request.model": name,
    }
    if request.config:
        for key, attribute in _REQUEST_SETTINGS:
            value = _number(request.config.get(key))
            if value is not None:
                attributes[attribute] = value
    return attributes


def _record_response(span: Span, request: ModelRequest, response: ModelResponse) -> None:
    finish_reason = str(response.finish_reason)
    usage = response.usage
    found: dict[str, Any] = {"gen_ai.response.finish_reasons": [finish_reason]}
    if usage is not None and usage.input_tokens is not None:
        found["gen_ai.usage.input_tokens"] = usage.input_tokens
    if usage is not None and usage.output_tokens is not None:
        found["gen_ai.usage.output_tokens"] = usage.output_tokens
    span.set_attributes(found)  # one call (one lock) for the three
    if capture_content():
        span.set_attribute("gen_ai.input.messages", as_json(_genai_messages(request.messages)))
        output = _genai_messages([response.message])
        output[0]["finish_reason"] = finish_reason
        span.set_attribute("gen_ai.output.messages", as_json(output))


def _number(value: object) -> float | int | None:
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def reasked(part: ToolRequestPart, reason: str) -> None:
    """An approved call's recheck failed: it is asked again instead of running."""
    add_event("interlock.tool.reasked", {"gen_ai.tool.name": part.name, "gen_ai.tool.call.id": part.ref})
    _tools.warning(
        "tool %s#%s asked again: its approval went stale (%s)",
        part.name,
        part.ref or "",
        reason,
        extra={"tool": part.name, "ref": part.ref, "reason": reason},
    )


def model_retry(error: InterlockError, attempt: int, delay: float) -> None:
    """A transient model failure is retried after ``delay`` seconds."""
    add_event("interlock.model.retry", {"error.type": error.status, "interlock.retry.attempt": attempt})
    _models.warning(
        "model call failed (%s), retry %d in %.1f s: %s",
        error.status,
        attempt,
        delay,
        error.message,
        extra={"status": error.status, "attempt": attempt, "delay_s": round(delay, 3)},
    )


@dataclass(kw_only=True)
class ToolTrace:
    """The span of one tool call; :meth:`output` records what the tool returned."""

    span: Span | None

    def output(self, value: object) -> Any:
        """Record the tool's output (content capture only) and hand it back."""
        if self.span is not None and capture_content():
            self.span.set_attribute("gen_ai.tool.call.result", as_json(value))
        return value


class _Untraced(contextlib.AbstractContextManager[ToolTrace]):
    """A tool call with neither spans nor debug logging: nothing to do."""

    def __enter__(self) -> ToolTrace:
        return _UNTRACED_TOOL

    def __exit__(self, *exc: object) -> None:
        return None


_UNTRACED_TOOL = ToolTrace(span=None)
_UNTRACED = _Untraced()


def tool_call(
    part: ToolRequestPart, *, description: str, resumed: bool
) -> contextlib.AbstractContextManager[ToolTrace]:
    """The ``execute_tool`` span of one call; an :class:`~interlock.errors.Interrupt` is an outcome, not an error."""
    tracer = recorder()
    if tracer is None and not _tools.isEnabledFor(logging.DEBUG):
        return _UNTRACED
    return _TracedTool(part, tracer, description=description, resumed=resumed)


class _TracedTool(ToolTrace, contextlib.AbstractContextManager[ToolTrace]):
    """A tool call's ``execute_tool`` span (when a tracer provider is set) and its debug log line.

    A class rather than a generator: a recorded call pays for its span, not for the scaffolding.
    """

    def __init__(self, part: ToolRequestPart, tracer: Tracer | None, *, description: str, resumed: bool) -> None:
        self.span = None
        self.part, self.tracer, self.description, self.resumed = part, tracer, description, resumed
        self.opened: Opened | None = None
        self.started = 0.0

    def __enter__(self) -> ToolTrace:
        self.started = time.perf_counter()
        if self.tracer is not None:
            self.opened = self._open(self.tracer)
            self.span = self.opened[0]
        return self

    def _open(self, tracer: Tracer) -> Opened:
        part = self.part
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": part.name,
            "gen_ai.tool.type": "function",
            "interlock.tool.resumed": self.resumed,
        }
        if part.ref is not None:
            attributes["gen_ai.tool.call.id"] = part.ref
        if self.description:
            attributes["gen_ai.tool.description"] = self.description
        if capture_content():
            attributes["gen_ai.tool.call.arguments"] = as_json(part.input)
        return start(tracer, f"execute_tool {part.name}", attributes)

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        outcome = "ok"
        if isinstance(exc, Interrupt):
            outcome = "interrupted"
            if self.span is not None:
                self.span.set_attribute("interlock.tool.interrupted", True)
        elif exc is not None:
            outcome = error_type(exc)
            fail(self.span, outcome, str(exc) or type(exc).__name__, exc)
        if _tools.isEnabledFor(logging.DEBUG):
            part, duration = self.part, elapsed_ms(self.started)
            _tools.debug(
                "tool %s: %s in %.1f ms",
                part.name,
                outcome,
                duration,
                extra={"tool": part.name, "ref": part.ref, "outcome": outcome, "duration_ms": duration},
            )
        if self.opened is not None:
            close_span(self.opened)


# content ----------------------------------------------------------------------------------

_ROLES = {"model": "assistant"}


def _genai_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Messages in the GenAI conventions' shape: ``{role, parts: [{type, ...}]}``."""
    out: list[dict[str, Any]] = []
    for message in messages:
        parts: list[dict[str, Any]] = []
        for part in message.content:
            if part.kind == "text":
                parts.append({"type": "text", "content": part.text})
            elif part.kind == "tool_request":
                parts.append({"type": "tool_call", "id": part.ref, "name": part.name, "arguments": part.input})
            elif part.kind == "tool_response":
                parts.append({"type": "tool_call_response", "id": part.ref, "response": part.output})
            else:
                parts.append({"type": part.kind})
        out.append({"role": _ROLES.get(message.role, message.role), "parts": parts})
    return out
