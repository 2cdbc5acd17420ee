"""Agents for the A2A tests, served by ``interlock serve a2a_apps:agents --a2a`` (``$A2A_DIR`` holds the store).

``banker`` pays through ``transfer``, which pauses for an approval; every run of its body past
the approval appends a line to ``$A2A_DIR/runs.log`` (append-only: the tests count runs across
processes). ``asker`` pauses on ``ask``, a question whose answer is text. Their model is
:class:`Turns`: a user message calls the agent's tool, a tool message gets a text reply, so
any number of tasks run in any order.
"""

from __future__ import annotations

import json
import os
import pathlib

from pydantic import BaseModel

from interlock import Message, PromptAgent, TextPart, ToolContext, ToolRequestPart, interrupt_tool, tool
from interlock.models._base import ModelRequest, ModelResponse
from interlock.stores.sqlite import SQLiteStore


class Payment(BaseModel):
    to: str
    amount: int


class Approval(BaseModel):
    approved: bool


def folder() -> pathlib.Path:
    return pathlib.Path(os.environ["A2A_DIR"])


def runs(directory: pathlib.Path | None = None) -> list[str]:
    """The lines ``transfer`` appended, one per run of its body past the approval."""
    log = (directory or folder()) / "runs.log"
    return log.read_text().splitlines() if log.exists() else []


@tool
async def transfer(req: Payment, ctx: ToolContext[Approval], approval: Approval | None) -> str:
    """Send money; a person approves first."""
    if approval is None:
        ctx.interrupt({"message": f"Send {req.amount} to {req.to}?"})
    with (folder() / "runs.log").open("a") as log:
        log.write(f"{req.to} {req.amount} {approval.approved}\n")
    return "sent" if approval.approved else "not sent"


class Question(BaseModel):
    question: str


ask = interrupt_tool(
    "ask", input=Question, output=str, description="ask the person", data=lambda q: {"question": q.question}
)


class Turns:
    """A user message calls ``tool`` (``to`` = the text); a tool message is answered with its output."""

    def __init__(self, tool: str) -> None:
        self.tool = tool

    @property
    def name(self) -> str:
        return "test/turns"

    async def generate(self, request: ModelRequest, *, on_chunk: object = None) -> ModelResponse:
        last = request.messages[-1]
        if last.role == "tool":
            outputs = [getattr(p, "output", None) for p in last.content]
            return ModelResponse(message=Message(role="model", content=[TextPart(text=f"done: {json.dumps(outputs)}")]))
        text = last.text
        args = {"to": text, "amount": 5} if self.tool == "transfer" else {"question": f"what about {text}?"}
        call = ToolRequestPart(name=self.tool, ref="t1", input=args)
        return ModelResponse(message=Message(role="model", content=[call]), finish_reason="stop")


def build() -> list[PromptAgent]:
    store = SQLiteStore(str(folder() / "store.db"))
    banker = PromptAgent("banker", Turns("transfer"), tools=[transfer], store=store, description="pays people")
    asker = PromptAgent("asker", Turns("ask"), tools=[ask], store=store, description="asks a question")
    return [banker, asker]


agents = build() if "A2A_DIR" in os.environ else []
