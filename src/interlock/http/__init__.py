"""interlock over HTTP: the Genkit-compatible ASGI server, the remote client and the approval inbox.

:class:`~interlock.http.AgentServer` serves agents to any Genkit client (JS, Python,
interlock's own); :class:`~interlock.http.RemoteAgent` drives any Genkit-compatible
server with the local :class:`~interlock.Agent` interface. :class:`~interlock.http.InboxApp`
and :func:`~interlock.http.mount_inbox` serve the approval inbox (the ``inbox`` extra: they are
loaded on first use, so this package imports without starlette and jinja2). :class:`~interlock.http.AgUiMount`
serves AG-UI 1.0 beside the Genkit routes (``AgentServer(agents, protocols=[AgUiMount()])``; the ``ag-ui``
extra, also loaded on first use).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._client import RemoteAgent, RemoteConnection
from ._server import AgentServer, ContextProvider, RequestInfo

if TYPE_CHECKING:
    from ._agui import AgUiMount as AgUiMount
    from ._inbox import InboxApp as InboxApp
    from ._inbox import mount_inbox as mount_inbox

_LAZY = {"AgUiMount": "._agui", "InboxApp": "._inbox", "mount_inbox": "._inbox"}

__all__ = [
    "AgUiMount",
    "AgentServer",
    "ContextProvider",
    "InboxApp",
    "RemoteAgent",
    "RemoteConnection",
    "RequestInfo",
    "mount_inbox",
]


def __getattr__(name: str) -> Any:
    where = _LAZY.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(where, __name__), name)
    globals()[name] = value
    return value
