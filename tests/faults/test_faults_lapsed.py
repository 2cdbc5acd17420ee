"""Acceptance (safety core): a claim that lapses never lets two resumes commit.

(a) A synchronous tool sleeping 3 s with ``claim_ttl=1`` runs off the event loop, so its
lease stays fresh: a second resume 1.5 s in (another store object on the same file) is
refused. (b) A resumer process SIGSTOPped in its tool for 2.5 s (``claim_ttl=1``) loses
its lease; another resume takes over and commits; continued, the stopped one ends ABORTED
and writes nothing. Five runs each, in parallel, each on its own SQLite file or PostgreSQL schema.
"""

from __future__ import annotations

import asyncio
import pathlib

import pytest
from fault_worker import LapseRun, lapse_blocking_tool, lapse_stopped_process
from store_kinds import KINDS

pytestmark = pytest.mark.slow

RUNS = 5


def _one_commit(run: LapseRun) -> tuple[dict[str, object], dict[str, object]]:
    winner, loser = run.winner, run.loser
    assert run.commits == 1 and winner is not None and loser is not None, run
    assert loser["status"] == "ABORTED", run
    assert loser["winner"] == winner["snapshot"] or str(winner["snapshot"]) in str(loser["message"]), run
    assert run.children == [winner["snapshot"]], run  # no branch: one child of the paused snapshot
    assert run.latest == winner["snapshot"], run  # and the session continues from the committed one
    return winner, loser


@pytest.mark.parametrize("kind", KINDS)
async def test_a_blocking_tool_longer_than_the_claim_ttl_commits_alone(tmp_path: pathlib.Path, kind: str) -> None:
    runs = await asyncio.gather(*(lapse_blocking_tool(tmp_path, i, kind) for i in range(RUNS)))
    for run in runs:
        print(f"blocking tool: commits={run.commits} tool runs={len(run.tool_runs)} wall={run.wall:.2f}s")
        winner, _ = _one_commit(run)
        # The lease stayed fresh while the body blocked: the first resume kept its claim, the tool ran once.
        assert winner is run.first, run
        assert run.tool_runs == [None], run


@pytest.mark.parametrize("kind", KINDS)
async def test_a_resumer_stopped_past_the_claim_ttl_is_taken_over_and_cannot_commit(
    tmp_path: pathlib.Path, kind: str
) -> None:
    runs = await asyncio.gather(*(lapse_stopped_process(tmp_path, i, kind=kind) for i in range(RUNS)))
    for run in runs:
        notes = run.notes
        print(
            f"SIGSTOP: commits={run.commits} lapse after {notes['lapse_wait']:.2f}s "
            f"taken over while stopped={notes['took_over_while_stopped']} tool runs={len(run.tool_runs)} "
            f"wall={run.wall:.2f}s"
        )
        winner, loser = _one_commit(run)
        assert winner is run.second and loser is run.first, run  # the takeover commits, the stopped one is refused
        assert "lapsed" in str(loser["message"]) or "took it over" in str(loser["message"]), run  # fence or journal
        holder = notes["holder"]
        assert holder is not None and notes["holder_row"] is None, run  # the stopped turn wrote nothing
        assert notes["claimed_by"] == winner["snapshot"] and notes["reclaimed_from"] == holder, run
        # The stopped run's tool had started; the takeover's re-run is told whose run it may repeat.
        assert run.tool_runs == [None, holder], run
