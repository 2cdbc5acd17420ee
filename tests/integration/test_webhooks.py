"""Signed webhooks from the outbox to a real receiver on 127.0.0.1: signatures, events, retries, leases."""

from __future__ import annotations

import asyncio
import json
import pathlib
import time
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest
from hook_receiver import Received, receiver
from notify_app import KEYRING, POLICIES, bank

from interlock import metadata as md
from interlock.errors import PermissionDeniedError
from interlock.inbox._inbox import Inbox
from interlock.interrupts._signing import Keyring
from interlock.notify._deadlines import sweep
from interlock.notify._webhooks import Endpoint, Webhooks, sign, verify
from interlock.records._journal import JournalEntry
from interlock.records._outbox import WEBHOOK, new_event
from interlock.records._sessions import utcnow
from interlock.stores.sqlite import SQLiteStore

BODY = b'{"id":"e1","type":"interrupt.created","data":{"amount":5}}'


def _reason(body: bytes, headers: dict[str, str], keyring: Keyring = KEYRING, **kw: Any) -> str:
    with pytest.raises(PermissionDeniedError) as info:
        verify(body, headers, keyring, **kw)
    return info.value.details["reason"]


def test_a_signed_body_verifies_and_every_tampering_is_refused() -> None:
    now = time.time()
    header = {"Interlock-Signature": sign(BODY, KEYRING, now=now)}
    assert verify(BODY, header, KEYRING, now=now)["id"] == "e1"
    assert verify(BODY.decode(), header, KEYRING, now=now)["id"] == "e1"  # a body read as text
    assert verify(BODY, {"interlock-signature": header["Interlock-Signature"]}, KEYRING, now=now + 299)["id"] == "e1"
    assert _reason(BODY.replace(b"5", b"6"), header, now=now) == "tampered"
    assert _reason(BODY + b" ", header, now=now) == "tampered"
    version, kid, issued, mac = header["Interlock-Signature"].split(".")
    moved = {"Interlock-Signature": f"{version}.{kid}.{int(issued) + 1}.{mac}"}
    assert _reason(BODY, moved, now=now) == "tampered"  # the timestamp is signed too
    assert _reason(BODY, header, now=now + 301) == "stale"  # a replay, later
    assert _reason(BODY, header, now=now - 301) == "stale"  # signed in the future
    assert _reason(BODY, {}, now=now) == "missing"
    assert _reason(BODY, {"Interlock-Signature": "v1.k1.abc.def"}, now=now) == "malformed"
    assert _reason(BODY, {"Interlock-Signature": mac}, now=now) == "malformed"
    other = Keyring({"k2": "another-secret-of-32-bytes-or-more!!"})
    assert _reason(BODY, header, other, now=now) == "unknown-key"
    forged = {"Interlock-Signature": sign(BODY, Keyring({"k1": "a-forger-s-own-secret-of-32-bytes!!"}), now=now)}
    assert _reason(BODY, forged, now=now) == "tampered"


def test_keys_rotate() -> None:
    now = time.time()
    old = sign(BODY, KEYRING, now=now)
    both = Keyring({"k1": "webhook-secret-for-the-tests-0123456789", "k2": "the-next-webhook-secret-0123456789"})
    new = sign(BODY, both, now=now)
    assert new.split(".")[1] == "k2"
    assert verify(BODY, {"Interlock-Signature": old}, both, now=now)
    assert verify(BODY, {"Interlock-Signature": new}, both, now=now)
    retired = Keyring({"k2": "the-next-webhook-secret-0123456789"})
    assert _reason(BODY, {"Interlock-Signature": old}, retired, now=now) == "unknown-key"


@pytest.fixture
async def store(tmp_path: pathlib.Path) -> AsyncIterator[SQLiteStore]:
    async with SQLiteStore(tmp_path / "bank.db") as s:
        yield s


def _event(r: Received) -> dict[str, Any]:
    event = verify(r.body, r.headers, KEYRING)
    assert r.headers["Interlock-Event"] == event["type"] and r.headers["Interlock-Delivery"] == event["id"]
    return event


async def test_a_pause_and_its_answer_are_delivered_signed_with_the_resume_token(store: SQLiteStore) -> None:
    agent = bank(store)
    with receiver() as hook:
        hooks = Webhooks([hook.url], KEYRING)
        out = await agent.run("pay bob 5", context={"tenant": "acme"})
        (created,) = await hooks.deliver_due(store)
        await Inbox(store, agents=[agent]).approve(out.snapshot_id or "", identity="alice", tenant="acme")
        (answered,) = await hooks.deliver_due(store)
        events = [_event(r) for r in hook.requests]
    assert [e["type"] for e in events] == ["interrupt.created", "interrupt.answered"]
    first, second = events
    assert first["tenant"] == "acme" and first["id"] == created.id
    data = first["data"]
    assert (data["agent"], data["snapshotId"], data["tool"], data["ref"]) == ("bank", out.snapshot_id, "transfer", "t1")
    assert data["input"] == {"to": "bob", "amount": 5} and data["interrupt"] == {"to": "bob", "amount": 5}
    assert data["resumeToken"] == md.resume_token(out.interrupts[0]) and data["resumeToken"]
    assert second["data"]["by"] == "alice" and second["data"]["decision"] == "approve"
    assert second["data"]["snapshotId"] == out.snapshot_id and second["id"] == answered.id
    assert [e.status for e in await store.outbox_events(channel=WEBHOOK)] == ["done", "done"]


async def test_an_in_doubt_call_is_announced(store: SQLiteStore) -> None:
    agent = bank(store)
    out = await agent.run("pay bob 5")
    (entry,) = await store.journal_entries()
    crashed = entry.evolve(attempt=entry.attempt + 1, status="running")  # an attempt that never reported back
    await store.journal_put(crashed, expect=entry.attempt)
    assert isinstance(crashed, JournalEntry)
    await Inbox(store, agents=[agent]).approve(out.snapshot_id or "", identity="alice")
    with receiver() as hook:
        await Webhooks([hook.url], KEYRING).deliver_due(store)
        events = [_event(r) for r in hook.requests]
    assert [e["type"] for e in events] == ["interrupt.created", "interrupt.answered", "effect.in_doubt"]
    assert events[2]["data"]["inDoubt"] is True and events[2]["data"]["interrupt"]["idempotencyKey"] == entry.key


async def _until(condition: Any, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not condition() and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    assert condition(), "timed out"


async def test_receiver_errors_are_retried_with_backoff(store: SQLiteStore) -> None:
    await store.save_all([], events=[new_event(WEBHOOK, "interrupt.created", {"n": 1}, tenant=None)])
    with receiver([500, 500]) as hook:
        hooks = Webhooks([hook.url], KEYRING, retry_base=0.3, poll_interval=0.02)
        stop = asyncio.Event()
        task = asyncio.ensure_future(hooks.run(store, stop=stop))
        await _until(lambda: len(hook.requests) >= 3, 30)
        await _until(lambda: bool(task.done()) or len(hook.requests) >= 3, 1)
        stop.set()
        await task
        got = list(hook.requests)
    assert len({_event(r)["id"] for r in got}) == 1  # the same event, signed afresh each time
    first_gap, second_gap = got[1].at - got[0].at, got[2].at - got[1].at
    assert first_gap >= 0.25 and second_gap >= 0.5, (first_gap, second_gap)  # 0.3 s, then 0.6 s
    (row,) = await store.outbox_events()
    assert row.status == "done" and row.attempts == 3 and row.last_error is None


async def test_the_delivery_loop_prunes_rows_settled_longer_ago_than_it_keeps_them(store: SQLiteStore) -> None:
    old, fresh = (new_event(WEBHOOK, "interrupt.created", {"n": n}, tenant=None) for n in (1, 2))
    await store.save_all([], events=[old, fresh])
    now = utcnow()
    for row in await store.outbox_claim(channel=WEBHOOK, holder="t", lease=30):
        age = timedelta(days=8 if row.id == old.id else 6)
        assert await store.outbox_settle(row.evolve(status="done", settled_at=now - age), holder="t")
    with receiver() as hook:
        hooks = Webhooks([hook.url], KEYRING, poll_interval=0.02, keep_settled=timedelta(days=7))
        stop = asyncio.Event()
        task = asyncio.ensure_future(hooks.run(store, stop=stop))
        for _ in range(250):  # the first pass prunes (the next is an hour on)
            if len(await store.outbox_events()) < 2:
                break
            await asyncio.sleep(0.02)
        stop.set()
        await task
    assert [row.id for row in await store.outbox_events()] == [fresh.id]
    assert hooks.retention.cutoff() is None  # not due again for an hour
    keep_all = Webhooks([hook.url], KEYRING, keep_settled=None)
    assert keep_all.retention.cutoff() is None


async def test_after_max_attempts_a_row_is_failed_with_its_error(store: SQLiteStore) -> None:
    await store.save_all([], events=[new_event(WEBHOOK, "interrupt.created", {"n": 1}, tenant=None)])
    with receiver([500, 503]) as hook:
        hooks = Webhooks([hook.url], KEYRING, retry_base=0.01, max_attempts=2)
        await hooks.deliver_due(store)
        await asyncio.sleep(0.05)
        await hooks.deliver_due(store)
    (row,) = await store.outbox_events()
    assert (row.status, row.attempts, row.last_error) == ("failed", 2, f"{hook.url}: HTTP 503")
    assert await hooks.deliver_due(store) == []


async def test_a_receiver_that_is_down_is_retried(store: SQLiteStore) -> None:
    await store.save_all([], events=[new_event(WEBHOOK, "interrupt.created", {"n": 1}, tenant=None)])
    with receiver() as hook:
        url = hook.url
    (row,) = await Webhooks([url], KEYRING, retry_base=5).deliver_due(store)
    assert row.status == "pending" and row.attempts == 1 and "Connect" in (row.last_error or "")


async def test_groups_and_event_types_route_deliveries(store: SQLiteStore) -> None:
    agent = bank(store, expires_in=0.3, on_expire=POLICIES["escalate"])
    await agent.run("pay bob 5")
    await asyncio.sleep(0.5)
    await sweep(store, [])
    with receiver() as default, receiver() as managers, receiver() as audit:
        hooks = Webhooks(
            [
                Endpoint(url=default.url),
                Endpoint(url=managers.url, groups=frozenset({"managers"})),
                Endpoint(
                    url=audit.url, groups=frozenset({None, "managers"}), events=frozenset({"interrupt.escalated"})
                ),
            ],
            KEYRING,
        )
        settled = await hooks.deliver_due(store)
        seen = {n: [_event(r)["type"] for r in h.requests] for n, h in [("d", default), ("m", managers), ("a", audit)]}
    assert seen == {"d": ["interrupt.created"], "m": ["interrupt.escalated"], "a": ["interrupt.escalated"]}
    assert [r.done_for for r in settled] == [(default.url,), (managers.url, audit.url)]


async def test_two_deliverers_never_post_one_event_twice(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "bank.db"
    async with SQLiteStore(path) as one, SQLiteStore(path) as two:
        events = [new_event(WEBHOOK, "interrupt.created", {"n": i}, tenant=None) for i in range(40)]
        await one.save_all([], events=events)
        with receiver() as hook:
            a, b = Webhooks([hook.url], KEYRING, batch=5), Webhooks([hook.url], KEYRING, batch=5)
            for _ in range(10):
                await asyncio.gather(a.deliver_due(one), b.deliver_due(two))
            ids = [json.loads(r.body)["id"] for r in hook.requests]
        assert sorted(ids) == sorted(e.id for e in events)  # each exactly once
        assert {e.status for e in await one.outbox_events()} == {"done"}


async def test_a_pass_stops_posting_before_its_lease_runs_out(store: SQLiteStore) -> None:
    events = [new_event(WEBHOOK, "interrupt.created", {"n": i}, tenant=None) for i in range(3)]
    await store.save_all([], events=events)
    with receiver() as hook:
        hook.delay = 1.0  # each delivery takes longer than 80 % of the lease
        settled = await Webhooks([hook.url], KEYRING, lease=1.0).deliver_due(store)
        posted = len(hook.requests)
    assert len(settled) == 1 and posted == 1  # the other two were left to lapse, not posted late
    rows = await store.outbox_events()
    assert sorted(r.status for r in rows) == ["done", "pending", "pending"]
