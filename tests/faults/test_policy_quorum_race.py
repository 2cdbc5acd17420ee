"""A 2-of-3 quorum with the voters racing from three processes: exactly one resume, one run, every vote once.

Each voter (bob, carol, dave: treasury) is a process of its own with its own store connection;
they meet at a file barrier and approve the same 25 000 transfer at once, 20 times, on SQLite
and on PostgreSQL. Per repetition: one answer resumes the turn (``stop``) and the transfer runs
once; one is a recorded vote (``interrupted``); the third loses to the resume (ABORTED). The
interrupted snapshot keeps exactly the two votes that counted, each voter once.
"""

from __future__ import annotations

import asyncio
import json
import os
import pathlib
import sys
from typing import Any

import pytest
from policy_bank import ALICE, bank
from store_kinds import KINDS, locate, store_at
from where import KIT

from interlock.records.snapshots import claim_state

pytestmark = pytest.mark.slow
VOTERS = ("bob", "carol", "dave")
REPS = 20


async def _paused(location: pathlib.Path) -> list[str]:
    async with store_at(location) as store:
        agent = bank(store)
        ids: list[str] = []
        for rep in range(REPS):
            out = await agent.run(f"pay r{rep} 25000", context={"identity": ALICE})
            assert out.finish_reason == "interrupted" and out.snapshot_id, out
            ids.append(out.snapshot_id)
        return ids


async def _voters(location: pathlib.Path, plan: pathlib.Path, barrier: pathlib.Path) -> list[dict[str, Any]]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(KIT), os.environ.get("PYTHONPATH", "")])}
    procs = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            str(KIT / "policy_vote_worker.py"),
            *map(str, (location, plan, voter, w, len(VOTERS), barrier)),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
        )
        for w, voter in enumerate(VOTERS)
    ]
    try:
        async with asyncio.timeout(240):
            outs = await asyncio.gather(*(p.communicate() for p in procs))
    finally:
        for p in procs:
            if p.returncode is None:
                p.kill()
                await p.wait()
    for p, (_, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err.decode()[-3000:]
    return [json.loads(line) for stdout, _ in outs for line in stdout.decode().splitlines()]


@pytest.mark.parametrize("kind", KINDS)
async def test_racing_voters_resume_exactly_once(
    kind: str, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    location = locate(kind, tmp_path / "store")
    runs = tmp_path / "runs"
    monkeypatch.setenv("POLICY_RUNS", str(runs))
    plan = await _paused(location)
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    (barrier := tmp_path / "barrier").mkdir()
    results = await _voters(location, tmp_path / "plan.json", barrier)
    ran = runs.read_text().splitlines() if runs.exists() else []
    problems: list[str] = []
    async with store_at(location) as store:
        for rep, snapshot_id in enumerate(plan):
            answers = sorted((r["outcome"], r["voter"]) for r in results if r["rep"] == rep)
            outcomes = [o for o, _ in answers]
            parent = await store.load(snapshot_id)
            assert parent is not None
            votes = [v["by"] for v in (parent.metadata or {}).get("votes", {}).get("transfer#t1", [])]
            counted = sorted(v for o, v in answers if o in ("stop", "interrupted"))
            if outcomes != ["ABORTED", "interrupted", "stop"] or ran.count(f"r{rep} 25000.0") != 1:
                problems.append(f"rep {rep}: {answers}, ran {ran.count(f'r{rep} 25000.0')}")
            elif sorted(votes) != counted or len(set(votes)) != 2 or claim_state(parent) != "answered":
                problems.append(f"rep {rep}: votes {votes} for {answers}, claim {claim_state(parent)}")
    assert problems == [], "\n".join(problems)
    assert len(ran) == REPS
