"""interlock over HTTP: the Genkit-compatible ASGI server, the remote client and the approval inbox.

:class:`~interlock.http.AgentServer` serves agents to any Genkit client (JS, Python,
interlock's own); :class:`~interlock.http.RemoteAgent` drives any Genkit-compatible
server with the local :class:`~interlock.Agent` interface. :class:`~interlock.http.InboxApp`
and :func:`~interlock.http.mount_inbox` serve the approval inbox (the ``inbox`` extra), and
:func:`~interlock.http.mcp_protocol` the agents as MCP tools (``AgentServer(agents,
protocols=[mcp_protocol()])``, the ``mcp`` extra): they are loaded on first use, so this
package imports without starlette, jinja2 and mcp.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._client import RemoteAgent, RemoteConnection
from ._server import AgentServer, ContextProvider, RequestInfo

if TYPE_CHECKING:
    from ._inbox import InboxApp as InboxApp
    from ._inbox import mount_inbox as mount_inbox
    from ._mcp import mcp_protocol as mcp_protocol

_LAZY = {"InboxApp": "._inbox", "mount_inbox": "._inbox", "mcp_protocol": "._mcp"}

__all__ = [
    "AgentServer",
    "ContextProvider",
    "InboxApp",
    "RemoteAgent",
    "RemoteConnection",
    "RequestInfo",
    "mcp_protocol",
    "mount_inbox",
]


def __getattr__(name: str) -> Any:
    where = _LAZY.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(where, __name__), name)
    globals()[name] = value
    return value
