"""The agent server mounted inside a real FastAPI app, under uvicorn in its own process.

``tests/kit/mounted_app.py`` mounts the servers with FastAPI's ``mount`` and Starlette ``Mount``
without telling them their prefix; they read it from the ASGI ``root_path``. interlock's
``RemoteAgent`` and the published Genkit JS and Python clients (as in tests/integration/test_interop.py)
drive them through the prefix, and the health route answers under it.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
import pytest_asyncio
from http_helpers import serve_process
from interop.app import approve_transfer
from test_interop import (
    Clients,
    interop_clients,  # noqa: F401  # pyright: ignore[reportUnusedImport]  (a fixture)
    run_client,
)
from where import KIT

from interlock import RemoteAgent, Resume
from interlock.errors import NotFoundError

pytestmark = [pytest.mark.slow, pytest.mark.asyncio(loop_scope="module")]


@pytest.fixture(scope="module")
def host() -> Iterator[str]:
    """``uvicorn mounted_app:app`` on a free 127.0.0.1 port, in its own process; yields its base URL."""
    command = [sys.executable, "-m", "uvicorn", "mounted_app:app", "--host", "127.0.0.1", "--port", "0"]
    with serve_process(command, cwd=KIT) as server:
        yield server.url


@pytest_asyncio.fixture(loop_scope="module")
async def http(host: str) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=host, timeout=30) as client:
        yield client


async def test_the_host_app_keeps_its_own_routes(http: httpx.AsyncClient) -> None:
    assert (await http.get("/")).json() == {"app": "host"}


async def test_the_health_route_answers_under_each_prefix(http: httpx.AsyncClient) -> None:
    for prefix in ("/agents/api", "/nested/v1"):
        answer = await http.get(f"{prefix}/healthz")
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert body["status"] == "SERVING" and body["stores"] and set(body["stores"].values()) == {"ok"}


async def test_a_path_outside_the_servers_routes_is_not_found(http: httpx.AsyncClient) -> None:
    answer = await http.post("/nested/v1/nobody", json={"data": {"message": {"role": "user", "content": []}}})
    assert answer.status_code == 404 and answer.json()["status"] == "NOT_FOUND"
    assert "'/nobody'" in answer.json()["message"]  # the path the server sees, without the mount prefix


async def test_remote_agent_drives_a_mounted_server(host: str) -> None:
    async with RemoteAgent(f"{host}/nested/v1/echo") as echo:
        out = await echo.run("hello through two mounts")
        assert (out.text, out.finish_reason) == ("Echo: hello through two mounts", "stop")
        snap = await echo.get_snapshot(out.snapshot_id)
        assert snap is not None and snap.status == "completed"
        try:  # a failed run returns its error (or raises it, where the caller asks for that)
            refused = await echo.run("again", snapshot_id="no-such-snapshot")
        except NotFoundError:
            pass
        else:
            assert refused.error is not None and refused.error.status == "NOT_FOUND"

    async with RemoteAgent(f"{host}/nested/v1/banker") as banker:
        paused = await banker.run("transfer 100 to acct-1")
        assert paused.finish_reason == "interrupted"
        pending = await banker.pending_interrupts(paused.snapshot_id)
        call = approve_transfer.interrupted(pending[0])
        assert call is not None
        done = await banker.run(
            resume=Resume(respond=[call.respond({"approved": True})]), snapshot_id=paused.snapshot_id
        )
        assert (done.text, done.finish_reason) == ("Transfer approved.", "stop")
        assert await banker.pending_interrupts(paused.snapshot_id) == []


async def _report(clients: Clients, client: str, url: str, scenario: str) -> dict[str, Any]:
    command = clients.command(client, url, scenario)
    run = await run_client(command, clients.env)
    assert not run.timed_out and run.returncode == 0, f"{command}:\n{run.stdout}\n{run.stderr}"
    payload: dict[str, Any] = json.loads(run.stdout.strip().splitlines()[-1])
    assert payload.get("ok"), payload
    return payload["report"]


@pytest.mark.parametrize("client", ["js", "py"])
async def test_genkit_clients_drive_a_mounted_server(host: str, request: pytest.FixtureRequest, client: str) -> None:
    clients: Clients = request.getfixturevalue("interop_clients")  # installs the published clients, or fails
    base = f"{host}/agents/api/{client}_"
    stream, paused = await asyncio.gather(
        _report(clients, client, base + "stream", "stream"),
        _report(clients, client, base + "interrupt_respond", "interrupt_respond"),
    )
    assert (stream["result"]["text"], stream["result"]["finishReason"]) == ("Echo: hello", "stop")
    assert stream["second"]["sessionId"] == stream["result"]["sessionId"]
    assert paused["interrupted"]["finishReason"] == "interrupted"
    assert [i["name"] for i in paused["interrupted"]["interrupts"]] == ["approveTransfer"]
    output = json.dumps({"approved": True, "by": client}, sort_keys=True)
    assert paused["resumed"]["text"] == f"Tool approveTransfer returned {output}"
