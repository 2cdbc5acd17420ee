"""Wire protocols served beside the Genkit routes: the mount point of MCP, AG-UI and A2A adapters.

A :class:`ProtocolMount` is what an adapter hands :class:`~interlock.http.AgentServer`
(``AgentServer(agents, protocols=[...])``): a path prefix and a factory that builds the
adapter's ASGI app once, from a :class:`MountHost`. The host gives the adapter the
:class:`~interlock.http._service.AgentService` of the served agents and the server's way
of turning a request into a :class:`~interlock.http._service.Caller` (its context
provider), so an adapter authenticates exactly as the Genkit routes do and reaches the
agents only through the protocol seam.

Requests whose path is the prefix or below it (after the server's ``base_path``) go to the
adapter's app unchanged; the server's lifespan opens and closes each adapter's
:meth:`ProtocolMount.lifespan` (e.g. an MCP session manager's task group).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from ._asgi import Action, Receive, Scope, Send
from ._service import AgentService, Caller

ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
"""An ASGI 3 application."""


@dataclass(frozen=True, kw_only=True, slots=True)
class MountHost:
    """What a mounted protocol adapter gets from the server that serves it."""

    service: AgentService
    """The served agents, through the protocol seam."""
    caller: Callable[[Scope, str], Awaitable[Caller]]
    """The caller an ASGI request names when it addresses the agent given (``""`` for none), as the server's
    context provider says (it sees a :class:`~interlock.http.RequestInfo` whose ``action`` is the protocol's
    name); raises an ``InterlockError`` (e.g. UNAUTHENTICATED) to refuse the request."""
    max_body: int
    """The largest request body the server accepts, in bytes."""
    body_timeout: float
    """Seconds a request body may take to arrive."""


class ProtocolMount(Protocol):
    """A wire protocol an :class:`~interlock.http.AgentServer` serves beside its Genkit routes."""

    @property
    def name(self) -> Action:
        """The protocol's name, the ``action`` of the :class:`~interlock.http.RequestInfo` its requests show."""
        ...

    @property
    def prefix(self) -> str:
        """The path the protocol is served under, e.g. ``"/mcp"`` (below the server's ``base_path``)."""
        ...

    def app(self, host: MountHost) -> ASGIApp:
        """The protocol's ASGI app over ``host`` (called once, when the server is built)."""
        ...

    def lifespan(self) -> contextlib.AbstractAsyncContextManager[None]:
        """What runs while the server runs (entered at ASGI startup, left at shutdown)."""
        ...


@contextlib.asynccontextmanager
async def no_lifespan() -> AsyncGenerator[None]:
    """A :meth:`ProtocolMount.lifespan` for adapters with nothing to run."""
    yield


def mounted(path: str, base_path: str, prefixes: dict[str, ASGIApp]) -> ASGIApp | None:
    """The adapter app serving ``path``, if a mounted prefix (below ``base_path``) covers it."""
    if base_path and not path.startswith(base_path + "/"):
        return None
    rest = path[len(base_path) :]
    for prefix, app in prefixes.items():
        if rest == prefix or rest.startswith(prefix + "/"):
            return app
    return None
