"""The examples in examples/ run as documented."""

from __future__ import annotations

import pathlib
import subprocess
import sys

EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "examples"


def test_approve_transfer_example_pauses_approves_and_resumes() -> None:
    run = subprocess.run(
        [sys.executable, str(EXAMPLES / "approve_transfer.py")], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0].startswith("turn paused (interrupted); snapshot ")
    assert "pending: transfer_money(" in lines[1] and "'amount': 25" in lines[1]
    assert lines[2] == "approving transfer of 25.0 to Bob ..."
    assert lines[3] == "resumed (stop): Done: 25 sent to Bob."
    assert lines[4] == "tool result recorded in history: {'status': 'sent', 'to': 'Bob', 'amount': 25.0}"
