"""Exporting traces from a process interlock runs (``interlock serve``): OTLP from the ``OTEL_*`` variables.

:func:`configure_from_env` sets up the OpenTelemetry SDK with the official OTLP/HTTP
exporter, which reads the standard variables itself (``OTEL_EXPORTER_OTLP_ENDPOINT``,
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``, ``OTEL_EXPORTER_OTLP_HEADERS``, ...), as does the
SDK (``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES``, ``OTEL_TRACES_SAMPLER``,
``OTEL_BSP_*``). It only acts when asked to export: an OTLP endpoint is set, or
``OTEL_TRACES_EXPORTER`` names ``otlp`` or ``console``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Literal

ExportSetup = Literal["configured", "disabled", "not-requested", "already-configured"]
"""What :func:`configure_from_env` did."""

_ENDPOINTS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")


def _exporters(env: Mapping[str, str]) -> list[str]:
    named = [e.strip().lower() for e in env.get("OTEL_TRACES_EXPORTER", "").split(",") if e.strip()]
    if named:
        return named
    return ["otlp"] if any(env.get(name) for name in _ENDPOINTS) else []


def configure_from_env(env: Mapping[str, str] | None = None) -> ExportSetup:
    """Install an SDK tracer provider exporting over OTLP/HTTP, as the ``OTEL_*`` variables say.

    Returns ``"disabled"`` for ``OTEL_SDK_DISABLED=true`` or ``OTEL_TRACES_EXPORTER=none``,
    ``"not-requested"`` when no exporter or endpoint is named, ``"already-configured"``
    when the application set a tracer provider itself (it is left alone).

    Raises:
        ImportError: the ``interlock[otel]`` extra is not installed (names it).
        ValueError: an exporter other than ``otlp``, ``console`` or ``none``, or a protocol other
            than ``http/protobuf``.
    """
    env = os.environ if env is None else env
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return "disabled"
    exporters = _exporters(env)
    if not exporters:
        return "not-requested"
    if exporters == ["none"]:
        return "disabled"
    unknown = sorted(set(exporters) - {"otlp", "console"})
    if unknown:
        raise ValueError(f"OTEL_TRACES_EXPORTER names {', '.join(unknown)}; interlock exports with otlp or console")
    protocol = env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or env.get("OTEL_EXPORTER_OTLP_PROTOCOL") or ""
    if "otlp" in exporters and protocol not in ("", "http/protobuf"):
        raise ValueError(f"OTLP protocol {protocol!r} is not supported; set OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf")
    try:
        from opentelemetry import trace
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter
    except ImportError:
        raise ImportError(
            "exporting traces needs the OpenTelemetry SDK and OTLP exporter: pip install 'interlock[otel]'"
        ) from None
    if not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        return "already-configured"
    provider = TracerProvider(resource=Resource.create({"service.name": env.get("OTEL_SERVICE_NAME") or "interlock"}))
    for name in exporters:
        exporter: SpanExporter = OTLPSpanExporter() if name == "otlp" else ConsoleSpanExporter()
        provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    return "configured"
