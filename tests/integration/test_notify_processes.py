"""Real processes: a SIGKILLed ``interlock serve`` still delivers its webhook after a restart, and two
``interlock serve --deadlines`` processes racing on one store (SQLite, PostgreSQL) apply each passed
deadline's policy exactly once."""

from __future__ import annotations

import asyncio
import pathlib
import signal
from typing import Any

import httpx
import pytest
from hook_receiver import receiver
from notify_app import KEYRING, POLICIES
from notify_serve import ready, serve, wait_for
from server_pair import started
from store_kinds import KINDS, locate, store_at

from interlock._engine.io import AgentOutput
from interlock.http._client import RemoteAgent
from interlock.inbox._inbox import Inbox
from interlock.notify._deadlines import IDENTITY
from interlock.notify._webhooks import verify
from interlock.records._outbox import DEADLINE, WEBHOOK, OutboxEvent
from interlock.stores import SessionStore
from interlock.stores.sqlite import SQLiteStore

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
"""Paused turns per policy in the deadline race (three policies: 24 deadlines passing together)."""
RACE = ("--deadlines", "--deadline-interval", "0.05", "--deadline-lease", "0.001", "--webhooks", "notify_app:webhooks")
"""Both servers sweep every 50 ms with a lease so short that both take every due timer: the claim decides."""


@pytest.mark.parametrize("kind", KINDS)
async def test_two_servers_racing_apply_each_deadline_once(tmp_path: pathlib.Path, kind: str) -> None:
    db, log = locate(kind, tmp_path / "bank.db"), tmp_path / "log"
    async with store_at(db) as store:
        await store.ready()  # the tables exist before the servers open the store
    with receiver() as hook:
        env = {"NOTIFY_DB": str(db), "NOTIFY_HOOK": hook.url, "NOTIFY_LOG": str(log)}
        env |= {"NOTIFY_POLICY": "all", "NOTIFY_EXPIRES": "1.5", "NOTIFY_LEASE": "30"}
        with started(tmp_path, "notify_app:server", *RACE, env=env) as servers:
            async with httpx.AsyncClient(timeout=60) as http:
                runs = [
                    RemoteAgent(f"{servers[i % 2].url}/bank-{policy}", http=http).run("pay bob 5")
                    for policy in POLICIES
                    for i in range(SESSIONS)
                ]
                outs = await asyncio.gather(*runs)  # paused through both servers at once
            assert {o.finish_reason for o in outs} == {"interrupted"}
            async with store_at(db) as store:
                await _settled(store, DEADLINE, 3 * SESSIONS)
                events = await _settled(store, WEBHOOK, 6 * SESSIONS)  # created x 3, expired x 2, escalated x 1
                await _check_policies(store, outs, log)
            each = [sum(line.endswith(" applied") for line in s.output().splitlines()) for s in servers]
    print(f"deadlines applied by each server: {each}")
    assert sum(each) == 3 * SESSIONS  # between the two servers, once per deadline
    types = [e.type for e in events]
    assert types.count("interrupt.expired") == 2 * SESSIONS and types.count("interrupt.escalated") == SESSIONS
    assert {e.data["snapshotId"] for e in events if e.type != "interrupt.created"} == {o.snapshot_id for o in outs}
    delivered = [verify(r.body, r.headers, KEYRING)["id"] for r in hook.requests]
    assert sorted(set(delivered)) == sorted(e.id for e in events)  # each event delivered (at least once)


@pytest.mark.parametrize("kind", KINDS)
async def test_two_servers_racing_send_each_expiry_warning_once(tmp_path: pathlib.Path, kind: str) -> None:
    db = locate(kind, tmp_path / "bank.db")
    async with store_at(db) as store:
        await store.ready()
    with receiver() as hook:
        env = {"NOTIFY_DB": str(db), "NOTIFY_HOOK": hook.url, "NOTIFY_EXPIRES": "3600", "NOTIFY_WARN": "3598.5"}
        with started(tmp_path, "notify_app:server", *RACE, env=env) as servers:
            async with httpx.AsyncClient(timeout=60) as http:
                runs = [RemoteAgent(f"{servers[i % 2].url}/bank", http=http).run("pay bob 5") for i in range(SESSIONS)]
                outs = await asyncio.gather(*runs)
            async with store_at(db) as store, asyncio.timeout(60):
                while True:
                    warns = [e for e in await store.outbox_events(channel=DEADLINE) if e.type == "deadline.warn"]
                    if len(warns) == SESSIONS and all(e.status == "done" for e in warns):
                        break
                    await asyncio.sleep(0.1)
                expiring = [e for e in await store.outbox_events(channel=WEBHOOK) if e.type == "interrupt.expiring"]
                assert len(await Inbox(store).pending()) == SESSIONS  # warned, still waiting
    assert sorted(e.data["snapshotId"] for e in expiring) == sorted(o.snapshot_id or "" for o in outs)


async def _settled(store: SessionStore, channel: str, count: int) -> list[OutboxEvent]:
    """Wait until the outbox holds ``count`` rows of ``channel``, all done; returns them."""
    async with asyncio.timeout(60):
        while True:
            rows = await store.outbox_events(channel=channel)
            if len(rows) >= count and all(r.status == "done" for r in rows):
                assert len(rows) == count, [(r.type, r.data.get("snapshotId")) for r in rows]
                return rows
            await asyncio.sleep(0.1)


async def _check_policies(store: SessionStore, outs: list[AgentOutput], log: pathlib.Path) -> None:
    """reject/respond: one resume by the sweeper per session, its model call once; escalate: still waiting."""
    inbox = Inbox(store)
    waiting = {i.snapshot_id for i in await inbox.pending()}
    lines = log.read_text().splitlines()
    for k, policy in enumerate(POLICIES):  # the turns were started policy by policy
        mine = outs[k * SESSIONS : (k + 1) * SESSIONS]
        assert {(await store.load(o.snapshot_id or "") or _none()).agent for o in mine} == {f"bank-{policy}"}
        if policy == "escalate":
            assert {o.snapshot_id for o in mine} <= waiting  # still waiting for a person
            continue
        for out in mine:
            assert [e.by for e in await inbox.audit(out.session_id or "")] == [IDENTITY]
        assert lines.count(f"model tool bank-{policy}") == SESSIONS  # each resumed turn ran once
    assert not [line for line in lines if line.startswith("transfer")]  # the tool never ran


def _none() -> Any:
    raise AssertionError("a paused snapshot is missing")
