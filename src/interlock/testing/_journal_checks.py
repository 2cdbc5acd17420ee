"""Store conformance checks of :class:`~interlock.stores.JournalStore`, the effect journal.

Run by :func:`~.stores.check_journal_store` and :data:`~.stores.STORE_CHECKS`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ..errors import ClaimConflictError
from ..records._journal import Expecting, JournalEntry
from ..records._sessions import Snapshot
from ._checking import at_seconds as _at
from ._checking import equal as _equal
from ._checking import must_load as _must_load
from ._checking import put as _put
from ._checking import raises as _raises
from ._checking import snap as _snap
from ._checking import turn as _turn

if TYPE_CHECKING:
    from ._kinds import JournaledStore, StoreFactoryOf

    _Factory = StoreFactoryOf[JournaledStore]


def _entry(
    key: str, *, snapshot_id: str = "a", session_id: str = "s1", attempt: int = 1, **changes: Any
) -> JournalEntry:
    base = JournalEntry(
        key=key,
        session_id=session_id,
        snapshot_id=snapshot_id,
        agent="bank",
        tool="transfer",
        ref="t1",
        input_digest="d",
        attempt=attempt,
        status="running",
        started_at=_at(attempt),
    )
    return base.evolve(**changes) if changes else base


async def check_journal(make_store: _Factory) -> None:
    """The effect journal: intents and results round-trip, writes are conditional on the attempt, tenants apart."""
    async with make_store() as store:
        _equal(await store.journal_get("k1"), None, "a key never written")
        intent = _entry("k1")
        await store.journal_put(intent, expect=0)
        _equal(await store.journal_get("k1"), intent, "the intent read back")
        await _raises(ClaimConflictError, "a second first attempt", store.journal_put(_entry("k1"), expect=0))
        done = intent.evolve(status="done", output={"id": "tx-1", "amount": 5.5}, steps={"reserve": [1, "a"]})
        await store.journal_put(done, expect=1)
        _equal(await store.journal_get("k1"), done, "the result read back")
        retry = done.evolve(attempt=2, status="running", attempts=({"attempt": 1, "status": "done"},))
        await _raises(ClaimConflictError, "a stale attempt", store.journal_put(retry, expect=2))
        await store.journal_put(retry, expect=1)
        _equal(await store.journal_get("k1"), retry, "the retry read back")
        _equal(await store.journal_get("k1", tenant="acme"), None, "another tenant's entry")
        await store.journal_put(_entry("k2", session_id="s2", snapshot_id="b"), expect=0)
        _equal([e.key for e in await store.journal_entries(session_id="s1")], ["k1"], "entries of one session")
        _equal(sorted(e.key for e in await store.journal_entries()), ["k1", "k2"], "every entry")


async def check_journal_in_save_all(make_store: _Factory) -> None:
    """save_all's journal updates: in the same transaction as its rows, each seeing its stored entry."""

    def boom(_: Any) -> Any:
        raise ValueError("boom")

    async with make_store() as store:
        first = await _put(store, _snap("a", messages=_turn(0)))
        intent = _entry("k1")
        seen: list[Any] = []

        def record(cur: Any) -> Any:
            seen.append(cur)
            return intent

        await _raises(
            ValueError, "a raising journal updater", store.save_all([("a", lambda _: None)], journal=[("k1", boom)])
        )
        await _raises(
            ValueError,
            "a raising row updater",
            store.save_all([("b", lambda _: _snap("b")), ("a", boom)], journal=[("k1", record)]),
        )
        _equal(await store.journal_get("k1"), None, "an entry staged with a failed save_all")
        _equal(await store.load("b"), None, "a row staged with a raising journal updater")
        new_a = first.evolve(claimed_by="x")
        await store.save_all([("a", lambda _: new_a)], journal=[("k1", record), ("k2", lambda _: None)])
        _equal(seen[-1], None, "the journal updater of a key never written")
        _equal(await store.journal_get("k1"), intent, "the entry written with the row")
        _equal(await store.journal_get("k2"), None, "a journal updater returning None")
        _equal((await _must_load(store, "a")).claimed_by, "x", "the row written with the entry")
        done = intent.evolve(status="done", output={"ok": True})
        await store.save_all([], journal=[("k1", lambda cur: done if cur == intent else boom(cur))])
        _equal(await store.journal_get("k1"), done, "a journal-only save_all, updating the stored entry")
        await store.save_all([], tenant="acme", journal=[("k1", record)])
        _equal(seen[-1], None, "another tenant's updater does not see this tenant's entry")
        _equal(await store.journal_get("k1"), done, "this tenant's entry after another tenant's write")


async def check_journal_pruned_with_snapshots(make_store: _Factory) -> None:
    """Deleting a snapshot deletes the journal entries of calls made from it."""
    async with make_store() as store:
        await _put(store, _snap("a", messages=_turn(0)))
        await _put(store, _snap("b", parent_id="a", messages=[*_turn(0), *_turn(1)]))
        await store.journal_put(_entry("ka", snapshot_id="a"), expect=0)
        await store.journal_put(_entry("kb", snapshot_id="b"), expect=0)
        await store.delete(["a"])
        _equal([e.key for e in await store.journal_entries()], ["kb"], "entries after deleting a snapshot")


async def check_journal_expecting(make_store: _Factory) -> None:
    """``Expecting``: a commit's outcome is written only over its own attempt (else ABORTED, and nothing is written)."""
    async with make_store() as store:
        await _put(store, _snap("a", messages=_turn(0)))
        intent = _entry("k1")
        await store.journal_put(intent, expect=0)
        paused = intent.evolve(status="interrupted")
        await store.save_all([("a", lambda cur: cur)], journal=[("k1", Expecting(paused))])
        _equal(await store.journal_get("k1"), paused, "the outcome written over its own attempt")
        late = intent.evolve(status="done", output="late")
        await store.journal_put(intent.evolve(attempt=2), expect=1)  # another run took the call over
        before = await _must_load(store, "a")
        await _raises(
            ClaimConflictError,
            "an outcome over a newer attempt",
            store.save_all([("a", _claimed)], journal=[("k1", Expecting(late))]),
        )
        _equal(await store.journal_get("k1"), intent.evolve(attempt=2), "the newer attempt, untouched")
        _equal(await _must_load(store, "a"), before, "the row of the refused save_all")
        await _raises(
            ClaimConflictError,
            "an outcome of a call never journaled",
            store.save_all([], journal=[("k9", Expecting(_entry("k9")))]),
        )
        _equal(await store.journal_get("k9"), None, "a call never journaled")


def _claimed(cur: Snapshot | None) -> Snapshot | None:
    return None if cur is None else cur.evolve(claimed_by="x")


JOURNAL_CHECKS: list[Callable[[_Factory], Awaitable[None]]] = [
    check_journal,
    check_journal_in_save_all,
    check_journal_expecting,
    check_journal_pruned_with_snapshots,
]
"""The journal's checks, in order."""
