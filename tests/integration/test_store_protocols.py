"""The store seam split by capability: the Protocols' sizes, every store has every one, parts ask for theirs.

``SnapshotStore`` is the core (at most 7 methods); ``JournalStore``, ``OutboxStore``,
``InterruptIndex`` and ``StoreAdmin`` are the rest, and ``SessionStore`` is all of them. The
typing side (pyright) is ``tests/typing/check_stores.py``.
"""

from __future__ import annotations

import inspect
import pathlib
import sqlite3
import sys
from collections.abc import AsyncGenerator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
from pg import fresh_dsn

from interlock import InMemoryStore
from interlock._engine.commit import Claims, TurnWriter
from interlock._engine.effects import Effects
from interlock.cli import _inbox as cli_inbox
from interlock.cli import _notify as cli_notify
from interlock.errors import FailedPreconditionError
from interlock.http import _health as health
from interlock.notify._webhooks import Webhooks
from interlock.records._sessions import Snapshot
from interlock.stores import (
    InterruptIndex,
    JournalStore,
    OutboxStore,
    SessionStore,
    SnapshotStore,
    StoreAdmin,
)
from interlock.stores.postgres import PostgresStore
from interlock.stores.postgres._schema import TABLE
from interlock.stores.sqlite import SQLiteStore

CAPABILITIES: dict[type, set[str]] = {
    SnapshotStore: {"load", "latest", "save", "save_all", "watch", "ready"},
    JournalStore: {"journal_get", "journal_put", "journal_entries"},
    OutboxStore: {"outbox_claim", "outbox_settle", "outbox_events", "outbox_retry", "outbox_prune"},
    InterruptIndex: {"open_interrupts"},
    StoreAdmin: {"list", "delete", "prune"},
}


def methods(protocol: type) -> set[str]:
    """The methods a Protocol declares itself (not those of the Protocols it extends)."""
    return {name for name, value in vars(protocol).items() if inspect.isfunction(value) and not name.startswith("_")}


def test_the_core_has_at_most_seven_methods_and_each_capability_its_own() -> None:
    assert len(methods(SnapshotStore)) <= 7
    for protocol, expected in CAPABILITIES.items():
        assert methods(protocol) == expected, protocol.__name__


def test_session_store_is_every_capability_and_nothing_else() -> None:
    assert methods(SessionStore) == set()
    assert set(inspect.getmro(SessionStore)) >= set(CAPABILITIES)
    assert {name for p in CAPABILITIES for name in methods(p)} == set().union(*CAPABILITIES.values())
    assert sum(len(m) for m in CAPABILITIES.values()) == 18  # disjoint: no method in two capabilities


def test_prune_and_then_are_on_the_protocols_they_belong_to() -> None:
    prune = inspect.signature(StoreAdmin.prune).parameters
    assert list(prune)[1:] == ["session_id", "keep_last", "older_than", "tenant"]
    assert "then" in inspect.signature(SnapshotStore.save_all).parameters


@pytest.mark.parametrize("store", [InMemoryStore, SQLiteStore, PostgresStore], ids=lambda c: c.__name__)
def test_every_store_has_every_capability_with_the_protocols_keywords(store: type) -> None:
    for protocol in (*CAPABILITIES, SessionStore):
        assert issubclass(store, protocol), (store.__name__, protocol.__name__)
    for protocol, names in CAPABILITIES.items():
        for name in names:
            wanted = inspect.signature(getattr(protocol, name)).parameters
            has = inspect.signature(getattr(store, name)).parameters
            assert list(has) == list(wanted), f"{store.__name__}.{name}"


def _hint(fn: Callable[..., Any] | type, name: str) -> object:
    """The class a parameter or field is annotated with (one name, looked up in its module)."""
    annotation = inspect.get_annotations(fn)[name]
    return getattr(sys.modules[fn.__module__], annotation) if isinstance(annotation, str) else annotation


def test_each_engine_part_asks_for_the_capability_it_uses() -> None:
    assert _hint(Effects, "store") is JournalStore
    assert _hint(Claims.__init__, "store") is SnapshotStore
    assert _hint(health._check, "store") is SnapshotStore  # pyright: ignore[reportPrivateUsage]
    assert _hint(Webhooks.deliver_due, "store") is OutboxStore
    assert _hint(Webhooks.run, "store") is OutboxStore
    assert _hint(cli_notify._prune, "store") is OutboxStore  # pyright: ignore[reportPrivateUsage]
    assert _hint(cli_inbox._prune, "store") is StoreAdmin  # pyright: ignore[reportPrivateUsage]
    turn_store = _hint(TurnWriter, "store")
    assert isinstance(turn_store, type)
    assert set(inspect.getmro(turn_store)) >= {SnapshotStore, JournalStore}
    assert not set(inspect.getmro(turn_store)) & {OutboxStore, InterruptIndex, StoreAdmin}


# then= on every store -------------------------------------------------------------------------


@asynccontextmanager
async def open_store(kind: str, tmp_path: pathlib.Path) -> AsyncGenerator[SessionStore]:
    if kind == "memory":
        yield InMemoryStore()
    elif kind == "postgres":
        async with PostgresStore(fresh_dsn()) as store:
            yield store
    else:
        async with SQLiteStore(tmp_path / "then.db") as store:
            yield store


def row(snapshot_id: str) -> Snapshot:
    return Snapshot(snapshot_id=snapshot_id, session_id="s")


@pytest.mark.parametrize("kind", ["memory", "sqlite", "postgres"])
async def test_a_plain_step_runs_in_the_save_with_the_stores_handle(kind: str, tmp_path: pathlib.Path) -> None:
    handles: list[object] = []
    async with open_store(kind, tmp_path) as store:
        written = await store.save_all([("a", lambda _: row("a"))], then=[handles.append])
        assert [w.snapshot_id for w in written if w] == ["a"]
    (handle,) = handles
    expected = {"memory": type(None), "sqlite": sqlite3.Connection}.get(kind)
    if expected is not None:
        assert isinstance(handle, expected)
    else:
        assert type(handle).__module__.startswith("psycopg")


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_an_awaitable_step_is_refused_where_steps_run_synchronously(kind: str, tmp_path: pathlib.Path) -> None:
    async def step(_: object) -> None:
        raise AssertionError("an async step of a synchronous store never runs")

    async with open_store(kind, tmp_path) as store:
        with pytest.raises(FailedPreconditionError, match="plain function"):
            await store.save_all([("a", lambda _: row("a"))], then=[step])
        assert await store.load("a") is None


async def test_postgres_awaits_an_async_step_inside_the_transaction() -> None:
    seen: list[object] = []

    async def step(con: Any) -> None:
        found = await (await con.execute("SELECT count(*) FROM " + TABLE)).fetchone()
        seen.append(found[0])

    async with open_store("postgres", pathlib.Path()) as store:
        await store.save_all([("a", lambda _: row("a"))], then=[step])
    assert seen == [1]  # it saw the row its save wrote, before the commit
