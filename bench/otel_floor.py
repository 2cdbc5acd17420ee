"""The SDK floor of ``bench/telemetry.py``: one interrupt cycle's spans, events and link, made without interlock.

Two ways: :func:`floor_cycle`, a plain loop (the SDK alone, hot in the caches), and
:func:`in_place`, stand-ins for the hooks the engine calls that make the same spans at the
same points of the cycle with constant attributes and nothing else (the least recording can
cost inside a cycle). :func:`same_spans` checks both against what interlock records.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from typing import Any

from bank import one_cycle
from opentelemetry import context as otel_context
from opentelemetry import trace as otel_trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from interlock import InMemoryStore
from interlock.errors import Interrupt
from interlock.telemetry import _calls, _hooks, configure

_UUID = "00000000-0000-4000-8000-000000000000"
"""The length of the ids interlock records (sessions and snapshots are UUIDs)."""
_PAUSED = otel_trace.SpanContext(0x1234, 0x5678, is_remote=True, trace_flags=otel_trace.TraceFlags(1))
_TURN = {
    "gen_ai.operation.name": "invoke_agent",
    "gen_ai.agent.name": "bank",
    "interlock.detached": False,
    "gen_ai.conversation.id": _UUID,
    "interlock.snapshot.id": _UUID,
}
_RESUMING = _TURN | {"interlock.parent_snapshot.id": _UUID}
_CHAT = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "test", "gen_ai.request.model": "scripted"}
_TOOL = {
    "gen_ai.operation.name": "execute_tool",
    "gen_ai.tool.name": "transfer",
    "gen_ai.tool.type": "function",
    "interlock.tool.resumed": False,
    "gen_ai.tool.call.id": "t1",
    "gen_ai.tool.description": "Move money once approved.",
}
_INTERRUPT = {
    "gen_ai.tool.name": "transfer",
    "interlock.interrupt.kind": "tool",
    "gen_ai.tool.call.id": "t1",
    "interlock.snapshot.id": _UUID,
}
_CLAIM = {"interlock.snapshot.id": _UUID, "interlock.claim.holder": _UUID, "interlock.claim.ttl": 60.0}
_RESUME = {
    "interlock.resume.verb": "restart",
    "gen_ai.tool.name": "transfer",
    "gen_ai.tool.call.id": "t1",
    "interlock.claim.holder": _UUID,
}


def _start(tracer: otel_trace.Tracer, name: str, attributes: dict[str, Any], **kwargs: Any) -> tuple[Any, Any]:
    """A span started in the current context (read once, as interlock does) and made current."""
    context = otel_context.get_current()
    started = tracer.start_span(name, context=context, attributes=attributes, **kwargs)
    return started, otel_context.attach(otel_trace.set_span_in_context(started, context))


def _end(opened: tuple[Any, Any]) -> None:
    otel_context.detach(opened[1])
    opened[0].end()


def _floor_chat(tracer: otel_trace.Tracer) -> None:
    chat = _start(tracer, "chat scripted", _CHAT, kind=otel_trace.SpanKind.CLIENT)
    chat[0].set_attributes({"gen_ai.response.finish_reasons": ["stop"]})
    _end(chat)


def _floor_tool(tracer: otel_trace.Tracer, *, pausing: bool) -> None:
    tool = _start(tracer, "execute_tool transfer", _TOOL if pausing else _TOOL | {"interlock.tool.resumed": True})
    if pausing:
        tool[0].set_attribute("interlock.tool.interrupted", True)
    _end(tool)


def _floor_turn(tracer: otel_trace.Tracer, *, pausing: bool) -> None:
    """One turn's spans, events and link as interlock records them (the same names, attributes and nesting).

    The pausing turn: ``invoke_agent`` with ``chat`` then ``execute_tool`` (which pauses) inside,
    and the ``interlock.interrupt`` event; the resuming one links to the paused turn's span,
    records ``interlock.claim.taken`` and ``interlock.resume``, then runs the tool and the model.
    """
    if pausing:
        turn = _start(tracer, "invoke_agent bank", _TURN)
        _floor_chat(tracer)
        _floor_tool(tracer, pausing=True)
        turn[0].set_attribute("interlock.finish_reason", "interrupted")
        turn[0].add_event("interlock.interrupt", _INTERRUPT)
    else:
        links = [otel_trace.Link(_PAUSED, {"interlock.link": "paused_turn"})]
        turn = _start(tracer, "invoke_agent bank", _RESUMING, links=links)
        turn[0].add_event("interlock.claim.taken", _CLAIM)
        turn[0].add_event("interlock.resume", _RESUME)
        _floor_tool(tracer, pausing=False)
        _floor_chat(tracer)
        turn[0].set_attribute("interlock.finish_reason", "stop")
    _end(turn)


def floor_cycle(tracer: otel_trace.Tracer) -> None:
    """The SDK's work in one cycle: the pausing turn (one event) and the resuming one (two, and a link)."""
    _floor_turn(tracer, pausing=True)
    _floor_turn(tracer, pausing=False)


Shape = tuple[str, str, str | None, tuple[tuple[str, str], ...], tuple[Any, ...], tuple[Any, ...]]


def _shape(spans: Sequence[ReadableSpan]) -> list[Shape]:
    """What each span is, in the order they ended: name, kind, parent's name, attributes, events and links.

    Attribute values by type only (ids and timings differ from run to run).
    """
    names = {s.context.span_id: s.name for s in spans if s.context is not None}

    def keys(attributes: Any) -> tuple[tuple[str, str], ...]:
        return tuple((k, type(v).__name__) for k, v in (attributes or {}).items())

    return [
        (
            s.name,
            s.kind.name,
            names.get(s.parent.span_id) if s.parent else None,
            keys(s.attributes),
            tuple((e.name, keys(e.attributes)) for e in s.events),
            tuple(keys(link.attributes) for link in s.links),
        )
        for s in spans
    ]


class _InPlaceTurn:
    """The ``turn`` stand-in: the ``invoke_agent`` span, current while the turn runs; no carrier is stored."""

    def __init__(self, tracer: otel_trace.Tracer, resuming: bool) -> None:
        self.tracer, self.resuming = tracer, resuming
        self.span: Any = None

    def __enter__(self) -> _InPlaceTurn:
        if self.resuming:
            links = [otel_trace.Link(_PAUSED, {"interlock.link": "paused_turn"})]
            self.opened = _start(self.tracer, "invoke_agent bank", _RESUMING, links=links)
        else:
            self.opened = _start(self.tracer, "invoke_agent bank", _TURN)
        self.span = self.opened[0]
        return self

    def __exit__(self, *_: object) -> None:
        _end(self.opened)

    def metadata(self) -> dict[str, Any]:
        return {}

    def finish(self, *, finish_reason: str | None, **_: object) -> None:
        self.span.set_attribute("interlock.finish_reason", finish_reason or "")
        if finish_reason == "interrupted":
            self.span.add_event("interlock.interrupt", _INTERRUPT)


class _InPlaceTool:
    """The ``tool_call`` stand-in: the ``execute_tool`` span, current while the tool runs."""

    span = None

    def __init__(self, tracer: otel_trace.Tracer, resumed: bool) -> None:
        self.tracer, self.resumed = tracer, resumed

    def __enter__(self) -> _InPlaceTool:
        self.opened = _start(self.tracer, "execute_tool transfer", _RESUMED_TOOL if self.resumed else _TOOL)
        return self

    def __exit__(self, _: object, exc: BaseException | None, __: object) -> None:
        if isinstance(exc, Interrupt):
            self.opened[0].set_attribute("interlock.tool.interrupted", True)
        _end(self.opened)

    def output(self, value: object) -> object:
        return value


_RESUMED_TOOL = _TOOL | {"interlock.tool.resumed": True}


def in_place(tracer: otel_trace.Tracer) -> dict[Any, dict[str, Callable[..., Any]]]:
    """Stand-ins for the hooks a cycle calls, making its spans where interlock does (for ``hooks_patched``)."""

    async def call_model(model: Any, request: Any, *, on_chunk: Any) -> Any:
        chat = _start(tracer, "chat scripted", _CHAT, kind=otel_trace.SpanKind.CLIENT)
        try:
            response = await model.generate(request, on_chunk=on_chunk)
            chat[0].set_attributes({"gen_ai.response.finish_reasons": [str(response.finish_reason)]})
        finally:
            _end(chat)
        return response

    def event(name: str, attributes: dict[str, Any]) -> Callable[..., None]:
        return lambda *_, **__: otel_trace.get_current_span().add_event(name, attributes)

    return {
        _hooks: {
            "turn": lambda *_, parent, **__: _InPlaceTurn(tracer, parent is not None),
            "resuming": event("interlock.resume", _RESUME),
            "claim_taken": event("interlock.claim.taken", _CLAIM),
        },
        _calls: {
            "call_model": call_model,
            "tool_call": lambda *_, resumed, **__: _InPlaceTool(tracer, resumed),
        },
    }


@contextlib.contextmanager
def hooks_patched(stand_ins: dict[Any, dict[str, Callable[..., Any]]]) -> Any:
    """The engine's telemetry hooks replaced by ``stand_ins`` (the modules are patched, then restored)."""
    saved = [(module, name, getattr(module, name)) for module, names in stand_ins.items() for name in names]
    for module, names in stand_ins.items():
        for name, stand_in in names.items():
            setattr(module, name, stand_in)
    try:
        yield
    finally:
        for module, name, original in saved:
            setattr(module, name, original)


def same_spans() -> bool:
    """Whether :func:`floor_cycle` and :func:`in_place` make the spans, events and link one recorded cycle does."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("interlock")
    configure(tracer_provider=provider)
    try:
        asyncio.run(one_cycle(InMemoryStore()))
    finally:
        configure()
    shapes = [_shape(exporter.get_finished_spans())]
    exporter.clear()
    floor_cycle(tracer)
    shapes.append(_shape(exporter.get_finished_spans()))
    exporter.clear()
    with hooks_patched(in_place(tracer)):
        asyncio.run(one_cycle(InMemoryStore()))
    shapes.append(_shape(exporter.get_finished_spans()))
    return shapes[0] == shapes[1] == shapes[2]
