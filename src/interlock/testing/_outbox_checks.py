"""Store conformance checks of :class:`~interlock.stores.OutboxStore`, the outbox (:mod:`interlock.records._outbox`).

Run by :func:`~.stores.check_outbox_store` and :data:`~.stores.STORE_CHECKS`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from ..records._outbox import DEADLINE, WEBHOOK, OutboxEvent, new_event
from ..records._sessions import Snapshot, utcnow

if TYPE_CHECKING:
    from ._kinds import OutboxedStore, StoreFactoryOf

    _Factory = StoreFactoryOf[OutboxedStore]


def _expect(condition: bool, message: str) -> None:
    if not condition:
        raise AssertionError(message)


def _event(
    type: str = "interrupt.created", *, channel: str = WEBHOOK, tenant: str | None = None, **data: Any
) -> OutboxEvent:
    return new_event(channel, type, {"n": 1, **data}, tenant=tenant)


def _row(snapshot_id: str) -> Snapshot:
    return Snapshot(snapshot_id=snapshot_id, session_id="s1", finish_reason="interrupted")


async def check_outbox_written_with_save(make_store: _Factory) -> None:
    """Events are written by save_all with the rows they report, and not at all when an updater raises."""

    def boom(_: Snapshot | None) -> Snapshot | None:
        raise ValueError("boom")

    async with make_store() as store:
        kept = _event(tenant="acme", note="héllo ✓")
        await store.save_all([("a", lambda _: _row("a"))], tenant="acme", events=[kept])
        try:
            await store.save_all([("b", lambda _: _row("b")), ("a", boom)], events=[_event("dropped")])
        except ValueError:
            pass
        else:
            raise AssertionError("save_all with a raising updater should raise")
        found = await store.outbox_events()
        _expect([e.id for e in found] == [kept.id], f"only the committed event is stored, got {found!r}")
        _expect(found[0] == kept, f"the event reads back as written: {found[0]!r} != {kept!r}")
        await store.save_all([], events=[_event(channel=DEADLINE, type="deadline.due")])
        _expect(len(await store.outbox_events(channel=DEADLINE)) == 1, "events of one channel")
        _expect(len(await store.outbox_events(status="done")) == 0, "events of one status")


async def check_outbox_claim_leases(make_store: _Factory) -> None:
    """A claim leases due rows of its channel, oldest first; a leased row is not claimed again until it lapses."""
    async with make_store() as store:
        first, second = _event("one"), _event("two")
        now = utcnow()
        later = _event("later").evolve(due_at=now + timedelta(hours=1))
        timer = _event("deadline.due", channel=DEADLINE)
        await store.save_all([], events=[first, second, later, timer])
        got = await store.outbox_claim(channel=WEBHOOK, holder="p1", lease=30, limit=1, now=now)
        _expect([e.id for e in got] == [first.id], f"the oldest due row first, got {[e.type for e in got]}")
        _expect(got[0].lease_holder == "p1" and got[0].lease_expires_at is not None, "the row comes back leased")
        more = await store.outbox_claim(channel=WEBHOOK, holder="p2", lease=30, now=now)
        _expect([e.id for e in more] == [second.id], f"a leased or future row is not claimed, got {more!r}")
        after = await store.outbox_claim(channel=WEBHOOK, holder="p3", lease=30, now=now + timedelta(seconds=31))
        _expect({e.id for e in after} == {first.id, second.id}, "rows whose lease lapsed are claimed again")
        _expect(not await store.outbox_settle(first.evolve(status="done"), holder="p1"), "a lost lease cannot settle")
        done = after[0].evolve(status="done", attempts=1, done_for=("hook",), settled_at=now)
        _expect(await store.outbox_settle(done, holder="p3"), "the holder settles its row")
        stored = {e.id: e for e in await store.outbox_events()}
        _expect(stored[done.id].status == "done" and stored[done.id].lease_holder is None, "settled and unleased")
        _expect(stored[done.id].done_for == ("hook",), "the delivery state reads back")
        final = await store.outbox_claim(channel=WEBHOOK, holder="p4", lease=30, now=now + timedelta(hours=2))
        rest = {first.id, second.id, later.id} - {done.id}
        _expect({e.id for e in final} == rest, f"done rows are never claimed, got {[e.type for e in final]}")


async def check_outbox_claims_race(make_store: _Factory) -> None:
    """Concurrent claimers never share a row."""
    async with make_store() as store:
        events = [_event(f"e{i}") for i in range(20)]
        await store.save_all([], events=events)

        async def take(holder: str) -> list[str]:
            return [e.id for e in await store.outbox_claim(channel=WEBHOOK, holder=holder, lease=30, limit=3)]

        batches = await asyncio.gather(*(take(f"p{i}") for i in range(10)))
        taken = [i for batch in batches for i in batch]
        _expect(len(taken) == len(set(taken)) == 20, f"each row claimed exactly once, got {len(taken)} claims")


async def check_outbox_prune(make_store: _Factory) -> None:
    """A prune drops its channel's rows settled before the cutoff, of every tenant, and never a pending row."""
    async with make_store() as store:
        old, recent, waiting = _event("old", tenant="acme"), _event("recent"), _event("waiting")
        failed, timer = _event("failed"), _event("deadline.due", channel=DEADLINE)
        await store.save_all([], events=[old, recent, waiting, failed, timer])
        now = utcnow()
        taken = {e.id: e for e in await store.outbox_claim(channel=WEBHOOK, holder="p", lease=30, now=now)}
        (timer_taken,) = await store.outbox_claim(channel=DEADLINE, holder="p", lease=30, now=now)
        day = timedelta(days=1)
        settled = [
            taken[old.id].evolve(status="done", attempts=1, settled_at=now - 9 * day),
            taken[recent.id].evolve(status="done", attempts=1, settled_at=now - day),
            taken[failed.id].evolve(status="failed", attempts=20, settled_at=now - 8 * day),
            timer_taken.evolve(status="done", attempts=1, settled_at=now - 9 * day),
        ]
        for event in settled:
            _expect(await store.outbox_settle(event, holder="p"), f"the holder settles {event.type}")
        await store.outbox_settle(taken[waiting.id].evolve(attempts=1, due_at=now - 9 * day), holder="p")
        gone = await store.outbox_prune(channel=WEBHOOK, settled_before=now - 7 * day)
        _expect(gone == 2, f"the two webhook rows settled over 7 days ago are pruned, not {gone}")
        left = {e.type for e in await store.outbox_events()}
        _expect(left == {"recent", "waiting", "deadline.due"}, f"a pending row and other channels stay: {left}")
        _expect(await store.outbox_prune(channel=WEBHOOK, settled_before=now - 7 * day) == 0, "pruned once")
        _expect(await store.outbox_prune(channel=DEADLINE, settled_before=now) == 1, "a channel of its own")


async def check_outbox_retry(make_store: _Factory) -> None:
    """A retry gives failed rows of its channel a fresh start (all, or the ids named), and nothing else."""
    async with make_store() as store:
        one, two, done = _event("one", tenant="acme"), _event("two"), _event("done")
        timer = _event("deadline.due", channel=DEADLINE)
        await store.save_all([], events=[one, two, done, timer])
        now = utcnow()
        for row in await store.outbox_claim(channel=WEBHOOK, holder="p", lease=30, now=now):
            status = "done" if row.id == done.id else "failed"
            settled = row.evolve(status=status, attempts=20, last_error="HTTP 503", done_for=("a",), settled_at=now)
            _expect(await store.outbox_settle(settled, holder="p"), f"the holder settles {row.type}")
        (timer_row,) = await store.outbox_claim(channel=DEADLINE, holder="p", lease=30, now=now)
        await store.outbox_settle(timer_row.evolve(status="failed", settled_at=now), holder="p")
        later = now + timedelta(seconds=1)
        (again,) = await store.outbox_retry(channel=WEBHOOK, ids=[one.id, done.id, "unknown"], now=later)
        _expect(again.id == one.id, f"only a failed row of the ids is retried, got {again.type}")
        _expect((again.status, again.attempts, again.due) == ("pending", 0, later), f"a fresh start: {again!r}")
        _expect(
            again.done_for == ("a",) and again.last_error == "HTTP 503", "what was delivered and why it failed stay"
        )
        taken = await store.outbox_claim(channel=WEBHOOK, holder="q", lease=30, now=later)
        _expect([e.id for e in taken] == [one.id], f"a retried row is claimed again, got {[e.type for e in taken]}")
        rest = await store.outbox_retry(channel=WEBHOOK, now=later)
        _expect([e.id for e in rest] == [two.id], f"without ids: every failed row of the channel, got {rest!r}")
        stored = {e.id: e.status for e in await store.outbox_events()}
        _expect(stored[done.id] == "done" and stored[timer.id] == "failed", f"other rows stay as they were: {stored}")


OUTBOX_CHECKS: list[Callable[[_Factory], Awaitable[None]]] = [
    check_outbox_written_with_save,
    check_outbox_claim_leases,
    check_outbox_claims_race,
    check_outbox_prune,
    check_outbox_retry,
]
