"""A separate process for the exactly-once tests: it resumes (or pauses) a transfer on a shared store.

Usage: python race_worker.py DB LOG MODE [N]
  setup          run the first turn (it pauses for approval) and print the snapshot id
  resume SNAP N  start N concurrent resumes of SNAP and print one JSON result per line
  hang SNAP      resume SNAP with a tool that writes "started" to LOG and then hangs
"""

from __future__ import annotations

import asyncio
import json
import pathlib
import sys
import time
from typing import Any

from pydantic import BaseModel
from store_kinds import store_at

from interlock import Message, PromptAgent, Resume, ToolContext, ToolRequestPart, tool
from interlock.agents._host import Host
from interlock.stores.postgres import PostgresStore
from interlock.stores.sqlite import SQLiteStore
from interlock.testing import ScriptedModel


class Transfer(BaseModel):
    to: str
    amount: float


class Approval(BaseModel):
    approved: bool


def bank(
    store: SQLiteStore | PostgresStore,
    log: pathlib.Path,
    *,
    pause: bool = False,
    hang: bool = False,
    claim_ttl: float = 60.0,
) -> PromptAgent:
    """The bank agent: its model pauses on a transfer (``pause``) or answers \"paid\" after a resume."""

    @tool(idempotent=True)
    async def transfer(req: Transfer, ctx: ToolContext[Any], approval: Approval | None) -> str:
        """Move money once approved."""
        if approval is None:
            ctx.interrupt({"to": req.to, "amount": req.amount})
        with log.open("a") as f:
            note = f" (reclaimed from {ctx.reclaimed_from})" if ctx.reclaimed_from else ""
            f.write(f"transfer {req.to} {req.amount}{note}\n")
        if hang:
            await asyncio.sleep(3600)
        return "sent"

    first = Message(
        role="model", content=[ToolRequestPart(name="transfer", ref="t1", input={"to": "bob", "amount": 5})]
    )
    script = [first] if pause else ["paid"]
    return PromptAgent("bank", ScriptedModel(script), tools=[transfer], store=store, host=Host(claim_ttl=claim_ttl))


APPROVE = Resume(
    restart=[
        ToolRequestPart(
            name="transfer", ref="t1", input={"to": "bob", "amount": 5}, metadata={"resumed": {"approved": True}}
        )
    ]
)


async def main(argv: list[str]) -> None:
    db, log, mode = argv[0], pathlib.Path(argv[1]), argv[2]
    async with store_at(db) as store:
        if mode == "setup":
            out = await bank(store, log, pause=True).run("pay bob 5")
            print(out.snapshot_id, flush=True)
        elif mode == "resume":
            snap, n, start_at = argv[3], int(argv[4]), float(argv[5])
            agents = [bank(store, log) for _ in range(n)]
            time.sleep(max(0.0, start_at - time.time()))
            outs = await asyncio.gather(
                *(a.run(resume=APPROVE, snapshot_id=snap, raise_on_error=False) for a in agents)
            )
            for out in outs:
                err = out.error
                print(
                    json.dumps(
                        {
                            "finish": out.finish_reason,
                            "snapshot": out.snapshot_id,
                            "status": err.status if err else None,
                            "message": err.message if err else None,
                        }
                    ),
                    flush=True,
                )
        elif mode == "hang":
            await bank(store, log, hang=True, claim_ttl=2.0).run(resume=APPROVE, snapshot_id=argv[3])


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
