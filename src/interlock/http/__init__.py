"""interlock over HTTP: the Genkit-compatible ASGI server, the remote client and the approval inbox.

:class:`~interlock.http.AgentServer` serves agents to any Genkit client (JS, Python,
interlock's own); :class:`~interlock.http.RemoteAgent` drives any Genkit-compatible
server with the local :class:`~interlock.Agent` interface. :class:`~interlock.http.InboxApp`
and :func:`~interlock.http.mount_inbox` serve the approval inbox (the ``inbox`` extra). The other
wire protocols are served beside the Genkit routes (``AgentServer(agents, protocols=[...])``):
:class:`~interlock.http.MCP` (the ``mcp`` extra), :class:`~interlock.http.AGUI`
(AG-UI 1.0, the ``ag-ui`` extra) and :class:`~interlock.http.A2A` (the ``a2a`` extra);
:func:`~interlock.http.mcp_tools` gives an agent the tools of a remote MCP server, and
:class:`~interlock.http.A2AAgent` makes a remote A2A agent a sub-agent for ``delegate``. They are
loaded on first use, so this package imports without their extras.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._client import RemoteAgent, RemoteConnection
from ._server import AgentServer, ContextProvider, RequestInfo

if TYPE_CHECKING:
    from ._a2a import A2A as A2A
    from ._a2a_agent import A2AAgent as A2AAgent
    from ._agui import AGUI as AGUI
    from ._inbox import InboxApp as InboxApp
    from ._inbox import mount_inbox as mount_inbox
    from ._mcp import MCP as MCP
    from ._mcp_tools import McpTool as McpTool
    from ._mcp_tools import mcp_tools as mcp_tools

_LAZY = {
    "A2A": "._a2a",
    "A2AAgent": "._a2a_agent",
    "AGUI": "._agui",
    "InboxApp": "._inbox",
    "McpTool": "._mcp_tools",
    "MCP": "._mcp",
    "mcp_tools": "._mcp_tools",
    "mount_inbox": "._inbox",
}

__all__ = [
    "A2A",
    "A2AAgent",
    "AGUI",
    "AgentServer",
    "ContextProvider",
    "InboxApp",
    "MCP",
    "McpTool",
    "RemoteAgent",
    "RemoteConnection",
    "RequestInfo",
    "mcp_tools",
    "mount_inbox",
]


def __getattr__(name: str) -> Any:
    where = _LAZY.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(where, __name__), name)
    globals()[name] = value
    return value
