"""The agents the worker tests serve and run, in every process (``interlock serve`` and ``interlock worker``).

``$INTERLOCK_TEST_WORKERS_DSN`` names the store; ``$INTERLOCK_TEST_WORKERS_LOG`` the
append-only file every tool body (and every turn start) writes one line to:
``<what> <session id> <pid> <unix time>``, so a test counts body runs across processes.

* ``errand``: a turn calls ``pay`` (logs, returns), then ``wait`` (logs, sleeps
  ``$INTERLOCK_TEST_WORKERS_SLEEP`` seconds), then answers ``done``. Neither tool is
  idempotent: a re-run after a crash replays ``pay`` from the journal and pauses ``wait``
  as in doubt. A cancelled ``wait`` logs ``cancelled``.
* ``quick``: a turn logs ``start`` from its model call and answers at once (latency).
"""

from __future__ import annotations

import asyncio
import os
import pathlib
import time
from typing import Any

from pydantic import BaseModel
from workers_fleet import DSN, LOG, SLEEP

from interlock import Message, PromptAgent, ToolContext, ToolRequestPart, tool
from interlock.agents._host import Host
from interlock.models import ChunkCallback, ModelRequest, ModelResponse
from interlock.stores.postgres import PostgresStore


def record(what: str, session_id: str | None) -> None:
    with pathlib.Path(os.environ[LOG]).open("a") as f:  # O_APPEND: one whole line per write
        f.write(f"{what} {session_id or '-'} {os.getpid()} {time.time():.6f}\n")


class Note(BaseModel):
    text: str


@tool
async def pay(note: Note, ctx: ToolContext[Any]) -> str:
    """Pay (logs one line per body run)."""
    record("pay", ctx.session.session_id if ctx.session else None)
    return f"paid {note.text}"


@tool(name="wait")
async def wait_a_while(note: Note, ctx: ToolContext[Any]) -> str:
    """Wait a while (logs one line per body run, then sleeps)."""
    session_id = ctx.session.session_id if ctx.session else None
    record("wait", session_id)
    try:
        await asyncio.sleep(float(os.environ.get(SLEEP, "0")))
    except asyncio.CancelledError:
        record("cancelled", session_id)
        raise
    return "waited"


def _call(name: str) -> ModelResponse:
    return ModelResponse(
        message=Message(role="model", content=[ToolRequestPart(name=name, ref=name, input={"text": name})])
    )


class Errands:
    """Calls ``pay``, then ``wait``, then answers ``done`` (the next step read from the last message)."""

    name = "test/errands"

    async def generate(self, request: ModelRequest, *, on_chunk: ChunkCallback | None = None) -> ModelResponse:
        last = request.messages[-1]
        done = {p.name for p in last.tool_responses} if last.role == "tool" else set[str]()
        if last.role == "user":
            return _call("pay")
        if "pay" in done:
            return _call("wait")
        return ModelResponse(message=Message.model("done"))


class Quick:
    """Logs ``start`` on each call and answers at once."""

    name = "test/quick"

    async def generate(self, request: ModelRequest, *, on_chunk: ChunkCallback | None = None) -> ModelResponse:
        record("start", None)
        return ModelResponse(message=Message.model("ok"))


store = PostgresStore(os.environ[DSN])
agents = [
    PromptAgent("errand", Errands(), tools=[pay, wait_a_while], store=store, host=Host(heartbeat_interval=1.0)),
    PromptAgent("quick", Quick(), store=store, host=Host(heartbeat_interval=1.0)),
]
