"""Run the chain's turns in a process of its own: ``python delegation_worker.py DB APPROVER_URL ID [MODE]``.

``answer`` (the default) answers a propagated interrupt by snapshot id ``ID``; ``ask`` starts the
first turn in session ``ID``. ``die`` (answer) and ``ask-die`` die once the banker's turn has committed;
``race`` answers once ``$DELEGATION_DIR/go`` exists (each racer touches ``ready-<pid>`` first).

Builds a fresh chain (tests/kit/delegation_apps.py) on a fresh store object over the same SQLite
file, finds what the boss's snapshot waits on, approves it through the boss, and prints the
outcome as JSON. With ``die`` the process dies once the banker's resumed turn has committed
(before the boss's turn commits).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys

from delegation_apps import Approval, approve_payment, chain, folder

from interlock import Resume
from interlock.stores.sqlite import SQLiteStore


async def ask(db: str, approver_url: str, session_id: str, mode: str) -> None:
    async with SQLiteStore(db) as store:
        boss, remote = chain(store, approver_url, "ask", die=mode == "ask-die")
        try:
            out = await boss.run("have bob paid", session_id=session_id)
        finally:
            await remote.aclose()
    refs = [p.ref for p in out.interrupts]
    print(json.dumps({"finish_reason": out.finish_reason, "snapshot_id": out.snapshot_id, "refs": refs}))


async def _start_together() -> None:
    (folder() / f"ready-{os.getpid()}").touch()
    while not (folder() / "go").exists():
        await asyncio.sleep(0.005)


async def main(db: str, approver_url: str, snapshot_id: str, mode: str = "") -> None:
    if mode.startswith("ask"):
        return await ask(db, approver_url, snapshot_id, mode)
    async with SQLiteStore(db) as store:
        boss, remote = chain(store, approver_url, "answer", die=mode == "die")
        try:
            pending = await boss.pending_interrupts(snapshot_id)
            calls = [c for c in map(approve_payment.interrupted, pending) if c is not None]
            resume = Resume(restart=[c.restart(Approval(approved=True)) for c in calls])
            if mode == "race":  # every racer has read the interrupt: all answer at once
                await _start_together()
            out = await boss.run(resume=resume, snapshot_id=snapshot_id, raise_on_error=False)
        finally:
            await remote.aclose()
    if out.error is not None:  # a racing answer that lost, say
        print(json.dumps({"claimed": len(calls), "error": out.error.status}))
        return
    print(json.dumps({"claimed": len(calls), "finish_reason": out.finish_reason, "text": out.text}))


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
