"""Who is asking, for which tenant, and whether a state-changing request may come from where it comes from.

Identity comes from the agent server's context hook (:data:`interlock.server.ContextProvider`,
called with a :class:`~interlock.server.RequestInfo` whose ``action`` is ``"inbox"``): it
must give an ``identity``; its ``tenant`` scopes every read and answer. For one person,
``token=`` is simpler: ``Authorization: Bearer <token>``, or open any page once with
``?key=<token>`` and a cookie (HttpOnly, SameSite=Strict) keeps you signed in.

Answers are protected from cross-site requests twice: a request whose ``Origin`` is not
the inbox's own is refused, and a form post must carry the double-submit token of the
``interlock_csrf`` cookie (the page puts it in every form); the JSON API takes only
``Content-Type: application/json``, which a cross-site page cannot send without a CORS
preflight, and the inbox answers none.
"""

from __future__ import annotations

import hashlib
import hmac
import inspect
import secrets
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request

from ..._json_object import is_object
from ...errors import PermissionDeniedError, UnauthenticatedError, UsageError
from ...stores import check_tenant
from ..asgi import RequestInfo
from ..server import ContextProvider

__all__ = ["CSRF_COOKIE", "SESSION_COOKIE", "Auth", "Who"]

SESSION_COOKIE = "interlock_inbox"
CSRF_COOKIE = "interlock_csrf"


@dataclass(frozen=True, slots=True)
class Who:
    """The person asking and their tenant."""

    identity: Any
    tenant: str | None


class Auth:
    """Identity (context hook or one token) and cross-site protection for the inbox app."""

    def __init__(self, *, context: ContextProvider | None, token: str | None, user: str) -> None:
        if context is None and not token:
            raise UsageError(
                "the inbox must know who answers: pass context= (the agent server's context hook, which gives "
                "identity and tenant) or token= (one user signs in with it)"
            )
        self.context = context
        self.token = token
        self.user = user
        self._session = hmac.new((token or "").encode(), b"interlock-inbox-session", hashlib.sha256).hexdigest()

    def session_cookie(self, key: str) -> str | None:
        """The cookie value that keeps a browser signed in, when ``key`` is the token; else ``None``."""
        if self.token and hmac.compare_digest(key.encode(), self.token.encode()):
            return self._session
        return None

    async def who(self, request: Request) -> Who:
        """The identity and tenant of ``request``; UNAUTHENTICATED (401) when it has none."""
        if self.token and self._has_token(request):
            return Who(self.user, None)
        if self.context is None:
            raise UnauthenticatedError(
                "sign in: send 'Authorization: Bearer <token>', or open the inbox once with ?key=<token>"
            )
        info = RequestInfo(
            method=request.method,
            path=request.url.path,
            headers={k.lower(): v for k, v in request.headers.items()},
            query=dict(request.query_params),
            client=(request.client.host, request.client.port) if request.client else None,
            agent="",
            action="inbox",
        )
        value: Any = self.context(info)
        if inspect.isawaitable(value):
            value = await value
        if not is_object(value):
            raise TypeError(f"the context provider returned {type(value).__name__}, not a dict")
        found = value
        if found.get("identity") is None:
            raise UnauthenticatedError(
                "the inbox needs to know who you are: sign in (the context hook gave no identity)"
            )
        return Who(found["identity"], check_tenant(found.get("tenant")))

    def _has_token(self, request: Request) -> bool:
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and given and self.token:
            return hmac.compare_digest(given.strip().encode(), self.token.encode())
        cookie = request.cookies.get(SESSION_COOKIE, "")
        return bool(cookie) and hmac.compare_digest(cookie.encode(), self._session.encode())


def check_origin(request: Request) -> None:
    """Refuse (PERMISSION_DENIED) a state-changing request sent from another origin."""
    origin = request.headers.get("origin")
    if origin is None:
        return
    own = f"{request.url.scheme}://{request.headers.get('host', request.url.netloc)}"
    if origin != own:
        raise PermissionDeniedError(f"answers from origin {origin!r} are refused: answer from the inbox's own page")


def csrf_token(request: Request) -> str:
    """The browser's double-submit token (its cookie's value, or a new one the response sets)."""
    return request.cookies.get(CSRF_COOKIE) or secrets.token_urlsafe(24)


def check_csrf(request: Request, given: str | None) -> None:
    """Refuse (PERMISSION_DENIED) a form post whose ``csrf`` field does not match its cookie."""
    cookie = request.cookies.get(CSRF_COOKIE, "")
    if not cookie or not given or not hmac.compare_digest(cookie.encode(), given.encode()):
        raise PermissionDeniedError("the form's CSRF token does not match: reload the page and answer again")
