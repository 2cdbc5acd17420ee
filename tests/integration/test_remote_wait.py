"""RemoteAgent.wait: one long poll (``waitForSnapshot``) on an interlock server, polling where there is none."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator
from typing import Any

import httpx
import pytest
from http_helpers import serve

from interlock import CustomAgent, InMemoryStore
from interlock._engine.invocation import SessionRunner
from interlock.errors import DeadlineExceededError
from interlock.http._client import RemoteAgent
from interlock.http._server import AgentServer

Scope = dict[str, Any]


class Gate:
    """A detached turn that finishes when the test opens the gate."""

    def __init__(self) -> None:
        self.open = asyncio.Event()

    async def agent(self, runner: SessionRunner) -> None:
        async def one(_: Any, __: Any) -> None:
            await self.open.wait()

        await runner.run(one)


def without_long_poll(app: Any) -> Any:
    """``app`` as a Genkit server looks to the client: no ``waitForSnapshot`` route (404)."""

    async def asgi(scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"].endswith("/waitForSnapshot"):
            await send({"type": "http.response.start", "status": 404, "headers": [(b"content-length", b"0")]})
            await send({"type": "http.response.body", "body": b""})
            return
        await app(scope, receive, send)

    return asgi


@pytest.fixture
async def gate() -> Gate:
    return Gate()


@contextlib.asynccontextmanager
async def site(gate: Gate, *, long_poll: bool) -> AsyncGenerator[tuple[str, list[str]]]:
    server = AgentServer([CustomAgent("job", gate.agent, store=InMemoryStore())])
    paths: list[str] = []
    app = server if long_poll else without_long_poll(server)
    async with serve(app) as base:
        yield base, paths
    await server.aclose()


def counting(paths: list[str]) -> httpx.AsyncClient:
    async def log(request: httpx.Request) -> None:
        paths.append(request.url.path.rsplit("/", 1)[-1])

    return httpx.AsyncClient(event_hooks={"request": [log]})


@pytest.mark.parametrize("long_poll", [True, False], ids=["interlock", "no-waitForSnapshot"])
async def test_wait_answers_when_the_turn_settles(gate: Gate, long_poll: bool) -> None:
    async with site(gate, long_poll=long_poll) as (base, paths):
        async with counting(paths) as http:
            remote = RemoteAgent(f"{base}/job", http=http)
            out = await remote.run("go", detach=True)
            assert out.finish_reason == "detached" and out.snapshot_id
            waiting = asyncio.ensure_future(remote.wait(out.snapshot_id, timeout=10))
            await asyncio.sleep(0.6)
            assert not waiting.done()
            opened = time.monotonic()
            gate.open.set()
            final = await waiting
            late = time.monotonic() - opened
    assert final.status == "completed"
    waits, reads = paths.count("waitForSnapshot"), paths.count("getSnapshot")
    if long_poll:
        assert (waits, reads) == (1, 2), paths  # read, one long poll answered by the commit, read
        assert late < 0.2, f"answered {late:.3f} s after the commit"
    else:
        assert waits == 1 and reads >= 3, paths  # tried once, then polled every wait_interval
        assert late < RemoteAgent.wait_interval + 0.2


async def test_a_wait_past_its_timeout_is_deadline_exceeded_and_leaves_no_request_open(gate: Gate) -> None:
    async with site(gate, long_poll=True) as (base, paths):
        async with counting(paths) as http:
            remote = RemoteAgent(f"{base}/job", http=http)
            out = await remote.run("go", detach=True)
            assert out.snapshot_id
            started = time.monotonic()
            with pytest.raises(DeadlineExceededError, match="still pending"):
                await remote.wait(out.snapshot_id, timeout=0.5)
            assert time.monotonic() - started < 2
            gate.open.set()
            assert (await remote.wait(out.snapshot_id, timeout=5)).status == "completed"
