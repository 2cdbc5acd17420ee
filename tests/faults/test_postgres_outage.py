"""During a PostgreSQL outage a store call fails with UNAVAILABLE after the pool timeout, instead of waiting.

A cluster of its own (so freezing it stops no other test): its postmaster is stopped with
SIGSTOP (it accepts no connection: a new one waits) and the store's connections are
terminated, as when the server restarts or hangs. Every call must end with UNAVAILABLE,
saying that retrying may help; once the postmaster runs again, the same store serves again.
Then the cluster is shut down for good: calls still end with UNAVAILABLE. Every wait is
bounded, so a hang fails the test instead of blocking it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pathlib
import signal
from collections.abc import Awaitable, Iterator
from typing import Any

import psycopg
import pytest
from pg import start_cluster, stop_cluster

from interlock.errors import UnavailableError
from interlock.records._sessions import Snapshot
from interlock.stores.postgres import PostgresStore

WAIT = 20.0
"""Seconds a call may take before the test calls it a hang (the pool timeout is 5 s by default)."""


@pytest.fixture
def cluster() -> Iterator[tuple[str, str]]:
    dsn, directory = start_cluster()
    try:
        yield dsn, directory
    finally:
        stop_cluster(directory)


def postmaster(directory: str) -> int:
    return int((pathlib.Path(directory) / "data" / "postmaster.pid").read_text().split()[0])


async def unavailable(call: Awaitable[Any]) -> UnavailableError:
    with pytest.raises(UnavailableError) as info:
        async with asyncio.timeout(WAIT):
            await call
    assert info.value.status == "UNAVAILABLE" and info.value.message.endswith("retrying may help")
    return info.value


async def until_served(store: PostgresStore) -> Snapshot | None:
    async with asyncio.timeout(WAIT):
        while True:
            try:
                return await store.load("a")
            except UnavailableError:
                await asyncio.sleep(0.1)


def _clients(postmaster: int, keep: int) -> list[int]:
    """The postmaster's children that serve a client, or were forked to (still its title), but ``keep``.

    Read from ``/proc``, not ``pg_stat_activity``: a backend forked just before the postmaster
    stopped may not be listed there yet, and would serve the store's next call.
    """
    own = pathlib.Path(f"/proc/{postmaster}/cmdline").read_bytes()
    found: list[int] = []
    for entry in pathlib.Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == keep:
            continue
        try:
            stat, title = (entry / "stat").read_text(), (entry / "cmdline").read_bytes()
        except OSError:  # gone meanwhile
            continue
        state, parent = stat.rsplit(")", 1)[1].split()[:2]
        if int(parent) == postmaster and state not in ("Z", "X") and (b"127.0.0.1(" in title or title == own):
            found.append(int(entry.name))
    return found


async def terminated(admin: psycopg.AsyncConnection[Any], postmaster: int) -> None:
    """End every client backend but ``admin``'s and wait until each has exited (its socket closed)."""
    found = await (await admin.execute("SELECT pg_backend_pid()")).fetchone()
    assert found is not None
    async with asyncio.timeout(WAIT):
        while clients := _clients(postmaster, found[0]):
            for pid in clients:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGTERM)  # what pg_terminate_backend sends
            await asyncio.sleep(0.01)


def snap(sid: str) -> Snapshot:
    return Snapshot(snapshot_id=sid, session_id="s")


async def test_calls_fail_unavailable_within_the_pool_timeout_during_an_outage(cluster: tuple[str, str]) -> None:
    dsn, directory = cluster
    pid = postmaster(directory)
    async with PostgresStore(dsn) as store, await psycopg.AsyncConnection.connect(dsn, autocommit=True) as admin:
        await store.save("a", lambda _: snap("a"))
        os.kill(pid, signal.SIGSTOP)  # no new connection is accepted; the ones open still work
        try:
            await terminated(admin, pid)
            for call in (store.load("a"), store.load("a"), store.save("b", lambda _: snap("b")), store.ready()):
                await unavailable(call)
            waited = await unavailable(store.list())
            assert "found no connection to the database within 5 s" in waited.message  # the pool timeout
        finally:
            os.kill(pid, signal.SIGCONT)
        served = await until_served(store)  # the same store serves again
        assert served is not None and served.snapshot_id == "a"
        await store.save("b", lambda _: snap("b"))
    async with PostgresStore(dsn, pool_timeout=1) as store:
        await store.load("a")
        stop_cluster(directory)  # down for good
        for call in (store.load("a"), store.save("c", lambda _: snap("c")), store.list()):
            await unavailable(call)
