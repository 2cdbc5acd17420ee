"""bench/regress.py (issue 27) keeps running: the wave-1 commit against this checkout, one pair.

The workload imports only the names 6f3566d and later commits share, so a change that breaks
it on either side (a renamed import, an API the old commit lacks) fails here, not on the day
someone needs the comparison.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
WORKLOADS = ("turn/memory", "turn/sqlite", "cycle/memory", "cycle/sqlite")
ROW = r"\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s+[0-9.]+-[0-9.]+\s+[0-9.]+-[0-9.]+\s+([0-9.]+)$"


def regress(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "bench" / "regress.py"), "--base", "6f3566d", "--pairs", "1", "--ops", "5", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_one_pair_prints_each_workloads_figures_and_ratio() -> None:
    proc = regress()
    assert proc.returncode == 0, proc.stderr
    assert "A = 6f3566d" in proc.stdout and "B = worktree (" in proc.stdout
    assert "load average at start:" in proc.stdout and "load average at end:" in proc.stdout
    for name in WORKLOADS:
        match = re.search(re.escape(name) + ROW, proc.stdout, re.MULTILINE)
        assert match is not None, proc.stdout
        a_ms, b_ms, ratio, of_mins = (float(g) for g in match.groups())
        assert a_ms > 0 and b_ms > 0
        assert ratio == of_mins  # one pair: the median ratio is that pair's, as is the ratio of the least figures
        assert ratio == pytest.approx(b_ms / a_ms, rel=0.05)


def test_a_median_ratio_over_max_ratio_exits_1_and_names_it() -> None:
    proc = regress("--max-ratio", "0")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "cycle/memory: median ratio" in proc.stdout and "above --max-ratio 0" in proc.stdout


def test_an_unknown_commit_is_refused_with_git_s_reason() -> None:
    proc = regress("--head", "no-such-commit")
    assert proc.returncode == 1
    assert "git rev-parse" in proc.stderr and "no-such-commit" in proc.stderr
