"""A journal entry for store tests: one call of ``transfer`` in session ``s1``, at the attempt and status asked."""

from __future__ import annotations

from typing import Any

from interlock.records._journal import JournalEntry


def entry(attempt: int = 1, status: Any = "running", output: object = None) -> JournalEntry:
    return JournalEntry(
        key="ik_test",
        session_id="s1",
        snapshot_id="p1",
        agent="bank",
        tool="transfer",
        ref="t1",
        input_digest="d" * 64,
        attempt=attempt,
        status=status,
        output=output,
    )
