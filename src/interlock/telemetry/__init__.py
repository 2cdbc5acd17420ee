"""Observability: OpenTelemetry traces (optional, ``interlock[otel]``) and stdlib logging.

Traces. With ``opentelemetry-api`` installed and a tracer provider configured (yours, or
:func:`configure_from_env` as ``interlock serve`` does), every turn is an
``invoke_agent {agent}`` span with a ``chat {model}`` span per model call and an
``execute_tool {tool}`` span per tool call (OpenTelemetry's GenAI semantic conventions),
plus interlock's events: interrupts, resumes, claims, the effect journal, detached runs.
A resumed turn's span links to the span of the turn that paused, whichever process ran it.
Without the package nothing is traced, and nothing needs it.

Content (prompts, model replies, tool inputs and outputs, interrupt data, resume
payloads) stays off spans unless :func:`configure` ``(capture_content=True)`` or
``INTERLOCK_OTEL_CAPTURE_CONTENT=true`` turns it on.

Logging. ``interlock.*`` loggers (see :mod:`interlock.telemetry._logs`) with structured
``extra`` fields; nothing is printed unless you configure logging
(:func:`configure_logging` does it for the command line).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._export import ExportSetup, configure_from_env
from ._logs import JsonFormatter, LogFormat, configure_logging
from ._otel import TRACER_NAME, capture_content, set_options

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider

__all__ = [
    "TRACER_NAME",
    "ExportSetup",
    "JsonFormatter",
    "LogFormat",
    "capture_content",
    "configure",
    "configure_from_env",
    "configure_logging",
]


def configure(*, capture_content: bool | None = None, tracer_provider: TracerProvider | None = None) -> None:
    """Process-wide telemetry settings; each call sets both (``configure()`` restores the defaults).

    Args:
        capture_content: record prompts, replies, tool inputs and outputs on spans
            (``None``: by ``INTERLOCK_OTEL_CAPTURE_CONTENT``, off unless it is ``true``).
        tracer_provider: where interlock's spans go (``None``: OpenTelemetry's global provider).
    """
    set_options(capture_content=capture_content, tracer_provider=tracer_provider)
