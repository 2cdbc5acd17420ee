"""The stores the shared test bodies run on, and where a test's store lives.

A test names its store by a *location*: a path. For SQLite the path is the database file;
for PostgreSQL it is a small file holding the DSN of a fresh schema of the session's
cluster (see ``pg.fresh_dsn``). Worker processes get the same path on their command line,
so :func:`store_at` opens the same store in every process.
"""

from __future__ import annotations

import os
import pathlib
from collections.abc import AsyncGenerator, Callable
from contextlib import asynccontextmanager

from pg import fresh_dsn

from interlock import InMemoryStore
from interlock.stores import SessionStore
from interlock.stores.postgres import PostgresStore
from interlock.stores.sqlite import SQLiteStore

KINDS = ("sqlite", "postgres")
"""The stores shared between processes (the memory store is not)."""
LOCAL = ("memory", "sqlite")
"""The stores the unit tier runs on: in this process, no server."""

_PREFIX = "interlock-test-postgres:"


def locate(kind: str, path: pathlib.Path) -> pathlib.Path:
    """A new, empty store of ``kind`` at ``path`` (for PostgreSQL: a file naming a fresh schema)."""
    if kind == "postgres":
        path.write_text(_PREFIX + fresh_dsn())
    elif kind != "sqlite":
        raise ValueError(f"unknown store kind {kind!r}")
    return path


def dsn_at(location: str | os.PathLike[str]) -> str | None:
    """The PostgreSQL DSN a location names, or ``None`` for a SQLite file."""
    path = pathlib.Path(location)
    try:
        with path.open("rb") as f:
            head = f.read(len(_PREFIX))
    except FileNotFoundError:
        return None
    return path.read_text()[len(_PREFIX) :].strip() if head == _PREFIX.encode() else None


def store_at(location: str | os.PathLike[str]) -> SQLiteStore | PostgresStore:
    """The store at a location (not opened yet; use it as an async context manager)."""
    dsn = dsn_at(location)
    return SQLiteStore(location) if dsn is None else PostgresStore(dsn)


async def integrity(location: str | os.PathLike[str]) -> str:
    """``ok`` if the store is sound: SQLite's integrity_check, and every snapshot loads with its history."""
    problems: list[str] = []
    if dsn_at(location) is None:
        import contextlib
        import sqlite3

        with contextlib.closing(sqlite3.connect(location)) as con:
            verdict = str(con.execute("PRAGMA integrity_check").fetchone()[0])
        if verdict != "ok":
            problems.append(verdict)
    async with store_at(location) as store:
        for info in await store.list():
            try:
                await store.load(info.snapshot_id)
            except Exception as exc:  # a damaged row is what this reports
                problems.append(f"{info.snapshot_id}: {exc}")
    return "; ".join(problems) or "ok"


@asynccontextmanager
async def stores_of(kind: str, directory: pathlib.Path) -> AsyncGenerator[Callable[[], SessionStore]]:
    """A factory of fresh stores of ``kind`` (``memory`` too) for one test; closes what it made afterwards."""
    made: list[SessionStore] = []

    def make() -> SessionStore:
        store = InMemoryStore() if kind == "memory" else store_at(locate(kind, directory / f"store{len(made)}.db"))
        made.append(store)
        return store

    try:
        yield make
    finally:
        for store in made:
            if isinstance(store, SQLiteStore | PostgresStore):
                await store.close()


@asynccontextmanager
async def open_store(kind: str, directory: pathlib.Path) -> AsyncGenerator[SessionStore]:
    """One fresh, open store of ``kind`` (``memory``, ``sqlite`` or ``postgres``) in ``directory``; closed after."""
    if kind == "memory":
        yield InMemoryStore()
        return
    async with store_at(locate(kind, directory / "s.db")) as store:
        yield store
