"""The one place that touches the OpenTelemetry API, which is optional (``interlock[otel]``).

Without the package every helper here is a no-op (spans are ``None``); with it and no SDK
configured, the API hands out non-recording spans and nothing is exported.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
from collections.abc import Generator, Mapping
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from contextvars import Token

    from opentelemetry.context import Context
    from opentelemetry.trace import Link, Span, Tracer, TracerProvider

try:
    from opentelemetry import context as _context
    from opentelemetry import trace as _trace
    from opentelemetry.trace.propagation import tracecontext as _tracecontext
except ImportError:  # the extra is not installed: no spans
    _context = None
    _trace = None
    _tracecontext = None


TRACER_NAME = "interlock"
"""The instrumentation scope of every span interlock makes."""

Attributes = Mapping[str, "str | bool | int | float | list[str] | None"]
"""Span attributes; ``None`` values are left out."""

Opened = tuple["Span", "Token[Context]"]
"""A span :func:`open_span` started and made current, and the token that restores the context before it."""

_capture: bool | None = None
_provider: TracerProvider | None = None
_tracer: tuple[object, Tracer] | None = None
_TRUE = frozenset({"1", "true", "yes", "on"})
_UNDECIDED: Any = object()
_GLOBAL_SLOT = "_TRACER_PROVIDER"
"""Where the OpenTelemetry API keeps the global provider (``None`` until one is set; it is set once)."""
_decided_for: Any = _UNDECIDED
"""The global provider slot's value when :func:`recorder` last decided (``_UNDECIDED``: decide again)."""
_decided: Tracer | None = None
_capture_env: bool | None = None


def set_options(*, capture_content: bool | None, tracer_provider: TracerProvider | None) -> None:
    """Record content on spans (``None``: by the environment); take tracers from ``tracer_provider`` (or the global)."""
    global _capture, _provider, _tracer, _decided_for, _capture_env
    _capture, _provider, _tracer, _decided_for = capture_content, tracer_provider, None, _UNDECIDED
    _capture_env = None


def capture_content() -> bool:
    """Whether spans carry content: the :func:`set_options` setting, else the environment.

    ``INTERLOCK_OTEL_CAPTURE_CONTENT=true`` (or OpenTelemetry's own
    ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``) turns it on; off by default.
    """
    global _capture_env
    if _capture is not None:
        return _capture
    if _capture_env is None:  # read once, and again after the next configure()
        names = ("INTERLOCK_OTEL_CAPTURE_CONTENT", "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")
        _capture_env = any(os.environ.get(name, "").strip().lower() in _TRUE for name in names)
    return _capture_env


def _clean(attributes: Attributes) -> dict[str, Any]:
    return {k: v for k, v in attributes.items() if v is not None}


def open_span(
    name: str,
    attributes: dict[str, Any],
    *,
    client: bool = False,
    link_to: Mapping[str, Any] | None = None,
    parent: Span | None = None,
) -> Opened | None:
    """Start a span and make it current (``None`` while no tracer provider is set); :func:`close_span` ends it.

    ``attributes`` holds no ``None`` values (the SDK copies them; they are not cleaned here).
    ``link_to`` is a W3C trace-context carrier (see :func:`span_carrier`) the span links to;
    ``parent`` makes the span a child of that span instead of the current one. Exceptions are
    left to the caller (see :func:`fail`).
    """
    tracer = recorder()
    if tracer is None or _trace is None:
        return None
    if parent is not None:
        return start(tracer, name, attributes, _trace.set_span_in_context(parent), client=client, link_to=link_to)
    return start(tracer, name, attributes, client=client, link_to=link_to)


def start(
    tracer: Tracer,
    name: str,
    attributes: dict[str, Any],
    context: Context | None = None,
    *,
    client: bool = False,
    link_to: Mapping[str, Any] | None = None,
) -> Opened:
    """:func:`open_span` with the tracer in hand (from :func:`recorder`), in ``context`` (``None``: the current one).

    The current context is read once and handed to the SDK, which would otherwise read it
    twice more (for the parent and for the sampler); the span is the same.
    """
    assert _trace is not None and _context is not None
    if context is None:
        context = _context.get_current()
    started = tracer.start_span(
        name,
        context=context,
        kind=_CLIENT if client else _INTERNAL,
        attributes=attributes,
        links=_links(link_to) if link_to else (),
    )
    # what ``use_span(end_on_exit=True, record_exception=False, set_status_on_exception=False)`` does, inline
    return started, _context.attach(_trace.set_span_in_context(started, context))


def close_span(opened: Opened) -> None:
    """Restore the context from before :func:`open_span` (or :func:`start`) and end its span."""
    assert _context is not None
    _context.detach(opened[1])
    opened[0].end()


@contextlib.contextmanager
def span(
    name: str,
    attributes: Attributes,
    *,
    kind: Literal["internal", "client"] = "internal",
    link_to: Mapping[str, Any] | None = None,
    parent: Span | None = None,
) -> Generator[Span | None, None, None]:
    """A current span around the block (``None`` without a tracer provider); exceptions are left to the caller.

    :func:`open_span` and :func:`close_span` around a block, for the spans off the hot path.
    """
    opened = open_span(name, _clean(attributes), client=kind == "client", link_to=link_to, parent=parent)
    if opened is None:
        yield None
        return
    try:
        yield opened[0]
    finally:
        close_span(opened)


def tracing() -> bool:
    """True when spans are recorded somewhere: the API is installed and a tracer provider is set."""
    return recorder() is not None


def recorder() -> Tracer | None:
    """Interlock's tracer; ``None`` while no tracer provider is set (so no span is made at all).

    Decided once, and again only when the configuration changes: :func:`set_options`, or the
    OpenTelemetry API's global provider slot, read as one attribute (no provider lookup).
    """
    global _decided, _decided_for
    slot = getattr(_trace, _GLOBAL_SLOT, _UNDECIDED)
    if slot is _decided_for and slot is not _UNDECIDED:
        return _decided
    _decided, _decided_for = _look_up_tracer(), slot
    return _decided


def _look_up_tracer() -> Tracer | None:
    global _tracer
    if _trace is None:
        return None
    if _tracer is not None and (_provider is None or _tracer[0] is _provider):
        return _tracer[1]  # a provider, once set, stays (OpenTelemetry refuses to replace the global one)
    provider = _provider or _trace.get_tracer_provider()
    if isinstance(provider, _trace.ProxyTracerProvider):
        return None
    if _tracer is None or _tracer[0] is not provider:
        _tracer = (provider, provider.get_tracer(TRACER_NAME))
    return _tracer[1]


_INTERNAL: Any = _trace.SpanKind.INTERNAL if _trace is not None else None
_CLIENT: Any = _trace.SpanKind.CLIENT if _trace is not None else None

_TRACEPARENT = re.compile(r"00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})")
"""A ``traceparent`` as :func:`span_carrier` writes it (W3C trace context, version 00)."""


def _links(carrier: Mapping[str, Any] | None) -> list[Link]:
    """The link to the span a stored carrier (written by :func:`span_carrier`) names; none for anything else."""
    if _trace is None or not carrier:
        return []
    traceparent, tracestate = carrier.get("traceparent"), carrier.get("tracestate")
    found = _TRACEPARENT.fullmatch(traceparent) if isinstance(traceparent, str) else None
    if found is None:
        return []
    linked = _trace.SpanContext(
        int(found[1], 16),
        int(found[2], 16),
        is_remote=True,
        trace_flags=_trace.TraceFlags(int(found[3], 16)),
        trace_state=_trace.TraceState.from_header([tracestate]) if isinstance(tracestate, str) else None,
    )
    return [_trace.Link(linked, {"interlock.link": "paused_turn"})] if linked.is_valid else []


def _propagator() -> Any:
    """The W3C trace-context propagator (one, made on first use)."""
    global _w3c
    if _w3c is None and _tracecontext is not None:
        _w3c = _tracecontext.TraceContextTextMapPropagator()
    return _w3c


_w3c: Any = None


def current_span() -> Span | None:
    """The current span, when it records (``None`` otherwise)."""
    if _trace is None:
        return None
    found = _trace.get_current_span()
    return found if found.is_recording() else None


def add_event(name: str, attributes: Attributes, target: Span | None = None) -> None:
    """Add an event to ``target`` (or the current span), when it records (without a tracer provider: nothing)."""
    if target is None:
        if recorder() is None:
            return
        target = current_span()
    if target is not None and target.is_recording():
        target.add_event(name, _clean(attributes))


def fail(target: Span | None, error_type: str, message: str, exc: BaseException | None = None) -> None:
    """Mark ``target`` failed: ``error.type``, status ERROR with ``message``, the exception recorded."""
    if _trace is None or target is None or not target.is_recording():
        return
    target.set_attribute("error.type", error_type)
    if exc is not None:
        target.record_exception(exc)
    target.set_status(_trace.StatusCode.ERROR, message)


_FLAGS = tuple(f"-{flags:02x}" for flags in range(256))
"""A ``traceparent``'s last field for each trace-flags byte (looked up: cheaper than a format spec per turn)."""


def span_carrier(target: Span | None) -> dict[str, str]:
    """``target``'s span context as a W3C trace-context carrier (``{"traceparent": ...}``), or ``{}``.

    What the W3C propagator's ``inject`` writes (``tracestate`` too, when there is one),
    formatted here without making a context for it: every traced turn stores one.
    """
    if _trace is None or target is None:
        return {}
    context = target.get_span_context()
    if not context.is_valid:
        return {}
    ids = f"00-{context.trace_id.to_bytes(16, 'big').hex()}-{context.span_id.to_bytes(8, 'big').hex()}"
    carrier = {"traceparent": ids + _FLAGS[context.trace_flags]}
    if context.trace_state:
        carrier["tracestate"] = context.trace_state.to_header()
    return carrier


def elapsed_ms(started: float) -> float:
    """Milliseconds since ``started`` (a :func:`time.perf_counter` reading)."""
    return round((time.perf_counter() - started) * 1000, 3)


def as_json(value: object) -> str:
    """``value`` as a JSON string attribute (anything not JSON as its ``str``)."""
    return json.dumps(value, default=str, ensure_ascii=False)


def error_type(exc: BaseException) -> str:
    """The ``error.type`` of an exception: its canonical status, or its class name."""
    from ..errors import InterlockError

    return exc.status if isinstance(exc, InterlockError) else type(exc).__qualname__


def outgoing_trace() -> dict[str, str]:
    """The W3C trace-context headers (``traceparent``) of the current span, for an HTTP request; ``{}`` untraced."""
    if not tracing():
        return {}
    assert _trace is not None
    return span_carrier(_trace.get_current_span())


@contextlib.contextmanager
def incoming_trace(headers: Mapping[str, str]) -> Generator[None, None, None]:
    """Make the caller's span (a request's ``traceparent`` header) the parent of the spans made in the block."""
    if _context is None or _tracecontext is None or "traceparent" not in headers or not tracing():
        yield
        return
    extracted = _propagator().extract(dict(headers))
    token = _context.attach(extracted)
    try:
        yield
    finally:
        _context.detach(token)
