"""Logging: the ``interlock.*`` loggers, a JSON formatter, and the command line's setup.

The library logs through stdlib :mod:`logging` and prints nothing by default: the
``interlock`` logger has a :class:`logging.NullHandler`, so without your own logging
configuration no record reaches Python's last-resort handler. Each record carries its
facts as ``extra`` fields (``agent``, ``session_id``, ``tool``, ``duration_ms``, ...), which
:class:`JsonFormatter` writes out as JSON keys.

==========================  ===================================================================
logger                      what it logs
==========================  ===================================================================
``interlock.agents``        turns (debug), resumes and interrupts (info), detached runs
``interlock.models``        each model call: provider, model, duration, tokens (info); retries
``interlock.tools``         each tool call: tool, ref, duration, outcome (debug)
``interlock.claims``        claims taken (debug), taken over and lost (warning)
``interlock.effects``       effect journal replays (info) and in-doubt calls (warning)
``interlock.stores``        store errors (warning when retrying may help, else error)
``interlock.http.server``   one line per HTTP turn (info)
==========================  ===================================================================
"""

from __future__ import annotations

import datetime
import json
import logging
import sys
from typing import Any, Literal, TextIO

LogFormat = Literal["text", "json"]

logging.getLogger("interlock").addHandler(logging.NullHandler())

_STANDARD = frozenset(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime", "taskName"}
_SKIPPED = _STANDARD | {"color_message"}  # uvicorn's copy of the message with terminal colours
_TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def logger(area: str) -> logging.Logger:
    """The logger of one area of interlock (``interlock.<area>``)."""
    return logging.getLogger(f"interlock.{area}")


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time, level, logger, message, the ``extra`` fields, the exception.

    The current OpenTelemetry span's ``trace_id`` and ``span_id`` are added when one records,
    so log lines join their traces.
    """

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": datetime.datetime.fromtimestamp(record.created, datetime.UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _SKIPPED and not key.startswith("_"):
                out[key] = value
        out.update(_trace_ids())
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str, ensure_ascii=False)


def _trace_ids() -> dict[str, str]:
    from ._otel import current_span

    found = current_span()
    if found is None:
        return {}
    context = found.get_span_context()
    return {"trace_id": format(context.trace_id, "032x"), "span_id": format(context.span_id, "016x")}


class _Handler(logging.StreamHandler[TextIO]):
    """The handler :func:`configure_logging` installs: to ``stream``, or to ``sys.stderr`` as it is at each record."""

    def __init__(self, stream: TextIO | None) -> None:
        super().__init__(stream or sys.stderr)
        self._fixed = stream

    def emit(self, record: logging.LogRecord) -> None:
        if self._fixed is None:
            self.stream = sys.stderr
        super().emit(record)


def configure_logging(level: str = "warning", fmt: LogFormat = "text", *, stream: TextIO | None = None) -> None:
    """Send log records of ``level`` and above to ``stream`` (stderr), as text lines or JSON objects.

    For applications and the command line; the library itself never calls it. A handler on
    the root logger (so other libraries' records, uvicorn's among them, come out the same
    way); it replaces the one an earlier call installed and leaves other handlers alone.
    """
    numeric = logging.getLevelNamesMapping().get(level.upper())
    if numeric is None:
        raise ValueError(f"unknown log level {level!r}; use debug, info, warning or error")
    handler = _Handler(stream)
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(_TEXT_FORMAT))
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _Handler)]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(numeric)  # the interlock loggers inherit it (their own levels are left alone)
