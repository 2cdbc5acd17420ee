"""The inbox's web page: Jinja2 server rendering (autoescaped) plus htmx, live over server-sent events.

::

    GET  /                                the pending list (updates itself: new interrupts and answers)
    GET  /fragments/pending               the list alone (what the live updates swap in)
    GET  /interrupts/{snapshot_id}        one snapshot: its calls, answer forms, messages, audit trail
                                          (?resume_token=... : an answer link's token rides in the forms)
    POST /interrupts/{snapshot_id}/answer a form's answer (double-submit CSRF token, same-origin)
    GET  /interrupts/{snapshot_id}/state  "waiting" or "answered by X at T" (refreshed live)
    GET  /audit                           the newest answers across the store
    GET  /sessions/{session_id}           a session's audit trail
    GET  /events                          the live updates (htmx's SSE extension swaps them in)

(``POST /sign-out``, the header's button, is the app's: :class:`interlock.http._inbox.InboxApp`.)

Forms post what :mod:`interlock.http._inbox.forms` reads back into JSON, and the answer runs
through :func:`interlock.http._inbox.service.answer`, like the API's.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import datetime
from typing import Any, Protocol
from urllib.parse import parse_qsl

import jinja2
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import BaseRoute, Route

from ..._durations import parse_whole
from ...errors import InterlockError, InternalError, InvalidArgumentError, NotFoundError
from ...inbox._inbox import Inbox, PendingInterrupt
from .._asgi import Reject
from .._status import http_status
from . import service
from .auth import CSRF_COOKIE, Auth, Who, check_csrf, check_origin, csrf_token
from .events import changes, sse
from .forms import fields_for, read_form
from .responses import event_stream

_ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("interlock.http._inbox", "templates"),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
)


def _when(value: object) -> str:
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            return value
    return value.strftime("%Y-%m-%d %H:%M:%S UTC") if isinstance(value, datetime) else "-"


def _age(seconds: float) -> str:
    whole = max(0, int(seconds))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if whole >= size:
            return f"{whole // size}{unit}"
    return f"{whole}s"


def _pretty(value: object) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def _compact(value: object, limit: int = 90) -> str:
    text = json.dumps(value, separators=(", ", ": "), ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


_LOOSE: Any = _ENV  # jinja2 leaves its filters' and globals' value types open
_LOOSE.filters.update(when=_when, pretty=_pretty, compact=_compact, age=_age)
_LOOSE.globals["fields_for"] = fields_for

Page = Callable[[Request, Who], Awaitable[Response]]


_CARRIES = {"respond": ("output",), "restart": ("payload",), "edit": ("input",)}
"""Which typed fields a decision's form carries (its answer reads those and no others)."""
MAX_FORM_ANSWERS = 100


def _prefixes(form: dict[str, str]) -> list[str]:
    """Where a form's answers sit: the whole form (one interrupt), or ``a1.``, ``a2.``, ... (``count`` of them)."""
    count = form.get("count")
    if count is None:
        return [""]
    return [f"a{n}." for n in range(1, parse_whole(count, "count", low=1, high=MAX_FORM_ANSWERS) + 1)]


class PagesApp(Protocol):
    """What the pages need of the app that mounts them (:class:`~interlock.http.InboxApp`)."""

    inbox: Inbox
    auth: Auth
    poll_interval: float
    stream_lifetime: float

    async def read_body(self, request: Request) -> bytes: ...


def page_routes(app: PagesApp) -> list[BaseRoute]:
    """The page's routes, bound to ``app``."""
    pages = _Pages(app)
    return [
        Route("/", pages.guarded(pages.index), methods=["GET"]),
        Route("/fragments/pending", pages.guarded(pages.pending), methods=["GET"]),
        Route("/interrupts/{snapshot_id}", pages.guarded(pages.detail), methods=["GET"]),
        Route("/interrupts/{snapshot_id}/answer", pages.guarded(pages.answer), methods=["POST"]),
        Route("/interrupts/{snapshot_id}/state", pages.guarded(pages.state), methods=["GET"]),
        Route("/audit", pages.guarded(pages.audit), methods=["GET"]),
        Route("/sessions/{session_id}", pages.guarded(pages.session), methods=["GET"]),
        Route("/events", pages.guarded(pages.events), methods=["GET"]),
    ]


class _Pages:
    def __init__(self, app: PagesApp) -> None:
        self.app = app
        self.inbox = app.inbox

    def guarded(self, page: Page) -> Callable[[Request], Awaitable[Response]]:
        """Identity first; a refusal is a page saying what to do, with its HTTP code."""

        async def endpoint(request: Request) -> Response:
            try:
                who = await self.app.auth.who(request)
                return await page(request, who)
            except InterlockError as exc:
                return self.render(request, "error.html", {"error": exc}, code=http_status(exc))
            except Reject as reject:
                return self.render(request, "error.html", {"error": reject.error}, code=reject.code)
            except Exception:
                logging.getLogger("interlock.inbox").exception("unexpected error serving %s", request.url.path)
                service_error = InternalError("Internal error")
                return self.render(request, "error.html", {"error": service_error}, code=500)

        return endpoint

    def render(self, request: Request, name: str, values: dict[str, Any], *, code: int = 200) -> Response:
        csrf = csrf_token(request)
        base = str(request.scope.get("root_path") or "").rstrip("/")
        signs_out = self.app.auth.token is not None
        html = _ENV.get_template(name).render(base=base, csrf=csrf, signs_out=signs_out, **values)
        response = HTMLResponse(html, status_code=code)
        if request.cookies.get(CSRF_COOKIE) != csrf:
            response.set_cookie(CSRF_COOKIE, csrf, samesite="strict", path=base or "/")
        return response

    # the list ------------------------------------------------------------------------------

    async def _listing(self, request: Request, who: Who) -> dict[str, Any]:
        filters = service.parse_filters(dict(request.query_params))
        page = await service.list_page(self.inbox, filters, who.tenant)
        return {"page": page, "query": dict(request.query_params), "who": who.identity}

    async def index(self, request: Request, who: Who) -> Response:
        return self.render(request, "index.html", await self._listing(request, who))

    async def pending(self, request: Request, who: Who) -> Response:
        return self.render(request, "_pending.html", await self._listing(request, who))

    async def events(self, request: Request, who: Who) -> Response:
        base = str(request.scope.get("root_path") or "").rstrip("/")
        query = dict(request.query_params)
        filters = service.parse_filters({k: v for k, v in query.items() if k != "cursor"})

        async def stream() -> AsyncIterator[bytes]:
            async for change in changes(
                self.inbox,
                who.tenant,
                interval=self.app.poll_interval,
                lifetime=self.app.stream_lifetime,
                filters=filters,
            ):
                items = change.items[: filters.limit]
                page = {"items": [service.item_json(self.inbox, i) for i in items], "next_cursor": None}
                html = _ENV.get_template("_pending.html").render(base=base, page=page, query=query)
                yield sse("pending", html)
                if change.created or change.resolved:
                    yield sse("changed", " ".join(change.resolved) or "-")

        return event_stream(stream())

    # one snapshot --------------------------------------------------------------------------

    async def detail(self, request: Request, who: Who) -> Response:
        snapshot_id = request.path_params["snapshot_id"]
        token = request.query_params.get("resume_token")
        extra = [k for k in request.query_params if k != "resume_token"]
        if extra:
            raise InvalidArgumentError(f"unknown query parameter {extra[0]!r}; this page takes resume_token")
        values = await self._snapshot(snapshot_id, who, token)
        return self.render(request, "detail.html", values, code=200 if values.get("found", True) else 404)

    async def _snapshot(self, snapshot_id: str, who: Who, token: str | None) -> dict[str, Any]:
        values: dict[str, Any] = {"snapshot_id": snapshot_id, "token": token, "who": who.identity}
        try:
            values["detail"] = await service.detail(self.inbox, snapshot_id, who.tenant, who.identity)
        except service.AnsweredError as exc:
            values["answered"] = exc.details
        except NotFoundError as exc:
            values |= {"found": False, "problem": exc.message}
        except InterlockError as exc:
            values["problem"] = exc.message
        found: dict[str, Any] = values.get("detail") or {}
        audit_session: str | None = found.get("session_id") or await self._session_of(snapshot_id, who)
        values["audit"] = (
            await service.audit(self.inbox, who.tenant, session_id=audit_session, limit=50) if audit_session else []
        )
        return values

    async def _session_of(self, snapshot_id: str, who: Who) -> str | None:
        store = self.inbox.store
        snap = await store.load(snapshot_id, tenant=who.tenant) if store else None
        return snap.session_id if snap else None

    async def state(self, request: Request, who: Who) -> Response:
        values = await self._snapshot(request.path_params["snapshot_id"], who, None)
        return self.render(request, "_state.html", values)

    async def answer(self, request: Request, who: Who) -> Response:
        check_origin(request)
        form = await self._form(request)
        check_csrf(request, form.get("csrf"))
        snapshot_id = request.path_params["snapshot_id"]
        values: dict[str, Any] = {"snapshot_id": snapshot_id, "form": form}
        try:
            items = await service.waiting(self.inbox, snapshot_id, who.tenant)
            parsed = [service.parse_answer(self._answer_body(form, items, p)) for p in _prefixes(form)]
            given = parsed if "count" in form else parsed[0]
            values["result"] = await service.answer(
                self.inbox, snapshot_id, given, identity=who.identity, tenant=who.tenant
            )
        except service.AnsweredError as exc:
            values["answered"] = exc.details
            return self.render(request, "_result.html", values, code=409)
        except InterlockError as exc:
            values["error"] = exc
            return self.render(request, "_result.html", values, code=http_status(exc))
        return self.render(request, "_result.html", values)

    async def _form(self, request: Request) -> dict[str, str]:
        kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if kind != "application/x-www-form-urlencoded":
            raise InvalidArgumentError("answer with the page's form (application/x-www-form-urlencoded)")
        raw = await self.app.read_body(request)
        try:
            return dict(parse_qsl(raw.decode("utf-8"), keep_blank_values=True, max_num_fields=200))
        except (UnicodeDecodeError, ValueError) as exc:
            raise InvalidArgumentError(f"the form could not be read ({exc})") from None

    def _answer_body(self, form: dict[str, str], items: list[PendingInterrupt], prefix: str) -> dict[str, Any]:
        """The API answer a posted form (its fields under ``prefix``) stands for, typed by the call's schemas."""
        decision = form.get(f"{prefix}decision", "")
        ref = form.get(f"{prefix}ref") or None
        item = next((i for i in items if i.ref == ref), items[0])
        options = service.answer_options(self.inbox, item).get(decision)
        if options is None:
            raise InvalidArgumentError(f"{item.label} cannot be answered with {decision!r} here")
        body: dict[str, Any] = {"decision": decision, "ref": ref, "tool": item.tool}
        if form.get(f"{prefix}resume_token"):
            body["resume_token"] = form[f"{prefix}resume_token"]
        if decision == "reject":
            body["reason"] = form.get(f"{prefix}reason") or None
        for key in _CARRIES.get(decision, ()):
            schema_key = f"{key}_schema"
            if schema_key in options and any(k.startswith(f"{prefix}{key}.") for k in form):
                body[key] = read_form(options[schema_key], form, f"{prefix}{key}")
        return body

    # the audit trail -----------------------------------------------------------------------

    async def audit(self, request: Request, who: Who) -> Response:
        if request.query_params:
            raise InvalidArgumentError("this page takes no query parameters")
        entries = await service.audit(self.inbox, who.tenant, session_id=None, limit=200)
        return self.render(request, "audit.html", {"entries": entries, "session_id": None, "who": who.identity})

    async def session(self, request: Request, who: Who) -> Response:
        if request.query_params:
            raise InvalidArgumentError("this page takes no query parameters")
        session_id = request.path_params["session_id"]
        entries = await service.audit(self.inbox, who.tenant, session_id=session_id, limit=1000)
        return self.render(request, "audit.html", {"entries": entries, "session_id": session_id, "who": who.identity})
