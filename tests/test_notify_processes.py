"""Real processes: a SIGKILLed ``interlock serve`` still delivers its webhook after a restart, and two
processes racing on one SQLite store apply each passed deadline exactly once."""

from __future__ import annotations

import asyncio
import pathlib
import signal
import subprocess
import sys

import pytest
from hook_receiver import receiver
from notify_app import KEYRING, POLICIES, bank
from notify_serve import TESTS, ready, serve, wait_for

from interlock.deadlines import IDENTITY
from interlock.http.client import RemoteAgent
from interlock.inbox import Inbox
from interlock.outbox import WEBHOOK
from interlock.stores.sqlite import SQLiteStore
from interlock.webhooks import verify

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("kill", ["while-delivering", "before-delivering"])
async def test_a_sigkilled_server_delivers_after_restart(tmp_path: pathlib.Path, kill: str) -> None:
    db = tmp_path / "bank.db"
    with receiver() as hook:
        first_flags = ("--webhooks", "notify_app:webhooks") if kill == "while-delivering" else ()
        hook.hold.set()  # the first delivery hangs: the server dies with it in flight
        with serve(tmp_path, db, hook.url, *first_flags, NOTIFY_LEASE="3") as (proc, port):
            await ready(proc, port)
            async with RemoteAgent(f"http://127.0.0.1:{port}/bank") as remote:
                out = await remote.run("pay bob 5")
            assert out.finish_reason == "interrupted"
            if kill == "while-delivering":
                await wait_for(hook, 1, 30)
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)
        async with SQLiteStore(db) as store:
            (row,) = await store.outbox_events(channel=WEBHOOK)
        assert row.status == "pending" and row.type == "interrupt.created"  # committed, not delivered
        hook.hold.clear()
        hook.release.set()
        before = len(hook.requests)
        with serve(tmp_path, db, hook.url, "--webhooks", "notify_app:webhooks", NOTIFY_LEASE="3") as (proc, port):
            await wait_for(hook, before + 1, 60)
            async with SQLiteStore(db) as store:
                async with asyncio.timeout(30):
                    while (await store.outbox_events(channel=WEBHOOK))[0].status != "done":
                        await asyncio.sleep(0.1)
        delivered = [verify(r.body, r.headers, KEYRING) for r in hook.requests]
    assert {e["id"] for e in delivered} == {row.id}  # at least once, and always the same event
    assert delivered[-1]["data"]["snapshotId"] == out.snapshot_id and delivered[-1]["data"]["resumeToken"]


SESSIONS = 8


@pytest.mark.parametrize("policy", ["reject", "respond", "escalate"])
async def test_two_sweeping_processes_apply_each_deadline_once(tmp_path: pathlib.Path, policy: str) -> None:
    db, log = tmp_path / "bank.db", tmp_path / "log"
    async with SQLiteStore(db) as store:
        agent = bank(store, log=log, expires_in=1, on_expire=POLICIES[policy])
        outs = await asyncio.gather(*(agent.run("pay bob 5") for _ in range(SESSIONS)))
    await asyncio.sleep(1.2)  # every deadline has passed: the workers start racing at once
    workers = [
        subprocess.Popen(
            [sys.executable, str(TESTS / "deadline_worker.py"), str(db), str(log), policy, "6"],
            cwd=TESTS,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    results = [w.communicate(timeout=120) for w in workers]
    assert all(w.returncode == 0 for w in workers), results
    applied = [int(out.split()[-1]) for out, _ in results]
    assert sum(applied) == SESSIONS, applied  # between them, once per interrupt
    async with SQLiteStore(db) as store:
        types = [e.type for e in await store.outbox_events(channel=WEBHOOK)]
        inbox = Inbox(store)
        if policy == "escalate":
            assert types.count("interrupt.escalated") == SESSIONS
            assert len(await inbox.pending()) == SESSIONS  # still waiting for a person
        else:
            assert types.count("interrupt.expired") == SESSIONS
            for out in outs:
                audit = await inbox.audit(out.session_id or "")
                assert [e.by for e in audit] == [IDENTITY]
            lines = log.read_text().splitlines()
            assert lines.count("model tool") == SESSIONS  # each resumed turn ran once
            assert not [line for line in lines if line.startswith("transfer")]  # the tool never ran
