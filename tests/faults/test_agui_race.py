"""Racing AG-UI resumes of one paused turn: exactly one continues it, every other gets RUN_ERROR ABORTED.

``interlock serve agui_app:server --ag-ui --workers 2`` (two processes over one SQLite file);
eight ``@ag-ui/client`` HttpAgents, each a client with no history of the thread, send the same
resume at once, REPS times. Every transfer that runs appends a line to a file, so "once" is
counted. The claim that decides the race is the engine's: the adapter only translates.
"""

from __future__ import annotations

import collections
import pathlib
from typing import Any

import pytest
from agui_kit import clients, drive, error, outcome, served

pytestmark = pytest.mark.slow
RACERS = 8
REPS = 5


def test_eight_racing_resumes_one_winner(tmp_path: pathlib.Path) -> None:
    env = clients()
    plan: list[Any] = []
    for rep in range(REPS):
        thread = f"race-{rep}"
        plan.append({"client": f"p{rep}", "agent": "bank", "threadId": thread, "message": f"pay racer{rep} 1"})
        resume = [{"interruptId": "t1", "status": "resolved", "payload": {"approved": True}}]
        plan.append(
            [{"client": f"r{rep}-{i}", "agent": "bank", "threadId": thread, "resume": resume} for i in range(RACERS)]
        )
    with served(tmp_path, "--workers", "2") as server:
        runs = drive(env, server.url, plan)
        ran = collections.Counter(r["to"] for r in server.runs())
    for rep in range(REPS):
        paused, racers = runs[2 * rep], runs[2 * rep + 1]
        found = outcome(paused)
        assert found is not None and found["type"] == "interrupt"
        winners = [r for r in racers if r["events"][-1]["type"] == "RUN_FINISHED"]
        losers = [r for r in racers if r["events"][-1]["type"] == "RUN_ERROR"]
        assert (len(winners), len(losers)) == (1, RACERS - 1), [r["events"][-1] for r in racers]
        assert {error(r)["code"] for r in losers} == {"ABORTED"}
        assert all(r["events"][0]["type"] == "RUN_STARTED" for r in racers)
        assert ran[f"racer{rep}"] == 1
