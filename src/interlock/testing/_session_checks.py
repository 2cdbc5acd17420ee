"""Core conformance checks of a session's rows together (a :class:`~interlock.stores.SnapshotStore`).

Part of :data:`~._snapshot_checks.SNAPSHOT_CHECKS`. Sessions written the way the runtime does
(chains of turns): ``latest`` (linear and branching), watch, rewrites that keep other rows'
histories, bookkeeping that keeps the state, and long chains.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

from ..errors import FailedPreconditionError
from ..messages import Message
from ..parts import TextPart
from ..records._sessions import Artifact, SessionState, Snapshot
from ..stores import SnapshotStore
from ._checking import at_seconds as _at
from ._checking import chain as _chain
from ._checking import equal as _equal
from ._checking import expect as _expect
from ._checking import messages_of as _messages_of
from ._checking import must_load as _must_load
from ._checking import put as _put
from ._checking import raises as _raises
from ._checking import snap as _snap
from ._checking import turn as _turn

if TYPE_CHECKING:
    from ._kinds import StoreFactoryOf

    _Factory = StoreFactoryOf[SnapshotStore]


async def check_latest_linear(make_store: _Factory) -> None:
    """The latest snapshot is the leaf (with full state), whatever its status; an unknown session has none."""
    async with make_store() as store:
        _equal(await store.latest("s1"), None, "latest of an unknown session")
        histories = await _chain(store, 3)
        leaf = await store.latest("s1")
        _expect(leaf is not None and leaf.snapshot_id == "t2", f"latest should be t2, got {leaf}")
        assert leaf is not None
        _equal(_messages_of(leaf), histories[-1], "latest's messages")
        # leaf-based: a parent rewritten with a newer created_at does not become the latest
        await store.save("t0", lambda cur: None if cur is None else cur.evolve(created_at=_at(100)))
        pending = _snap("t3", parent_id="t2", at=3, status="pending", finish_reason=None, stateless=True)
        await _put(store, pending)
        leaf = await store.latest("s1")
        _expect(leaf is not None and leaf.snapshot_id == "t3", "latest is the leaf even when it is pending")
        _equal(await store.latest("s2"), None, "latest of another session")


async def check_latest_branching(make_store: _Factory) -> None:
    """With several leaves latest is the newest leaf; reject_branching raises FAILED_PRECONDITION."""
    async with make_store() as store:
        await _put(store, _snap("a", messages=_turn(0), at=0))
        await _put(store, _snap("b", parent_id="a", messages=_turn(1), at=1))
        await _put(store, _snap("c", parent_id="a", messages=_turn(2), at=2))
        leaf = await store.latest("s1")
        _equal(None if leaf is None else leaf.snapshot_id, "c", "latest of a branching session")
        await _put(store, _snap("d", parent_id="b", messages=_turn(3), at=3))
        leaf = await store.latest("s1")
        _equal(None if leaf is None else leaf.snapshot_id, "d", "latest of a branching session")
    async with make_store(reject_branching=True) as store:
        await _put(store, _snap("a", messages=_turn(0), at=0))
        await _put(store, _snap("b", parent_id="a", messages=_turn(1), at=1))
        leaf = await store.latest("s1")
        _equal(None if leaf is None else leaf.snapshot_id, "b", "latest of a linear session")
        await _put(store, _snap("c", parent_id="a", messages=_turn(2), at=2))
        error = await _raises(FailedPreconditionError, "latest of a branching session", store.latest("s1"))
        _expect("branching" in str(error), f"the error should say the session branches: {error}")


async def _collect(store: SnapshotStore, snapshot_id: str, statuses: list[str], first: asyncio.Event) -> None:
    async for status in store.watch(snapshot_id):
        statuses.append(status)
        first.set()


async def check_watch_sees_abort(make_store: _Factory) -> None:
    """A watch yields the current status, then the abort written by a concurrent save, then ends."""
    async with make_store() as store:
        await _put(store, _snap("p", status="pending", finish_reason=None, messages=_turn(0)))
        statuses: list[str] = []
        first = asyncio.Event()
        task = asyncio.ensure_future(_collect(store, "p", statuses, first))
        try:
            async with asyncio.timeout(10):
                await first.wait()
            _equal(statuses, ["pending"], "watch's first status")
            beat = await store.save("p", lambda cur: None if cur is None else cur.evolve(heartbeat_at=_at(5)))
            _expect(beat is not None, "a heartbeat save should write")
            await store.save(
                "p", lambda cur: cur.evolve(status="aborted") if cur is not None and cur.status == "pending" else None
            )
            async with asyncio.timeout(10):
                await task
        finally:
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        _equal(statuses, ["pending", "aborted"], "statuses watched")


async def check_watch_ends(make_store: _Factory) -> None:
    """A watch of a terminal row yields its status and ends; a watch of a missing row ends at once."""
    async with make_store() as store:
        await _put(store, _snap("done", messages=_turn(0)))
        async with asyncio.timeout(10):
            _equal([s async for s in store.watch("done")], ["completed"], "watch of a completed row")
            _equal([s async for s in store.watch("missing")], [], "watch of a missing row")


async def check_rewrite_keeps_others(make_store: _Factory) -> None:
    """Rewriting one snapshot's state (a finalize) never changes another snapshot's history."""
    async with make_store() as store:
        histories = await _chain(store, 3)
        await store.save("t0", lambda cur: None if cur is None else cur.evolve(state=None))
        _expect((await _must_load(store, "t0")).state is None, "state dropped by a rewrite")
        for i in (1, 2):
            _equal(_messages_of(await _must_load(store, f"t{i}")), histories[i], f"history of t{i}")
        replaced = [Message.user("replaced")]
        await store.save(
            "t1",
            lambda cur: None if cur is None else cur.evolve(state=SessionState(session_id="s1", messages=replaced)),
        )
        _equal(_messages_of(await _must_load(store, "t1")), replaced, "rewritten history")
        _equal(_messages_of(await _must_load(store, "t2")), histories[2], "history of the rewritten row's child")


async def check_bookkeeping_keeps_state(make_store: _Factory) -> None:
    """Heartbeats and claims keep the state; a finalize replaces it."""
    async with make_store() as store:
        await _chain(store, 2)
        first = _messages_of(await _must_load(store, "t1"))
        pending = Snapshot(
            snapshot_id="p",
            session_id="s1",
            parent_id="t1",
            created_at=_at(5),
            heartbeat_at=_at(5),
            status="pending",
            state=SessionState(
                session_id="s1",
                messages=[*first, Message.user("more")],
                custom={"n": 1},
                artifacts=[Artifact(name="a", parts=[TextPart(text="x")])],
            ),
        )
        await _put(store, pending)
        await store.save("p", lambda cur: None if cur is None else cur.evolve(heartbeat_at=_at(6)))
        await store.save("p", lambda cur: None if cur is None else cur.evolve(claimed_by="t9", claim_expires_at=_at(7)))
        loaded = await _must_load(store, "p")
        _equal(loaded.state, pending.state, "state after a heartbeat and a claim")
        _equal((loaded.heartbeat_at, loaded.claimed_by, loaded.claim_expires_at), (_at(6), "t9", _at(7)), "bookkeeping")
        assert pending.state is not None
        final = SessionState(
            session_id="s1",
            messages=[*pending.state.messages, Message.model("done")],
            custom={"n": 2},
            artifacts=[Artifact(name="a", parts=[TextPart(text="y")])],
        )
        await store.save(
            "p",
            lambda cur: None if cur is None else cur.evolve(status="completed", state=final, heartbeat_at=None),
        )
        loaded = await _must_load(store, "p")
        _equal((loaded.status, loaded.heartbeat_at, loaded.state), ("completed", None, final), "finalized row")
        _equal(loaded.version, 4, "version after four writes")


async def check_long_chain(make_store: _Factory) -> None:
    """A 200-turn chain loads with its full history, at the leaf and in the middle."""
    async with make_store() as store:
        histories = await _chain(store, 200)
        leaf = await store.latest("s1")
        _expect(leaf is not None and leaf.snapshot_id == "t199", "latest of a long chain")
        assert leaf is not None
        _equal(len(_messages_of(leaf)), 400, "messages at the leaf")
        _equal(_messages_of(leaf), histories[199], "history at the leaf")
        _equal(_messages_of(await _must_load(store, "t100")), histories[100], "history in the middle")
