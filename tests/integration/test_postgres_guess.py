"""A PostgreSQL save guesses the rows its store last saw (``stores/postgres/_known.py``); a wrong guess changes nothing.

Each test makes the guess wrong from a second store on the same database (another process,
as far as the first store can tell) and checks that the first store's save saw the rows as
they are: the guard fails the guessed transaction and the save runs again, reading them.
"""

from __future__ import annotations

from datetime import UTC, datetime

from pg import fresh_dsn

from interlock.records._journal import JournalEntry
from interlock.records._sessions import SessionState, Snapshot
from interlock.stores.postgres import PostgresStore

T0 = datetime(2025, 1, 1, tzinfo=UTC)


def counter(sid: str, n: int) -> Snapshot:
    return Snapshot(
        snapshot_id=sid,
        session_id="s1",
        created_at=T0,
        status="completed",
        finish_reason="stop",
        state=SessionState(session_id="s1", messages=[], custom={"n": n}),
    )


def count(snap: Snapshot | None) -> int:
    assert snap is not None and snap.state is not None
    return int(snap.state.custom["n"])


def entry(attempt: int) -> JournalEntry:
    return JournalEntry(key="k", session_id="s1", snapshot_id="a", agent="bank", tool="transfer", ref="t1",
                        input_digest="d", attempt=attempt, status="running", started_at=T0)  # fmt: skip


async def test_a_row_changed_elsewhere_is_updated_as_it_is_not_as_this_store_last_saw_it() -> None:
    url = fresh_dsn()
    async with PostgresStore(url) as one, PostgresStore(url) as two:
        await one.save("r", lambda _: counter("r", 0))  # one remembers n=0
        await two.save("r", lambda cur: counter("r", count(cur) + 1))
        seen: list[int] = []

        def bump(cur: Snapshot | None) -> Snapshot:
            seen.append(count(cur))
            return counter("r", count(cur) + 1)

        written = await one.save("r", bump)
        assert seen[-1] == 1 and count(written) == 2
        assert count(await two.load("r")) == 2
        await one.save("r", bump)  # a guess from its own write: right this time
        assert seen[-1] == 2 and count(await two.load("r")) == 3


async def test_a_row_this_store_never_saw_is_given_to_its_updater() -> None:
    url = fresh_dsn()
    async with PostgresStore(url) as one, PostgresStore(url) as two:
        await two.save("x", lambda _: counter("x", 5))
        written = await one.save("x", lambda cur: None if cur is None else counter("x", count(cur) + 1))
        assert count(written) == 6 and count(await two.load("x")) == 6


async def test_a_row_deleted_elsewhere_is_absent_to_the_updater() -> None:
    url = fresh_dsn()
    async with PostgresStore(url) as one, PostgresStore(url) as two:
        await one.save("d", lambda _: counter("d", 0))
        assert await two.delete(["d"]) == 1
        written = await one.save("d", lambda cur: None if cur is None else counter("d", count(cur) + 1))
        assert written is None and await two.load("d") is None


async def test_an_updater_that_refuses_a_stale_row_is_asked_again_with_the_row_as_it_is() -> None:
    url = fresh_dsn()
    async with PostgresStore(url) as one, PostgresStore(url) as two:
        await one.save("c", lambda _: counter("c", 0))
        await two.save("c", lambda cur: None if cur is None else cur.evolve(claimed_by="b"))

        def needs_claim(cur: Snapshot | None) -> Snapshot:
            assert cur is not None
            if cur.claimed_by != "b":
                raise ValueError("not claimed by b")
            return cur.evolve(claimed_by=None)

        written = await one.save("c", needs_claim)
        assert written is not None and written.claimed_by is None
        loaded = await two.load("c")
        assert loaded is not None and loaded.claimed_by is None


async def test_a_journal_entry_changed_elsewhere_is_updated_as_it_is() -> None:
    url = fresh_dsn()
    async with PostgresStore(url) as one, PostgresStore(url) as two:
        await one.journal_put(entry(1), expect=0)  # one remembers attempt 1
        await two.journal_put(entry(2), expect=1)
        seen: list[int] = []

        def finish(cur: JournalEntry | None) -> JournalEntry | None:
            assert cur is not None
            seen.append(cur.attempt)
            return cur.evolve(status="done", output="sent")

        await one.save_all([], journal=[("k", finish)])
        assert seen[-1] == 2
        stored = await two.journal_get("k")
        assert stored is not None and (stored.attempt, stored.status, stored.output) == (2, "done", "sent")
