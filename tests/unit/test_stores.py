"""Every store passes the conformance suite (interlock.testing.STORE_CHECKS); prune semantics."""

from __future__ import annotations

import itertools
import pathlib
from collections.abc import AsyncGenerator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pg import fresh_dsn

from interlock import InMemoryStore, Message, Snapshot
from interlock.errors import InvalidArgumentError
from interlock.records._sessions import SessionState
from interlock.stores import SessionStore
from interlock.stores.postgres import PostgresStore
from interlock.stores.sqlite import SQLiteStore
from interlock.testing import STORE_CHECKS, StoreCheck, StoreFactory, check_store, store_factory

T0 = datetime(2025, 1, 1, tzinfo=UTC)


def sqlite_factory(tmp_path: pathlib.Path) -> StoreFactory:
    counter = itertools.count()

    def make(*, reject_branching: bool = False) -> AbstractAsyncContextManager[SessionStore]:
        return SQLiteStore(tmp_path / f"store-{next(counter)}.db", reject_branching=reject_branching)

    return make


def postgres_factory() -> StoreFactory:
    def make(*, reject_branching: bool = False) -> AbstractAsyncContextManager[SessionStore]:
        return PostgresStore(fresh_dsn(), reject_branching=reject_branching)

    return make


@pytest.fixture
def make_store(store_kind: str, tmp_path: pathlib.Path) -> StoreFactory:
    if store_kind == "memory":
        return store_factory(InMemoryStore)
    if store_kind == "postgres":
        return postgres_factory()
    return sqlite_factory(tmp_path)


@pytest.fixture
def kind(store_kind: str) -> str:
    """The prune tests' store: each kind of the tier (tests/conftest.py's ``store_kind``)."""
    return store_kind


@pytest.mark.parametrize("check", STORE_CHECKS, ids=lambda c: c.__name__)
async def test_store_conformance(make_store: StoreFactory, check: StoreCheck) -> None:
    await check(make_store)


async def test_check_store_runs_every_check() -> None:
    await check_store(store_factory(InMemoryStore))


async def test_check_store_names_the_failing_check() -> None:
    class Forgetful(InMemoryStore):
        async def load(self, snapshot_id: str, *, tenant: str | None = None) -> Snapshot | None:
            return None

    with pytest.raises(AssertionError, match=r"^check_round_trip: "):
        await check_store(store_factory(Forgetful))


async def test_sqlite_store_is_a_session_store(tmp_path: pathlib.Path) -> None:
    async with SQLiteStore(tmp_path / "x.db") as store:
        assert isinstance(store, SessionStore)


# prune ----------------------------------------------------------------------------------------


@asynccontextmanager
async def open_store(kind: str, tmp_path: pathlib.Path) -> AsyncGenerator[Any]:
    if kind == "memory":
        yield InMemoryStore()
    elif kind == "postgres":
        async with PostgresStore(fresh_dsn()) as store:
            yield store
    else:
        async with SQLiteStore(tmp_path / "prune.db") as store:
            yield store


def turn(i: int) -> list[Message]:
    return [Message.user(f"q{i}"), Message.model(f"a{i}")]


async def write_chain(
    store: Any,
    ids: list[str],
    *,
    session_id: str = "s",
    parent: str | None = None,
    start: int = 0,
) -> dict[str, list[Message]]:
    """A chain of snapshots, one turn each, created one minute apart from T0 + start minutes."""
    histories: dict[str, list[Message]] = {}
    messages: list[Message] = []
    if parent is not None:
        loaded = await store.load(parent)
        messages = list(loaded.state.messages)
    for n, sid in enumerate(ids):
        messages = messages + turn(start + n)
        snap = Snapshot(
            snapshot_id=sid,
            session_id=session_id,
            parent_id=parent,
            created_at=T0 + timedelta(minutes=start + n),
            state=SessionState(session_id=session_id, messages=list(messages)),
        )
        await store.save(sid, lambda _, s=snap: s)  # pyright: ignore[reportUnknownLambdaType]
        histories[sid] = list(messages)
        parent = sid
    return histories


async def ids_of(store: Any, **filters: Any) -> set[str]:
    return {i.snapshot_id for i in await store.list(**filters)}


async def test_prune_keep_last_keeps_each_leafs_recent_chain(kind: str, tmp_path: pathlib.Path) -> None:
    async with open_store(kind, tmp_path) as store:
        histories = await write_chain(store, [f"a{i}" for i in range(6)])
        histories |= await write_chain(store, ["b0", "b1"], parent="a2", start=10)
        histories |= await write_chain(store, ["o0", "o1", "o2"], session_id="other", start=20)
        assert await store.prune(session_id="s", keep_last=2) == 4  # a0, a1, a2, a3 go
        assert await ids_of(store, session_id="s") == {"a4", "a5", "b0", "b1"}
        assert await ids_of(store, session_id="other") == {"o0", "o1", "o2"}
        for sid in ("a4", "a5", "b0", "b1"):
            assert (await store.load(sid)).state.messages == histories[sid]
        assert (await store.latest("s")).snapshot_id == "b1"
        assert await store.prune(keep_last=1) == 4  # all sessions of the tenant: a4, b0, o0, o1 (not the leaves)
        assert await ids_of(store) == {"a5", "b1", "o2"}
        for sid in ("a5", "b1", "o2"):
            assert (await store.load(sid)).state.messages == histories[sid]


async def test_prune_older_than_and_pending(kind: str, tmp_path: pathlib.Path) -> None:
    async with open_store(kind, tmp_path) as store:
        histories = await write_chain(store, [f"a{i}" for i in range(5)])
        pending = Snapshot(
            snapshot_id="p", session_id="s", parent_id="a4", created_at=T0, heartbeat_at=T0, status="pending"
        )
        await store.save("p", lambda _: pending)  # pyright: ignore[reportUnknownLambdaType]
        # older than minute 3: a0..a2 go; a3, a4 are newer; p is pending (and old)
        assert await store.prune(older_than=T0 + timedelta(minutes=3)) == 3
        assert await ids_of(store) == {"a3", "a4", "p"}
        assert (await store.load("a4")).state.messages == histories["a4"]
        # both: only rows outside the last 2 of the leaf's chain AND older than the cutoff
        assert await store.prune(keep_last=2, older_than=T0 + timedelta(hours=1)) == 1  # a3 (p, a4 kept)
        assert await ids_of(store) == {"a4", "p"}
        assert await store.prune(older_than=T0 + timedelta(hours=1), tenant="nobody") == 0
        assert await ids_of(store) == {"a4", "p"}
        assert await store.prune(older_than=T0 + timedelta(hours=1)) == 1  # a4; the pending row stays
        assert await ids_of(store) == {"p"}


async def test_prune_needs_a_criterion(kind: str, tmp_path: pathlib.Path) -> None:
    async with open_store(kind, tmp_path) as store:
        with pytest.raises(InvalidArgumentError, match="keep_last, older_than"):
            await store.prune()
        with pytest.raises(InvalidArgumentError, match="at least 1"):
            await store.prune(keep_last=0)
