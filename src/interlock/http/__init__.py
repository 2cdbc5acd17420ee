"""interlock over HTTP: the Genkit-compatible ASGI server and the remote client.

:class:`~interlock.http._server.AgentServer` serves agents to any Genkit client (JS, Python,
interlock's own); :class:`~interlock.http._client.RemoteAgent` drives any Genkit-compatible
server with the local :class:`~interlock.Agent` interface. :mod:`interlock.http._sse` holds
the byte-exact event framing, :mod:`interlock.http._status` the status map both ways, and
:mod:`interlock.http._asgi` the request-reading helpers.
"""

from ._client import RemoteAgent, RemoteConnection
from ._server import AgentServer, ContextProvider, RequestInfo

__all__ = ["AgentServer", "ContextProvider", "RemoteAgent", "RemoteConnection", "RequestInfo"]
