"""Tracing a SQLite store's statements and asking SQLite for their plans (the layout tests' kit)."""

from __future__ import annotations

import pathlib
import sqlite3
from collections.abc import AsyncGenerator
from contextlib import AbstractAsyncContextManager, asynccontextmanager

from banking import PAY, transfer

from interlock import PromptAgent
from interlock.inbox._inbox import Inbox
from interlock.stores import SessionStore
from interlock.stores.sqlite import SQLiteStore
from interlock.testing import ScriptedModel
from interlock.testing._kinds import StoreFactoryOf


def traced_factory(tmp_path: pathlib.Path, statements: list[str]) -> StoreFactoryOf[SQLiteStore]:
    """A factory of SQLite stores (a new file each) whose every statement is appended to ``statements``."""
    files = iter(range(1_000))

    @asynccontextmanager
    async def make(*, reject_branching: bool = False) -> AsyncGenerator[SQLiteStore]:
        async with SQLiteStore(tmp_path / f"s{next(files)}.db", reject_branching=reject_branching) as store:
            await store.ready()
            con = store._con  # pyright: ignore[reportPrivateUsage]
            assert con is not None
            con.set_trace_callback(statements.append)
            yield store

    def factory(*, reject_branching: bool = False) -> AbstractAsyncContextManager[SQLiteStore]:
        return make(reject_branching=reject_branching)

    return factory


async def inbox_cycle(store: SessionStore) -> None:
    """Pause a transfer, list it, approve it through the inbox (claim, resume)."""
    agent = PromptAgent("bank", ScriptedModel([PAY, "paid"]), tools=[transfer], store=store)
    paused = await agent.run("pay bob 5")
    assert paused.snapshot_id is not None
    inbox = Inbox(store, agents=[agent])
    assert [i.snapshot_id for i in await inbox.pending()] == [paused.snapshot_id]
    out = await inbox.approve(paused.snapshot_id)
    assert out.finish_reason == "stop" and await inbox.pending() == []


def plan(con: sqlite3.Connection, sql: str) -> list[str]:
    return [detail for *_, detail in con.execute("EXPLAIN QUERY PLAN " + sql)]
