"""ASGI helpers for the server: request reading with limits, early answers, response writing."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable, Iterable, Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any, Literal, cast

from .._json import MAX_DEPTH, check_json
from .._json_object import is_object
from ..errors import DeadlineExceededError, InterlockError, InvalidArgumentError, ResourceExhaustedError
from ._sse import encode
from ._status import error_body, http_status

ASGIMessage = MutableMapping[str, Any]
Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[ASGIMessage]]
Send = Callable[[ASGIMessage], Awaitable[None]]
Headers = list[tuple[bytes, bytes]]
Action = Literal["turn", "getSnapshot", "abort", "waitForSnapshot", "inbox", "mcp", "ag-ui", "a2a"]

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
        self.code = code or http_status(error)
        self.headers: Headers = headers or []


class ClientGone(Exception):
    """The client disconnected before its request was read."""


def bad(message: str) -> Reject:
    """An INVALID_ARGUMENT (400) answer."""
    return Reject(InvalidArgumentError(message))


def parse(fn: Callable[[Any], Any], value: object, what: str) -> Any:
    """Run a wire reader; any failure is the caller's mistake (400)."""
    try:
        return fn(value)
    except InterlockError as exc:
        raise Reject(exc) from None
    except (TypeError, ValueError, KeyError, AttributeError, RecursionError) as exc:
        raise bad(f"invalid {what}: {exc}") from None


def route_path(scope: Scope) -> str:
    """The request path below the app's mount point: ``path`` without its ``root_path`` prefix.

    Under ASGI, ``path`` is the full path and ``root_path`` the prefix the app is mounted at
    (Starlette's ``Mount``, FastAPI's ``mount``, uvicorn's ``--root-path``), so an app mounted at
    ``/agents`` sees ``/agents/banker`` and routes ``/banker``. A ``path`` that does not start with
    ``root_path`` (older servers stripped it themselves) is taken as it is.
    """
    path = str(scope.get("path") or "/")
    root = str(scope.get("root_path") or "").rstrip("/")
    if root and (path == root or path.startswith(root + "/")):
        path = path[len(root) :] or "/"
    return path


def read_headers(scope: Scope) -> dict[str, str]:
    """The request headers, names lower-cased, repeated ones joined with ``", "``."""
    found: dict[str, str] = {}
    for raw_name, raw_value in cast(Iterable[tuple[bytes, bytes]], scope.get("headers") or ()):
        name, value = raw_name.decode("latin-1").lower(), raw_value.decode("latin-1")
        found[name] = f"{found[name]}, {value}" if name in found else value
    return found


def declared_length(headers: Mapping[str, str]) -> int | None:
    """The request's ``Content-Length`` (``None`` without one); 400 INVALID_ARGUMENT when it is not a number."""
    declared = headers.get("content-length")
    if declared is None:
        return None
    text = declared.strip()
    if not text.isascii() or not text.isdigit() or len(text) > 30:
        raise bad("invalid Content-Length")
    return int(text)


async def refuse_oversized(
    headers: Mapping[str, str], receive: Receive, send: Send, *, limit: int, timeout: float, extra: Headers
) -> bool:
    """Answer at once, before reading any of the body, a request whose ``Content-Length`` is bad or over ``limit``.

    The refusal (400, or 413 RESOURCE_EXHAUSTED) is sent in full first; then what the client
    still sends is read and dropped (until it ends, pauses for :data:`_IDLE` seconds, or
    ``timeout``) and the connection closed, so a client still sending gets the answer rather
    than a reset, and a client announcing more than it sends is not waited for. True when it answered.
    """
    try:
        declared = declared_length(headers)
        if declared is None or declared <= limit:
            return False
        reject = too_large(limit)
    except Reject as refused:
        reject = refused
    until = asyncio.get_running_loop().time() + timeout
    body = encode(error_body(reject.error))
    head = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": reject.code, "headers": head + extra + reject.headers})
    await send_body(send, body, more=True)
    with contextlib.suppress(ClientGone):
        await _drain(receive, until, 0, idle=_IDLE)
    await send_body(send, b"", more=False)
    return True


async def read_body(headers: Mapping[str, str], receive: Receive, limit: int, timeout: float) -> bytes:
    """The whole request body, within ``timeout`` seconds and at most ``limit`` bytes.

    A body over ``limit`` is refused (413 RESOURCE_EXHAUSTED): what arrives of it within the
    timeout is read and dropped first, so the client, still sending, gets the answer instead
    of a reset connection (a ``Content-Length`` over the limit is answered before this, at
    once: :func:`refuse_oversized`). A body that does not arrive in time (a
    ``Content-Length`` larger than what is sent) is refused with 408 DEADLINE_EXCEEDED. Both
    close the connection.
    """
    declared = declared_length(headers)
    until = asyncio.get_running_loop().time() + timeout
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
    raise too_large(limit)


_DRAIN = 256_000_000
"""Most bytes of a refused body read and dropped before the connection is closed."""
_IDLE = 2.0
"""Seconds without a byte after which the rest of a body refused at once is no longer waited for."""


async def _drain(receive: Receive, until: float, size: int, *, idle: float | None = None) -> None:
    """Read and drop the rest of a refused body: until it ends, the timeout, ``idle`` s of silence, or _DRAIN bytes."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout_at(until):
            while size <= _DRAIN:
                message = await (asyncio.wait_for(receive(), idle) if idle else receive())
                if message["type"] == "http.disconnect":
                    raise ClientGone
                size += len(message.get("body") or b"")
                if not message.get("more_body"):
                    return


def too_large(limit: int) -> Reject:
    """413 RESOURCE_EXHAUSTED for a body over ``limit`` bytes, closing the connection."""
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
    if not is_object(payload):
        raise bad('the request body must be a JSON object: {"data": ..., "init": ...}')
    body_object = payload
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


async def respond(send: Send, code: int, payload: object, headers: Headers) -> None:
    """Send a whole JSON response (``payload`` is a JSON value or already encoded bytes)."""
    body = payload if isinstance(payload, bytes) else encode(payload)
    head = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *headers]
    await send({"type": "http.response.start", "status": code, "headers": head})
    await send({"type": "http.response.body", "body": body})
