"""Acceptance (safety core): N concurrent resumes of one paused snapshot, in one process and across four.

Every repetition resumes its own paused snapshot (all 20 per N are set up first); the
cross-process runs use four long-lived workers that meet at a file barrier before each
repetition. Exactly one resume wins, the tool body runs once (counted in an append-only
file), and every loser ends ABORTED naming the winner, which is a completed child of the
paused snapshot after the race.
"""

from __future__ import annotations

import pathlib
from dataclasses import replace

import pytest
from banking import APPROVE, PAY
from fault_worker import RaceFigures, bank, pause_many, race_across_processes, race_in_process, tool_runs
from store_kinds import KINDS, locate

from interlock import Resume
from interlock.stores.sqlite import SQLiteStore
from interlock.testing import ScriptedModel

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


@pytest.mark.parametrize("kind", KINDS)
async def test_racing_resumes_by_snapshot_and_by_session_id_lose_aborted_naming_the_winner(
    tmp_path: pathlib.Path, kind: str
) -> None:
    """Half the racers name the session: one that loads it after the winner committed is told who won."""
    db, log = locate(kind, tmp_path / "s.db"), tmp_path / "tool-runs.log"
    snaps = await pause_many(db, REPS)
    _check(await race_across_processes(db, log, snaps, 64, workers=4, timeout=120, mixed=True))


async def test_a_resume_by_session_id_answered_by_a_later_turn_is_aborted_naming_it(tmp_path: pathlib.Path) -> None:
    """The loser of a race by session id loads the winner's turn as the latest: ABORTED naming the winner."""
    log = tmp_path / "tool-runs.log"
    async with SQLiteStore(tmp_path / "s.db") as store:
        agent = bank(store, log, "p", model=ScriptedModel([PAY, "paid", "you are welcome"]))
        paused = await agent.run("pay bob 5")
        session, snap = paused.session_id or "", paused.snapshot_id or ""
        won = await agent.run(resume=APPROVE, snapshot_id=snap)
        assert won.finish_reason == "stop" and won.snapshot_id
        rows = await store.list()
        lost = await agent.run(resume=APPROVE, session_id=session, raise_on_error=False)
        assert lost.error is not None and lost.error.status == "ABORTED", lost.error
        assert lost.error.details == {"winner": won.snapshot_id} and f"already resumed by turn {won.snapshot_id}" in (
            lost.error.message
        )
        assert await store.list() == rows and len(tool_runs(log)["p"]) == 1  # nothing ran, nothing was written
        thanks = await agent.run("thanks", session_id=session)  # the session goes on: still the same answer
        later = await agent.run(resume=APPROVE, session_id=session, raise_on_error=False)
        assert thanks.finish_reason == "stop" and later.error is not None and later.error.status == "ABORTED"
        assert later.error.details == {"winner": won.snapshot_id}
        never = Resume(restart=[replace(APPROVE.restart[0], ref="t9")])  # a call nobody asked for: stale as ever
        wrong = await agent.run(resume=never, session_id=session, raise_on_error=False)
        assert wrong.error is not None and wrong.error.status == "INVALID_ARGUMENT", wrong.error
        assert len(tool_runs(log)["p"]) == 1
