"""A FastAPI app that mounts interlock's agent servers under prefixes, for tests/integration/test_asgi_mount.py.

Served by uvicorn in its own process. ``/agents`` mounts the interop agents of
``tests/kit/interop/app.py`` (their own ``base_path`` is ``/api``) with FastAPI's ``mount``, and
``/nested/v1`` a server of its own inside two Starlette ``Mount`` routes; neither server is told
its prefix (it reads it from the ASGI ``root_path``). ``GET /`` is the host app's own route.
"""

from __future__ import annotations

from fastapi import FastAPI
from interop.app import approve_transfer, build, create_server, transfer_request
from starlette.routing import Mount

from interlock import AgentServer, InMemoryStore, Message, PromptAgent
from interlock.testing import EchoModel, ScriptedModel

interop = create_server(build())
banker_script = [Message(role="model", content=[transfer_request()]), "Transfer approved."] * 5
own = AgentServer(
    [
        PromptAgent("echo", EchoModel(), store=InMemoryStore()),
        PromptAgent("banker", ScriptedModel(banker_script), tools=[approve_transfer], store=InMemoryStore()),
    ]
)

app = FastAPI()


@app.get("/")
def home() -> dict[str, str]:
    return {"app": "host"}


app.mount("/agents", interop)
app.router.routes.append(Mount("/nested", routes=[Mount("/v1", app=own)]))
