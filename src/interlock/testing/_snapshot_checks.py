"""The core conformance checks: a :class:`~interlock.stores.SnapshotStore` (:data:`SNAPSHOT_CHECKS`).

Here one row's writes: a snapshot loads back equal (every field, full state); updaters that
return None or raise write nothing; every write bumps the version; a row's session and a
terminal status are fixed; concurrent saves lose no update; ``save_all`` is atomic, its
``then`` steps too; a store is ready. A session's rows together are checked by
:mod:`._session_checks`; :data:`SNAPSHOT_CHECKS` runs both.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING

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
from ..records._sessions import Artifact, ErrorInfo, SessionState, Snapshot
from ..stores import SnapshotStore
from . import _session_checks as rows
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


async def check_round_trip(make_store: _Factory) -> None:
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


async def check_updater_none_writes_nothing(make_store: _Factory) -> None:
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


async def check_updater_error_propagates(make_store: _Factory) -> None:
    """An updater that raises aborts the save; the error propagates and nothing is written."""

    def boom(_: Snapshot | None) -> Snapshot | None:
        raise ValueError("boom")

    async with make_store() as store:
        await _raises(ValueError, "save of a new row with a raising updater", store.save("a", boom))
        _equal(await store.load("a"), None, "row after a failed save")
        written = await _put(store, _snap("a", messages=_turn(0)))
        await _raises(ValueError, "save with a raising updater", store.save("a", boom))
        _equal(await store.load("a"), written, "row after a failed save")


async def check_versions(make_store: _Factory) -> None:
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


async def check_session_id_is_fixed(make_store: _Factory) -> None:
    """A row cannot move to another session, and rows need a session id."""
    async with make_store() as store:
        written = await _put(store, _snap("a", "s1", messages=_turn(0)))
        moved = _snap("a", "s2", messages=_turn(0))
        await _raises(FailedPreconditionError, "moving a row to another session", store.save("a", lambda _: moved))
        _equal(await store.load("a"), written, "row after a refused move")
        nameless = Snapshot(snapshot_id="b", session_id="")
        await _raises(InvalidArgumentError, "a row without a session id", store.save("b", lambda _: nameless))
        _equal(await store.load("b"), None, "row without a session id")


async def check_terminal_status_absorbs(make_store: _Factory) -> None:
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


async def check_concurrent_saves(make_store: _Factory) -> None:
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


async def check_save_all_is_atomic(make_store: _Factory) -> None:
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


async def check_ready(make_store: _Factory) -> None:
    """A usable store is ready (and stays usable after the check)."""
    async with make_store() as store:
        await store.ready()
        await _put(store, _snap("r", messages=_turn(0)))
        await store.ready()
        _equal(_messages_of(await _must_load(store, "r")), _turn(0), "row after ready")


async def check_save_all_then(make_store: _Factory) -> None:
    """save_all's ``then`` steps run in order after its updaters, once; one that raises writes nothing."""

    def boom(_: object) -> None:
        raise ValueError("boom")

    async with make_store() as store:
        order: list[str] = []

        def row(_: Snapshot | None) -> Snapshot | None:
            order.append("update")
            return _snap("a", messages=_turn(0))

        await store.save_all([("a", row)], then=[lambda _: order.append("first"), lambda _: order.append("second")])
        _equal(order, ["update", "first", "second"], "the order of updaters and steps")
        first = await _must_load(store, "a")
        again = _snap("b", parent_id="a", messages=_turn(1))
        await _raises(
            ValueError,
            "save_all with a raising step",
            store.save_all(
                [("a", lambda cur: None if cur is None else cur.evolve(claimed_by="x")), ("b", lambda _: again)],
                then=[boom],
            ),
        )
        _equal(await store.load("a"), first, "a row updated in a save_all whose step raised")
        _equal(await store.load("b"), None, "a row created in a save_all whose step raised")


SNAPSHOT_CHECKS: list[Callable[[_Factory], Awaitable[None]]] = [
    check_round_trip,
    check_updater_none_writes_nothing,
    check_updater_error_propagates,
    check_versions,
    check_session_id_is_fixed,
    check_terminal_status_absorbs,
    rows.check_latest_linear,
    rows.check_latest_branching,
    rows.check_watch_sees_abort,
    rows.check_watch_ends,
    rows.check_rewrite_keeps_others,
    rows.check_bookkeeping_keeps_state,
    rows.check_long_chain,
    check_concurrent_saves,
    check_save_all_is_atomic,
    check_ready,
    check_save_all_then,
]
"""The core checks, in order: what every store must pass, whatever else it can do."""
