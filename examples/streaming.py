"""Stream a turn: the model's text arrives chunk by chunk, then the output."""

import asyncio

from interlock import InMemoryStore, PromptAgent, StreamChunk, TextPart
from interlock.models import ModelChunk
from interlock.testing import ScriptedModel


def show(chunk: StreamChunk) -> None:
    if isinstance(chunk, ModelChunk):
        print("chunk:", repr(chunk.text))


async def main() -> None:
    pieces = [ModelChunk(role="model", index=0, content=[TextPart(text=t)]) for t in ("Hello, ", "Ann.")]
    agent = PromptAgent(
        "greeter", ScriptedModel(["Hello, Ann.", "Hello again."], chunks=[pieces]), store=InMemoryStore()
    )
    out = await agent.run("Hi, I am Ann", on_chunk=show)
    print("output:", out.text)

    async with agent.connect(session_id=out.session_id) as conn:  # the same, as a connection
        await conn.send("Again")
        await conn.close()
        async for chunk in conn:
            print("event:", type(chunk).__name__)
        print("finish:", (await conn.output()).finish_reason)


asyncio.run(main())
