"""The PostgreSQL store's LISTEN connection: status changes wake the watchers of their rows.

A save that changes a row's status notifies :data:`~._schema.CHANNEL` with
``[tenant, snapshot_id]`` in its transaction (PostgreSQL delivers it at commit). One
connection per store listens and sets the events of that row's watchers, which then read
the row. After a lost connection it reconnects with a growing delay and wakes every watcher
once, since changes made meanwhile were not heard.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import psycopg
from psycopg import AsyncConnection

from ._plumbing import connect_seconds
from ._schema import CHANNEL

Guard = Callable[[Callable[[], Awaitable[Any]]], Awaitable[Any]]
"""Runs a coroutine function with PostgreSQL's failures as typed interlock errors (the store's)."""


class Listener:
    """One LISTEN connection per store, waking the watchers of the rows whose status changed."""

    def __init__(self, dsn: str, timeout: float, guard: Guard) -> None:
        self._dsn = dsn
        self._timeout = timeout
        self._guard = guard
        self._waiters: dict[tuple[str, str], set[asyncio.Event]] = {}
        self._task: asyncio.Task[None] | None = None
        self._listening: asyncio.Future[None] | None = None

    @asynccontextmanager
    async def waiting(self, tenant: str, snapshot_id: str, wake: asyncio.Event) -> AsyncGenerator[None, None]:
        """Register ``wake`` for the row, after the listener listens (so no change is missed)."""
        key = (tenant, snapshot_id)
        self._waiters.setdefault(key, set()).add(wake)
        try:
            await self._start()
            yield
        finally:
            events = self._waiters.get(key)
            if events is not None:
                events.discard(wake)
                if not events:
                    del self._waiters[key]

    async def _start(self) -> None:
        if self._task is None or self._task.done():
            self._listening = asyncio.get_running_loop().create_future()
            self._task = asyncio.create_task(self._run(), name="interlock-postgres-listener")
        listening = self._listening
        if listening is not None and not listening.done():
            await self._guard(lambda: asyncio.wait_for(asyncio.shield(listening), self._timeout))
        elif listening is not None and listening.exception() is not None:
            self._task = None
            await self._guard(lambda: listening)

    async def _run(self) -> None:
        delay = 0.05
        while True:
            try:
                con = await AsyncConnection.connect(
                    self._dsn, autocommit=True, connect_timeout=connect_seconds(self._timeout)
                )
                async with con:
                    await con.execute(f"LISTEN {CHANNEL}")
                    if self._listening is not None and not self._listening.done():
                        self._listening.set_result(None)
                    delay = 0.05
                    self._wake_all()  # changes made while nobody listened
                    async for note in con.notifies():
                        self._dispatch(note.payload)
            except psycopg.Error as exc:
                if self._listening is not None and not self._listening.done():
                    self._listening.set_exception(exc)
                    return
                self._wake_all()
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)

    def _dispatch(self, payload: str) -> None:
        try:
            tenant, snapshot_id = json.loads(payload)
        except (ValueError, TypeError):
            return
        for wake in self._waiters.get((tenant, snapshot_id), ()):
            wake.set()

    def _wake_all(self) -> None:
        for events in self._waiters.values():
            for wake in events:
                wake.set()

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, psycopg.Error):
                await task
        self._wake_all()
