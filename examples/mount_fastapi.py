"""Mount the agent server inside a FastAPI app, under a prefix, and check its health route.

The server is not told its prefix: it reads the ASGI ``root_path`` that FastAPI's ``mount``
(Starlette's ``Mount``) sets. The app runs on uvicorn in this process, on a free port.
"""

import asyncio

import httpx
import uvicorn
from fastapi import FastAPI

from interlock import AgentServer, InMemoryStore, PromptAgent, RemoteAgent
from interlock.testing import EchoModel

app = FastAPI()
app.mount("/agents", AgentServer([PromptAgent("echo", EchoModel(), store=InMemoryStore())]))


@app.get("/")
def home() -> dict[str, str]:
    return {"hello": "from the host app"}


async def main() -> None:
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    serving = asyncio.ensure_future(server.serve())
    while not server.started:
        await asyncio.sleep(0.01)
    base = f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
    try:
        async with httpx.AsyncClient() as http:
            print("host:", (await http.get(f"{base}/")).json())
            print("health:", (await http.get(f"{base}/agents/healthz")).json())
        async with RemoteAgent(f"{base}/agents/echo") as echo:
            print("agent:", (await echo.run("hi")).text)
    finally:
        server.should_exit = True
        await serving


asyncio.run(main())
