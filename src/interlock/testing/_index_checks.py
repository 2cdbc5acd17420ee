"""Store conformance checks of :class:`~interlock.stores.InterruptIndex` (and the leaves ``latest`` reads).

Run by :func:`~.stores.check_index_store` and :data:`~.stores.STORE_CHECKS`.

What the index must hold is :mod:`interlock.records._interrupt_index`'s rule; these checks write
snapshots the way the runtime does (pause, claim, answer, go on, delete) and compare
:meth:`~interlock.stores.InterruptIndex.open_interrupts` and ``latest`` with it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from .. import metadata as md
from ..errors import FailedPreconditionError
from ..messages import Message
from ..parts import ToolRequestPart
from ..records._interrupt_index import InterruptQuery
from ..records._sessions import SessionState, Snapshot
from ..stores import InterruptIndex, SnapshotStore

if TYPE_CHECKING:
    from ._kinds import IndexedStore, StoreFactoryOf

    _Factory = StoreFactoryOf[IndexedStore]

_T0 = datetime(2025, 3, 4, 5, 6, 7, 123456, tzinfo=UTC)
_NOW = _T0 + timedelta(hours=1)


def _equal(actual: object, expected: object, what: str) -> None:
    if actual != expected:
        raise AssertionError(f"{what}: expected {expected!r}, got {actual!r}")


def _call(tool: str, ref: str, data: object = True, **meta: Any) -> ToolRequestPart:
    return ToolRequestPart(name=tool, ref=ref, input={"ref": ref}, metadata={md.INTERRUPT: data, **meta})


def _paused(
    snapshot_id: str,
    session_id: str,
    *calls: ToolRequestPart,
    parent_id: str | None = None,
    at: float = 0,
    agent: str = "bank",
    **changes: Any,
) -> Snapshot:
    messages = [Message.user(f"turn {snapshot_id}"), Message(role="model", content=list(calls))]
    snap = Snapshot(
        snapshot_id=snapshot_id,
        session_id=session_id,
        parent_id=parent_id,
        created_at=_T0 + timedelta(seconds=at),
        finish_reason="interrupted",
        state=SessionState(session_id=session_id, messages=messages),
        metadata={"agent": agent},
    )
    return snap.evolve(**changes)


def _done(
    snapshot_id: str, session_id: str, parent_id: str | None, *, at: float, status: str = "completed"
) -> Snapshot:
    messages = [Message.user(f"turn {snapshot_id}"), Message.model("done")]
    return Snapshot(
        snapshot_id=snapshot_id,
        session_id=session_id,
        parent_id=parent_id,
        created_at=_T0 + timedelta(seconds=at),
        status=status,
        finish_reason="stop" if status == "completed" else None,
        state=SessionState(session_id=session_id, messages=messages),
    )


async def _put(store: SnapshotStore, snap: Snapshot, *, tenant: str | None = None) -> None:
    await store.save(snap.snapshot_id, lambda _: snap, tenant=tenant)


async def _change(store: SnapshotStore, snapshot_id: str, **changes: Any) -> None:
    await store.save(snapshot_id, lambda cur: None if cur is None else cur.evolve(**changes))


async def _open(store: InterruptIndex, *, tenant: str | None = None, **filters: Any) -> list[tuple[str, str]]:
    """``(snapshot_id, ref)`` of each entry a query with ``filters`` (at :data:`_NOW` by default) returns."""
    query = replace(InterruptQuery(now=_NOW), **filters)
    return [(e.snapshot_id, e.ref or "") for e in await store.open_interrupts(query, tenant=tenant)]


async def check_open_interrupts_follow_the_rows(make_store: _Factory) -> None:
    """A paused turn's calls are listed until answered or gone on from; held claims hide them; deletes bring back."""
    async with make_store() as store:
        await _put(store, _paused("p", "s1", _call("transfer", "t1", {"to": "bob"}), _call("delete", "d1")))
        await _put(store, _done("q", "s2", None, at=1))
        found = await store.open_interrupts(InterruptQuery(now=_NOW))
        _equal(
            [(e.snapshot_id, e.position, e.tool, e.ref) for e in found],
            [("p", 0, "transfer", "t1"), ("p", 1, "delete", "d1")],
            "entries of a paused turn",
        )
        first = found[0]
        _equal(
            (first.session_id, first.agent, first.created_at, first.in_doubt),
            ("s1", "bank", _T0, False),
            "entry fields",
        )
        _equal(first.part.meta(md.INTERRUPT), {"to": "bob"}, "the entry's part carries the interrupt data")
        _equal(await _open(store, tenant="acme"), [], "another tenant's index")
        # a held claim hides the calls until it lapses; an answer removes them
        until = _NOW + timedelta(seconds=30)
        await _change(store, "p", claimed_by="r1", claim_expires_at=until)
        _equal(await _open(store), [], "calls whose claim is held")
        _equal(len(await _open(store, now=until)), 2, "calls whose claim lapsed")
        held = (await store.open_interrupts(InterruptQuery(now=until)))[0]
        _equal((held.claimed_by, held.claim_expires_at), ("r1", until), "the entry's claim")
        await _change(store, "p", claimed_by=None, claim_expires_at=None)
        _equal(len(await _open(store)), 2, "calls whose claim was given back")
        # a resume that failed, or still runs, does not move the session on; a completed one does
        await _put(store, _done("f", "s1", "p", at=2, status="failed"))
        await _put(store, _done("r", "s1", "p", at=3, status="pending"))
        _equal(len(await _open(store)), 2, "calls after a failed and a running resume")
        await _change(store, "r", status="completed", finish_reason="stop")
        _equal(await _open(store), [], "calls after the session went on")
        await _change(store, "p", claimed_by="r9", claim_expires_at=until)
        _equal(await _open(store, now=until), [], "calls the session went on from, after a claim on them")
        await _change(store, "p", claimed_by=None, claim_expires_at=None)
        await store.delete(["r"])
        _equal(len(await _open(store)), 2, "calls after the snapshot that went on was deleted")
        await _put(store, _done("x", "s-other", "p", at=4))
        _equal(len(await _open(store)), 2, "calls after a completed child in another session")
        await store.delete(["x"])
        _equal(len(await _open(store)), 2, "calls after that child (of another session) was deleted")
        await _change(store, "p", claimed_by="r2", claim_expires_at=None)
        _equal(await _open(store), [], "calls of an answered turn")
        await _put(store, _paused("z", "s3", _call("transfer", "t9")))
        await store.delete(["z"])
        _equal(await _open(store), [], "calls of a deleted snapshot")
        await _put(store, _done("k", "s4", "j", at=5))  # the session went on before its paused turn was written
        await _put(store, _paused("j", "s4", _call("transfer", "t4")))
        _equal(await _open(store), [], "calls of a paused turn written after its session went on")
        await store.delete(["k"])
        _equal(await _open(store), [("j", "t4")], "calls of that turn once the one that went on was deleted")


async def check_open_interrupts_filter_and_page(make_store: _Factory) -> None:
    """Filters (agent, tool, session, age, in doubt, snapshot) and pages (order, cursor, limit) are the query's."""
    async with make_store() as store:
        doubt = _call("charge", "c1", {md.IN_DOUBT: True, "idempotencyKey": "k", "attempts": 2})
        await _put(store, _paused("a", "s1", _call("transfer", "t1"), _call("transfer", "t2"), at=0))
        await _put(store, _paused("b", "s2", _call("delete", "d1"), at=10, agent="ops"))
        await _put(store, _paused("c", "s3", doubt, at=20))
        await _put(store, _paused("d", "s4", _call("transfer", "t3"), at=30))
        everything = [("a", "t1"), ("a", "t2"), ("b", "d1"), ("c", "c1"), ("d", "t3")]
        _equal(await _open(store), everything, "all, oldest first")
        _equal(
            await _open(store, newest_first=True),
            [("d", "t3"), ("c", "c1"), ("b", "d1"), ("a", "t1"), ("a", "t2")],
            "newest first",
        )
        _equal(await _open(store, agent="ops"), [("b", "d1")], "agent=ops")
        _equal(await _open(store, tool="transfer"), [("a", "t1"), ("a", "t2"), ("d", "t3")], "tool=transfer")
        _equal(await _open(store, session_id="s3"), [("c", "c1")], "session s3")
        _equal(await _open(store, snapshot_id="b"), [("b", "d1")], "snapshot b")
        _equal(await _open(store, in_doubt=True), [("c", "c1")], "in doubt")
        _equal(len(await _open(store, in_doubt=False)), 4, "not in doubt")
        t10 = _T0 + timedelta(seconds=10)
        _equal(await _open(store, created_before=t10), everything[:3], "created at or before +10 s")
        _equal(await _open(store, created_after=t10), everything[3:], "created after +10 s")
        _equal(await _open(store, limit=0), [], "a page of 0")
        _equal(await _open(store, limit=1), everything[:2], "a page of 1 keeps the snapshot whole")
        _equal(await _open(store, limit=3), everything[:3], "a page of 3")
        _equal(await _open(store, after=(t10, "b"), limit=1), [("c", "c1")], "the page after b")
        _equal(await _open(store, after=(t10, "b"), newest_first=True), everything[:2], "newest first after b")
        _equal(await _open(store, after=(t10, "a")), everything[2:], "after an id that sorts before b at b's time")
        (entry,) = await store.open_interrupts(InterruptQuery(now=_NOW, in_doubt=True))
        _equal((entry.in_doubt, entry.part.meta(md.INTERRUPT)), (True, doubt.meta(md.INTERRUPT)), "an in-doubt entry")
        deadline = {md.DEADLINE: {"expiresAt": "2025-03-04T06:00:00+00:00", "onExpire": {"policy": "reject"}}}
        await _put(store, _paused("e", "s5", _call("transfer", "t4", True, **deadline), at=40), tenant="acme")
        (entry,) = await store.open_interrupts(InterruptQuery(now=_NOW), tenant="acme")
        _equal(entry.deadline, datetime(2025, 3, 4, 6, tzinfo=UTC), "an entry's deadline")


async def check_leaves_follow_writes(make_store: _Factory) -> None:
    """Latest reads the leaves: they follow new rows, deletes, moved parents and rows written out of order."""
    async with make_store() as store:
        await _put(store, _done("a", "s1", None, at=0))
        await _put(store, _done("b", "s1", "a", at=1))
        await _put(store, _done("c", "s1", "b", at=2))
        await store.delete(["c"])
        leaf = await store.latest("s1")
        _equal(None if leaf is None else leaf.snapshot_id, "b", "latest after deleting the leaf")
        await store.save("b", lambda cur: None if cur is None else cur.evolve(parent_id=None))
        leaf = await store.latest("s1")
        _equal(None if leaf is None else leaf.snapshot_id, "b", "latest after b left its parent (a is a leaf too)")
        await store.delete(["b"])
        leaf = await store.latest("s1")
        _equal(None if leaf is None else leaf.snapshot_id, "a", "latest once a is the only row")
        # a child written before its parent: the parent is not a leaf
        await _put(store, _done("y", "s2", "x", at=5))
        await _put(store, _done("x", "s2", None, at=9))
        leaf = await store.latest("s2")
        _equal(None if leaf is None else leaf.snapshot_id, "y", "latest when the parent came after its child")
        await store.delete(["a", "x", "y"])
        _equal((await store.latest("s1"), await store.latest("s2")), (None, None), "latest of emptied sessions")
        await _put(store, _done("loop", "s3", "loop", at=0))
        try:
            await store.latest("s3")
        except FailedPreconditionError:
            pass
        else:
            raise AssertionError(
                "latest of a session whose only row is its own parent should raise FAILED_PRECONDITION"
            )


INDEX_CHECKS: list[Callable[[_Factory], Awaitable[None]]] = [
    check_open_interrupts_follow_the_rows,
    check_open_interrupts_filter_and_page,
    check_leaves_follow_writes,
]
"""The leaf and index checks, in order."""
