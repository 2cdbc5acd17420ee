r"""HTTP plumbing shared by the server and the client: framing, error bodies, ASGI helpers.

The framing is the one both Genkit clients accept: ``data: <json>\n\n``, the JSON
compact, ASCII-only and on one line. Errors travel as ``{status, message, details?}``;
reading them back accepts every variant Genkit servers write.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import json
from collections.abc import Awaitable, Callable, Iterable, Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any, Literal, cast

from ._json import MAX_DEPTH, check_json
from .errors import (
    DeadlineExceededError,
    InterlockError,
    InternalError,
    InvalidArgumentError,
    ResourceExhaustedError,
    error_from_status,
)
from .sessions import ErrorInfo
from .turns import AgentOutput, StreamChunk
from .wire import chunk_from_json, error_to_json, output_from_json

__all__ = [
    "Action",
    "EventParser",
    "RequestInfo",
    "encode",
    "error_body",
    "error_from_http",
    "error_from_wire",
    "frame",
    "read_event",
]

ASGIMessage = MutableMapping[str, Any]
Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[ASGIMessage]]
Send = Callable[[ASGIMessage], Awaitable[None]]
Headers = list[tuple[bytes, bytes]]
Action = Literal["turn", "getSnapshot", "abort", "waitForSnapshot", "inbox"]

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


# framing and error bodies -------------------------------------------------------------------


def encode(payload: Any) -> bytes:
    """Compact, ASCII-only, single-line JSON."""
    return json.dumps(payload, ensure_ascii=True, separators=(",", ":"), allow_nan=False).encode("ascii")


def frame(payload: Any) -> bytes:
    r"""One stream frame: ``data: <json>\n\n``."""
    return b"data: " + encode(payload) + b"\n\n"


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


def error_from_wire(error: Any, http_status: int | None = None) -> InterlockError:
    """The typed error for an error object off the wire.

    Reads ``{status, message, details?}``, a doubly nested ``{"error": {...}}``, the
    numeric ``code`` form, and Genkit JS's ``"STATUS: message"`` prefix.
    """
    while isinstance(error, dict) and isinstance(cast(dict[str, Any], error).get("error"), (dict, str)):
        error = cast(dict[str, Any], error)["error"]
    fallback = HTTP_TO_STATUS.get(http_status or 500, "UNKNOWN")
    if not isinstance(error, dict):
        return error_from_status(fallback, str(error))
    e = cast(dict[str, Any], error)
    status, code = e.get("status"), e.get("code")
    if not isinstance(status, str) or not status:
        valid = isinstance(code, int) and not isinstance(code, bool) and 0 <= code < len(_GRPC_CODES)
        status = _GRPC_CODES[cast(int, code)] if valid else fallback
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
    if isinstance(parsed, dict):
        d = cast(dict[str, Any], parsed)
        if "error" in d:
            return error_from_wire(d["error"], http_status)
        if "message" in d and ("status" in d or "code" in d):
            return error_from_wire(d, http_status)
    status = HTTP_TO_STATUS.get(http_status, "INTERNAL" if http_status >= 500 else "UNKNOWN")
    return error_from_status(status, text.strip()[:1000] or f"HTTP {http_status}")


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


def read_event(event: str, on_chunk: Callable[[StreamChunk], None] | None) -> AgentOutput | None:
    """Handle one stream event: a chunk goes to ``on_chunk``, a result is returned, an error raised."""
    try:
        payload: Any = json.loads(event)
    except ValueError:
        raise InternalError(f"unreadable stream frame: {event[:200]!r}") from None
    if not isinstance(payload, dict):
        raise InternalError(f"unexpected stream frame: {event[:200]!r}")
    d = cast(dict[str, Any], payload)
    if "result" in d:
        return output_from_json(d["result"] or {})
    if "error" in d:
        raise error_from_wire(d["error"])
    chunk = chunk_from_json(d["message"] if "message" in d else d)
    if on_chunk is not None:
        on_chunk(chunk)
    return None


# the server side ----------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class RequestInfo:
    """What a context provider sees of a request (header names are lower-case)."""

    method: str
    path: str
    headers: Mapping[str, str]
    query: Mapping[str, str]
    client: tuple[str, int] | None
    agent: str
    action: Action


class Reject(Exception):
    """An answer decided before any agent work: an HTTP code and a canonical error."""

    def __init__(self, error: InterlockError, *, code: int | None = None, headers: Headers | None = None) -> None:
        super().__init__(error.message)
        self.error = error
        self.code = code or error.http_status
        self.headers: Headers = headers or []


class ClientGone(Exception):
    """The client disconnected before its request was read."""


def bad(message: str) -> Reject:
    """An INVALID_ARGUMENT (400) answer."""
    return Reject(InvalidArgumentError(message))


def parse(fn: Callable[[Any], Any], value: Any, what: str) -> Any:
    """Run a wire reader; any failure is the caller's mistake (400)."""
    try:
        return fn(value)
    except InterlockError as exc:
        raise Reject(exc) from None
    except (TypeError, ValueError, KeyError, AttributeError, RecursionError) as exc:
        raise bad(f"invalid {what}: {exc}") from None


def read_headers(scope: Scope) -> dict[str, str]:
    """The request headers, names lower-cased, repeated ones joined with ``", "``."""
    found: dict[str, str] = {}
    for raw_name, raw_value in cast(Iterable[tuple[bytes, bytes]], scope.get("headers") or ()):
        name, value = raw_name.decode("latin-1").lower(), raw_value.decode("latin-1")
        found[name] = f"{found[name]}, {value}" if name in found else value
    return found


async def read_body(headers: Mapping[str, str], receive: Receive, limit: int, timeout: float) -> bytes:
    """The whole request body, within ``timeout`` seconds and at most ``limit`` bytes.

    A body over ``limit`` is refused (413 RESOURCE_EXHAUSTED); what arrives of it within
    the timeout is read and dropped first, so the client, still sending, gets the answer
    instead of a reset connection. A body that does not arrive in time (a
    ``Content-Length`` larger than what is sent) is refused with 408 DEADLINE_EXCEEDED.
    Both close the connection.
    """
    declared = headers.get("content-length")
    if declared is not None and not declared.strip().isdigit():
        raise bad("invalid Content-Length")
    until = asyncio.get_running_loop().time() + timeout
    if declared is not None and int(declared) > limit:
        await _drain(receive, until, 0)
        raise _too_large(limit)
    parts: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout_at(until):
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    raise ClientGone
                chunk = bytes(message.get("body") or b"")
                size += len(chunk)
                if size > limit:
                    break
                parts.append(chunk)
                if not message.get("more_body"):
                    return b"".join(parts)
    except TimeoutError:
        expected = f" of the {declared} its Content-Length announced" if declared is not None else ""
        error = DeadlineExceededError(
            f"the request body did not arrive within {timeout:g} s (got {size} bytes{expected}); "
            "send the whole body, with a Content-Length that matches it"
        )
        raise Reject(error, code=408, headers=[(b"connection", b"close")]) from None
    if message.get("more_body"):
        await _drain(receive, until, size)
    raise _too_large(limit)


_DRAIN = 256_000_000
"""Most bytes of a refused body read and dropped before the connection is closed."""


async def _drain(receive: Receive, until: float, size: int) -> None:
    """Read and drop the rest of a refused body: until it ends, the body timeout, or :data:`_DRAIN` bytes."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout_at(until):
            while size <= _DRAIN:
                message = await receive()
                if message["type"] == "http.disconnect":
                    raise ClientGone
                size += len(message.get("body") or b"")
                if not message.get("more_body"):
                    return


def _too_large(limit: int) -> Reject:
    error = ResourceExhaustedError(
        f"the request body is larger than this server's limit of {limit} bytes; send less (e.g. fewer messages)"
    )
    return Reject(error, code=413, headers=[(b"connection", b"close")])


def json_body(body: bytes) -> dict[str, Any]:
    """The request body as a JSON object (an empty body reads as ``{}``), checked by :func:`check_json`."""
    try:
        payload: Any = json.loads(body.decode("utf-8")) if body.strip() else {}
    except UnicodeDecodeError:
        raise bad("the request body is not valid UTF-8; send JSON encoded as UTF-8") from None
    except RecursionError:
        raise bad(f"the request body is nested too deeply (at most {MAX_DEPTH} levels)") from None
    except ValueError as exc:
        raise bad(f"the request body is not valid JSON ({exc})") from None
    if not isinstance(payload, dict):
        raise bad('the request body must be a JSON object: {"data": ..., "init": ...}')
    body_object = cast(dict[str, Any], payload)
    try:
        check_json(body_object, "the request body")
    except InterlockError as exc:
        raise Reject(exc) from None
    return body_object


def string_field(data: dict[str, Any], key: str) -> str | None:
    """An optional string field (empty reads as absent)."""
    value = data.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise bad(f"'{key}' must be a string")
    return value


async def disconnected(receive: Receive) -> None:
    """Return once the client has gone (or the response is complete)."""
    while (await receive())["type"] != "http.disconnect":
        pass


async def send_body(send: Send, body: bytes, *, more: bool) -> None:
    """Send one piece of the response body."""
    await send({"type": "http.response.body", "body": body, "more_body": more})


async def respond(send: Send, code: int, payload: Any, headers: Headers) -> None:
    """Send a whole JSON response (``payload`` is a JSON value or already encoded bytes)."""
    body = payload if isinstance(payload, bytes) else encode(payload)
    head = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *headers]
    await send({"type": "http.response.start", "status": code, "headers": head})
    await send({"type": "http.response.body", "body": body})
