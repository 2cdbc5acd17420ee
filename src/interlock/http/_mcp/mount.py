"""The MCP endpoint: a :class:`~interlock.http._mounts.ProtocolMount` serving Streamable HTTP at ``/mcp``.

Built on the official SDK (PyPI ``mcp``): its low-level ``Server`` with the handlers of
:mod:`.calls`, and its ``StreamableHTTPSessionManager`` (stateless: MCP 2026-07-28 requests are
self-contained, and older clients get a transport per request), whose task group runs while
the :class:`~interlock.http.AgentServer` runs. Every request is authenticated first by the
server's context provider (its :class:`~interlock.http.RequestInfo` shows ``action="mcp"``
and ``agent=""``; a refusal is the provider's HTTP status), and each ``tools/call`` again with
the agent it names, so tools read the same context as over Genkit's routes. The Tasks
extension (:mod:`.tasks`) is advertised in the server's capabilities; its methods are
registered on the low-level server beside the tool handlers.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, Sequence
from typing import Any

from mcp.server.lowlevel.server import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp_types import CallToolRequestParams

from ...errors import InterlockError
from .._asgi import Action, Receive, Scope, Send, respond
from .._mounts import ASGIApp, MountHost
from .._status import error_body, http_status
from .calls import Calls
from .shapes import EXTENSION
from .state import StateSeal
from .tasks import Tasks


class MCP:
    """The MCP endpoint, for ``AgentServer(agents, protocols=[MCP(...)])``.

    Args:
        keys: the secrets sealing ``requestState`` (each at least 32 bytes; the first seals,
            each opens, so keys rotate). ``None``: a random key of this process, so a paused
            call cannot be answered over MCP after a restart or by another worker process
            (the inbox still can).
        state_ttl: seconds a paused call's ``requestState`` can be answered with.
        prefix: the path served (below the server's ``base_path``).
        server_name: the name the server gives in MCP's ``serverInfo``.
    """

    def __init__(
        self,
        *,
        keys: Sequence[bytes | str] | None = None,
        state_ttl: float = 600.0,
        prefix: str = "/mcp",
        server_name: str = "interlock",
    ) -> None:
        self.seal = StateSeal(keys, ttl=state_ttl)
        self._prefix = "/" + prefix.strip("/")
        self.server_name = server_name
        self._managers: list[StreamableHTTPSessionManager] = []

    @property
    def name(self) -> Action:
        return "mcp"

    @property
    def prefix(self) -> str:
        return self._prefix

    def app(self, host: MountHost) -> ASGIApp:
        from ... import __version__

        calls = Calls(host, self.seal)
        tasks = Tasks(calls)
        server: Server[Any] = Server(
            self.server_name, version=__version__, on_list_tools=calls.list_tools, on_call_tool=calls.call_tool
        )
        # a tools/call may answer a task (resultType "task"), so its handler is wrapped as the SDK wraps
        # an extension's tool-call interceptor: registered in place of the plain one
        server.add_request_handler("tools/call", CallToolRequestParams, tasks.call_tool)
        for method, (params, handler) in tasks.handlers().items():
            server.add_request_handler(method, params, handler)
        server.extensions[EXTENSION] = {}
        manager = StreamableHTTPSessionManager(app=server, stateless=True, max_request_body_size=host.max_body)
        self._managers.append(manager)

        async def app(scope: Scope, receive: Receive, send: Send) -> None:
            try:
                await host.caller(scope, "")
            except InterlockError as exc:
                await respond(send, http_status(exc), {"error": error_body(exc)}, [])
                return
            await manager.handle_request(scope, receive, send)

        return app

    @contextlib.asynccontextmanager
    async def lifespan(self) -> AsyncGenerator[None]:
        async with contextlib.AsyncExitStack() as running:
            for manager in self._managers:
                await running.enter_async_context(manager.run())
            yield
