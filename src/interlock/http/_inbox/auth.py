"""Who is asking, for which tenant, and whether a state-changing request may come from where it comes from.

Identity comes from the agent server's context hook (:data:`interlock.server.ContextProvider`,
called with a :class:`~interlock.server.RequestInfo` whose ``action`` is ``"inbox"``): it
must give an ``identity``; its ``tenant`` scopes every read and answer. For one person,
``token=`` is simpler: ``Authorization: Bearer <token>``, or open any page once with
``?key=<token>`` and a cookie (HttpOnly, SameSite=Strict) keeps you signed in.

That cookie is one sign-in's: a random id and its issue time, signed (a
:class:`~interlock.interrupts.Keyring` keyed by the token), refused once older than
``session_max_age`` or altered. ``POST /sign-out`` clears it, and this process refuses the
signed-out value from then on; changing the token ends every sign-in.

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
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request

from ..._json_object import is_object
from ...errors import PermissionDeniedError, UnauthenticatedError, UsageError
from ...interrupts._signing import Keyring
from ...stores import check_tenant
from .._asgi import RequestInfo
from .._server import ContextProvider

SESSION_COOKIE = "interlock_inbox"
CSRF_COOKIE = "interlock_csrf"
SESSION_MAX_AGE = 12 * 3600.0
"""Seconds a sign-in cookie is accepted, by default."""


@dataclass(frozen=True, slots=True)
class Who:
    """The person asking and their tenant."""

    identity: Any
    tenant: str | None


class Auth:
    """Identity (context hook or one token) and cross-site protection for the inbox app."""

    def __init__(
        self,
        *,
        context: ContextProvider | None,
        token: str | None,
        user: str,
        session_max_age: float = SESSION_MAX_AGE,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if context is None and not token:
            raise UsageError(
                "the inbox must know who answers: pass context= (the agent server's context hook, which gives "
                "identity and tenant) or token= (one user signs in with it)"
            )
        if not session_max_age > 0:
            raise UsageError(f"session_max_age must be a positive number of seconds, not {session_max_age!r}")
        self.context = context
        self.token = token
        self.user = user
        self.session_max_age = session_max_age
        self.clock = clock
        key = hmac.new((token or "").encode(), b"interlock-inbox-session", hashlib.sha256).digest()
        self._keys = Keyring({"s": key}, max_age=session_max_age)
        self._signed_out: dict[str, float] = {}  # sign-in id -> when its cookie would expire anyway

    def session_cookie(self, key: str) -> str | None:
        """A new sign-in's cookie value (its own id and issue time, signed), when ``key`` is the token."""
        if self.token and hmac.compare_digest(key.encode(), self.token.encode()):
            sign_in = secrets.token_urlsafe(16)
            return f"{sign_in}.{self._keys.sign(sign_in.encode(), now=self.clock())}"
        return None

    def sign_out(self, request: Request) -> None:
        """Refuse the request's sign-in cookie from now on (in this process)."""
        sign_in = self._signed_in(request)
        if sign_in is not None:
            now = self.clock()
            self._signed_out = {k: t for k, t in self._signed_out.items() if t > now}
            self._signed_out[sign_in] = now + self.session_max_age

    def _signed_in(self, request: Request) -> str | None:
        """The id of the request's sign-in cookie: signed by this inbox, unaltered, not expired nor signed out."""
        sign_in, _, signature = request.cookies.get(SESSION_COOKIE, "").partition(".")
        if not self.token or not sign_in or sign_in in self._signed_out:
            return None
        try:
            self._keys.verify(signature, sign_in.encode(), now=self.clock())
        except PermissionDeniedError:
            return None
        return sign_in

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
        return self._signed_in(request) is not None


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
