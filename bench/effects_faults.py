"""The effect journal's fault figures: SIGKILL at every await point of a two-step tool turn (a table).

Runs the harness of ``tests/kit/effects_worker.py`` (the scenario ``tests/faults/test_faults_effects.py``
asserts on) and prints, per tool variant, kill point and mode: runs, effect lines per call
(reserve/charge), calls in doubt and how they were resolved (asked with an interrupt, or
retried automatically for ``idempotent=True``), repeats a person's restart asked for,
silent repeats, writes the deduping service ignored, and lost turns.

    python bench/effects_faults.py              # 10 runs per point and mode (about 75 s on two cores)
    python bench/effects_faults.py --runs 3
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import pathlib
import sys
import tempfile
import time
from typing import Any

KIT = pathlib.Path(__file__).resolve().parents[1] / "tests" / "kit"


def _harness() -> Any:
    sys.path.insert(0, str(KIT))  # effects_worker imports fault_worker beside it
    spec = importlib.util.spec_from_file_location("effects_worker", KIT / "effects_worker.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["effects_worker"] = module
    spec.loader.exec_module(module)
    return module


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10, help="runs per kill point and mode (default 10)")
    parser.add_argument("--parallel", type=int, default=20, help="runs at a time (default 20)")
    args = parser.parse_args()
    ew = _harness()
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="interlock-effects-faults-") as tmp:
        runs = await ew.effect_runs(pathlib.Path(tmp), runs=args.runs, parallel=args.parallel)
    wall = time.monotonic() - start
    print("Effect journal under SIGKILL (killed worker claim_ttl 1 s; recovery resumes after the lease lapses)")
    print(ew.render(*ew.table(runs)))
    problems = [f"{r.variant} {r.point} {r.mode}: {p}" for r in runs for p in r.problems]
    silent = sum(r.silent_repeats for r in runs)
    lost = sum(r.lost for r in runs)
    asked = sum(r.retried_after_asking for r in runs)
    print(
        f"\n{len(runs)} runs in {wall:.1f} s: silent repeats {silent}, lost turns {lost}, "
        f"repeats a person's restart asked for {asked} (a step that took effect but was never journaled)"
    )
    for p in problems[:20]:
        print("  PROBLEM", p)
    print("all checks passed" if not problems else f"SOME CHECKS FAILED ({len(problems)} problems)")
    return 0 if not problems else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
