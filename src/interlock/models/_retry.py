"""What the provider adapters share: HTTP failures as canonical errors, retries with backoff.

Each adapter turns its SDK's exceptions into interlock errors with :func:`http_error`
(and :func:`timeout_error` / :func:`connection_error`), and wraps one model call in
:func:`call_with_retries`. The SDKs' own retries are switched off, so these are the only
ones: ``RESOURCE_EXHAUSTED`` (429) and ``UNAVAILABLE`` (5xx, connection failures) are
retried with exponential backoff, everything else is raised at once.
"""

from __future__ import annotations

import asyncio
import base64
import json
import random
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Self, TypeVar

from .._json_object import is_object
from ..errors import (
    DeadlineExceededError,
    InterlockError,
    InvalidArgumentError,
    ModelError,
    NotFoundError,
    PermissionDeniedError,
    ResourceExhaustedError,
    UnauthenticatedError,
    UnavailableError,
)
from ..telemetry import _calls as telemetry

_T = TypeVar("_T")

_BY_HTTP: dict[int, type[InterlockError]] = {
    400: InvalidArgumentError,
    401: UnauthenticatedError,
    403: PermissionDeniedError,
    404: NotFoundError,
    408: DeadlineExceededError,
    413: InvalidArgumentError,
    422: InvalidArgumentError,
    429: ResourceExhaustedError,
}


@dataclass(frozen=True, kw_only=True, slots=True)
class RetryPolicy:
    """How often and how patiently a throttled or unavailable call is retried."""

    max_retries: int = 2
    """Retries after the first attempt; ``0`` disables retrying."""
    initial_delay: float = 0.5
    """Seconds before the first retry; each later one waits ``multiplier`` times longer."""
    max_delay: float = 20.0
    """No single wait is longer than this, including a server's ``Retry-After``."""
    multiplier: float = 2.0

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait before retry number ``attempt`` (0-based), with jitter."""
        backoff = min(self.max_delay, self.initial_delay * self.multiplier**attempt)
        backoff *= 0.5 + random.random() / 2
        if retry_after is not None:
            backoff = max(backoff, retry_after)
        return min(backoff, self.max_delay)


def missing_extra(package: str, extra: str) -> ImportError:
    """The error raised when a provider's optional SDK is not installed."""
    return ImportError(
        f"this model provider needs the {package!r} package; install it with: pip install 'interlock[{extra}]'"
    )


def http_error(
    status: int,
    message: str,
    *,
    provider: str,
    retry_after: float | None = None,
    cls: type[InterlockError] | None = None,
) -> InterlockError:
    """The canonical error for a provider's HTTP failure (``cls`` overrides the status mapping)."""
    if cls is None:
        cls = _BY_HTTP.get(status) or (UnavailableError if status >= 500 else ModelError)
    details: dict[str, Any] = {"provider": provider, "httpStatus": status}
    if retry_after is not None:
        details["retryAfter"] = retry_after
    return cls(f"{provider} returned HTTP {status}: {message}", details=details)


def timeout_error(provider: str, exc: BaseException) -> DeadlineExceededError:
    """The error for a request that ran out of time."""
    return DeadlineExceededError(f"{provider} request timed out: {exc}", details={"provider": provider})


def connection_error(provider: str, exc: BaseException) -> UnavailableError:
    """The error for a request that never reached the provider."""
    return UnavailableError(f"could not reach {provider}: {exc}", details={"provider": provider})


def transport_error(provider: str, exc: BaseException) -> InterlockError | None:
    """A timeout or connection failure raised by an HTTP library (httpx, httpx2, aiohttp), else ``None``.

    Matched by class name so it holds whichever HTTP library an SDK version uses.
    """
    if isinstance(exc, TimeoutError):
        return timeout_error(provider, exc)
    if type(exc).__module__.split(".")[0] not in ("httpx", "httpx2", "aiohttp"):
        return None
    names = {cls.__name__ for cls in type(exc).__mro__}
    if names & {"TimeoutException", "ServerTimeoutError"}:
        return timeout_error(provider, exc)
    if names & {"TransportError", "ClientConnectionError"}:
        return connection_error(provider, exc)
    return None


def retry_after_seconds(headers: Any) -> float | None:
    """A ``Retry-After`` (or ``retry-after-ms``) header value in seconds, when numeric."""
    if headers is None:
        return None
    millis = headers.get("retry-after-ms")
    if millis is not None and re.fullmatch(r"\d+(\.\d+)?", str(millis)):
        return float(millis) / 1000
    seconds = headers.get("retry-after")
    if seconds is not None and re.fullmatch(r"\d+(\.\d+)?", str(seconds)):
        return float(seconds)
    return None


async def call_with_retries(
    attempt: Callable[[], Awaitable[_T]],
    *,
    policy: RetryPolicy,
    map_error: Callable[[Exception], InterlockError | None],
    may_retry: Callable[[], bool] = lambda: True,
) -> _T:
    """Run ``attempt``, mapping provider failures and retrying the transient ones.

    ``map_error`` returns the canonical error for a provider exception, or ``None`` for
    anything else (which is re-raised untouched, e.g. an error from a chunk callback).
    ``may_retry`` is asked before each retry: a stream that already delivered chunks
    must not be replayed.
    """
    retries = 0
    while True:
        try:
            return await attempt()
        except Exception as exc:
            error = map_error(exc)
            if error is None:
                raise
            transient = isinstance(error, ResourceExhaustedError | UnavailableError)
            if not transient or retries >= policy.max_retries or not may_retry():
                raise error from exc
        delay = policy.delay(retries, _retry_after(error))
        telemetry.model_retry(error, retries + 1, delay)
        await asyncio.sleep(delay)
        retries += 1


def _retry_after(error: InterlockError) -> float | None:
    details: object = error.details
    if not is_object(details):
        return None
    value = details.get("retryAfter")
    return float(value) if isinstance(value, int | float) else None


def json_text(value: object) -> str:
    """A tool output as the text a provider expects: strings as they are, the rest as JSON."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def data_url(url: str) -> tuple[str, bytes] | None:
    """``(content_type, bytes)`` of a base64 ``data:`` URL, or ``None`` for other URLs."""
    match = re.fullmatch(r"data:([^;,]*)(?:;[^,]*)?;base64,(.*)", url, re.S)
    if match is None:
        return None
    return match.group(1) or "application/octet-stream", base64.b64decode(match.group(2))


class OwnsClient:
    """Mixin for adapters that may own their SDK client: ``aclose()`` and ``async with``.

    Subclasses set ``_owns_client`` and implement :meth:`_close_client`.
    """

    _owns_client: bool

    async def _close_client(self) -> None:
        raise NotImplementedError

    async def aclose(self) -> None:
        """Close the HTTP client, unless it was passed in."""
        if self._owns_client:
            await self._close_client()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
