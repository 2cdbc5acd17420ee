"""Racing answers to one interrupt through the inbox's HTTP API: one wins, every loser is told who.

The agent server (``interlock serve inbox_served:server --inbox``, resume tokens required) runs
in a process of its own over SQLite; eight approvers, each a process of its own with its own
identity, meet at a file barrier and post their approval of the same interrupt at once, with its
resume token, 20 times. Every transfer that runs appends a line to a file.
"""

from __future__ import annotations

import asyncio
import json
import os
import pathlib
import sys
from typing import Any

import pytest
from http_helpers import serve_process
from inbox_apps import build_agents
from where import KIT

from interlock import metadata as md
from interlock._engine.commit import claim_state
from interlock.stores.sqlite import SQLiteStore

pytestmark = pytest.mark.slow
APPROVERS = 8
REPS = 20


async def _paused(db: pathlib.Path) -> list[dict[str, Any]]:
    """``REPS`` paused transfers (to r0, r1, ...), each with its interrupt's resume token."""
    async with SQLiteStore(db) as store:
        bank = build_agents(store, tokens=True)[0]
        plan: list[dict[str, Any]] = []
        for rep in range(REPS):
            out = await bank.run(f"pay r{rep} 5")
            [part] = out.interrupts
            assert out.snapshot_id and md.resume_token(part), out
            plan.append({"snapshot_id": out.snapshot_id, "token": md.resume_token(part)})
        return plan


async def _approvers(url: str, plan: pathlib.Path, barrier: pathlib.Path) -> list[dict[str, Any]]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(KIT), os.environ.get("PYTHONPATH", "")])}
    procs = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            str(KIT / "inbox_race_worker.py"),
            *map(str, (url, plan, w, APPROVERS, barrier)),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
        )
        for w in range(APPROVERS)
    ]
    try:
        async with asyncio.timeout(120):
            outs = await asyncio.gather(*(p.communicate() for p in procs))
    finally:
        for p in procs:
            if p.returncode is None:
                p.kill()
                await p.wait()
    for p, (_, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err.decode()[-3000:]
    return [json.loads(line) for stdout, _ in outs for line in stdout.decode().splitlines()]


def _told(loser: dict[str, Any], winner: str, by: str) -> bool:
    """409 ABORTED naming the winning turn, and who answered (or that the winner is still answering)."""
    body: dict[str, Any] = loser["body"]
    details: dict[str, Any] = body.get("details") or {}
    message: str = body.get("message") or ""
    if loser["code"] != 409 or body.get("status") != "ABORTED" or details.get("winner") != winner:
        return False
    if details.get("answered_by") is None:  # refused while the winning turn still ran
        return f"is being answered (turn {winner})" in message
    return details["answered_by"] == by and f"already answered by {by}" in message


async def test_racing_answers_with_tokens_one_wins_and_every_loser_gets_409_naming_the_winner(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db, runs = tmp_path / "inbox.db", tmp_path / "runs.log"
    plan = await _paused(db)
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    (barrier := tmp_path / "barrier").mkdir()
    for name, value in (("INTERLOCK_STORE", str(db)), ("INBOX_TOKENS", "1"), ("INBOX_RUNS_LOG", str(runs))):
        monkeypatch.setenv(name, value)
    command = [sys.executable, "-m", "interlock", "serve", "inbox_served:server", "--inbox", "--port", "0"]
    with serve_process(command, cwd=KIT) as server:
        results = await _approvers(server.url, tmp_path / "plan.json", barrier)
    ran = [json.loads(line)["to"] for line in runs.read_text().splitlines()]
    problems: list[str] = []
    for rep in range(REPS):
        answers = [r for r in results if r["rep"] == rep]
        wins = [r for r in answers if r["code"] == 200]
        if len(answers) != APPROVERS or len(wins) != 1 or ran.count(f"r{rep}") != 1:
            problems.append(f"rep {rep}: {len(wins)} of {len(answers)} won, ran {ran.count(f'r{rep}')}: {answers}")
            continue
        winner, by = wins[0]["body"]["snapshot_id"], wins[0]["user"]
        assert wins[0]["body"]["answered"]["by"] == by
        for r in answers:
            if r is not wins[0] and not _told(r, winner, by):
                problems.append(f"rep {rep}: {r['user']} lost to {by} ({winner}) and was told {r['code']} {r['body']}")
    async with SQLiteStore(db) as store:  # each paused turn's claim is answered by its winner
        for rep, item in enumerate(plan):
            parent = await store.load(item["snapshot_id"])
            [won] = [r["body"]["snapshot_id"] for r in results if r["rep"] == rep and r["code"] == 200] or [None]
            if parent is None or claim_state(parent) != "answered" or parent.claimed_by != won:
                problems.append(f"rep {rep}: the paused turn is not answered by the winner {won}: {parent}")
    held = sum(r["code"] == 409 and r["body"]["details"].get("answered_by") is None for r in results)
    print(f"inbox race: {len(results)} answers, {len(problems)} problems, {held} lost while the winner ran")
    assert problems == [], "\n".join(problems[:10])
    assert sorted(ran) == sorted(f"r{rep}" for rep in range(REPS))
