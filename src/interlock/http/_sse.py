r"""Server-sent event framing, the one both Genkit clients accept: ``data: <json>\n\n``.

The JSON is compact, ASCII-only and on one line. Hand-written on purpose: the bytes must be
exactly what Genkit's JS and Python clients parse, which no SSE library guarantees.
"""

from __future__ import annotations

import codecs
import json
from typing import Any


def encode(payload: object) -> bytes:
    """Compact, ASCII-only, single-line JSON."""
    return json.dumps(payload, ensure_ascii=True, separators=(",", ":"), allow_nan=False).encode("ascii")


def frame(payload: Any) -> bytes:
    r"""One stream frame: ``data: <json>\n\n``."""
    return b"data: " + encode(payload) + b"\n\n"


class EventParser:
    """Splits a response body into event payloads (tolerant of what servers really send).

    Accepts ``data:`` and ``error:`` fields (joined per event, SSE style), CRLF line ends,
    UTF-8 split across reads, comments and ``event:``/``id:``/``retry:`` lines (ignored),
    and bare JSON lines (NDJSON).
    """

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._buffer = ""
        self._data: list[str] = []

    def feed(self, raw: bytes, *, final: bool = False) -> list[str]:
        """Take the next bytes; return the events they complete (``final``: the body ended)."""
        self._buffer += self._decoder.decode(raw, final=final)
        events: list[str] = []
        *lines, self._buffer = self._buffer.split("\n")
        if final:
            lines.extend([self._buffer, ""])
            self._buffer = ""
        for line in lines:
            self._line(line.rstrip("\r"), events)
        return events

    def _line(self, line: str, events: list[str]) -> None:
        if not line:
            if self._data:
                events.append("\n".join(self._data))
                self._data = []
            return
        name, colon, value = line.partition(":")
        if line.startswith(":") or (colon and name in ("event", "id", "retry")):
            return
        if colon and name in ("data", "error"):
            self._data.append(value[1:] if value.startswith(" ") else value)
        else:
            events.append(line)
