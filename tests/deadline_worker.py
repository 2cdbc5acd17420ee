"""A separate process for the deadline race: it sweeps one SQLite file over and over.

Usage: python deadline_worker.py DB LOG POLICY SECONDS
The lease is tiny, so both workers take the same timers and race on applying them: the
claim (reject, respond) or the escalation mark (escalate) must keep each to one.
"""

from __future__ import annotations

import asyncio
import pathlib
import sys
import time

from notify_app import POLICIES, bank

from interlock.deadlines import sweep
from interlock.stores.sqlite import SQLiteStore


async def main(db: str, log: str, policy: str, seconds: float) -> None:
    async with SQLiteStore(db) as store:
        agent = bank(store, log=pathlib.Path(log), expires_in=1, on_expire=POLICIES[policy])
        end = time.monotonic() + seconds
        applied = 0
        while time.monotonic() < end:
            done = await sweep(store, [agent], lease=0.001, retry_base=0.05)
            applied += sum(d.result == "applied" for d in done)
            await asyncio.sleep(0.01)
        print(f"applied {applied}", flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])))
