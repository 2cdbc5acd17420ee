"""The queue of an invocation's turns and stream chunks (interlock._engine.io.Waiting)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable

from interlock import InMemoryStore, PromptAgent
from interlock._engine.io import Waiting
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
