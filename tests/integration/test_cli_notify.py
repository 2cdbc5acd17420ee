"""``interlock webhooks`` and ``interlock deadlines`` on a real SQLite file, and serve's --webhooks/--deadlines."""

from __future__ import annotations

import asyncio
import json
import pathlib
import time
from datetime import timedelta

import pytest
from hook_receiver import receiver
from notify_app import KEYRING, POLICIES, SECRET, bank
from notify_serve import ready, serve, wait_for

from interlock.cli import main
from interlock.http._client import RemoteAgent
from interlock.notify._webhooks import verify
from interlock.records._outbox import WEBHOOK
from interlock.records._sessions import utcnow
from interlock.stores.sqlite import SQLiteStore


def _paused(db: pathlib.Path, **options: object) -> str:
    async def run() -> str:
        async with SQLiteStore(db) as store:
            out = await bank(store, **options).run("pay bob 5")  # type: ignore[arg-type]
            return out.snapshot_id or ""

    return asyncio.run(run())


def test_webhooks_run_once_delivers_and_list_shows_it(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "bank.db"
    snapshot = _paused(db)
    monkeypatch.setenv("HOOK_SECRET", SECRET)
    with receiver() as hook:
        code = main(
            ["webhooks", "run", "--store", str(db), "--endpoint", hook.url, "--secret-env", "HOOK_SECRET", "--once"]
        )
        assert code == 0
        (request,) = hook.requests
    assert verify(request.body, request.headers, KEYRING)["data"]["snapshotId"] == snapshot
    assert "interrupt.created done attempts=1" in capsys.readouterr().out
    assert main(["webhooks", "list", "--store", str(db), "--json"]) == 0
    (row,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert row["status"] == "done" and row["done_for"] == [hook.url]


def _settled(db: pathlib.Path, days_ago: float) -> None:
    """Settle every webhook row as delivered ``days_ago`` days ago."""

    async def run() -> None:
        async with SQLiteStore(db) as store:
            for row in await store.outbox_claim(channel=WEBHOOK, holder="t", lease=30):
                settled_at = utcnow() - timedelta(days=days_ago)
                assert await store.outbox_settle(row.evolve(status="done", settled_at=settled_at), holder="t")

    asyncio.run(run())


def test_webhooks_prune_drops_rows_settled_over_its_age_and_keeps_the_rest(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "bank.db"
    _paused(db)
    _settled(db, days_ago=8)
    _paused(db)  # a second pause: its row is pending
    assert main(["webhooks", "prune", "--store", str(db), "--older-than", "7d"]) == 0
    assert capsys.readouterr().out.startswith("pruned 1 webhook row settled before ")
    assert main(["webhooks", "list", "--store", str(db), "--json"]) == 0
    (row,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert row["status"] == "pending"
    assert main(["deadlines", "prune", "--store", str(db), "--older-than", "1d"]) == 0
    assert capsys.readouterr().out.startswith("pruned 0 deadline rows")
    for bad in (["--older-than", "soon"], []):  # the age is required: nothing is pruned by accident
        with pytest.raises(SystemExit) as exit:
            main(["webhooks", "prune", "--store", str(db), *bad])
        assert exit.value.code == 2 and "--older-than" in capsys.readouterr().err


def test_webhooks_retry_gives_failed_rows_a_fresh_start(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "bank.db"
    _paused(db)

    async def fail() -> str:
        async with SQLiteStore(db) as store:
            (row,) = await store.outbox_claim(channel=WEBHOOK, holder="t", lease=30)
            failed = row.evolve(status="failed", attempts=20, last_error="HTTP 503", settled_at=utcnow())
            assert await store.outbox_settle(failed, holder="t")
            return row.id

    event_id = asyncio.run(fail())
    assert main(["webhooks", "retry", "--store", str(db), "missing-id"]) == 1
    assert "not failed webhook rows (nothing done to them): missing-id" in capsys.readouterr().err
    assert main(["webhooks", "retry", "--store", str(db)]) == 0
    assert capsys.readouterr().out.startswith(f"{event_id}  interrupt.created    pending again (last error: HTTP 503)")
    assert main(["webhooks", "list", "--store", str(db), "--json"]) == 0
    (row,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert (row["status"], row["attempts"]) == ("pending", 0)
    assert main(["webhooks", "retry", "--store", str(db)]) == 0
    assert capsys.readouterr().out == "no failed webhook rows\n"


def test_webhooks_run_refuses_missing_configuration(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "bank.db"
    _paused(db)
    monkeypatch.delenv("INTERLOCK_WEBHOOK_SECRET", raising=False)
    assert main(["webhooks", "run", "--store", str(db), "--once"]) == 2
    assert "--endpoint" in capsys.readouterr().err
    assert main(["webhooks", "run", "--store", str(db), "--endpoint", "http://127.0.0.1:9/", "--once"]) == 2
    assert "INTERLOCK_WEBHOOK_SECRET" in capsys.readouterr().err
    monkeypatch.setenv("INTERLOCK_WEBHOOK_SECRET", SECRET)
    assert main(["webhooks", "run", "--store", str(db), "--endpoint", "ftp://x", "--once"]) == 2
    assert "http://" in capsys.readouterr().err
    assert main(["webhooks", "list", "--store", str(tmp_path / "missing.db")]) == 2


def test_deadlines_run_once_applies_a_passed_deadline(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "bank.db"
    snapshot = _paused(db, expires_in=0.3, on_expire=POLICIES["escalate"])
    time.sleep(0.5)
    assert main(["deadlines", "run", "--store", str(db), "--once"]) == 0
    assert f"{snapshot} transfer escalate applied" in capsys.readouterr().out
    assert main(["deadlines", "run", "--store", str(db), "--once"]) == 0
    assert capsys.readouterr().out == ""  # applied once


@pytest.mark.slow
async def test_serve_runs_the_deadline_and_webhook_loops(tmp_path: pathlib.Path) -> None:
    db = tmp_path / "bank.db"
    with receiver() as hook:
        flags = ("--webhooks", "notify_app:webhooks", "--deadlines")
        with serve(tmp_path, db, hook.url, *flags, NOTIFY_POLICY="reject", NOTIFY_EXPIRES="1") as (proc, port):
            await ready(proc, port)
            async with RemoteAgent(f"http://127.0.0.1:{port}/bank") as remote:
                out = await remote.run("pay bob 5")
            await wait_for(hook, 2, 60)  # created, then (after the deadline) expired
            events = [verify(r.body, r.headers, KEYRING) for r in hook.requests]
    assert [e["type"] for e in events] == ["interrupt.created", "interrupt.expired"]
    assert events[1]["data"]["snapshotId"] == out.snapshot_id and events[1]["data"]["policy"] == "reject"


@pytest.mark.parametrize("flag", ["--deadline-interval", "--deadline-lease"])
@pytest.mark.parametrize("value", ["0", "-1", "soon"])
def test_serve_refuses_a_deadline_period_that_is_not_a_positive_number(
    flag: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit:
        main(["serve", "notify_app:server", "--deadlines", flag, value])
    assert exit.value.code == 2 and flag in capsys.readouterr().err  # argparse: bad usage, before anything starts
