"""The banker demo end to end on the real embedded model: --yes, --no, a typed answer, and --later + inbox."""

from __future__ import annotations

import json
import os
import pathlib
import pty
import select
import subprocess
import sys
import time

import pytest
from where import KIT

pytestmark = pytest.mark.slow


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(KIT)}


def _demo(store: pathlib.Path, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "interlock", "demo", "--store", str(store), *flags],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=600,
        stdin=subprocess.DEVNULL,
    )


def _transfers(store: pathlib.Path) -> list[dict[str, object]]:
    ledger = pathlib.Path(f"{store}.ledger.json")
    return json.loads(ledger.read_text())["transfers"] if ledger.exists() else []


def test_demo_yes_sends_the_transfer_once(tmp_path: pathlib.Path) -> None:
    store = tmp_path / "demo.db"
    run = _demo(store, "--yes")
    assert run.returncode == 0, run.stderr
    assert "PENDING APPROVAL  transferMoney: $150.00 to Alice" in run.stdout
    assert '"status": "sent"' in run.stdout
    assert _transfers(store) == [{"to": "Alice", "amount": 150.0, "reason": _transfers(store)[0]["reason"]}]


def test_demo_no_sends_nothing(tmp_path: pathlib.Path) -> None:
    store = tmp_path / "demo.db"
    run = _demo(store, "--no")
    assert run.returncode == 0, run.stderr
    assert "PENDING APPROVAL" in run.stdout and '"status": "rejected"' in run.stdout
    assert _transfers(store) == []


def test_demo_asks_in_the_terminal(tmp_path: pathlib.Path) -> None:
    store = tmp_path / "demo.db"
    main, child = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "interlock", "demo", "--store", str(store)],
        stdin=child,
        stdout=child,
        stderr=subprocess.DEVNULL,
        env=_env(),
        close_fds=True,
    )
    os.close(child)
    seen = b""
    try:
        deadline = time.time() + 600
        answered = False
        while proc.poll() is None or select.select([main], [], [], 0)[0]:
            assert time.time() < deadline, seen.decode(errors="replace")
            ready, _, _ = select.select([main], [], [], 0.5)
            if not ready:
                continue
            try:
                data = os.read(main, 4096)
            except OSError:
                break
            if not data:
                break
            seen += data
            if not answered and b"Approve this transfer? [y/n]" in seen:
                os.write(main, b"y\n")
                answered = True
        proc.wait(timeout=60)
    finally:
        os.close(main)
        if proc.poll() is None:
            proc.kill()
    text = seen.decode(errors="replace")
    assert proc.returncode == 0, text
    assert "approved - resuming the turn" in text and '"status": "sent"' in text
    assert len(_transfers(store)) == 1


def test_demo_later_then_inbox_approve_from_another_process(tmp_path: pathlib.Path) -> None:
    store = tmp_path / "demo.db"
    run = _demo(store, "--later")
    assert run.returncode == 0, run.stderr
    assert _transfers(store) == []
    command = next(line.split() for line in run.stdout.splitlines() if "inbox approve" in line)
    snapshot = command[command.index("approve") + 1]
    approve = subprocess.run(
        [sys.executable, "-m", "interlock", *command[1:], "--as", "carol"],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=600,
    )
    assert approve.returncode == 0, approve.stderr + approve.stdout
    assert len(_transfers(store)) == 1
    again = subprocess.run(
        [sys.executable, "-m", "interlock", *command[1:]], capture_output=True, text=True, env=_env(), timeout=600
    )
    assert again.returncode != 0 and len(_transfers(store)) == 1
    assert snapshot in approve.stdout + approve.stderr or "approved" in approve.stdout.lower()
