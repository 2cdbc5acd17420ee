"""One voter of the quorum race (``tests/faults/test_policy_quorum_race.py``), in a process of its own.

Usage: python policy_vote_worker.py LOCATION PLAN VOTER WORKER WORKERS BARRIER

PLAN is JSON, one snapshot id per repetition. For each, the voter (a person of
``policy_bank.PEOPLE``) meets the others at a file barrier, then approves the interrupt through
its own inbox over its own connection to the store, and prints ``{"rep", "voter", "outcome"}``:
the finish reason, or the refusal's status. Transfers that run append to ``$POLICY_RUNS``.
"""

from __future__ import annotations

import asyncio
import json
import pathlib
import sys
import time

from fault_worker import meet
from policy_bank import PEOPLE, bank
from store_kinds import store_at

from interlock.errors import InterlockError
from interlock.inbox._inbox import Approve, Inbox


async def main(location: str, plan_path: str, voter: str, worker: int, workers: int, barrier: pathlib.Path) -> None:
    plan: list[str] = json.loads(pathlib.Path(plan_path).read_text())
    async with store_at(location) as store:
        inbox = Inbox(store, agents=[bank(store)])
        for rep, snapshot_id in enumerate(plan):
            start_at = await meet(barrier, rep, worker, workers)
            await asyncio.sleep(max(0.0, start_at - time.time()))
            try:
                out = await inbox.answer(snapshot_id, Approve(), identity=PEOPLE[voter])
                outcome = out.finish_reason
            except InterlockError as exc:
                outcome = exc.status
            print(json.dumps({"rep": rep, "voter": voter, "outcome": outcome}), flush=True)


if __name__ == "__main__":
    args = sys.argv[1:]
    asyncio.run(main(args[0], args[1], args[2], int(args[3]), int(args[4]), pathlib.Path(args[5])))
