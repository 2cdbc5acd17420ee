"""Agents for tests/unit/test_delegation.py: the chain boss → banker (local) → approver (remote, its own server).

``approver_server`` is served by ``interlock serve delegation_apps:approver_server`` in a process of
its own; :func:`chain` builds boss and banker in any process, over one store. Every run of
``approve_payment``'s body past its approval appends a line to ``$DELEGATION_DIR/runs.log``, so a
test counts the runs across processes. Each process plays its own part of the script: ``ask``
(the turn that pauses) or ``answer`` (the resumed turn).
"""

from __future__ import annotations

import os
import pathlib
from collections.abc import Callable
from typing import Literal

from pydantic import BaseModel

from interlock import AgentServer, Message, PromptAgent, RemoteAgent, SessionStore, ToolContext, ToolRequestPart, tool
from interlock._engine.io import StreamChunk, TurnEnd
from interlock.agents._delegation import delegate
from interlock.agents._host import Host
from interlock.stores.sqlite import SQLiteStore
from interlock.testing import ScriptedModel


class Payment(BaseModel):
    to: str
    amount: int


class Approval(BaseModel):
    approved: bool


def folder() -> pathlib.Path:
    return pathlib.Path(os.environ["DELEGATION_DIR"])


def runs() -> list[str]:
    """The lines ``approve_payment`` appended, one per run of its body past the approval."""
    log = folder() / "runs.log"
    return log.read_text().splitlines() if log.exists() else []


@tool
async def approve_payment(req: Payment, ctx: ToolContext[Approval], approval: Approval | None) -> str:
    """Pay someone; a person approves first."""
    if approval is None:
        ctx.interrupt({"to": req.to, "amount": req.amount})
    with (folder() / "runs.log").open("a") as log:
        log.write(f"{req.to} {req.amount} {approval.approved}\n")
    return "paid" if approval.approved else "refused"


def call(name: str, ref: str, **input: object) -> Message:
    return Message(role="model", content=[ToolRequestPart(name=name, ref=ref, input=dict(input))])


def approver(store: SessionStore) -> PromptAgent:
    script = [call("approve_payment", "p1", to="bob", amount=5), "approver: paid bob 5"] * 5
    return PromptAgent("approver", ScriptedModel(script), tools=[approve_payment], store=store)


def dies_at(finish: str) -> Callable[[StreamChunk], StreamChunk]:
    """A chunk transform that kills the process at the end of a turn that ended ``finish``, once it committed."""

    def transform(chunk: StreamChunk) -> StreamChunk:
        if isinstance(chunk, TurnEnd) and chunk.finish_reason == finish:
            os._exit(17)
        return chunk

    return transform


def chain(
    store: SessionStore, approver_url: str, phase: Literal["ask", "answer"], *, die: bool = False
) -> tuple[PromptAgent, RemoteAgent]:
    """The boss, delegating to the banker, delegating to the remote approver (returned too, to close it).

    With ``die``, the process dies as soon as the banker's turn of this phase has committed.
    """
    remote = RemoteAgent(f"{approver_url}/approver")
    asks = phase == "ask"
    banker_script = [call("delegate_to_approver", "a1", task="pay bob 5")] if asks else ["banker: bob is paid"]
    banker = PromptAgent(
        "banker",
        ScriptedModel(banker_script),
        tools=delegate([remote]),
        store=store,
        host=Host(chunk_transform=dies_at("interrupted" if asks else "stop") if die else None),
    )
    boss_script = [call("delegate_to_banker", "b1", task="have bob paid 5")] if asks else ["boss: bob is paid"]
    ttl = 1.0 if die else 60.0  # a dying resume's claim lapses soon, so the next one takes it over
    boss = PromptAgent(
        "boss", ScriptedModel(boss_script), tools=delegate([banker]), store=store, host=Host(claim_ttl=ttl)
    )
    return boss, remote


def _approver_server() -> AgentServer | None:
    if "DELEGATION_DIR" not in os.environ:
        return None
    return AgentServer([approver(SQLiteStore(str(folder() / "approver.db")))])


approver_server = _approver_server()
