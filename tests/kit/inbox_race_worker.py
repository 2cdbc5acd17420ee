"""One approver of the inbox race (``tests/faults/test_inbox_race.py``), in a process of its own.

Usage: python inbox_race_worker.py URL PLAN WORKER WORKERS BARRIER

PLAN is JSON, one ``{"snapshot_id": ..., "token": ...}`` per repetition. For each, the approver
meets the others at a file barrier (:func:`fault_worker.meet`), then posts one approval as user
``approver-WORKER``, carrying the interrupt's resume token (as an answer link does), and prints
``{"rep", "user", "code", "body"}`` as one JSON line.
"""

from __future__ import annotations

import asyncio
import json
import pathlib
import sys
import time
from typing import Any

import httpx
from fault_worker import meet


async def main(url: str, plan_path: str, worker: int, workers: int, barrier: pathlib.Path) -> None:
    plan: list[dict[str, Any]] = json.loads(pathlib.Path(plan_path).read_text())
    user = f"approver-{worker}"
    async with httpx.AsyncClient(base_url=url, headers={"x-user": user}, timeout=60) as client:
        await client.get("/inbox/openapi.json")  # connect before the first race
        for rep, item in enumerate(plan):
            start_at = await meet(barrier, rep, worker, workers)
            await asyncio.sleep(max(0.0, start_at - time.time()))
            body = {"decision": "approve", "resume_token": item["token"]}
            answer = await client.post(f"/inbox/api/interrupts/{item['snapshot_id']}/answer", json=body)
            print(json.dumps({"rep": rep, "user": user, "code": answer.status_code, "body": answer.json()}), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), pathlib.Path(sys.argv[5])))
