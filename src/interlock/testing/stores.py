"""The store conformance suite.

:func:`check_store` runs :data:`STORE_CHECKS`, the contract every
:class:`~interlock.stores.SessionStore` must meet (snapshots, atomic multi-row saves,
tenants, watch, deletes, the effect journal, the outbox, the leaves and the index of open
interrupts), against a store of your own.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import datetime, timedelta, timezone
from typing import Any, Protocol, TypeAlias

from ..errors import FailedPreconditionError, InvalidArgumentError
from ..messages import Message
from ..parts import (
    CustomPart,
    DataPart,
    MediaPart,
    ReasoningPart,
    ResourcePart,
    TextPart,
    ToolRequestPart,
    ToolResponsePart,
)
from ..sessions import Artifact, ErrorInfo, SessionState, Snapshot
from ..stores import SessionStore
from ._checking import at_seconds as _at
from ._checking import equal as _equal
from ._checking import expect as _expect
from ._checking import messages_of as _messages_of
from ._checking import must_load as _must_load
from ._checking import put as _put
from ._checking import raises as _raises
from ._checking import snap as _snap
from ._checking import turn as _turn
from ._index_checks import INDEX_CHECKS
from ._journal_checks import JOURNAL_CHECKS
from ._outbox_checks import OUTBOX_CHECKS

__all__ = ["STORE_CHECKS", "StoreCheck", "StoreFactory", "check_store", "store_factory"]


class StoreFactory(Protocol):
    """Opens a fresh, empty store for one check and closes it afterwards.

    ``async with make_store() as store: ...``; ``reject_branching=True`` asks for a store
    whose :meth:`~interlock.stores.SessionStore.latest` rejects branching sessions.
    """

    def __call__(self, *, reject_branching: bool = False) -> AbstractAsyncContextManager[SessionStore]: ...


StoreCheck: TypeAlias = Callable[[StoreFactory], Awaitable[None]]
"""One conformance check: an async function of a :class:`StoreFactory` that raises ``AssertionError`` on failure."""


def store_factory(make: Callable[..., SessionStore]) -> StoreFactory:
    """A :class:`StoreFactory` from a store constructor (called with the options as keywords).

    After each check the store's ``close()`` (sync or async) is called if it has one.
    ``store_factory(InMemoryStore)`` is the simplest example.
    """

    @asynccontextmanager
    async def open_store(*, reject_branching: bool = False) -> AsyncGenerator[SessionStore, None]:
        store = make(reject_branching=reject_branching)
        try:
            yield store
        finally:
            close: Any = getattr(store, "close", None)
            if callable(close):
                result = close()
                if inspect.isawaitable(result):
                    await result

    return open_store


async def check_store(make_store: StoreFactory, *, checks: Iterable[StoreCheck] | None = None) -> None:
    """Run every check of :data:`STORE_CHECKS` (or ``checks``) against fresh stores from ``make_store``.

    Raises ``AssertionError`` naming the first check that fails. Third-party stores can
    also parametrise a test over :data:`STORE_CHECKS` to see every failure separately.
    """
    for check in STORE_CHECKS if checks is None else checks:
        try:
            await check(make_store)
        except AssertionError as exc:
            raise AssertionError(f"{getattr(check, '__name__', check)}: {exc}") from exc


async def _chain(store: SessionStore, n: int, *, session_id: str = "s1") -> list[list[Message]]:
    """Write ``n`` turns the way the runtime does (load the parent, append, save); returns each turn's history."""
    histories: list[list[Message]] = []
    parent: Snapshot | None = None
    for i in range(n):
        messages = (_messages_of(parent) if parent is not None else []) + _turn(i)
        parent_id = None if parent is None else parent.snapshot_id
        await _put(store, _snap(f"t{i}", session_id, parent_id, messages=messages, at=i))
        histories.append(list(messages))
        parent = await _must_load(store, f"t{i}")
    return histories


def _rich_messages() -> list[Message]:
    return [
        Message.system("be brief"),
        Message(
            role="user",
            content=[TextPart(text="héllo ✓", metadata={"k": [1, 2.5, None, True]})],
            metadata={"m": "x"},
            extra={"unknownKey": {"a": 1}},
        ),
        Message(
            role="model",
            content=[
                ReasoningPart(reasoning="thinking"),
                ToolRequestPart(name="lookup", ref="r0", input={"q": "x"}),
                ToolRequestPart(name="approve", ref="r1", input={"amount": 10}, metadata={"interrupt": {"why": "big"}}),
            ],
        ),
        Message(
            role="tool",
            content=[ToolResponsePart(name="lookup", ref="r0", output={"ok": True}, content=[TextPart(text="done")])],
        ),
        Message(
            role="user",
            content=[
                MediaPart(url="data:image/png;base64,AAAA", content_type="image/png"),
                DataPart(data={"x": [1, "ü"]}),
                CustomPart(value={"vendor": 1}),
                ResourcePart(uri="file:///a.txt"),
            ],
        ),
    ]


async def check_round_trip(make_store: StoreFactory) -> None:
    """Every field of a snapshot, full state included, loads back equal; timestamps stay timezone-aware."""
    plus2 = timezone(timedelta(hours=2))
    created = datetime(2025, 5, 6, 7, 8, 9, 123456, tzinfo=plus2)
    state = SessionState(
        session_id="s1",
        messages=_rich_messages(),
        custom={"count": 3, "nested": {"list": [1, 2, {"deep": None}]}, "text": "ü"},
        artifacts=[
            Artifact(name="report", parts=[TextPart(text="body")], metadata={"v": 1}),
            Artifact(parts=[DataPart(data=[1, 2])]),
        ],
    )
    snapshot = Snapshot(
        snapshot_id="a",
        session_id="s1",
        parent_id="root",
        created_at=created,
        heartbeat_at=created + timedelta(seconds=1),
        status="failed",
        finish_reason="failed",
        error=ErrorInfo(status="INTERNAL", message="intentional failure", details={"trace": ["x"]}),
        state=state,
        claimed_by="turn-x",
        claim_expires_at=created + timedelta(seconds=2),
        metadata={"agent": "bot", "resume": {"by": "u"}},
    )
    async with make_store() as store:
        written = await _put(store, snapshot)
        _equal(written.version, 1, "version of a new row")
        loaded = await _must_load(store, "a")
        _equal(loaded, written, "loaded snapshot")
        _equal(loaded.state, state, "loaded state")
        for name in ("created_at", "updated_at", "heartbeat_at", "claim_expires_at"):
            value: datetime | None = getattr(loaded, name)
            _expect(value is not None and value.utcoffset() is not None, f"{name} should be timezone-aware")
        _equal(loaded.created_at, created, "created_at")
        # the caller owns what it loaded: changing it does not change the store
        _messages_of(loaded).append(Message.user("local"))
        assert loaded.state is not None
        loaded.state.custom["count"] = 99
        _equal(await store.load("a"), written, "snapshot after changing a loaded copy")
        # a row without state (a pending detach) keeps state None
        pending = Snapshot(snapshot_id="p", session_id="s1", created_at=created, heartbeat_at=created, status="pending")
        await _put(store, pending)
        loaded_pending = await _must_load(store, "p")
        _expect(loaded_pending.state is None, "a snapshot saved without state loads without state")
        _equal(loaded_pending.status, "pending", "status")
        _equal(await store.load("missing"), None, "load of a missing snapshot")


async def check_updater_none_writes_nothing(make_store: StoreFactory) -> None:
    """An updater returning None writes nothing, and save returns None."""
    async with make_store() as store:
        seen: list[Snapshot | None] = []

        def nothing(current: Snapshot | None) -> Snapshot | None:
            seen.append(current)
            return None

        _equal(await store.save("a", nothing), None, "save with an updater returning None")
        _equal(seen, [None], "the updater of a missing row receives")
        _equal(await store.load("a"), None, "load after a None update")
        written = await _put(store, _snap("a", messages=_turn(0)))
        _equal(await store.save("a", nothing), None, "save with an updater returning None")
        _equal(await store.load("a"), written, "row after a None update")


async def check_updater_error_propagates(make_store: StoreFactory) -> None:
    """An updater that raises aborts the save; the error propagates and nothing is written."""

    def boom(_: Snapshot | None) -> Snapshot | None:
        raise ValueError("boom")

    async with make_store() as store:
        await _raises(ValueError, "save of a new row with a raising updater", store.save("a", boom))
        _equal(await store.load("a"), None, "row after a failed save")
        written = await _put(store, _snap("a", messages=_turn(0)))
        await _raises(ValueError, "save with a raising updater", store.save("a", boom))
        _equal(await store.load("a"), written, "row after a failed save")


async def check_versions(make_store: StoreFactory) -> None:
    """Every write bumps the version; created_at is kept and updated_at stamped."""
    async with make_store() as store:
        first = await _put(store, _snap("a", messages=_turn(0), at=0))
        _equal(first.version, 1, "version after the first write")
        for expected in (2, 3):
            written = await store.save("a", lambda cur: None if cur is None else cur.evolve(finish_reason="length"))
            _expect(written is not None, "an update of an existing row should write")
            assert written is not None
            _equal(written.version, expected, "version")
            _equal(written.created_at, first.created_at, "created_at after an update")
            _expect(written.updated_at is not None, "updated_at should be stamped")
            loaded = await _must_load(store, "a")
            _equal(loaded.version, expected, "loaded version")
            _equal(loaded.finish_reason, "length", "finish_reason")


async def check_session_id_is_fixed(make_store: StoreFactory) -> None:
    """A row cannot move to another session, and rows need a session id."""
    async with make_store() as store:
        written = await _put(store, _snap("a", "s1", messages=_turn(0)))
        moved = _snap("a", "s2", messages=_turn(0))
        await _raises(FailedPreconditionError, "moving a row to another session", store.save("a", lambda _: moved))
        _equal(await store.load("a"), written, "row after a refused move")
        nameless = Snapshot(snapshot_id="b", session_id="")
        await _raises(InvalidArgumentError, "a row without a session id", store.save("b", lambda _: nameless))
        _equal(await store.load("b"), None, "row without a session id")


async def check_terminal_status_absorbs(make_store: StoreFactory) -> None:
    """completed, failed and aborted never change status (FAILED_PRECONDITION), but may be rewritten."""
    async with make_store() as store:
        for status in ("completed", "failed", "aborted"):
            sid = f"row-{status}"
            await _put(store, _snap(sid, messages=_turn(0), status=status))
            await _raises(
                FailedPreconditionError,
                f"changing a {status} row's status",
                store.save(sid, lambda cur: None if cur is None else cur.evolve(status="pending")),
            )
            _equal((await _must_load(store, sid)).status, status, "status after a refused change")
            rewritten = await store.save(sid, lambda cur: None if cur is None else cur.evolve(finish_reason="other"))
            _expect(rewritten is not None and rewritten.finish_reason == "other", "a terminal row may be rewritten")


async def check_latest_linear(make_store: StoreFactory) -> None:
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


async def check_latest_branching(make_store: StoreFactory) -> None:
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


async def check_tenant_isolation(make_store: StoreFactory) -> None:
    """Another tenant's snapshots do not exist: load, latest, save, list, watch and delete see nothing."""
    async with make_store() as store:
        mine = await _put(store, _snap("x", "s1", messages=_turn(0), metadata={"agent": "a"}), tenant="acme")
        for other in (None, "globex"):
            _equal(await store.load("x", tenant=other), None, f"load from tenant {other!r}")
            _equal(await store.latest("s1", tenant=other), None, f"latest from tenant {other!r}")
            _equal(await store.list(tenant=other), [], f"list from tenant {other!r}")
            _equal([s async for s in store.watch("x", tenant=other)], [], f"watch from tenant {other!r}")
            _equal(await store.delete(["x"], tenant=other), 0, f"delete from tenant {other!r}")
        seen: list[Snapshot | None] = []
        theirs = _snap("x", "s-other", messages=_turn(9))

        def take(current: Snapshot | None) -> Snapshot | None:
            seen.append(current)
            return theirs

        await store.save("x", take, tenant="globex")
        _equal(seen, [None], "the updater in another tenant receives")
        _equal(await store.load("x", tenant="acme"), mine, "the first tenant's row after another tenant's save")
        _equal((await _must_load(store, "x", tenant="globex")).session_id, "s-other", "the second tenant's row")
        _equal([i.snapshot_id for i in await store.list(tenant="acme")], ["x"], "list of the first tenant")


async def _collect(store: SessionStore, snapshot_id: str, statuses: list[str], first: asyncio.Event) -> None:
    async for status in store.watch(snapshot_id):
        statuses.append(status)
        first.set()


async def check_watch_sees_abort(make_store: StoreFactory) -> None:
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


async def check_watch_ends(make_store: StoreFactory) -> None:
    """A watch of a terminal row yields its status and ends; a watch of a missing row ends at once."""
    async with make_store() as store:
        await _put(store, _snap("done", messages=_turn(0)))
        async with asyncio.timeout(10):
            _equal([s async for s in store.watch("done")], ["completed"], "watch of a completed row")
            _equal([s async for s in store.watch("missing")], [], "watch of a missing row")


async def check_list_filters(make_store: StoreFactory) -> None:
    """Listing: newest first, filtered by session and finish reason, with the agent from metadata."""
    async with make_store() as store:
        await _put(store, _snap("a", "s1", messages=_turn(0), at=0, metadata={"agent": "bot"}))
        await _put(
            store,
            _snap("b", "s1", "a", messages=_turn(1), at=1, finish_reason="interrupted", metadata={"agent": "bot"}),
        )
        await _put(store, _snap("c", "s2", messages=_turn(2), at=2))
        infos = await store.list()
        _equal([i.snapshot_id for i in infos], ["c", "b", "a"], "list order")
        b = infos[1]
        _equal(
            (b.session_id, b.parent_id, b.created_at, b.status, b.finish_reason, b.agent),
            ("s1", "a", _at(1), "completed", "interrupted", "bot"),
            "snapshot info",
        )
        _equal(infos[0].agent, None, "agent of a row without metadata")
        _equal([i.snapshot_id for i in await store.list(session_id="s1")], ["b", "a"], "list of one session")
        _equal([i.snapshot_id for i in await store.list(finish_reason="interrupted")], ["b"], "list by finish reason")
        _equal(await store.list(session_id="s2", finish_reason="interrupted"), [], "list with both filters")


async def check_delete_keeps_history(make_store: StoreFactory) -> None:
    """Deleting snapshots (a middle ancestor, the root) leaves every other one loadable with its full history."""
    async with make_store() as store:
        histories = await _chain(store, 6)
        _equal(await store.delete(["t2"]), 1, "deleted count")
        _equal(await store.delete(["t2", "nope"]), 0, "deleted count of missing rows")
        _equal(await store.load("t2"), None, "a deleted snapshot")
        for i in (5, 3, 4, 1, 0):
            _equal(_messages_of(await _must_load(store, f"t{i}")), histories[i], f"history of t{i}")
        _equal(await store.delete(["t0", "t4"]), 2, "deleted count")
        for i in (5, 3, 1):
            _equal(_messages_of(await _must_load(store, f"t{i}")), histories[i], f"history of t{i}")
        leaf = await store.latest("s1")
        _equal(None if leaf is None else leaf.snapshot_id, "t5", "latest after deletes")


async def check_rewrite_keeps_others(make_store: StoreFactory) -> None:
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


async def check_bookkeeping_keeps_state(make_store: StoreFactory) -> None:
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


async def check_long_chain(make_store: StoreFactory) -> None:
    """A 200-turn chain loads with its full history, at the leaf and in the middle."""
    async with make_store() as store:
        histories = await _chain(store, 200)
        leaf = await store.latest("s1")
        _expect(leaf is not None and leaf.snapshot_id == "t199", "latest of a long chain")
        assert leaf is not None
        _equal(len(_messages_of(leaf)), 400, "messages at the leaf")
        _equal(_messages_of(leaf), histories[199], "history at the leaf")
        _equal(_messages_of(await _must_load(store, "t100")), histories[100], "history in the middle")


async def check_concurrent_saves(make_store: StoreFactory) -> None:
    """50 concurrent read-modify-write saves of one row never lose an update."""

    def increment(current: Snapshot | None) -> Snapshot | None:
        assert current is not None and current.state is not None
        state = current.state.copy()
        state.custom = {"n": state.custom["n"] + 1}
        return current.evolve(state=state)

    async with make_store() as store:
        await _put(store, _snap("c", messages=_turn(0), custom={"n": 0}))
        await asyncio.gather(*(store.save("c", increment) for _ in range(50)))
        loaded = await _must_load(store, "c")
        assert loaded.state is not None
        _equal(loaded.state.custom, {"n": 50}, "counter after 50 concurrent increments")
        _equal(loaded.version, 51, "version after 51 writes")


async def check_save_all_is_atomic(make_store: StoreFactory) -> None:
    """save_all writes every row or, when one updater raises, none; each updater sees its own row."""

    def boom(_: Snapshot | None) -> Snapshot | None:
        raise ValueError("boom")

    async with make_store() as store:
        first = await _put(store, _snap("a", messages=_turn(0)))
        new_b = _snap("b", parent_id="a", messages=[*_turn(0), *_turn(1)])
        await _raises(
            ValueError, "save_all with a raising updater", store.save_all([("b", lambda _: new_b), ("a", boom)])
        )
        _equal(await store.load("b"), None, "a row staged before a raising updater")
        _equal(await store.load("a"), first, "the other row after a failed save_all")
        seen: list[str | None] = []

        def mark(cur: Snapshot | None) -> Snapshot | None:
            seen.append(None if cur is None else cur.snapshot_id)
            return None if cur is None else cur.evolve(claimed_by="b", claim_expires_at=None)

        written = await store.save_all([("a", mark), ("b", lambda _: new_b), ("c", lambda _: None)])
        _equal(seen, ["a"], "the updater of an existing row receives it")
        _equal([w.snapshot_id if w else None for w in written], ["a", "b", None], "what save_all returns")
        _equal((await _must_load(store, "a")).claimed_by, "b", "the first row after save_all")
        _equal(_messages_of(await _must_load(store, "b")), [*_turn(0), *_turn(1)], "the second row after save_all")


async def check_tenant_rule(make_store: StoreFactory) -> None:
    """A tenant is None or a non-empty string: '' and non-strings are refused, not folded into None."""
    from ..errors import InvalidArgumentError

    async with make_store() as store:
        await _put(store, _snap("x", messages=_turn(0)))
        for bad in ("", 0):
            await _raises(InvalidArgumentError, f"load with tenant {bad!r}", store.load("x", tenant=bad))  # type: ignore[arg-type]
            await _raises(InvalidArgumentError, f"list with tenant {bad!r}", store.list(tenant=bad))  # type: ignore[arg-type]


async def check_ready(make_store: StoreFactory) -> None:
    """A usable store is ready (and stays usable after the check)."""
    async with make_store() as store:
        await store.ready()
        await _put(store, _snap("r", messages=_turn(0)))
        await store.ready()
        _equal(_messages_of(await _must_load(store, "r")), _turn(0), "row after ready")


STORE_CHECKS: list[StoreCheck] = [
    check_round_trip,
    check_updater_none_writes_nothing,
    check_updater_error_propagates,
    check_versions,
    check_session_id_is_fixed,
    check_terminal_status_absorbs,
    check_latest_linear,
    check_latest_branching,
    check_tenant_isolation,
    check_watch_sees_abort,
    check_watch_ends,
    check_list_filters,
    check_delete_keeps_history,
    check_rewrite_keeps_others,
    check_bookkeeping_keeps_state,
    check_long_chain,
    check_concurrent_saves,
    check_save_all_is_atomic,
    check_tenant_rule,
    check_ready,
    *JOURNAL_CHECKS,
    *OUTBOX_CHECKS,
    *INDEX_CHECKS,
]
"""Every store conformance check, in order (each opens its own fresh stores)."""
