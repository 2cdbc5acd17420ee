"""The inbox's HTTP API on SQLite: 1,000 pending interrupts, the first page listed (ms, target < 50 ms).

A real SQLite file holds ``--pending`` paused turns (two agents: a bank whose transfers
ask, an ops agent whose deletes are held) and ``--history`` finished sessions besides;
the inbox runs on uvicorn in this process and an HTTP client asks for
``GET /api/interrupts?limit=50`` (oldest first, newest first, filtered by tool, by agent),
``--requests`` times each. Printed: the median and the 95th percentile of each, in ms.
With ``--check`` it exits 1 when the median first page is over the target (the figure
depends on the machine's load, which it prints).

    python bench/inbox_http.py
    python bench/inbox_http.py --pending 5000 --requests 50
"""

from __future__ import annotations

import argparse
import asyncio
import os
import pathlib
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import uvicorn
from pydantic import BaseModel

from interlock import Agent, Message, PromptAgent, SQLiteStore, ToolContext, ToolRequestPart, tool
from interlock.http._inbox import InboxApp
from interlock.inbox._inbox import Inbox
from interlock.models import ModelRequest, ModelResponse
from interlock.testing import ScriptedModel
from interlock.tools._middleware import tool_approval

TARGET_MS = 50.0


class Transfer(BaseModel):
    to: str
    amount: float


class Approval(BaseModel):
    approved: bool


@tool
async def transfer(req: Transfer, ctx: ToolContext[Any], approval: Approval | None) -> str:
    """Move money; asks a person first."""
    if approval is None:
        ctx.interrupt({"question": f"Send {req.amount:g} to {req.to}?"})
    return "sent" if approval.approved else "cancelled"


@tool
def delete_file(path: str) -> str:
    """Delete a file (held for approval)."""
    return f"deleted {path}"


def plan(request: ModelRequest) -> ModelResponse:
    last = request.messages[-1]
    if last.role == "tool":
        return ModelResponse(message=Message.model("done"))
    calls = {
        "pay": ToolRequestPart(name="transfer", ref="t1", input={"to": "bob", "amount": 5}),
        "delete": ToolRequestPart(name="delete_file", ref="d1", input="a.txt"),
    }
    call = calls.get(last.text)
    return ModelResponse(message=Message(role="model", content=[call]) if call else Message.model("hello"))


def agents(store: SQLiteStore, turns: int) -> list[Agent]:
    return [
        PromptAgent("bank", ScriptedModel([plan] * turns), tools=[transfer], store=store),
        PromptAgent(
            "ops", ScriptedModel([plan] * turns), tools=[delete_file], middleware=[tool_approval()], store=store
        ),
    ]


async def seed(bank: Agent, ops: Agent, pending: int, history: int) -> None:
    for i in range(pending):
        out = await (bank.run("pay") if i % 2 else ops.run("delete"))
        assert out.finish_reason == "interrupted"
    for _ in range(history):
        assert (await bank.run("hello")).finish_reason == "stop"


@asynccontextmanager
async def serve(app: Any) -> AsyncIterator[str]:
    """The app on uvicorn at a free 127.0.0.1 port."""
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off"))
    task = asyncio.ensure_future(server.serve())
    while not server.started:
        await asyncio.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
    finally:
        server.should_exit = True
        await task


async def measure(url: str, params: dict[str, str], requests: int) -> tuple[float, float, int]:
    times: list[float] = []
    async with httpx.AsyncClient(base_url=url, headers={"authorization": "Bearer bench"}, timeout=60) as c:
        count = 0
        for _ in range(requests + 3):  # three warm-ups
            started = time.perf_counter()
            r = await c.get("/api/interrupts", params=params)
            times.append((time.perf_counter() - started) * 1000)
            r.raise_for_status()
            count = len(r.json()["items"])
    times = sorted(times[3:])
    return statistics.median(times), times[int(len(times) * 0.95) - 1], count


async def main() -> int:
    parser = argparse.ArgumentParser(description="the inbox HTTP API listing benchmark")
    parser.add_argument("--pending", type=int, default=1000)
    parser.add_argument("--history", type=int, default=200)
    parser.add_argument("--requests", type=int, default=30)
    parser.add_argument("--check", action="store_true", help="exit 1 when the first page is over the target")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        async with SQLiteStore(pathlib.Path(tmp) / "inbox.db") as store:
            bank, ops = agents(store, args.pending + args.history)
            started = time.perf_counter()
            await seed(bank, ops, args.pending, args.history)
            print(
                f"seeded {args.pending} pending interrupts and {args.history} finished sessions in "
                f"{time.perf_counter() - started:.1f} s"
            )
            app = InboxApp(Inbox(store, agents=[bank, ops]), token="bench", user="bench")
            first = 0.0
            async with serve(app) as url:
                for label, params in (
                    ("first page, oldest first", {"limit": "50"}),
                    ("first page, newest first", {"limit": "50", "order": "newest"}),
                    ("first page, tool=transfer", {"limit": "50", "tool": "transfer"}),
                    ("first page, agent=ops", {"limit": "50", "agent": "ops"}),
                ):
                    median, p95, count = await measure(url, params, args.requests)
                    first = first or median
                    print(f"inbox_http {label:28s} {count:3d} items  median {median:6.1f} ms  p95 {p95:6.1f} ms")
    verdict = "ok" if first < TARGET_MS else "OVER TARGET"
    load = os.getloadavg()[0]
    print(
        f"inbox_http first page of {args.pending} pending: {first:.1f} ms (target < {TARGET_MS:.0f} ms): {verdict} "
        f"(load average {load:.1f} on {os.cpu_count()} cores)"
    )
    return 0 if first < TARGET_MS or not args.check else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
