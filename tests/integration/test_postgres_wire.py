"""How the PostgreSQL store talks to the server (``stores/postgres/_wire.py``): prepared, batched, errors as psycopg's.

Each test uses a connection of its own to a fresh schema of the session's cluster and checks
what the server saw (``pg_prepared_statements``, the rows) beside what the store got back.
"""

from __future__ import annotations

import asyncio
from enum import IntEnum, StrEnum

import psycopg
import pytest
from pg import fresh_dsn
from psycopg import errors

from interlock.stores.postgres._wire import Answer, Wire

_PREPARED = "SELECT name FROM pg_prepared_statements WHERE statement LIKE %s ORDER BY name"


class Colour(StrEnum):
    RED = "red"


class Size(IntEnum):
    BIG = 7


async def connect() -> psycopg.AsyncConnection[tuple[object, ...]]:
    return await psycopg.AsyncConnection.connect(fresh_dsn(), autocommit=True)


async def test_arguments_round_trip_as_psycopg_would_send_them() -> None:
    async with await connect() as con:
        wire = Wire(con)
        sql = "SELECT %s::text, %s::bigint, %s::bool, %s::float8, %s::text[], %s::text, %s::text, %s::int, '%%s'"
        args = ("é ü", 2**40, True, 0.5, ['a"b', "c\\d", None], None, Colour.RED, Size.BIG)
        row = await (await wire.execute(sql, args)).fetchone()
        assert row == ("é ü", 2**40, True, 0.5, ['a"b', "c\\d", None], None, "red", 7, "%s")
        named = await wire.execute("SELECT %(a)s::text, %(b)s::int, %(a)s::text", {"a": "x", "b": 1})
        assert await named.fetchall() == [("x", 1, "x")]


async def test_a_nul_character_or_an_unknown_type_is_refused_before_sending() -> None:
    async with await connect() as con:
        wire = Wire(con)
        with pytest.raises(errors.DataError, match="NUL"):
            await wire.execute("SELECT %s::text", ("a\x00b",))
        with pytest.raises(errors.ProgrammingError, match="bytes argument"):
            await wire.execute("SELECT %s", (b"raw",))
        assert await (await wire.execute("SELECT 1")).fetchone() == (1,)  # the connection serves on


async def test_a_statement_is_prepared_once_per_connection_and_reused_by_later_wires() -> None:
    async with await connect() as con:
        for n in range(3):
            batch = Wire(con)  # a new Wire per checkout, as the store makes them
            async with batch.batch():
                first = await batch.execute("SELECT %s::int + 40 AS wire_reuse", (n,))
                second = await batch.execute("SELECT %s::int + 40 AS wire_reuse", (n + 1,))
            assert await first.fetchone() == (n + 40,)
            assert await second.fetchone() == (n + 41,)
        found = await (await con.execute(_PREPARED, ("%wire_reuse%",))).fetchall()
        assert len(found) == 1


async def test_a_failing_statement_raises_its_own_error_and_skips_the_rest_of_its_batch() -> None:
    async with await connect() as con:
        await con.execute("CREATE TABLE wire_t (k int PRIMARY KEY)")
        wire = Wire(con)
        answers: list[Answer] = []
        with pytest.raises(errors.UniqueViolation):
            async with wire.batch():
                await wire.execute("BEGIN", prepare=False)
                await wire.execute("INSERT INTO wire_t VALUES (%s)", (1,))
                await wire.execute("INSERT INTO wire_t VALUES (%s)", (1,))
                answers.append(await wire.execute("INSERT INTO wire_t VALUES (%s)", (2,)))
                await wire.execute("COMMIT", prepare=False)
        (skipped,) = answers
        assert skipped.pgresult is None
        with pytest.raises(errors.PipelineAborted):
            await skipped.fetchone()
        assert not wire.idle  # the transaction failed: the caller rolls it back
        await wire.execute("ROLLBACK", prepare=False)
        assert await (await wire.execute("SELECT count(*) FROM wire_t")).fetchone() == (0,)


async def test_a_statement_that_fails_to_prepare_is_prepared_again_next_time() -> None:
    async with await connect() as con:
        wire = Wire(con)
        with pytest.raises(errors.UndefinedTable):
            await wire.execute("SELECT k FROM wire_later WHERE k = %s", (1,))
        await con.execute("CREATE TABLE wire_later (k int)")
        await con.execute("INSERT INTO wire_later VALUES (1)")
        found = await wire.execute("SELECT k FROM wire_later WHERE k = %s", (1,))
        assert await found.fetchall() == [(1,)]


async def test_statements_dropped_before_sending_are_not_sent() -> None:
    async with await connect() as con:
        await con.execute("CREATE TABLE wire_d (k int)")
        wire = Wire(con)
        with pytest.raises(RuntimeError):
            async with wire.batch():
                await wire.execute("INSERT INTO wire_d VALUES (%s)", (1,))
                raise RuntimeError("an updater failed")
        assert wire.idle
        assert await (await wire.execute("SELECT count(*) FROM wire_d")).fetchone() == (0,)
        await wire.execute("INSERT INTO wire_d VALUES (%s)", (2,))  # its name was not kept as prepared
        assert await (await wire.execute("SELECT k FROM wire_d")).fetchall() == [(2,)]


async def test_a_batch_cancelled_while_waiting_closes_its_connection() -> None:
    async with await connect() as con:
        wire = Wire(con)
        slow = asyncio.create_task(wire.execute("SELECT pg_sleep(30)"))
        await asyncio.sleep(0.3)
        slow.cancel()
        with pytest.raises(asyncio.CancelledError):
            await slow
        assert con.closed  # its answer is still on the way: a pool drops it instead of reusing it


async def test_a_large_batch_goes_out_whole_while_its_answers_come_back() -> None:
    """More than the socket buffers hold: the server answers before it has everything, and nothing is lost."""
    big = "x" * (4 << 20)
    async with await connect() as con:
        await con.execute("CREATE TABLE wire_big (k int PRIMARY KEY, v text)")
        wire = Wire(con)
        answers: list[Answer] = []
        async with wire.batch():
            await wire.execute("BEGIN", prepare=False)
            for k in range(3000):
                answers.append(await wire.execute("INSERT INTO wire_big VALUES (%s, %s) RETURNING k", (k, "v")))
            answers.append(await wire.execute("INSERT INTO wire_big VALUES (%s, %s) RETURNING length(v)", (-1, big)))
            await wire.execute("COMMIT", prepare=False)
        assert [await a.fetchone() for a in answers[:3]] == [(0,), (1,), (2,)]
        assert await answers[-1].fetchone() == (len(big),)
        assert await (await wire.execute("SELECT count(*) FROM wire_big")).fetchone() == (3001,)


async def test_a_transaction_batch_that_goes_out_whole_commits_at_its_sync_or_not_at_all() -> None:
    async with await connect() as con:
        await con.execute("CREATE TABLE wire_i (k int PRIMARY KEY)")
        wire = Wire(con)
        wire.start_batch(b"BEGIN")
        await wire.execute("INSERT INTO wire_i VALUES (%s)", (1,))
        await wire.execute("INSERT INTO wire_i VALUES (%s)", (2,))
        committed = await wire.commit()
        await wire.end_batch()
        assert committed.pgresult is not None and wire.idle
        wire.start_batch(b"BEGIN")
        await wire.execute("INSERT INTO wire_i VALUES (%s)", (3,))
        await wire.execute("INSERT INTO wire_i VALUES (%s)", (1,))  # fails: the insert of 3 is rolled back with it
        failed = await wire.commit()
        after = await wire.execute("SELECT count(*) FROM wire_i")  # after the sync: runs anyway
        with pytest.raises(errors.UniqueViolation):
            await wire.end_batch()
        assert failed.pgresult is None and wire.idle
        assert await after.fetchone() == (2,)
        assert await (await wire.execute("SELECT k FROM wire_i ORDER BY k")).fetchall() == [(1,), (2,)]


async def test_a_transaction_batch_read_mid_way_begins_before_its_first_statement() -> None:
    async with await connect() as con:
        await con.execute("CREATE TABLE wire_m (k int PRIMARY KEY)")
        wire = Wire(con)
        wire.start_batch(b"BEGIN")
        await wire.execute("INSERT INTO wire_m VALUES (%s)", (1,))
        seen = await (await wire.execute("SELECT count(*) FROM wire_m")).fetchone()  # this part goes out now
        assert seen == (1,) and not wire.idle  # inside the transaction BEGIN opened ahead of the insert
        await wire.execute("INSERT INTO wire_m VALUES (%s)", (1,))
        await wire.commit()
        with pytest.raises(errors.UniqueViolation):
            await wire.end_batch()
        await wire.execute("ROLLBACK", prepare=False)  # the caller rolls back: the first insert goes too
        assert await (await wire.execute("SELECT count(*) FROM wire_m")).fetchone() == (0,)
