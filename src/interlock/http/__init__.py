"""interlock over HTTP: the Genkit-compatible ASGI server and the remote client.

:class:`~interlock.http.server.AgentServer` serves agents to any Genkit client (JS, Python,
interlock's own); :class:`~interlock.http.client.RemoteAgent` drives any Genkit-compatible
server with the local :class:`~interlock.Agent` interface. :mod:`interlock.http.sse` holds
the byte-exact event framing, :mod:`interlock.http.status` the status map both ways, and
:mod:`interlock.http.asgi` the request-reading helpers.
"""

from .client import RemoteAgent, RemoteConnection
from .server import AgentServer, ContextProvider, RequestInfo

__all__ = ["AgentServer", "ContextProvider", "RemoteAgent", "RemoteConnection", "RequestInfo"]
