"""Answer policies from ``interlock inbox``: a refused answer exits 1 with its reason; nothing changes or runs."""

from __future__ import annotations

import asyncio
import json
import pathlib
from typing import Any

import pytest
from policy_bank import RUNS, TREASURY, bank, timed_bank

import interlock.cli._inbox  # noqa: F401  # pyright: ignore[reportUnusedImport]  (registers the commands)
from interlock import AgentOutput
from interlock.cli import main
from interlock.stores.sqlite import SQLiteStore

AGENTS = "policy_bank:build_agents"


def _seed(db: pathlib.Path) -> AgentOutput:
    async def go() -> AgentOutput:
        async with SQLiteStore(db) as store:
            return await bank(store).run("pay bob 500", context={"identity": "alice"})

    return asyncio.run(go())


def _row(db: pathlib.Path, snapshot_id: str) -> Any:
    async def go() -> Any:
        async with SQLiteStore(db) as store:
            snap = await store.load(snapshot_id)
            assert snap is not None
            return snap.version, snap.claimed_by, snap.metadata

    return asyncio.run(go())


@pytest.mark.parametrize(
    ("reason", "args"),
    [
        ("requester_cannot_approve", ("approve", "--as", "alice")),
        ("not_permitted", ("reject", "--as", "mallory")),
        ("decision_not_allowed", ("respond", "--output", '"sent"', "--as", "bob")),
    ],
)
def test_the_cli_refuses(
    tmp_path: pathlib.Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    reason: str,
    args: tuple[str, ...],
) -> None:
    monkeypatch.delenv("INTERLOCK_STORE", raising=False)
    monkeypatch.setenv("POLICY_RUNS", str(tmp_path / "runs"))
    RUNS.clear()
    db = tmp_path / "sessions.db"
    out = _seed(db)
    sid = out.snapshot_id or ""
    before = _row(db, sid)
    action, *rest = args
    code = main(["inbox", action, sid, "--store", str(db), "--agents", AGENTS, *rest])
    printed, err = capsys.readouterr()
    assert (
        (code, printed) == (1, "") and f"{reason}:" in err and "(PERMISSION_DENIED)" in err and "Traceback" not in err
    )
    assert _row(db, sid) == before and not (tmp_path / "runs").exists() and RUNS == []
    code = main(["inbox", "approve", sid, "--store", str(db), "--agents", AGENTS, "--as", "bob", "--json"])
    printed, err = capsys.readouterr()
    assert code == 0, err
    assert json.loads(printed)["by"] == "bob" and (tmp_path / "runs").read_text() == "bob 500.0\n"
    assert main(["sessions", "show", out.session_id or "", "--store", str(db)]) == 0
    assert f"bob: approved transfer#t1 (policy {TREASURY.digest})" in capsys.readouterr()[0]


def test_the_cli_extends_a_deadline_for_a_permitted_identity(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("INTERLOCK_STORE", raising=False)
    db = tmp_path / "sessions.db"

    async def go() -> AgentOutput:
        async with SQLiteStore(db) as store:
            return await timed_bank(store).run("pay bob 500", context={"identity": "alice"})

    out = asyncio.run(go())
    sid = out.snapshot_id or ""
    args = ["inbox", "extend", sid, "--store", str(db), "--agents", "policy_bank:build_timed_agents", "--by", "1h"]
    assert main([*args, "--as", "alice"]) == 1
    assert "requester_cannot_approve" in capsys.readouterr()[1]
    assert main([*args, "--as", "bob", "--json"]) == 0
    said = json.loads(capsys.readouterr()[0])
    assert said["by"] == "bob" and said["expires_at"] > (out.interrupts[0].meta("deadline") or {})["expiresAt"]
    assert main(["sessions", "show", out.session_id or "", "--store", str(db)]) == 0
    assert "bob: extended the deadline (to " in capsys.readouterr()[0]
