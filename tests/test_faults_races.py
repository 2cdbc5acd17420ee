"""Acceptance (safety core): N concurrent resumes of one paused snapshot, in one process and across four.

Every repetition resumes its own paused snapshot (all 20 per N are set up first); the
cross-process runs use four long-lived workers that meet at a file barrier before each
repetition. Exactly one resume wins, the tool body runs once (counted in an append-only
file), and every loser ends ABORTED naming the winner, which is a completed child of the
paused snapshot after the race.
"""

from __future__ import annotations

import pathlib

import pytest
from fault_worker import RaceFigures, pause_many, race_across_processes, race_in_process
from store_kinds import KINDS, locate

pytestmark = pytest.mark.slow

REPS = 20


def _check(fig: RaceFigures) -> None:
    print(
        f"race {fig.where}: N={fig.n} reps={fig.reps} resumes={fig.resumes} winners={fig.winners} "
        f"aborted={fig.aborted} (winner in details: {fig.named_in_details}, while it ran: "
        f"{fig.lost_while_running}) winning workers={sorted(fig.winning_workers)} tool runs={fig.tool_runs} "
        f"wall={fig.wall:.2f}s"
    )
    assert fig.problems == [], "\n".join(fig.problems[:20])
    assert fig.resumes == REPS * fig.n
    assert fig.winners == REPS
    assert fig.tool_runs == REPS
    assert fig.aborted == REPS * (fig.n - 1)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("n", [2, 8, 64])
async def test_concurrent_resumes_in_one_process_exactly_one_wins(tmp_path: pathlib.Path, n: int, kind: str) -> None:
    db, log = locate(kind, tmp_path / "s.db"), tmp_path / "tool-runs.log"
    snaps = await pause_many(db, REPS)
    _check(await race_in_process(db, log, snaps, n))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("n", [2, 8, 64])
async def test_concurrent_resumes_across_four_processes_exactly_one_wins(
    tmp_path: pathlib.Path, n: int, kind: str
) -> None:
    db, log = locate(kind, tmp_path / "s.db"), tmp_path / "tool-runs.log"
    snaps = await pause_many(db, REPS)
    _check(await race_across_processes(db, log, snaps, n, workers=4, timeout=120))
