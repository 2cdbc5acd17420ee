"""The inbox's responses: compact JSON, canonical errors, and unbuffered event streams."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

from starlette.responses import Response, StreamingResponse

from ...errors import InterlockError
from .._sse import encode
from .._status import error_body, http_status

Headers = Sequence[tuple[bytes, bytes]]


def json_response(payload: Any, *, code: int = 200, headers: Headers = ()) -> Response:
    """A JSON response (compact, ASCII)."""
    extra = {name.decode("latin-1"): value.decode("latin-1") for name, value in headers}
    return Response(encode(payload), status_code=code, media_type="application/json", headers=extra)


def json_error(exc: InterlockError, *, code: int | None = None, headers: Headers = ()) -> Response:
    """``{status, message, details?}`` with the HTTP code of the canonical status (or ``code``)."""
    return json_response(error_body(exc), code=code or http_status(exc), headers=headers)


def event_stream(chunks: AsyncIterator[bytes]) -> Response:
    """A ``text/event-stream`` response that is not buffered on the way."""
    headers = {"cache-control": "no-cache", "x-accel-buffering": "no"}
    return StreamingResponse(chunks, media_type="text/event-stream", headers=headers)
