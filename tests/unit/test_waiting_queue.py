"""The queue of an invocation's turns and stream chunks (interlock._engine.io.Waiting)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable

import pytest

from interlock import InMemoryStore, Message, PromptAgent
from interlock._engine.io import Waiting
from interlock.models import ModelRequest, ModelResponse
from interlock.testing import ScriptedModel


async def test_items_come_out_in_order_whether_or_not_a_reader_waited() -> None:
    queue: Waiting[int] = Waiting()
    queue.put_nowait(1)
    reader = asyncio.ensure_future(asyncio.gather(queue.get(), queue.get()))
    await asyncio.sleep(0)
    queue.put_nowait(2)
    assert await reader == [1, 2]
    assert queue.empty()


async def test_two_waiting_readers_each_get_one_item() -> None:
    queue: Waiting[str] = Waiting()
    readers = [asyncio.ensure_future(queue.get()) for _ in range(2)]
    await asyncio.sleep(0)
    queue.put_nowait("a")
    await asyncio.sleep(0)
    queue.put_nowait("b")
    assert sorted(await asyncio.gather(*readers)) == ["a", "b"]


async def test_a_cancelled_reader_leaves_the_item_to_the_next() -> None:
    queue: Waiting[str] = Waiting()
    gone = asyncio.ensure_future(queue.get())
    stays = asyncio.ensure_future(queue.get())
    await asyncio.sleep(0)
    gone.cancel()
    await asyncio.sleep(0)
    queue.put_nowait("x")
    assert await stays == "x"
    assert gone.cancelled()


async def test_two_iterators_of_one_connection_share_its_stream() -> None:
    conn = PromptAgent("chat", ScriptedModel(["hello"]), store=InMemoryStore()).connect()
    first = asyncio.ensure_future(_drain(conn))
    second = asyncio.ensure_future(_drain(conn))
    await asyncio.sleep(0)
    await conn.send("hi")
    await conn.close()
    chunks = await first + await second
    assert sum(1 for c in chunks if type(c).__name__ == "TurnEnd") == 1
    assert (await conn.output()).finish_reason == "stop"


async def _drain(conn: AsyncIterable[object]) -> list[object]:
    return [chunk async for chunk in conn]


async def test_a_cancelled_wait_for_the_output_leaves_the_invocation_running() -> None:
    release = asyncio.Event()

    async def slow(request: ModelRequest) -> ModelResponse:
        await release.wait()
        return ModelResponse(message=Message.model("done"), finish_reason="stop")

    conn = PromptAgent("chat", ScriptedModel([slow]), store=InMemoryStore()).connect()
    await conn.send("hi")
    waiting = asyncio.ensure_future(conn.output())
    await asyncio.sleep(0.01)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    release.set()
    out = await conn.output()  # a second wait gets the output the first gave up on
    assert out.finish_reason == "stop" and out.snapshot_id is not None


async def test_an_invocation_cancelled_before_it_started_gives_a_cancelled_output() -> None:
    conn = PromptAgent("chat", ScriptedModel(["hello"]), store=InMemoryStore()).connect()
    conn.cancel()  # its task has not run yet: the done callback resolves the output
    out = await conn.output()
    assert out.finish_reason == "failed" and out.error is not None and out.error.status == "CANCELLED"


async def test_an_invocation_cancelled_while_it_runs_gives_a_cancelled_output() -> None:
    started = asyncio.Event()

    async def stuck(request: ModelRequest) -> ModelResponse:
        started.set()
        await asyncio.Event().wait()
        raise AssertionError("never answered")

    conn = PromptAgent("chat", ScriptedModel([stuck]), store=InMemoryStore()).connect()
    await conn.send("hi")
    await started.wait()
    conn.cancel()
    out = await conn.output()
    assert out.finish_reason == "failed" and out.error is not None and out.error.status == "CANCELLED"
