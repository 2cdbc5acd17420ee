"""Detach a turn (it runs in the background), wait for one, abort another."""

import asyncio

from interlock import InMemoryStore, Message, PromptAgent
from interlock.models import ModelRequest, ModelResponse
from interlock.testing import ScriptedModel


async def slow_report(request: ModelRequest) -> ModelResponse:
    await asyncio.sleep(0.2)  # a long model call
    return ModelResponse(message=Message.model("Q3 report ready."), finish_reason="stop")


async def never_done(request: ModelRequest) -> ModelResponse:
    await asyncio.sleep(3600)
    raise AssertionError("aborted before this")


async def main() -> None:
    agent = PromptAgent("reporter", ScriptedModel([slow_report, never_done]), store=InMemoryStore())
    out = await agent.run("Prepare the quarterly report", detach=True)  # returns at once
    print("detached:", out.snapshot_id is not None)
    snap = await agent.wait(out.snapshot_id or "", timeout=60)
    print("first:", snap.status)

    out = await agent.run("And the yearly one", detach=True, session_id=snap.session_id)
    previous = await agent.abort(out.snapshot_id or "")  # flips pending -> aborted, cancels the task
    snap = await agent.wait(out.snapshot_id or "", timeout=60)
    print("second:", previous, "->", snap.status)


asyncio.run(main())
