"""Schema versions: old stores are refused with the command that migrates them, and migrate intact.

``fixtures/sqlite-831404f.db`` was written by interlock at commit 831404f (the layout before
schema versions; ``fixtures/make_sqlite_831404f.py`` wrote it): a paused transfer, a completed
one (with its journal entries) and a paused transfer of tenant ``acme``.
"""

from __future__ import annotations

import asyncio
import json
import pathlib
import shutil
import sqlite3
from datetime import datetime, timedelta
from typing import Any

import psycopg
import pytest
from banking import APPROVE, PAY, Approval, Transfer
from pg import fresh_dsn

from interlock import PromptAgent, Snapshot, ToolContext, tool
from interlock.cli._main import main
from interlock.errors import FailedPreconditionError
from interlock.inbox._inbox import Inbox
from interlock.records._interrupt_index import InterruptQuery, OpenInterrupt
from interlock.records._sessions import utcnow
from interlock.stores.postgres import PostgresStore
from interlock.stores.sqlite import SQLiteStore
from interlock.testing import ScriptedModel

FIXTURES = pathlib.Path(__file__).with_name("fixtures")
OLD = FIXTURES / "sqlite-831404f.db"
IDS: dict[str, str] = json.loads((FIXTURES / "sqlite-831404f.json").read_text())
SQLITE = 7
"""The SQLite store's schema version (:data:`interlock.stores.sqlite._migrate.CURRENT`)."""


def bank(store: Any, runs: list[str], script: list[Any] | None = None) -> PromptAgent:
    """The agent that wrote the fixture (same name, tool and schema), counting tool runs."""

    @tool(idempotent=True)
    async def transfer(req: Transfer, ctx: ToolContext[Any], approval: Approval | None) -> str:
        """Move money once approved."""
        if approval is None:
            ctx.interrupt({"to": req.to, "amount": req.amount})
        runs.append(req.to)
        return "sent"

    return PromptAgent("bank", ScriptedModel(script or ["paid", "paid"]), tools=[transfer], store=store)


async def upgrade(capsys: pytest.CaptureFixture[str], url: str) -> tuple[int, str, str]:
    """``interlock db upgrade --store URL`` (on a thread: the command runs its own event loop)."""
    code = await asyncio.to_thread(main, ["db", "upgrade", "--store", url])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def old_file(tmp_path: pathlib.Path) -> pathlib.Path:
    path = tmp_path / "old.db"
    shutil.copyfile(OLD, path)
    return path


async def test_an_old_sqlite_file_is_refused_naming_the_command_and_left_unchanged(old_file: pathlib.Path) -> None:
    before = old_file.read_bytes()
    with pytest.raises(
        FailedPreconditionError, match=rf"schema version 1, older than this interlock's {SQLITE}"
    ) as caught:
        async with SQLiteStore(old_file) as store:
            await store.load(IDS["paused"])
    assert f"interlock db upgrade --store sqlite:///{old_file}" in caught.value.message
    assert old_file.read_bytes() == before


async def test_an_old_sqlite_file_upgrades_and_its_interrupts_resume(
    old_file: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{old_file}"
    assert await upgrade(capsys, url) == (0, f"{url}: upgraded from schema version 1 to {SQLITE}\n", "")
    assert await upgrade(capsys, url) == (0, f"{url}: schema version {SQLITE}, nothing to do\n", "")
    with sqlite3.connect(old_file) as con:
        assert con.execute("SELECT component, version FROM interlock_schema").fetchall() == [("interlock", SQLITE)]
    runs: list[str] = []
    async with SQLiteStore(old_file) as store:
        agent = bank(store, runs)
        # the completed session and its journal came through
        done = await store.load(IDS["completed"])
        assert done is not None and done.status == "completed" and done.state is not None
        assert [m.role for m in done.state.messages] == ["user", "model", "tool", "model"]
        assert len(await store.journal_entries(session_id=IDS["completed_session"])) == 1
        # the upgrade filled the index of open interrupts and the leaves from the rows
        inbox = Inbox(store, agents=[agent])
        assert [i.snapshot_id for i in await inbox.pending()] == [IDS["paused"]]
        assert [i.snapshot_id for i in await inbox.pending(tenant="acme")] == [IDS["acme"]]
        latest = await store.latest(IDS["completed_session"])
        assert latest is not None and latest.snapshot_id == IDS["completed"]
        # both paused transfers (one per tenant) are pending and resume, each running its tool once
        for snap, context in ((IDS["paused"], {}), (IDS["acme"], {"tenant": "acme"})):
            pending = await agent.pending_interrupts(snap, context=context)
            assert [(p.name, p.ref) for p in pending] == [("transfer", "t1")]
            out = await agent.run(resume=APPROVE, snapshot_id=snap, context=context)
            assert out.finish_reason == "stop", out.error
            assert await agent.pending_interrupts(snap, context=context) == []
        assert await inbox.pending() == [] and await inbox.pending(tenant="acme") == []
    assert runs == ["bob", "bob"]


def _as_sqlite_version(path: pathlib.Path, version: int) -> None:
    """Put a file back to the layout of the index of open interrupts of schema version 4 or 5.

    Both keyed ``(tenant, snapshot_id, position)`` with an index ``created`` on ``(tenant, created_us,
    snapshot_id, position)``: version 4 as a rowid table, version 5 ``WITHOUT ROWID``.
    """
    _as_sqlite_version_6(path)  # the leaves as version 6 kept them (a table of their own)
    without_rowid = " WITHOUT ROWID" if version == 5 else ""
    with sqlite3.connect(path) as con:
        con.execute("ALTER TABLE interlock_open_interrupts RENAME TO v6")
        con.execute(
            f"""CREATE TABLE interlock_open_interrupts (
                tenant TEXT NOT NULL, snapshot_id TEXT NOT NULL, position INTEGER NOT NULL,
                session_id TEXT NOT NULL, agent TEXT, tool TEXT NOT NULL, ref TEXT,
                created_us INTEGER NOT NULL, deadline_us INTEGER, in_doubt INTEGER NOT NULL,
                claimed_by TEXT, claim_until_us INTEGER, part TEXT NOT NULL,
                PRIMARY KEY (tenant, snapshot_id, position)){without_rowid}"""
        )
        con.execute(
            "CREATE INDEX interlock_open_interrupts_created "
            "ON interlock_open_interrupts (tenant, created_us, snapshot_id, position)"
        )
        con.execute("INSERT INTO interlock_open_interrupts SELECT * FROM v6")
        con.execute("DROP TABLE v6")
        con.execute("UPDATE interlock_schema SET version = ?", (version,))


def _open_table_sql(path: pathlib.Path) -> str:
    """The index of open interrupts' ``CREATE TABLE``, and ``+created`` when it has its ``created`` index."""
    with sqlite3.connect(path) as con:
        (sql,) = con.execute("SELECT sql FROM sqlite_master WHERE name = 'interlock_open_interrupts'").fetchone()
        created = con.execute("SELECT 1 FROM sqlite_master WHERE name = 'interlock_open_interrupts_created'").fetchone()
    return " ".join(str(sql).split()) + (" +created" if created else "")


NEW_KEY = "PRIMARY KEY (tenant, created_us, snapshot_id, position) ) WITHOUT ROWID"


async def test_a_version_4_sqlite_file_upgrades_keeping_its_open_interrupts(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "v4.db"
    runs: list[str] = []
    async with SQLiteStore(path) as store:
        agent = bank(store, runs, [PAY, PAY])
        paused = await agent.run("pay bob 5")
        other = await agent.run("pay bob 5", context={"tenant": "acme"})
    assert paused.snapshot_id is not None and other.snapshot_id is not None
    _as_sqlite_version(path, 4)
    assert "WITHOUT ROWID" not in _open_table_sql(path)
    url = f"sqlite:///{path}"
    assert await upgrade(capsys, url) == (0, f"{url}: upgraded from schema version 4 to {SQLITE}\n", "")
    assert _open_table_sql(path).endswith(NEW_KEY)
    async with SQLiteStore(path) as store:
        agent = bank(store, runs)
        inbox = Inbox(store, agents=[agent])
        (item,) = await inbox.pending()
        (acme,) = await inbox.pending(tenant="acme")
        assert (item.snapshot_id, item.tool, acme.snapshot_id) == (paused.snapshot_id, "transfer", other.snapshot_id)
        out = await inbox.approve(paused.snapshot_id)
        assert out.finish_reason == "stop" and runs == ["bob"]
        assert await inbox.pending() == [] and len(await inbox.pending(tenant="acme")) == 1


def _as_sqlite_version_6(path: pathlib.Path) -> None:
    """Put a file back to schema version 6's layout: a table of leaves and the ``(session, parent_id)`` index."""
    with sqlite3.connect(path) as con:
        con.execute(
            "CREATE TABLE interlock_leaves (session INTEGER NOT NULL, snapshot_id BLOB NOT NULL, "
            "created_us INTEGER NOT NULL, PRIMARY KEY (session, snapshot_id)) WITHOUT ROWID"
        )
        con.execute(
            "INSERT INTO interlock_leaves "
            "SELECT session, snapshot_id, created_us FROM interlock_snapshots WHERE leaf = 1"
        )
        con.execute("DROP INDEX interlock_snapshots_tree")
        con.execute("ALTER TABLE interlock_snapshots DROP COLUMN leaf")
        con.execute("CREATE INDEX interlock_snapshots_children ON interlock_snapshots (session, parent_id)")
        con.execute("UPDATE interlock_schema SET version = 6")


def _layout(path: pathlib.Path) -> dict[str, str]:
    with sqlite3.connect(path) as con:
        found = con.execute("SELECT name, sql FROM sqlite_master WHERE name LIKE 'interlock_%'").fetchall()
    return {str(name): str(sql) for name, sql in found}


async def test_a_version_6_sqlite_file_upgrades_its_leaves_into_flags(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "v6.db"
    runs: list[str] = []
    async with SQLiteStore(path) as store:
        agent = bank(store, runs, [PAY, "paid", "noted"])
        paused = await agent.run("pay bob 5")
        assert paused.snapshot_id is not None and paused.session_id is not None
        chat = await agent.run("pay bob 5", context={"tenant": "acme"})  # the model answers: no interrupt
        again = await agent.run("thanks", session_id=chat.session_id, context={"tenant": "acme"})
        assert chat.session_id is not None and again.snapshot_id is not None
    new_layout = _layout(path)
    _as_sqlite_version_6(path)
    assert "interlock_leaves" in _layout(path) and "interlock_snapshots_tree" not in _layout(path)
    url = f"sqlite:///{path}"
    assert await upgrade(capsys, url) == (0, f"{url}: upgraded from schema version 6 to {SQLITE}\n", "")
    assert _layout(path).keys() == new_layout.keys()  # as a new file has them: no table of leaves
    assert _layout(path)["interlock_snapshots_tree"] == new_layout["interlock_snapshots_tree"]
    async with SQLiteStore(path) as store:
        latest = await store.latest(chat.session_id, tenant="acme")
        assert latest is not None and latest.snapshot_id == again.snapshot_id  # the leaf, not its parent
        inbox = Inbox(store, agents=[bank(store, runs)])
        latest = await store.latest(paused.session_id)
        assert latest is not None and latest.snapshot_id == paused.snapshot_id
        out = await inbox.approve(paused.snapshot_id)
        assert out.finish_reason == "stop" and runs == ["bob"]
        latest = await store.latest(paused.session_id)
        assert latest is not None and latest.snapshot_id == out.snapshot_id  # the flag moved to the new leaf


async def _listing(store: SQLiteStore, now: datetime, tenant: str | None = None) -> list[OpenInterrupt]:
    return await store.open_interrupts(InterruptQuery(now=now), tenant=tenant)


async def test_a_version_5_sqlite_file_upgrades_listing_the_same_open_interrupts(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "v5.db"
    runs: list[str] = []
    script = [PAY, PAY, PAY]
    async with SQLiteStore(path) as store:
        agent = bank(store, runs, script)
        first = await agent.run("pay bob 5")
        second = await agent.run("pay bob 5")
        other = await agent.run("pay bob 5", context={"tenant": "acme"})
        assert first.snapshot_id and second.snapshot_id and other.snapshot_id
        await store.save(first.snapshot_id, lambda cur: None if cur is None else claimed(cur))
        now = utcnow() + timedelta(hours=1)  # after the claim's lease: every entry is listed
        before = (await _listing(store, now), await _listing(store, now, "acme"))
    assert [len(b) for b in before] == [2, 1] and before[0][0].claimed_by == "r1"
    _as_sqlite_version(path, 5)
    assert _open_table_sql(path).endswith("PRIMARY KEY (tenant, snapshot_id, position)) WITHOUT ROWID +created")
    url = f"sqlite:///{path}"
    assert await upgrade(capsys, url) == (0, f"{url}: upgraded from schema version 5 to {SQLITE}\n", "")
    assert _open_table_sql(path).endswith(NEW_KEY)
    async with SQLiteStore(path) as store:
        assert (await _listing(store, now), await _listing(store, now, "acme")) == before
        agent = bank(store, runs)
        inbox = Inbox(store, agents=[agent])
        assert [i.snapshot_id for i in await inbox.pending()] == [second.snapshot_id]  # the first is claimed
        out = await inbox.approve(second.snapshot_id)
        assert out.finish_reason == "stop" and runs == ["bob"]
        assert [e.snapshot_id for e in await _listing(store, now)] == [first.snapshot_id]


def claimed(snap: Snapshot) -> Snapshot:
    """``snap`` claimed by ``r1`` for a minute."""
    return snap.evolve(claimed_by="r1", claim_expires_at=utcnow() + timedelta(minutes=1))


async def test_a_newer_sqlite_file_is_refused(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "new.db"
    async with SQLiteStore(path) as store:
        await store.ready()
    with sqlite3.connect(path) as con:
        con.execute("UPDATE interlock_schema SET version = 99")
    with pytest.raises(FailedPreconditionError, match=r"schema version 99, written by a newer interlock"):
        async with SQLiteStore(path, upgrade=True) as store:
            await store.ready()


async def test_db_upgrade_needs_a_store_that_exists(tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = await upgrade(capsys, str(tmp_path / "missing.db"))
    assert (code, out) == (2, "") and "there is no SQLite store at" in err
    assert not (tmp_path / "missing.db").exists()


def _set_version(url: str, version: int) -> None:
    with psycopg.connect(url, autocommit=True) as con:
        con.execute("UPDATE interlock_schema SET version = %s", (version,))


async def test_postgres_creates_its_schema_and_refuses_an_older_one_until_upgraded(
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = fresh_dsn()
    async with PostgresStore(url) as store:
        await store.ready()
        assert store.upgraded_from is None
    _set_version(url, 1)  # as if written before version 2 (the outbox)
    with pytest.raises(FailedPreconditionError, match=r"schema version 1, older than this interlock's 5") as caught:
        async with PostgresStore(url) as store:
            await store.ready()
    assert f"interlock db upgrade --store {url}" in caught.value.message
    said = f"{url}: upgraded from schema version 1 to 5\n{url}: worker queue tables installed\n"
    assert await upgrade(capsys, url) == (0, said, "")
    async with PostgresStore(url) as store:
        await store.ready()
    _set_version(url, 7)
    with pytest.raises(FailedPreconditionError, match=r"schema version 7, written by a newer interlock"):
        async with PostgresStore(url, upgrade=True) as store:
            await store.ready()
    code, out, err = await upgrade(capsys, url)
    assert (code, out) == (1, "") and "written by a newer interlock" in err and "FAILED_PRECONDITION" in err


async def test_postgres_refuses_a_foreign_table_of_the_same_name() -> None:
    url = fresh_dsn()
    with psycopg.connect(url, autocommit=True) as con:
        con.execute("CREATE TABLE interlock_snapshots (id int)")
    with pytest.raises(FailedPreconditionError, match=r"without a schema version: not interlock's"):
        async with PostgresStore(url) as store:
            await store.ready()


def _as_version_2(url: str) -> None:
    """Put a database back to schema version 2's layout: no leaves, no index of open interrupts."""
    with psycopg.connect(url, autocommit=True) as con:
        con.execute("DROP TABLE interlock_leaves, interlock_open_interrupts")
        con.execute("DROP INDEX interlock_snapshots_children")
        con.execute("CREATE INDEX interlock_snapshots_session ON interlock_snapshots (tenant, session_id)")
        con.execute("UPDATE interlock_schema SET version = 2")


async def test_postgres_version_2_upgrades_and_fills_its_index(capsys: pytest.CaptureFixture[str]) -> None:
    url = fresh_dsn()
    runs: list[str] = []
    async with PostgresStore(url) as store:
        agent = bank(store, runs, [PAY])
        paused = await agent.run("pay bob 5", context={"tenant": "acme"})
        assert paused.finish_reason == "interrupted" and paused.snapshot_id is not None
    _as_version_2(url)
    said = f"{url}: upgraded from schema version 2 to 5\n{url}: worker queue tables installed\n"
    assert await upgrade(capsys, url) == (0, said, "")
    async with PostgresStore(url) as store:
        agent = bank(store, runs)
        inbox = Inbox(store, agents=[agent])
        assert await inbox.pending() == []
        (item,) = await inbox.pending(tenant="acme")
        assert (item.snapshot_id, item.tool) == (paused.snapshot_id, "transfer")
        assert paused.session_id is not None
        latest = await store.latest(paused.session_id, tenant="acme")
        assert latest is not None and latest.snapshot_id == paused.snapshot_id
        out = await inbox.approve(paused.snapshot_id, tenant="acme")
        assert out.finish_reason == "stop" and runs == ["bob"]
        assert await inbox.pending(tenant="acme") == []


def _as_version_4(url: str) -> None:
    """Put a database back to schema version 4's layout: secondary indexes led by ``tenant``."""
    with psycopg.connect(url, autocommit=True) as con:
        con.execute("DROP INDEX interlock_snapshots_children, interlock_journal_session, interlock_journal_snapshot")
        con.execute("CREATE INDEX interlock_snapshots_children ON interlock_snapshots (tenant, session_id, parent_id)")
        con.execute("CREATE INDEX interlock_journal_session ON interlock_journal (tenant, session_id)")
        con.execute("CREATE INDEX interlock_journal_snapshot ON interlock_journal (tenant, snapshot_id)")
        con.execute("UPDATE interlock_schema SET version = 4")


def _indexes(url: str) -> dict[str, str]:
    with psycopg.connect(url, autocommit=True) as con:
        found = con.execute(
            "SELECT indexname, indexdef FROM pg_indexes "
            "WHERE schemaname = current_schema() AND tablename LIKE 'interlock_%'"
        ).fetchall()
    return {name: definition.split(" USING btree ")[1] for name, definition in found}


async def test_postgres_version_4_upgrades_its_secondary_indexes_and_keeps_its_interrupts(
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = fresh_dsn()
    runs: list[str] = []
    async with PostgresStore(url) as store:
        paused = await bank(store, runs, [PAY]).run("pay bob 5", context={"tenant": "acme"})
        assert paused.finish_reason == "interrupted" and paused.snapshot_id is not None
    created = _indexes(url)
    _as_version_4(url)
    said = f"{url}: upgraded from schema version 4 to 5\n{url}: worker queue tables installed\n"
    assert await upgrade(capsys, url) == (0, said, "")
    assert _indexes(url) == created  # as a new database has them
    assert created["interlock_snapshots_children"] == "(session_id, tenant, parent_id)"
    assert created["interlock_journal_snapshot"] == "(snapshot_id, tenant)"
    async with PostgresStore(url) as store:
        inbox = Inbox(store, agents=[bank(store, runs)])
        (item,) = await inbox.pending(tenant="acme")
        assert item.snapshot_id == paused.snapshot_id
        out = await inbox.approve(paused.snapshot_id, tenant="acme")
        assert out.finish_reason == "stop" and runs == ["bob"]
