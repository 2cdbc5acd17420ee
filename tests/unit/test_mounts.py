"""Protocols mounted beside the Genkit routes (``AgentServer(protocols=...)``): routing, the caller, lifespan."""

from __future__ import annotations

import contextlib
import importlib
import json
import sys
from collections.abc import AsyncGenerator
from typing import Any

import httpx
import pytest

from interlock import PromptAgent
from interlock.errors import UnauthenticatedError
from interlock.http import AgentServer, RequestInfo
from interlock.http._asgi import Action, Receive, Scope, Send
from interlock.http._mounts import ASGIApp, MountHost
from interlock.stores.memory import InMemoryStore
from interlock.testing import ScriptedModel


class Echo:
    """A protocol that answers with the caller the server's context provider names, and the agents served."""

    def __init__(self) -> None:
        self.events: list[str] = []

    @property
    def name(self) -> Action:
        return "mcp"

    @property
    def prefix(self) -> str:
        return "/echo"

    def app(self, host: MountHost) -> ASGIApp:
        async def app(scope: Scope, receive: Receive, send: Send) -> None:
            caller = await host.caller(scope, "a")
            body = {"path": scope["path"], "identity": caller.identity, "agents": host.service.names()}
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": json.dumps(body).encode()})

        return app

    @contextlib.asynccontextmanager
    async def lifespan(self) -> AsyncGenerator[None]:
        self.events.append("start")
        yield
        self.events.append("stop")


def context(info: RequestInfo) -> dict[str, Any]:
    if "authorization" not in info.headers:
        raise UnauthenticatedError("send a token")
    return {"identity": f"{info.action}:{info.agent}:{info.headers['authorization']}"}


@pytest.fixture
def server() -> tuple[AgentServer, Echo]:
    echo = Echo()
    agent = PromptAgent("a", ScriptedModel(["hi"]), store=InMemoryStore())
    return AgentServer([agent], base_path="/api", context=context, protocols=[echo]), echo


async def test_a_mounted_protocol_gets_its_paths_and_the_callers_the_context_provider_names(
    server: tuple[AgentServer, Echo],
) -> None:
    app, _ = server
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as http:
        got = await http.post("/api/echo/x", headers={"authorization": "t1"})
        assert got.json() == {"path": "/api/echo/x", "identity": "mcp:a:t1", "agents": ["a"]}
        genkit = await http.post("/api/a", json={"data": {"message": {"role": "user", "content": [{"text": "x"}]}}})
        assert genkit.status_code == 401  # the Genkit routes are still there, behind the same provider
        assert (await http.post("/echo/x", headers={"authorization": "t1"})).status_code == 404  # below base_path only


async def test_the_callers_refusal_reaches_the_protocol_as_a_typed_error(server: tuple[AgentServer, Echo]) -> None:
    app, _ = server
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=True)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
        with pytest.raises(UnauthenticatedError, match="send a token"):
            await http.post("/api/echo")


async def test_the_servers_lifespan_runs_each_protocols(server: tuple[AgentServer, Echo]) -> None:
    app, echo = server
    sent: list[dict[str, Any]] = []
    messages = iter([{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}])

    async def receive() -> Any:
        message = next(messages)
        if message["type"] == "lifespan.shutdown":
            assert echo.events == ["start"]
        return message

    async def send(message: Any) -> None:
        sent.append(dict(message))

    await app({"type": "lifespan"}, receive, send)
    assert echo.events == ["start", "stop"]
    assert [m["type"] for m in sent] == ["lifespan.startup.complete", "lifespan.shutdown.complete"]


@pytest.mark.parametrize(
    ("package", "missing", "extra"),
    [
        ("interlock.http._mcp", "mcp", "mcp"),
        ("interlock.http._agui", "ag_ui", "ag-ui"),
        ("interlock.http._a2a", "a2a", "a2a"),
    ],
)
def test_without_its_extra_a_protocol_says_which_to_install(package: str, missing: str, extra: str) -> None:
    saved = dict(sys.modules)  # the failed import leaves half-built modules behind: put every entry back after
    try:
        for name in [n for n in sys.modules if n.startswith((package, missing))]:
            del sys.modules[name]
        sys.modules[missing] = None  # type: ignore[assignment]  # what "not installed" looks like to import
        with pytest.raises(ImportError, match=rf"pip install 'interlock\[{extra}\]'"):
            importlib.import_module(package)
    finally:
        sys.modules.clear()
        sys.modules.update(saved)
