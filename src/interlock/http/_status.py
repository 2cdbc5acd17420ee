"""HTTP status codes and error bodies: the canonical status of an error on the wire, both ways.

Servers write errors as ``{status, message, details?}``; reading them back accepts every
variant Genkit servers write, falling back on the HTTP code.
"""

from __future__ import annotations

import json
from typing import Any

from .._json_object import is_object
from .._wire import error_to_json
from ..errors import InterlockError, error_from_status
from ..records._sessions import ErrorInfo
from ._sse import encode

HTTP_STATUS: dict[str, int] = {
    "OK": 200,
    "CANCELLED": 499,
    "UNKNOWN": 500,
    "INVALID_ARGUMENT": 400,
    "DEADLINE_EXCEEDED": 504,
    "NOT_FOUND": 404,
    "ALREADY_EXISTS": 409,
    "PERMISSION_DENIED": 403,
    "UNAUTHENTICATED": 401,
    "RESOURCE_EXHAUSTED": 429,
    "FAILED_PRECONDITION": 400,
    "ABORTED": 409,
    "OUT_OF_RANGE": 400,
    "UNIMPLEMENTED": 501,
    "INTERNAL": 500,
    "UNAVAILABLE": 503,
    "DATA_LOSS": 500,
}
"""Canonical status -> HTTP status code, as Genkit servers map them."""


def http_status(exc: BaseException) -> int:
    """The HTTP status code for an error: its canonical status mapped, 500 for anything else."""
    return HTTP_STATUS.get(exc.status, 500) if isinstance(exc, InterlockError) else 500


HTTP_TO_STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    408: "DEADLINE_EXCEEDED",
    409: "ABORTED",
    413: "RESOURCE_EXHAUSTED",
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    500: "INTERNAL",
    501: "UNIMPLEMENTED",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}
"""HTTP code → canonical status, for error answers without a readable status."""
_GRPC_CODES = (
    "OK CANCELLED UNKNOWN INVALID_ARGUMENT DEADLINE_EXCEEDED NOT_FOUND ALREADY_EXISTS PERMISSION_DENIED "
    "RESOURCE_EXHAUSTED FAILED_PRECONDITION ABORTED OUT_OF_RANGE UNIMPLEMENTED INTERNAL UNAVAILABLE DATA_LOSS "
    "UNAUTHENTICATED"
).split()


def error_body(exc: BaseException) -> dict[str, Any]:
    """``{status, message, details?}`` for an error; anything unexpected reads as a masked INTERNAL."""
    if not isinstance(exc, InterlockError):
        return {"status": "INTERNAL", "message": "Internal error"}
    body = error_to_json(ErrorInfo(status=exc.status, message=exc.message, details=exc.details))
    try:
        encode(body)
    except (TypeError, ValueError):
        body.pop("details", None)
    return body


def error_from_wire(error: object, http_status: int | None = None) -> InterlockError:
    """The typed error for an error object off the wire.

    Reads ``{status, message, details?}``, a doubly nested ``{"error": {...}}``, the
    numeric ``code`` form, and Genkit JS's ``"STATUS: message"`` prefix.
    """
    while is_object(error) and isinstance(error.get("error"), (dict, str)):
        error = error["error"]
    fallback = HTTP_TO_STATUS.get(http_status or 500, "UNKNOWN")
    if not is_object(error):
        return error_from_status(fallback, str(error))
    e = error
    status, code = e.get("status"), e.get("code")
    if not isinstance(status, str) or not status:
        grpc = code if isinstance(code, int) and not isinstance(code, bool) else -1
        status = _GRPC_CODES[grpc] if 0 <= grpc < len(_GRPC_CODES) else fallback
    message = str(e.get("message") or "")
    if message.startswith(f"{status}: "):
        message = message[len(status) + 2 :]
    return error_from_status(status, message or status, details=e.get("details"))


def error_from_http(http_status: int, body: bytes) -> InterlockError:
    """The typed error for a non-200 answer: its JSON error body if it has one, else the HTTP code."""
    text = body.decode("utf-8", errors="replace")
    try:
        parsed: Any = json.loads(text)
    except ValueError:
        parsed = None
    if is_object(parsed):
        d = parsed
        if "error" in d:
            return error_from_wire(d["error"], http_status)
        if "message" in d and ("status" in d or "code" in d):
            return error_from_wire(d, http_status)
    status = HTTP_TO_STATUS.get(http_status, "INTERNAL" if http_status >= 500 else "UNKNOWN")
    return error_from_status(status, text.strip()[:1000] or f"HTTP {http_status}")
