"""Exactly-once interrupt resolution across processes, and recovery after a crash (SQLite and PostgreSQL)."""

from __future__ import annotations

import asyncio
import json
import os
import pathlib
import signal
import subprocess
import sys
import time
from typing import Any

import pytest
from race_worker import APPROVE, bank
from store_kinds import KINDS, integrity, locate, store_at
from where import KIT

WORKER = KIT / "race_worker.py"
pytestmark = pytest.mark.slow


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(WORKER.parent), os.environ.get("PYTHONPATH", "")])}


def _setup(db: pathlib.Path, log: pathlib.Path) -> str:
    out = subprocess.run(
        [sys.executable, WORKER, db, log, "setup"], capture_output=True, text=True, env=_env(), check=True
    )
    return out.stdout.strip()


@pytest.mark.parametrize("kind", KINDS)
def test_eight_resumes_from_two_processes_exactly_one_wins(tmp_path: pathlib.Path, kind: str) -> None:
    db, log = locate(kind, tmp_path / "s.db"), tmp_path / "side-effects.log"
    snap = _setup(db, log)
    start_at = f"{time.time() + 1.5:.3f}"
    procs = [
        subprocess.Popen(
            [sys.executable, WORKER, db, log, "resume", snap, "4", start_at],
            stdout=subprocess.PIPE,
            text=True,
            env=_env(),
        )
        for _ in range(2)
    ]
    results: list[dict[str, Any]] = []
    for p in procs:
        stdout, _ = p.communicate(timeout=60)
        assert p.returncode == 0
        results += [json.loads(line) for line in stdout.splitlines()]
    assert len(results) == 8
    winners = [r for r in results if r["finish"] == "stop"]
    losers = [r for r in results if r["finish"] != "stop"]
    assert len(winners) == 1, results
    assert all(r["status"] == "ABORTED" and winners[0]["snapshot"] in r["message"] for r in losers), results
    assert log.read_text().splitlines() == ["transfer bob 5.0"]


@pytest.mark.parametrize("kind", KINDS)
async def test_sigkill_mid_turn_leaves_the_store_readable_and_the_claim_recoverable(
    tmp_path: pathlib.Path, kind: str
) -> None:
    db, log = locate(kind, tmp_path / "s.db"), tmp_path / "side-effects.log"
    snap = _setup(db, log)
    proc = subprocess.Popen([sys.executable, WORKER, db, log, "hang", snap], env=_env())
    try:
        deadline = time.time() + 30
        while not (log.exists() and log.read_text()):
            assert time.time() < deadline, "the resumed tool never started"
            await asyncio.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    assert await integrity(db) == "ok"
    async with store_at(db) as store:
        parent = await store.load(snap)
        assert parent is not None and parent.status == "completed" and parent.claimed_by is not None
        # While the dead turn's lease (2 s, refreshed every 0.67 s) runs, a second resume is refused.
        blocked = await bank(store, log, claim_ttl=60).run(resume=APPROVE, snapshot_id=snap, raise_on_error=False)
        assert blocked.error is not None and blocked.error.status == "ABORTED"
        assert parent.claimed_by in blocked.error.message
        # Once the claim expires, the interrupt is resumable again, and the takeover is recorded.
        await asyncio.sleep(2.2)
        done = await bank(store, log, claim_ttl=1.0).run(resume=APPROVE, snapshot_id=snap)
        assert done.finish_reason == "stop", done.error
        after = await store.load(snap)
        assert after is not None and after.claimed_by == done.snapshot_id
        assert after.metadata is not None and after.metadata["reclaimedFrom"] == parent.claimed_by
    # The takeover is not silent: the tool itself is told whose half-done run it may be repeating.
    assert log.read_text().splitlines() == [
        "transfer bob 5.0",
        f"transfer bob 5.0 (reclaimed from {parent.claimed_by})",
    ]
