"""The PostgreSQL store's connections (``stores/postgres/_link.py``): held idle by the store, handed on, watched.

The store keeps the connections it is given back in front of its pool, their sockets still
watched by the event loop; these tests check that a connection is reused, that a caller
waiting for the pool still gets one, that a connection the server closes while idle stops
being watched and is replaced before anyone uses it, and that closing the store closes them all.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import psycopg
from pg import fresh_dsn

from interlock.records._sessions import SessionState, Snapshot
from interlock.stores.postgres import PostgresStore
from interlock.stores.postgres._link import Link
from interlock.stores.postgres._wire import Wire

T0 = datetime(2025, 1, 1, tzinfo=UTC)


def snap(sid: str, n: int) -> Snapshot:
    state = SessionState(session_id="s1", messages=[], custom={"n": n})
    return Snapshot(snapshot_id=sid, session_id="s1", created_at=T0, status="completed", state=state)


async def backend(store: PostgresStore) -> int:
    async def pid(con: Wire) -> int:
        found = await (await con.execute("SELECT pg_backend_pid()")).fetchone()
        assert found is not None
        return int(found[0])

    return await store._read(pid)  # pyright: ignore[reportPrivateUsage]


def links(store: PostgresStore) -> list[Link]:
    return store._links.idle  # pyright: ignore[reportPrivateUsage]


async def test_a_connection_given_back_is_taken_again_with_its_statements_prepared() -> None:
    async with PostgresStore(fresh_dsn(), min_size=1, max_size=3) as store:
        first = await backend(store)
        for n in range(5):
            await store.save("a", lambda _, n=n: snap("a", n))
            assert (await store.load("a")) is not None
        assert await backend(store) == first  # one connection served every call, one after the other
        [link] = links(store)
        assert link.held and link.prepared  # kept by the store, its statements prepared once


async def test_a_caller_waiting_for_the_pool_gets_the_connection_another_gives_back() -> None:
    async with PostgresStore(fresh_dsn(), min_size=1, max_size=1, pool_timeout=60) as store:
        await store.save("a", lambda _: snap("a", 0))
        held = await store._links.take()  # pyright: ignore[reportPrivateUsage]
        waiting = asyncio.ensure_future(store.load("a"))
        while not store._links.waiting:  # pyright: ignore[reportPrivateUsage]
            await asyncio.sleep(0)
        await store._links.give(held)  # pyright: ignore[reportPrivateUsage]
        found = await waiting  # handed on through the pool: a wait for the pool's timeout would fail the test
        assert found is not None and found.state is not None and found.state.custom == {"n": 0}


async def test_an_idle_connection_the_server_closes_is_no_longer_watched_and_is_replaced_before_use() -> None:
    dsn = fresh_dsn()
    async with PostgresStore(dsn, min_size=1, max_size=1) as store:
        await store.save("a", lambda _: snap("a", 1))
        pid = await backend(store)
        [link] = links(store)
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as admin:
            await admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        while link._watching:  # pyright: ignore[reportPrivateUsage]  # the socket reads the end of the connection
            await asyncio.sleep(0.01)
        assert link.con.pgconn.status == psycopg.pq.ConnStatus.BAD  # read to its end: known closed
        found = await store.load("a")  # the first use after it: a fresh connection, not the dead one
        assert found is not None and found.state is not None and found.state.custom == {"n": 1}
        assert await backend(store) != pid
        assert link.con.closed


async def test_closing_the_store_closes_the_connections_it_held() -> None:
    store = PostgresStore(fresh_dsn(), min_size=1, max_size=2)
    await store.setup()
    await store.save("a", lambda _: snap("a", 2))
    held = [link.con for link in links(store)]
    assert held
    await store.close()
    assert all(con.closed for con in held)
