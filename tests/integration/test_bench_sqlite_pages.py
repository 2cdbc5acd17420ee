"""bench/sqlite_pages.py keeps running, and the SQLite layout keeps an interrupt cycle's WAL pages down.

The index of open interrupts as a rowid table (schema version 4) made a cycle write 26.25 pages
on average over the script's 20 cycles; as a ``WITHOUT ROWID`` table, 24.25; keyed in its
listing's order, without its ``created`` index (version 6), 22.25 (page allocations as tables
grow make the fraction).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_pages_of_a_cycle_by_transaction_and_table() -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "sqlite_pages.py")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    rows = re.findall(r"^transaction (\d): ([0-9.]+)  \((.*)\)$", proc.stdout, re.MULTILINE)
    assert [n for n, _, _ in rows] == ["1", "2", "3", "4", "5"], proc.stdout  # intent, pause, claim, outcome, resume
    assert "interlock_open_interrupts" in rows[2][2] and "interlock_journal" in rows[3][2], proc.stdout
    assert "sqlite_autoindex_interlock_open_interrupts" not in proc.stdout  # no separate primary key written
    assert "interlock_open_interrupts_created" not in proc.stdout  # no secondary index: the key is the order
    for pause_claim_resume in (rows[1], rows[2], rows[4]):
        assert "interlock_open_interrupts 1," in pause_claim_resume[2], proc.stdout  # one page each
    total = re.search(r"^total: ([0-9.]+) pages in 5 write transactions$", proc.stdout, re.MULTILINE)
    assert total is not None and float(total.group(1)) < 24, proc.stdout
