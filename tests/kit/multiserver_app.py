"""The agents the multi-server tests serve from several ``interlock serve`` processes on one store.

Served: ``MULTI_STORE=<location> MULTI_LOG=<file> interlock serve multiserver_app:server --inbox``
(``MULTI_STORE`` is a :mod:`store_kinds` location: a SQLite file, or a file naming a PostgreSQL
schema). Every tool run appends ``<event> <name> <pid>`` to ``MULTI_LOG``, so a test counts runs
across processes.

* ``bank``: "pay NAME" asks to transfer to NAME; the transfer pauses for approval, then runs.
* ``slow``: "hold NAME" runs a tool that waits until the file ``NAME.gate`` beside the log
  exists (logging ``started`` first and ``cancelled`` if its turn is cancelled, e.g. by an
  abort), for detached turns.

The context hook takes ``X-User`` as the identity (``anonymous`` without one).
"""

from __future__ import annotations

import asyncio
import os
import pathlib
from typing import Any

from pydantic import BaseModel
from store_kinds import store_at

from interlock import AgentServer, Message, PromptAgent, ToolContext, ToolRequestPart, tool
from interlock.http._server import RequestInfo
from interlock.models import ModelRequest, ModelResponse
from interlock.stores import SessionStore


class Transfer(BaseModel):
    to: str
    amount: float


class Approval(BaseModel):
    approved: bool


def note(log: pathlib.Path, event: str, name: str) -> None:
    with log.open("a") as f:
        f.write(f"{event} {name} {os.getpid()}\n")


class CallModel:
    """Calls ``tool`` with the user message's last word as the name; after the tool, says what it answered."""

    def __init__(self, tool: str) -> None:
        self.name = f"test/{tool}"
        self.tool = tool

    async def generate(self, request: ModelRequest, *, on_chunk: Any = None) -> ModelResponse:
        last = request.messages[-1]
        if last.role == "user":
            name = last.text.split()[-1]
            args: dict[str, Any] = {"to": name, "amount": 5} if self.tool == "transfer" else {"name": name}
            call = ToolRequestPart(name=self.tool, ref="c1", input=args)
            return ModelResponse(message=Message(role="model", content=[call]), finish_reason="stop")
        outputs = [p.output for p in last.content if p.kind == "tool_response"]
        return ModelResponse(message=Message.model(f"tool said: {outputs}"), finish_reason="stop")


def agents(store: SessionStore, log: pathlib.Path) -> list[PromptAgent]:
    @tool
    async def transfer(req: Transfer, ctx: ToolContext[Any], approval: Approval | None) -> str:
        """Move money once approved."""
        if approval is None:
            ctx.interrupt({"to": req.to, "amount": req.amount})
        note(log, "transfer", req.to)
        return "sent" if approval.approved else "cancelled"

    @tool
    async def hold(input: dict[str, Any]) -> str:
        """Wait for the gate file."""
        name = str(input["name"])
        note(log, "started", name)
        gate = log.with_name(f"{name}.gate")
        try:
            while not gate.exists():
                await asyncio.sleep(0.01)
        except asyncio.CancelledError:
            note(log, "cancelled", name)
            raise
        note(log, "finished", name)
        return "opened"

    return [
        PromptAgent("bank", CallModel("transfer"), tools=[transfer], store=store),
        PromptAgent("slow", CallModel("hold"), tools=[hold], store=store),
    ]


def who(info: RequestInfo) -> dict[str, Any]:
    return {"identity": info.headers.get("x-user") or "anonymous"}


if os.environ.get("MULTI_STORE"):
    server = AgentServer(
        agents(store_at(os.environ["MULTI_STORE"]), pathlib.Path(os.environ["MULTI_LOG"])), context=who
    )
