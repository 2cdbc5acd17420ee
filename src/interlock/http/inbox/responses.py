"""The inbox's responses: compact JSON, canonical errors, and unbuffered event streams."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from starlette.responses import Response, StreamingResponse

from ...errors import InterlockError
from ..sse import encode
from ..status import error_body, http_status


def json_response(payload: Any, *, code: int = 200) -> Response:
    """A JSON response (compact, ASCII)."""
    return Response(encode(payload), status_code=code, media_type="application/json")


def json_error(exc: InterlockError, *, code: int | None = None) -> Response:
    """``{status, message, details?}`` with the HTTP code of the canonical status."""
    return json_response(error_body(exc), code=code or http_status(exc))


def event_stream(chunks: AsyncIterator[bytes]) -> Response:
    """A ``text/event-stream`` response that is not buffered on the way."""
    headers = {"cache-control": "no-cache", "x-accel-buffering": "no"}
    return StreamingResponse(chunks, media_type="text/event-stream", headers=headers)
