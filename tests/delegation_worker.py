"""Answer a propagated interrupt from another process: ``python delegation_worker.py DB APPROVER_URL SNAPSHOT``.

Builds a fresh chain (tests/delegation_apps.py) on a fresh store object over the same SQLite
file, finds what the boss's snapshot waits on, approves it through the boss, and prints the
outcome as JSON.
"""

from __future__ import annotations

import asyncio
import json
import sys

from delegation_apps import Approval, approve_payment, chain

from interlock import Resume
from interlock.stores.sqlite import SQLiteStore


async def main(db: str, approver_url: str, snapshot_id: str) -> None:
    async with SQLiteStore(db) as store:
        boss, remote = chain(store, approver_url, "answer")
        try:
            pending = await boss.pending_interrupts(snapshot_id)
            calls = [c for c in map(approve_payment.interrupted, pending) if c is not None]
            resume = Resume(restart=[c.restart(Approval(approved=True)) for c in calls])
            out = await boss.run(resume=resume, snapshot_id=snapshot_id)
        finally:
            await remote.aclose()
    print(json.dumps({"claimed": len(calls), "finish_reason": out.finish_reason, "text": out.text}))


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
