"""A server's per-turn registries empty out (issue 25): streams and clients that drop mid-stream leave nothing behind.

bench/memory.py prints the memory figures; this pins the bound they rest on: after turns read
to the end and turns whose client disconnected mid-stream, the server follows no abandoned
turn, the runtime keeps no background task, and no asyncio task is left running.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from http_helpers import serve

from interlock import Message, PromptAgent
from interlock._engine import invocation as runtime_module
from interlock.http._server import AgentServer
from interlock.models import ChunkCallback, ModelChunk, ModelRequest, ModelResponse
from interlock.parts import TextPart

pytestmark = pytest.mark.slow


class SlowEcho:
    """Streams a few chunks with pauses, so a dropping client leaves mid-stream."""

    name = "test/slow-echo"

    async def generate(self, request: ModelRequest, *, on_chunk: ChunkCallback | None = None) -> ModelResponse:
        for i in range(6):
            await asyncio.sleep(0.005)
            if on_chunk is not None:
                result = on_chunk(ModelChunk(role="model", index=0, content=[TextPart(text=f"{i} ")]))
                if asyncio.iscoroutine(result):
                    await result
        return ModelResponse(message=Message.model("done"), finish_reason="stop")


async def stream(http: httpx.AsyncClient, *, drop: bool) -> int:
    body = {"data": {"message": {"role": "user", "content": [{"text": "hi"}]}}, "init": {}}
    pieces = 0
    async with http.stream("POST", "/echo", json=body, headers={"Accept": "text/event-stream"}) as response:
        async for _ in response.aiter_raw():
            pieces += 1
            if drop:
                break  # leaving the block closes the connection mid-stream
    return pieces


@pytest.mark.parametrize("store", [None, "sqlite"], ids=["client-managed", "server-managed"])
async def test_streams_and_disconnects_leave_no_follower_or_task(store: Any, tmp_path: Any) -> None:
    from interlock.stores.sqlite import SQLiteStore

    agent = PromptAgent("echo", SlowEcho(), store=SQLiteStore(tmp_path / "s.db") if store else None)
    app = AgentServer([agent])
    async with serve(app) as base, httpx.AsyncClient(base_url=base) as http:
        before = len(asyncio.all_tasks())
        for _ in range(3):
            assert all(await asyncio.gather(*(stream(http, drop=False) for _ in range(10))))
            await asyncio.gather(*(stream(http, drop=True) for _ in range(10)))
        async with asyncio.timeout(30):  # abandoned turns wind down (a stored one runs to its end)
            while app._followers or runtime_module._background:  # pyright: ignore[reportPrivateUsage]
                await asyncio.sleep(0.01)
            while len(asyncio.all_tasks()) > before:
                await asyncio.sleep(0.01)
    assert not app._followers  # pyright: ignore[reportPrivateUsage]
    assert not runtime_module._background  # pyright: ignore[reportPrivateUsage]
