"""CPU per operation on two commits, interleaved, and the ratio with its spread.

Each side's ``src`` is exported from git into a temporary directory (``git archive``), or, with
``--worktree`` (the default head), is this checkout's ``src`` as it is on disk, uncommitted
edits included. ``bench/regress_workload.py`` (from this checkout, so both sides run the same
workload) then runs in a fresh process per side and pair with ``PYTHONPATH=<that tree>/src``
and this interpreter. The runs alternate A B, B A, A B, ... so a drift in the machine's load
falls on both sides alike.

Per workload it prints A's and B's median CPU ms per operation, and the median of the
per-pair ratios B/A with their min–max and interquartile range; last, the ratio of the two
sides' least figures (the runs the rest of the machine disturbed least). It exits 0 (it prints figures)
unless ``--max-ratio`` is given and a workload's median ratio is above it.

    python bench/regress.py --base 6f3566d              # the wave-1 commit vs this checkout
    python bench/regress.py --base e974be2 --head HEAD  # two commits
    python bench/regress.py --base HEAD --pairs 1 --ops 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORKLOAD = Path(__file__).resolve().parent / "regress_workload.py"


@dataclass
class Side:
    label: str
    src: Path
    samples: list[dict[str, float]] = field(default_factory=list[dict[str, float]])


def git(*args: str) -> str:
    proc = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"git {' '.join(args)} failed: {proc.stderr.strip()}")
    return proc.stdout.strip()


def export(rev: str, into: Path) -> Side:
    """``rev``'s ``src`` under ``into`` (``git archive``), labelled with its short hash."""
    short = git("rev-parse", "--short", f"{rev}^{{commit}}")
    into.mkdir(parents=True)
    archive = subprocess.run(["git", "archive", short, "src"], cwd=ROOT, check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return Side(f"{rev} ({short})" if rev != short else short, into / "src")


def worktree() -> Side:
    dirty = " +edits" if git("status", "--porcelain", "--", "src") else ""
    return Side(f"worktree ({git('rev-parse', '--short', 'HEAD')}{dirty})", ROOT / "src")


def run_once(side: Side, ops: int) -> None:
    env = {**os.environ, "PYTHONPATH": str(side.src)}
    proc = subprocess.run(
        [sys.executable, str(WORKLOAD), "--ops", str(ops)], env=env, capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        raise SystemExit(f"the workload failed on {side.label}:\n{proc.stderr}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    imported = Path(result["interlock"]).resolve()
    if imported != (side.src / "interlock").resolve():
        raise SystemExit(f"{side.label} imported interlock from {imported}, not {side.src}")
    side.samples.append(result["ms_per_op"])


def quartiles(values: list[float]) -> tuple[float, float]:
    if len(values) < 2:
        return values[0], values[0]
    q = statistics.quantiles(values, n=4)
    return q[0], q[2]


def report(a: Side, b: Side) -> dict[str, float]:
    """Print the table; return each workload's median ratio B/A."""
    print(f"{'workload':<14}{'A ms/op':>9}{'B ms/op':>9}{'B/A':>7}  {'min-max':<12} {'IQR':<12} {'B/A of mins':>11}")
    medians: dict[str, float] = {}
    for name in a.samples[0]:
        a_ms = [s[name] for s in a.samples]
        b_ms = [s[name] for s in b.samples]
        ratios = [bv / av for av, bv in zip(a_ms, b_ms, strict=True)]
        medians[name] = statistics.median(ratios)
        low, high = quartiles(ratios)
        print(
            f"{name:<14}{statistics.median(a_ms):>9.3f}{statistics.median(b_ms):>9.3f}{medians[name]:>7.3f}"
            f"  {min(ratios):.3f}-{max(ratios):.3f}  {low:.3f}-{high:.3f}  {min(b_ms) / min(a_ms):>11.3f}"
        )
    return medians


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", required=True, help="side A: a commit (e.g. 6f3566d)")
    head = parser.add_mutually_exclusive_group()
    head.add_argument("--head", help="side B: a commit (default: --worktree)")
    head.add_argument("--worktree", action="store_true", help="side B: this checkout's src as on disk (default)")
    parser.add_argument("--pairs", type=int, default=10, help="A/B pairs, each side a fresh process (default 10)")
    parser.add_argument("--ops", type=int, default=300, help="measured operations per workload and run (default 300)")
    parser.add_argument("--max-ratio", type=float, help="exit 1 if a workload's median ratio B/A is above this")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="interlock-regress-") as tmp:
        a = export(args.base, Path(tmp, "a"))
        b = export(args.head, Path(tmp, "b")) if args.head else worktree()
        print(f"A = {a.label}, B = {b.label}; {args.pairs} pairs x {args.ops} ops, CPU ms/op (time.process_time)")
        print(f"load average at start: {load()}")
        for pair in range(args.pairs):
            for side in (a, b) if pair % 2 == 0 else (b, a):
                run_once(side, args.ops)
        print(f"load average at end:   {load()}")
        medians = report(a, b)
    over = {name: r for name, r in medians.items() if args.max_ratio is not None and r > args.max_ratio}
    for name, ratio in over.items():
        print(f"{name}: median ratio {ratio:.3f} is above --max-ratio {args.max_ratio}")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
