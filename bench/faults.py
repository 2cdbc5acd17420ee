"""The safety core's fault figures: races, lapsed claims and crashes on SQLite (a table for the record).

Runs the acceptance fault harness of ``tests/kit/fault_worker.py`` (the same scenarios the
``tests/faults/test_faults_*.py`` tests assert on) and prints what happened:

    python bench/faults.py                  # everything (about a minute on two cores)
    python bench/faults.py --only races     # or lapsed, crash
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import pathlib
import statistics
import sys
import tempfile
import time
from typing import Any

KIT = pathlib.Path(__file__).resolve().parents[1] / "tests" / "kit"


def _harness() -> Any:
    sys.path.insert(0, str(KIT))  # fault_worker imports http_helpers beside it
    spec = importlib.util.spec_from_file_location("fault_worker", KIT / "fault_worker.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["fault_worker"] = module
    spec.loader.exec_module(module)
    return module


def _table(title: str, header: list[str], rows: list[list[Any]]) -> None:
    cells = [header, *[[str(c) for c in row] for row in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    print(f"\n{title}")
    for i, row in enumerate(cells):
        print(
            "  " + "  ".join(c.rjust(w) if j else c.ljust(w) for j, (c, w) in enumerate(zip(row, widths, strict=True)))
        )
        if i == 0:
            print("  " + "  ".join("-" * w for w in widths))


def _flagged(done: list[Any]) -> str:
    """Repeated tool runs told ``ctx.reclaimed_from``, of all repeated runs (``-`` when none repeated)."""
    repeats = [x for r in done for x in r.tool_runs[1:]]
    return f"{sum(x is not None for x in repeats)}/{len(repeats)}" if repeats else "-"


async def races(fw: Any, work: pathlib.Path, reps: int) -> bool:
    rows: list[list[Any]] = []
    ok = True
    for where in ("1 process", "4 processes"):
        for n in (2, 8, 64):
            db = work / f"race-{where[0]}-{n}.db"
            log = db.with_suffix(".log")
            snaps = await fw.pause_many(db, reps)
            if where == "1 process":
                fig = await fw.race_in_process(db, log, snaps, n)
            else:
                fig = await fw.race_across_processes(db, log, snaps, n, workers=4)
            ok &= not fig.problems
            rows.append(
                [
                    where,
                    n,
                    fig.reps,
                    fig.resumes,
                    fig.winners,
                    fig.aborted,
                    fig.lost_while_running,
                    ",".join(map(str, sorted(fig.winning_workers))) or "-",
                    fig.tool_runs,
                    f"{fig.wall:.2f}",
                    len(fig.problems),
                ]
            )
    header = ["where", "N", "reps", "resumes", "winners", "aborted", "lost while running", "winning workers"]
    _table("Races (each rep: N resumes of one paused snapshot)", [*header, "tool runs", "wall s", "problems"], rows)
    return ok


async def lapsed(fw: Any, work: pathlib.Path, runs: int) -> bool:
    rows: list[list[Any]] = []
    ok = True
    for name, scenario in (
        ("sync tool 3 s, ttl 1 s", fw.lapse_blocking_tool),
        ("SIGSTOP 2.5 s, ttl 1 s", fw.lapse_stopped_process),
    ):
        start = time.monotonic()
        done = await asyncio.gather(*(scenario(work, i) for i in range(runs)))
        wall = time.monotonic() - start
        one_commit = sum(r.commits == 1 and r.loser is not None and r.loser["status"] == "ABORTED" for r in done)
        branches = sum(len(r.children) != 1 for r in done)
        flagged = _flagged(done)
        ok &= one_commit == runs and branches == 0
        tool = [len(r.tool_runs) for r in done]
        rows.append([name, runs, one_commit, branches, f"{min(tool)}-{max(tool)}", flagged, f"{wall:.2f}"])
    header = ["scenario", "runs", "1 commit + ABORTED", "branched", "tool runs", "re-runs flagged", "wall s"]
    _table("Lapsed claims", header, rows)
    return ok


async def crashes(fw: Any, work: pathlib.Path, runs: int) -> bool:
    rows: list[list[Any]] = []
    ok = True
    for point in fw.POINTS:
        for mode in fw.MODES:
            start = time.monotonic()
            done = await fw.crash_runs(work, point, mode, runs, parallel=5)
            wall = time.monotonic() - start
            answerable = sum(r.local == ["t1"] and bool(r.inbox) and r.remote == ["t1"] for r in done)
            recovered = sum(r.resumed.get("finish") == "stop" for r in done)
            intact = sum(r.integrity == "ok" for r in done)
            flagged = _flagged(done)
            ok &= all(not r.problems for r in done)
            lapse = statistics.median(r.lapse_wait for r in done)
            rows.append([point, mode, runs, answerable, recovered, intact, flagged, f"{lapse:.2f}", f"{wall:.2f}"])
    header = ["killed at", "mode", "runs", "answerable again", "resumed", "integrity ok", "re-runs flagged"]
    _table("Crashes (SIGKILL; killed process claim_ttl 1 s)", [*header, "lapse s (median)", "wall s"], rows)
    return ok


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", choices=["races", "lapsed", "crash"])
    parser.add_argument("--reps", type=int, default=20, help="race repetitions per N (default 20)")
    parser.add_argument("--runs", type=int, default=5, help="lapsed-claim runs per scenario (default 5)")
    parser.add_argument("--crashes", type=int, default=10, help="crash runs per point and mode (default 10)")
    args = parser.parse_args()
    fw = _harness()
    ok = True
    with tempfile.TemporaryDirectory(prefix="interlock-faults-") as tmp:
        work = pathlib.Path(tmp)
        if args.only in (None, "races"):
            ok &= await races(fw, work, args.reps)
        if args.only in (None, "lapsed"):
            ok &= await lapsed(fw, work, args.runs)
        if args.only in (None, "crash"):
            ok &= await crashes(fw, work, args.crashes)
    print(
        "\nall checks passed"
        if ok
        else "\nSOME CHECKS FAILED (run the tests/faults/test_faults_*.py tests for details)"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
