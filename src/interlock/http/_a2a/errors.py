"""interlock's typed errors as A2A's JSON-RPC errors: each canonical status to the A2A error that fits.

The status rides in the error's data (``{"status": "ABORTED", ...}``), so a client can tell a
lost race from a bad request. No client input becomes an internal error: only
:class:`~interlock.errors.InternalError` (a tool or model failure, a bug) does.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, TypeVar, cast

from a2a.utils.errors import (
    A2AError,
    InternalError,
    InvalidParamsError,
    InvalidRequestError,
    TaskNotFoundError,
    UnsupportedOperationError,
)

from ..._json_object import is_object
from ...errors import InterlockError

F = TypeVar("F", bound=Callable[..., Any])

_BY_STATUS: dict[str, type[A2AError]] = {
    "INVALID_ARGUMENT": InvalidParamsError,
    "NOT_FOUND": TaskNotFoundError,
    "FAILED_PRECONDITION": UnsupportedOperationError,
    "ABORTED": UnsupportedOperationError,
    "ALREADY_EXISTS": InvalidRequestError,
    "PERMISSION_DENIED": InvalidRequestError,
    "UNAUTHENTICATED": InvalidRequestError,
    "RESOURCE_EXHAUSTED": InvalidRequestError,
    "OUT_OF_RANGE": InvalidParamsError,
    "CANCELLED": UnsupportedOperationError,
    "DEADLINE_EXCEEDED": UnsupportedOperationError,
    "UNIMPLEMENTED": UnsupportedOperationError,
    "UNAVAILABLE": UnsupportedOperationError,
}


def a2a_error(exc: InterlockError) -> A2AError:
    """``exc`` as the A2A error its canonical status maps to; its data carries the status (and details)."""
    kind = _BY_STATUS.get(exc.status, InternalError)
    data: dict[str, Any] = {"status": exc.status}
    details: Any = exc.details
    if is_object(details):
        data |= {str(k): str(v) for k, v in details.items() if v is not None}
    return kind(exc.message, data=data)


def translated(method: F) -> F:
    """A handler method whose :class:`~interlock.errors.InterlockError` reaches the client as its A2A error."""
    if inspect.isasyncgenfunction(method):

        @functools.wraps(method)
        async def stream(*args: Any, **kwargs: Any) -> Any:
            try:
                async for item in method(*args, **kwargs):
                    yield item
            except InterlockError as exc:
                raise a2a_error(exc) from None

        return cast(F, stream)

    @functools.wraps(method)
    async def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return await method(*args, **kwargs)
        except InterlockError as exc:
            raise a2a_error(exc) from None

    return cast(F, call)
