"""``GET <base>/healthz`` reports whether each agent's store takes writes, over a real uvicorn socket."""

from __future__ import annotations

import pathlib

import httpx
import pytest
from http_helpers import serve

from interlock import AgentServer, InMemoryStore, PromptAgent, SQLiteStore
from interlock.testing import EchoModel

pytestmark = pytest.mark.slow


async def test_healthy_stores_answer_200_and_a_shared_store_is_listed_per_agent(tmp_path: pathlib.Path) -> None:
    async with SQLiteStore(tmp_path / "s.db") as store:
        agents = [
            PromptAgent("banker", EchoModel(), store=store),
            PromptAgent("teller", EchoModel(), store=store),
            PromptAgent("memo", EchoModel(), store=InMemoryStore()),
            PromptAgent("stateless", EchoModel()),
        ]
        async with serve(AgentServer(agents, base_path="/api")) as base, httpx.AsyncClient() as client:
            answer = await client.get(f"{base}/api/healthz")
            assert answer.status_code == 200
            assert answer.json() == {"status": "SERVING", "stores": {"banker": "ok", "teller": "ok", "memo": "ok"}}
            assert (await client.get(f"{base}/healthz")).status_code == 404  # outside the base path
            posted = await client.post(f"{base}/api/healthz", json={})
            assert posted.status_code == 404 and posted.json()["status"] == "NOT_FOUND"  # no agent named healthz


async def test_a_store_that_cannot_take_writes_answers_503_naming_its_status(tmp_path: pathlib.Path) -> None:
    broken = SQLiteStore(tmp_path / "no-such-dir" / "s.db")  # its directory does not exist
    agents = [PromptAgent("banker", EchoModel(), store=broken), PromptAgent("memo", EchoModel(), store=InMemoryStore())]
    async with serve(AgentServer(agents)) as base, httpx.AsyncClient() as client:
        answer = await client.get(f"{base}/healthz")
    assert answer.status_code == 503
    assert answer.json() == {"status": "NOT_SERVING", "stores": {"banker": "FAILED_PRECONDITION", "memo": "ok"}}
    assert not (tmp_path / "no-such-dir").exists()
