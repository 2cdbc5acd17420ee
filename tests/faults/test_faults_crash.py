"""Acceptance (safety core): a resume SIGKILLed at its tool, its model call or inside its commit.

Attached and detached, ten runs each (five at a time, each on its own SQLite file or PostgreSQL schema). The
killed process used ``claim_ttl=1``. Once its lease lapses, the interrupt is answerable
again locally (``pending_interrupts``), in the inbox and over HTTP (an AgentServer on the
same store); a resume then succeeds and is the session's latest snapshot, the killed
attached turn left no row (a killed detached turn's pending row is marked failed), the
store is sound (SQLite's ``PRAGMA integrity_check``; every snapshot loads), and the
recovery's re-run of the tool is flagged with ``ctx.reclaimed_from`` naming the dead holder.
"""

from __future__ import annotations

import pathlib
import statistics

import pytest
from fault_worker import MODES, POINTS, crash_runs
from store_kinds import KINDS

pytestmark = pytest.mark.slow

RUNS = 10


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("point", POINTS)
async def test_a_killed_resume_leaves_its_interrupt_answerable_and_the_file_sound(
    tmp_path: pathlib.Path, point: str, mode: str, kind: str
) -> None:
    runs = await crash_runs(tmp_path, point, mode, RUNS, parallel=5, kind=kind)
    print(
        f"SIGKILL {mode} at {point} on {kind}: runs={len(runs)} "
        f"recovered={sum(r.resumed.get('finish') == 'stop' for r in runs)} "
        f"integrity ok={sum(r.integrity == 'ok' for r in runs)} "
        f"tool runs={[len(r.tool_runs) for r in runs]} "
        f"re-runs flagged={sum(all(x is not None for x in r.tool_runs[1:]) for r in runs)} "
        f"lapse wait median={statistics.median(r.lapse_wait for r in runs):.2f}s "
        f"wall median={statistics.median(r.wall for r in runs):.2f}s"
    )
    for run in runs:
        assert run.holder is not None, run
        assert run.local == ["t1"] and run.inbox and run.remote == ["t1"], run
        assert run.resumed["finish"] == "stop", run
        assert run.integrity == "ok", run
        assert run.problems == [], "\n".join(run.problems)
