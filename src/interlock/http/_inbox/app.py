"""The inbox's ASGI app: the JSON API under ``/api``, the web page, ``/openapi.json`` and the static files.

::

    app = InboxApp(Inbox(store, agents=[bank]), context=who_is_asking)   # or token="...", user="alice"
    uvicorn.run(app)                                  # or mount it: mount_inbox(AgentServer([bank]), app)

Routes (see :data:`interlock.http._inbox.openapi.ROUTES`)::

    GET  /api/interrupts                     pending interrupts (agent, tool, session, older_than,
                                             newer_than, order=oldest|newest, limit, cursor)
    GET  /api/interrupts/{snapshot_id}       one snapshot's interrupts, answer schemas, recent messages
    POST /api/interrupts/{snapshot_id}/answer  {"decision": approve|reject|respond|restart|edit, ...}
    POST /api/interrupts/{snapshot_id}/extend  {"by": "1h"} or {"until": ISO 8601}, and "ref" or "tool"
                                             (several interrupts: {"answers": [{..., "ref": ...}, ...]})
    GET  /api/sessions/{session_id}/audit    a session's audit trail
    GET  /api/audit                          the newest answers across the store
    GET  /api/events                         server-sent events: interrupt.created, interrupt.resolved
    POST /sign-out                           end a sign-in (its cookie cleared and refused from then on)

Every refusal is ``{status, message, details?}`` with the HTTP code of its canonical
status: bad input is 4xx, never 5xx; a second answer is 409 ABORTED naming who answered.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import Receive, Scope, Send

from ..._durations import parse_whole
from ...errors import InterlockError, InternalError, InvalidArgumentError, UsageError, error_from_status
from ...inbox._inbox import Inbox
from .._asgi import Reject, json_body, read_headers, refuse_oversized, too_large
from .._server import ContextProvider
from .._sse import encode
from .._status import HTTP_TO_STATUS
from . import service
from .auth import SESSION_COOKIE, SESSION_MAX_AGE, Auth, Who, check_origin
from .events import changes, sse
from .openapi import openapi
from .pages import page_routes
from .responses import event_stream, json_error, json_response

logger = logging.getLogger("interlock.inbox")
Handler = Callable[[Request, Who], Awaitable[Response]]
Endpoint = Callable[[Request], Awaitable[Response]]
HERE = Path(__file__).parent
_BODY_TIMEOUT = 30.0
"""Longest a body refused at once (its Content-Length over the limit) is read and dropped, in seconds."""


class InboxApp:
    """The approval inbox over HTTP: an API, a live web page, and an OpenAPI description.

    Args:
        inbox: the inbox (its store lists the interrupts; its agents resume them).
        context: the agent server's context hook: gives each request's ``identity``
            (required) and ``tenant`` (scopes everything).
        token: instead (or as well), one user's secret: ``Authorization: Bearer <token>``
            or a sign-in with ``?key=<token>``; that user answers as ``user``.
        poll_interval: seconds between the live listing's looks at the store.
        stream_lifetime: seconds an event stream lasts before the browser reconnects.
        max_body: largest accepted request body in bytes (larger: 413, refused before reading
            when its ``Content-Length`` says so).
        session_max_age: seconds a sign-in cookie (``?key=<token>``) is accepted.
    """

    def __init__(
        self,
        inbox: Inbox,
        *,
        context: ContextProvider | None = None,
        token: str | None = None,
        user: str = "admin",
        poll_interval: float = 1.0,
        stream_lifetime: float = 300.0,
        max_body: int = 1_000_000,
        session_max_age: float = SESSION_MAX_AGE,
    ) -> None:
        if inbox.store is None:
            raise UsageError("the inbox app lists pending interrupts, so its Inbox needs a store")
        self.inbox = inbox
        self.auth = Auth(context=context, token=token, user=user, session_max_age=session_max_age)
        self.poll_interval = poll_interval
        self.stream_lifetime = stream_lifetime
        self.max_body = max_body
        routes: list[BaseRoute] = [
            Route("/api/interrupts", self._guarded(self._list), methods=["GET"]),
            Route("/api/interrupts/{snapshot_id}", self._guarded(self._detail), methods=["GET"]),
            Route("/api/interrupts/{snapshot_id}/answer", self._guarded(self._answer), methods=["POST"]),
            Route("/api/interrupts/{snapshot_id}/extend", self._guarded(self._extend), methods=["POST"]),
            Route("/api/sessions/{session_id}/audit", self._guarded(self._session_audit), methods=["GET"]),
            Route("/api/audit", self._guarded(self._audit), methods=["GET"]),
            Route("/api/events", self._guarded(self._events), methods=["GET"]),
            Route("/openapi.json", self._openapi, methods=["GET"]),
            Route("/sign-out", self._sign_out, methods=["POST"]),
            *page_routes(self),
            Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
        ]
        self.routes = routes
        self._app = Starlette(routes=routes, exception_handlers={HTTPException: self._http_error})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and await refuse_oversized(
            read_headers(scope), receive, send, limit=self.max_body, timeout=_BODY_TIMEOUT, extra=[]
        ):
            return
        if scope["type"] == "http" and b"key=" in scope.get("query_string", b""):
            request = Request(scope, receive)
            if "key" in request.query_params and request.method == "GET":
                await self._sign_in(request)(scope, receive, send)
                return
        await self._app(scope, receive, send)

    # plumbing --------------------------------------------------------------------------------

    def _guarded(
        self, handler: Callable[[Request, Who], Awaitable[Response]]
    ) -> Callable[[Request], Awaitable[Response]]:
        """The endpoint for ``handler``: identity first, and every refusal as a canonical JSON error."""

        async def endpoint(request: Request) -> Response:
            try:
                who = await self.auth.who(request)
                return await handler(request, who)
            except InterlockError as exc:
                return json_error(exc)
            except Reject as reject:
                return json_error(reject.error, code=reject.code, headers=reject.headers)
            except Exception:
                logger.exception("unexpected error serving %s", request.url.path)
                return json_error(InternalError("Internal error"))

        return endpoint

    async def _http_error(self, request: Request, exc: Exception) -> Response:
        code = exc.status_code if isinstance(exc, HTTPException) else 500
        status = "UNIMPLEMENTED" if code == 405 else HTTP_TO_STATUS.get(code, "INVALID_ARGUMENT")
        detail = exc.detail if isinstance(exc, HTTPException) else "Internal error"
        message = f"no inbox route {request.method} {request.url.path}" if code in (404, 405) else str(detail)
        return json_error(error_from_status(status, message), code=code)

    def _sign_in(self, request: Request) -> Response:
        cookie = self.auth.session_cookie(request.query_params["key"])
        if cookie is None:
            return json_error(error_from_status("UNAUTHENTICATED", "that key is not this inbox's; check the link"))
        rest = [(k, v) for k, v in request.query_params.multi_items() if k != "key"]
        target = request.url.path + (f"?{urlencode(rest)}" if rest else "")
        response = RedirectResponse(target, status_code=303)
        response.set_cookie(
            SESSION_COOKIE,
            cookie,
            max_age=int(self.auth.session_max_age),
            httponly=True,
            samesite="strict",
            path=_root(request),
        )
        return response

    async def _sign_out(self, request: Request) -> Response:
        """End this browser's sign-in: its cookie is cleared, and refused from now on."""
        try:
            check_origin(request)
        except InterlockError as exc:
            return json_error(exc)
        self.auth.sign_out(request)
        response = RedirectResponse(_root(request).rstrip("/") + "/", status_code=303)
        response.delete_cookie(SESSION_COOKIE, httponly=True, samesite="strict", path=_root(request))
        return response

    async def read_json(self, request: Request) -> dict[str, Any]:
        """The request body as a JSON object (Content-Type application/json, at most ``max_body`` bytes)."""
        kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if kind != "application/json":
            raise InvalidArgumentError(
                f"send the answer as JSON with 'Content-Type: application/json' (got {kind or 'none'!r})"
            )
        body = await self.read_body(request)
        try:
            return json_body(body)
        except Reject as reject:
            raise reject.error from None

    async def read_body(self, request: Request) -> bytes:
        """The raw request body, refused (413 RESOURCE_EXHAUSTED) past ``max_body`` bytes.

        (A ``Content-Length`` over the limit was answered at once, before routing: :func:`refuse_oversized`.)
        """
        parts: list[bytes] = []
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > self.max_body:
                raise too_large(self.max_body)
            parts.append(chunk)
        return b"".join(parts)

    # the API ---------------------------------------------------------------------------------

    async def _list(self, request: Request, who: Who) -> Response:
        filters = service.parse_filters(dict(request.query_params))
        return json_response(await service.list_page(self.inbox, filters, who.tenant))

    async def _detail(self, request: Request, who: Who) -> Response:
        _no_query(request)
        return json_response(
            await service.detail(self.inbox, request.path_params["snapshot_id"], who.tenant, who.identity)
        )

    async def _answer(self, request: Request, who: Who) -> Response:
        check_origin(request)
        parsed = service.parse_answers(await self.read_json(request))
        result = await service.answer(
            self.inbox, request.path_params["snapshot_id"], parsed, identity=who.identity, tenant=who.tenant
        )
        return json_response(result)

    async def _extend(self, request: Request, who: Who) -> Response:
        check_origin(request)
        body = await self.read_json(request)
        result = await service.extend(
            self.inbox, request.path_params["snapshot_id"], body, identity=who.identity, tenant=who.tenant
        )
        return json_response(result)

    async def _session_audit(self, request: Request, who: Who) -> Response:
        limit = _audit_limit(request)
        entries = await service.audit(self.inbox, who.tenant, session_id=request.path_params["session_id"], limit=limit)
        return json_response({"entries": entries})

    async def _audit(self, request: Request, who: Who) -> Response:
        entries = await service.audit(self.inbox, who.tenant, session_id=None, limit=_audit_limit(request))
        return json_response({"entries": entries})

    async def _events(self, request: Request, who: Who) -> Response:
        _no_query(request)

        async def stream() -> AsyncIterator[bytes]:
            async for change in changes(
                self.inbox, who.tenant, interval=self.poll_interval, lifetime=self.stream_lifetime
            ):
                yield sse("pending", json.dumps({"count": len(change.items)}))
                for item in change.created:
                    yield sse("interrupt.created", encode(service.item_json(self.inbox, item)).decode())
                for snapshot_id in change.resolved:
                    yield sse("interrupt.resolved", encode({"snapshot_id": snapshot_id}).decode())

        return event_stream(stream())

    async def _openapi(self, request: Request) -> Response:
        return json_response(openapi())


def _no_query(request: Request) -> None:
    if request.query_params:
        raise InvalidArgumentError(f"this route takes no query parameters (got {', '.join(request.query_params)})")


def _audit_limit(request: Request) -> int:
    unknown = [k for k in request.query_params if k != "limit"]
    if unknown:
        raise InvalidArgumentError(f"unknown query parameter {unknown[0]!r}; the audit trail takes limit")
    text = request.query_params.get("limit")
    return parse_whole(text, "limit", low=1, high=1000) if text else 100


def _root(request: Request) -> str:
    """The path the inbox is mounted at (its cookies' path)."""
    return str(request.scope.get("root_path") or "/")


def mount_inbox(agents: Any, inbox: InboxApp, *, path: str = "/inbox") -> Starlette:
    """One ASGI app: ``inbox`` under ``path`` and the agent server (any ASGI app) everywhere else."""
    return Starlette(routes=[Mount(path, inbox), Mount("", agents)])
