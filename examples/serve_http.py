"""Serve an agent over Genkit's HTTP protocol and drive it with RemoteAgent.

The server runs on uvicorn in this same process (on a free 127.0.0.1 port) to keep the
example in one file; in production run ``interlock serve app:app``.
"""

import asyncio

import uvicorn

from interlock import AgentServer, InMemoryStore, PromptAgent, RemoteAgent
from interlock.testing import EchoModel

agent = PromptAgent("echo", EchoModel(), store=InMemoryStore())
app = AgentServer([agent], context=lambda request: {"identity": request.headers.get("x-user")})


async def main() -> None:
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    serving = asyncio.ensure_future(server.serve())
    while not server.started:
        await asyncio.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        async with RemoteAgent(f"http://127.0.0.1:{port}/echo") as remote:
            out = await remote.run("hello over HTTP")
            snap = await remote.get_snapshot(out.snapshot_id)
            print(out.text, "| stored:", snap is not None and snap.status)
    finally:
        server.should_exit = True
        await serving


asyncio.run(main())
