"""Every case of Genkit's agent conformance spec, over real HTTP: RemoteAgent → uvicorn → AgentServer, on each store."""

from __future__ import annotations

import pathlib
from typing import Any

import httpx
import pytest
from conformance import build_agents, load_cases, run_case
from http_helpers import serve
from store_kinds import KINDS, stores_of
from where import SHARED

from interlock.http._client import RemoteAgent
from interlock.http._server import AgentServer
from interlock.testing import ScriptedModel

CASES = load_cases(SHARED)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["memory", *KINDS])
@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
async def test_http_conformance(case: dict[str, Any], kind: str, tmp_path: pathlib.Path) -> None:
    async with stores_of(kind, tmp_path) as make:
        await _run_over_http(case, build_agents(make))


async def _run_over_http(case: dict[str, Any], agents: dict[str, Any]) -> None:
    app = AgentServer(agents, base_path="/api")

    def set_model(remote: RemoteAgent, model: ScriptedModel) -> None:
        agent = agents[remote.name]
        if hasattr(agent, "model"):
            agent.model = model

    async with serve(app) as base, httpx.AsyncClient() as http:
        remotes = {
            name: RemoteAgent(f"{base}/api/{name}", state_management=agent.state_management, http=http)
            for name, agent in agents.items()
        }
        await run_case(case, remotes, set_model=set_model)
    await app.aclose()
