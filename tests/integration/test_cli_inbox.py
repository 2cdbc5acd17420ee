"""``interlock inbox`` and ``interlock sessions``: in-process with capsys, over HTTP, and in a real subprocess."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import pathlib
import subprocess
import sys
import threading
import time
from collections.abc import Generator
from typing import Any

import pytest
import uvicorn
from pg import fresh_dsn
from test_inbox import Desk, build_agents
from where import KIT, UNIT

import interlock.cli._inbox  # noqa: F401  # pyright: ignore[reportUnusedImport]  (registers the commands)
from interlock import AgentOutput
from interlock.cli import main
from interlock.http._server import AgentServer
from interlock.inbox._inbox import AuditEntry, Inbox
from interlock.stores.postgres import PostgresStore
from interlock.stores.sqlite import SQLiteStore

AGENTS = "test_inbox:build_agents"


def seed(db: pathlib.Path, *turns: tuple[str, str] | tuple[str, str, str]) -> list[AgentOutput]:
    """Run each ``(agent, text[, tenant])`` turn over the SQLite file ``db`` (each pauses, or not)."""

    async def go() -> list[AgentOutput]:
        async with SQLiteStore(db) as store:
            desk = Desk(store)
            return [await desk.start(t[0], t[1], t[2] if len(t) > 2 else None) for t in turns]

    return asyncio.run(go())


def audit(db: pathlib.Path, session_id: str, tenant: str | None = None) -> list[AuditEntry]:
    async def go() -> list[AuditEntry]:
        async with SQLiteStore(db) as store:
            return await Inbox(store).audit(session_id, tenant=tenant)

    return asyncio.run(go())


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def run_json(capsys: pytest.CaptureFixture[str], *args: str) -> Any:
    code, out, err = run(capsys, *args, "--json")
    assert code == 0, err
    return json.loads(out)


@pytest.fixture
def db(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> pathlib.Path:
    monkeypatch.delenv("INTERLOCK_STORE", raising=False)
    return tmp_path / "sessions.db"


# ------------------------------------------------------------------------------ inbox list / show


def test_list_prints_an_aligned_table(db: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    pay, held, _ = seed(db, ("bank", "pay bob 25"), ("ops", "delete a.txt"), ("bank", "hi there"))
    code, out, _ = run(capsys, "inbox", "list", "--store", str(db))
    assert code == 0
    header, *rows = out.splitlines()
    assert header.split() == ["SNAPSHOT", "AGE", "AGENT", "TOOL", "DATA"]
    assert len(rows) == 2
    assert rows[0].split()[:4] == [pay.snapshot_id, "0s", "bank", "transfer#r1"]
    assert rows[1].split()[:4] == [held.snapshot_id, "0s", "ops", "delete_file#r1"]
    assert '{"to":"bob","amount":25.0}' in rows[0] and 'held: {"path":"a.txt"}' in rows[1]
    for column in ("AGE", "AGENT", "TOOL", "DATA"):
        start = header.index(column)
        assert all(row[start - 2 : start] == "  " and row[start] != " " for row in rows), (column, out)


def test_list_filters_and_json(
    db: pathlib.Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    pay, held, acme = seed(db, ("bank", "pay bob 25"), ("ops", "delete a.txt"), ("bank", "pay carol 1", "acme"))
    monkeypatch.setenv("INTERLOCK_STORE", f"sqlite:///{db}")  # the default store
    items = run_json(capsys, "inbox", "list")
    assert [(i["snapshot_id"], i["agent"], i["tool"], i["is_hold"]) for i in items] == [
        (pay.snapshot_id, "bank", "transfer", False),
        (held.snapshot_id, "ops", "delete_file", True),
    ]
    assert items[0]["data"] == {"to": "bob", "amount": 25.0} and items[0]["age_seconds"] >= 0
    assert [i["agent"] for i in run_json(capsys, "inbox", "list", "--agent", "ops")] == ["ops"]
    assert [i["tool"] for i in run_json(capsys, "inbox", "list", "--tool", "transfer")] == ["transfer"]
    assert [i["snapshot_id"] for i in run_json(capsys, "inbox", "list", "--tenant", "acme")] == [acme.snapshot_id]
    assert run_json(capsys, "inbox", "list", "--older-than", "1h") == []
    assert len(run_json(capsys, "inbox", "list", "--newer-than", "1h30m")) == 2
    assert run(capsys, "inbox", "list", "--older-than", "1d")[1] == "no pending interrupts\n"


def test_show_prints_every_interrupt_of_a_snapshot(db: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    (two,) = seed(db, ("bank", "pay-two bob carol"))
    code, out, _ = run(capsys, "inbox", "show", two.snapshot_id or "", "--store", str(db))
    assert code == 0
    assert f"snapshot  {two.snapshot_id}" in out and f"session   {two.session_id}" in out and "agent     bank" in out
    assert "transfer#r1: paused by the tool" in out and "transfer#r2: paused by the tool" in out
    assert '"to": "carol"' in out
    shown = run_json(capsys, "inbox", "show", two.snapshot_id or "", "--store", str(db))
    assert [(i["ref"], i["input"]["to"]) for i in shown] == [("r1", "bob"), ("r2", "carol")]


# ------------------------------------------------------------------------------ answers


def test_approve_records_who_and_a_second_approve_fails(db: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    (pay,) = seed(db, ("bank", "pay bob 25"))
    snap = pay.snapshot_id or ""
    args = ("inbox", "approve", snap, "--store", str(db), "--agents", AGENTS)
    code, out, err = run(capsys, *args, "--as", "alice")
    assert code == 0, err
    assert out.splitlines()[0] == f"approved transfer#r1 of snapshot {snap} as alice"
    assert "the turn finished (stop)" in out and out.rstrip().endswith("done: sent 25 to bob")
    [entry] = audit(db, pay.session_id or "")
    assert entry.by == "alice" and [(a.name, a.approved) for a in entry.restart] == [("transfer", True)]

    code, out, err = run(capsys, *args, "--as", "bob")
    assert code == 1 and out == ""
    assert f"no pending interrupt with snapshot id {snap}: it was already answered" in err and "(ABORTED)" in err
    assert run(capsys, "inbox", "list", "--store", str(db))[1] == "no pending interrupts\n"


def test_the_default_identity_is_the_user_variable(
    db: pathlib.Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (pay,) = seed(db, ("bank", "pay bob 2"))
    monkeypatch.setenv("LOGNAME", "someone-else")
    monkeypatch.setenv("USER", "operator7")
    reply = run_json(capsys, "inbox", "approve", pay.snapshot_id or "", "--store", str(db), "--agents", AGENTS)
    assert reply["by"] == "operator7" and reply["decision"] == "approve" and reply["answered"] == ["transfer#r1"]
    assert [e.by for e in audit(db, pay.session_id or "")] == ["operator7"]


def test_reject_respond_payload_and_all(db: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    held, asked, pay, two = seed(
        db, ("ops", "delete a.txt"), ("helpdesk", "ask which account"), ("bank", "pay bob 3"), ("bank", "pay-two a b")
    )
    common = ("--store", str(db), "--agents", AGENTS, "--as", "carol")
    denied = run_json(capsys, "inbox", "reject", held.snapshot_id or "", *common)
    assert denied["finish_reason"] == "stop" and "not approved" in denied["text"] and denied["by"] == "carol"

    answer = ("--output", '{"answer": "savings"}', "--tool", "ask_user")
    replied = run_json(capsys, "inbox", "respond", asked.snapshot_id or "", *common, *answer)
    assert replied["text"] == "done: {'answer': 'savings'}"

    payload = ("--payload", '{"approved": true, "note": "checked"}', "--ref", "r1")
    approved = run_json(capsys, "inbox", "approve", pay.snapshot_id or "", *common, *payload)
    assert approved["text"] == "done: sent 3 to bob (checked)"

    code, _, err = run(capsys, "inbox", "approve", two.snapshot_id or "", *common)
    assert code == 2 and "waits on transfer#r1, transfer#r2" in err and "--all" in err
    both = run_json(capsys, "inbox", "reject", two.snapshot_id or "", *common, "--all")
    assert both["answered"] == ["transfer#r1", "transfer#r2"] and both["text"].count("transfer cancelled") == 2

    code, out, _ = run(capsys, "sessions", "show", two.session_id or "", "--store", str(db))
    assert code == 0 and "carol: rejected transfer#r1, rejected transfer#r2" in out


@pytest.mark.parametrize(
    ("extra", "code", "message"),
    [
        ((), 2, "belongs to agent 'bank', which this inbox cannot run (it has: none)"),
        (("--agents", "test_inbox:Transfer"), 2, "gave a ModelMetaclass: expected an agent"),
        (("--agents", "test_inbox:nothing"), 2, "has no attribute 'nothing'"),
        (("--agents", AGENTS, "--ref", "r9"), 1, "none matches ref 'r9'"),
        (("--agents", AGENTS, "--all", "--ref", "r1"), 2, "--all answers every call"),
        (("--agents", AGENTS, "--payload", '{"approved": "perhaps"}'), 1, "resume payload for tool 'transfer'"),
    ],
)
def test_answer_errors_exit_non_zero(
    db: pathlib.Path, capsys: pytest.CaptureFixture[str], extra: tuple[str, ...], code: int, message: str
) -> None:
    (pay,) = seed(db, ("bank", "pay bob 25"))
    got, out, err = run(capsys, "inbox", "approve", pay.snapshot_id or "", "--store", str(db), *extra)
    assert (got, out) == (code, "") and message in err and "Traceback" not in err
    assert len(run_json(capsys, "inbox", "list", "--store", str(db))) == 1  # still pending


def test_usage_errors(db: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    seed(db, ("bank", "pay bob 25"))
    store = ("--store", str(db))
    cases: list[tuple[tuple[str, ...], int, str]] = [
        (("inbox", "show", "nope", *store), 1, "no pending interrupt with snapshot id nope: there is no such snapshot"),
        (("inbox", "approve", "nope", *store, "--agents", AGENTS), 1, "no pending interrupt with snapshot id nope"),
        (("inbox", "list"), 2, "--store URL (or $INTERLOCK_STORE)"),
        (("inbox", "list", "--store", str(db.parent / "missing.db")), 2, "there is no SQLite store at"),
        (("inbox", "list", "--store", "redis://localhost"), 2, "unknown store URL scheme 'redis'"),
        (("inbox", "list", "--store", "postgresql://127.0.0.1:1/x"), 1, "is unreachable or busy"),
        (("inbox", "list", "--server", "http://127.0.0.1:9"), 2, "Genkit's HTTP protocol has no call that lists"),
        (("inbox", "show", "x", *store, "--server", "http://127.0.0.1:9"), 2, "--store or --server, not both"),
        (("sessions", "prune", *store), 2, "--keep-last N, --older-than AGE, or both"),
        (("sessions", "show", "nope", *store), 1, "no session with id nope"),
    ]
    for args, code, message in cases:
        got, out, err = run(capsys, *args)
        assert (got, out) == (code, ""), (args, err)
        assert message in err, (args, err)
    assert not db.parent.joinpath("missing.db").exists()


@pytest.mark.parametrize(
    "args",
    [
        ("inbox", "list", "--older-than", "10 minutes"),
        ("inbox", "approve", "x", "--payload", "{not json"),
        ("inbox", "respond", "x"),
        ("inbox",),
        ("sessions", "prune", "--keep-last", "0"),
    ],
)
def test_bad_arguments_exit_2(capsys: pytest.CaptureFixture[str], args: tuple[str, ...]) -> None:
    with pytest.raises(SystemExit) as raised:
        main(list(args))
    assert raised.value.code == 2 and "error:" in capsys.readouterr().err


# ------------------------------------------------------------------------------ sessions


def test_sessions_list_show_and_prune(db: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    pay, _ = seed(db, ("bank", "pay bob 1"), ("helpdesk", "ask why"))
    assert run(capsys, "inbox", "approve", pay.snapshot_id or "", "--store", str(db), "--agents", AGENTS)[0] == 0
    code, out, _ = run(capsys, "sessions", "list", "--store", str(db))
    header, *rows = out.splitlines()
    assert code == 0 and header.split() == ["SESSION", "AGENT", "SNAPSHOTS", "LATEST", "STATE", "AGE"]
    assert sorted(r.split()[1:3] + [r.split()[4]] for r in rows) == [
        ["bank", "2", "stop"],
        ["helpdesk", "1", "interrupted"],
    ]
    listed = run_json(capsys, "sessions", "list", "--store", str(db), "--agent", "bank")
    assert [(s["session_id"], s["snapshots"]) for s in listed] == [(pay.session_id, 2)]

    shown = run_json(capsys, "sessions", "show", pay.session_id or "", "--store", str(db))
    assert [s["parent_id"] for s in shown["snapshots"]] == [None, pay.snapshot_id]
    assert [e["parent_id"] for e in shown["audit"]] == [pay.snapshot_id]

    store = ("--store", str(db))
    assert run_json(capsys, "sessions", "prune", *store, "--keep-last", "1", "--dry-run") == {
        "would_delete": [pay.snapshot_id]
    }
    assert run_json(capsys, "sessions", "prune", *store, "--keep-last", "1") == {"deleted": 1}
    assert run(capsys, "sessions", "prune", *store, "--older-than", "30d")[1] == "deleted 0 snapshots\n"
    assert [s["snapshots"] for s in run_json(capsys, "sessions", "list", *store)] == [1, 1]


# ------------------------------------------------------------------------------ over HTTP


@contextlib.contextmanager
def served(db: pathlib.Path) -> Generator[str]:
    """Serve the test agents over ``db`` on a uvicorn thread; the server takes the identity from X-User."""
    store = SQLiteStore(db)
    app = AgentServer(
        build_agents(store), base_path="/api", context=lambda info: {"identity": info.headers.get("x-user")}
    )
    server = uvicorn.Server(
        uvicorn.Config(app, port=0, log_level="warning", log_config=None, lifespan="off", ws="none")
    )
    thread = threading.Thread(target=server.run)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while not server.started:
            assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
            time.sleep(0.01)
        yield f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}/api"
    finally:
        server.should_exit = True
        thread.join(10)
        asyncio.run(store.close())


@pytest.mark.slow
def test_answers_through_a_server(db: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    (pay,) = seed(db, ("bank", "pay bob 9"))
    snap = pay.snapshot_id or ""
    with served(db) as url:
        remote = ("--server", url, "--agent", "bank")
        code, out, err = run(capsys, "inbox", "show", snap, *remote)
        assert code == 0 and "transfer#r1: paused by the tool" in out and "agent     bank" in out, err
        for extra in (("--as", "mallory"), ("--tenant", "acme")):
            code, _, err = run(capsys, "inbox", "approve", snap, *remote, *extra)
            assert code == 2 and "the server decides who answers, and for which tenant" in err
        reply = run_json(capsys, "inbox", "approve", snap, *remote, "--header", "X-User: alice")
        assert reply["text"] == "done: sent 9 to bob" and reply["by"] is None
        code, _, err = run(capsys, "inbox", "approve", snap, *remote, "--header", "X-User: bob")
        assert code == 1 and "(ABORTED)" in err
    assert [e.by for e in audit(db, pay.session_id or "")] == ["alice"]


# ------------------------------------------------------------------------------ a real process


@pytest.mark.slow
def test_a_separate_process_approves_a_snapshot_made_here(db: pathlib.Path) -> None:
    (pay,) = seed(db, ("bank", "pay dora 40"))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(KIT), str(UNIT), os.environ.get("PYTHONPATH", "")])}
    # `python -m interlock`, after importing interlock.cli._inbox (which cli.main does not import yet)
    launch = "import interlock.cli._inbox, runpy; runpy.run_module('interlock', run_name='__main__', alter_sys=True)"
    args = ["inbox", "approve", pay.snapshot_id or "", "--store", f"sqlite:///{db}", "--agents", AGENTS]
    proc = subprocess.run(
        [sys.executable, "-c", launch, *args, "--as", "dora-approver", "--json"],
        env=env,
        cwd=db.parent,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    reply = json.loads(proc.stdout)
    assert reply["text"] == "done: sent 40 to dora" and reply["by"] == "dora-approver"
    [entry] = audit(db, pay.session_id or "")
    assert entry.by == "dora-approver" and entry.snapshot_id == reply["snapshot_id"]
    again = subprocess.run(
        [sys.executable, "-c", launch, *args], env=env, cwd=db.parent, capture_output=True, text=True, timeout=60
    )
    assert again.returncode == 1 and "no pending interrupt with snapshot id" in again.stderr


# ------------------------------------------------------------------------------ on PostgreSQL


def test_inbox_and_sessions_with_a_postgresql_store(capsys: pytest.CaptureFixture[str]) -> None:
    url = fresh_dsn()

    async def go() -> list[AgentOutput]:
        async with PostgresStore(url) as store:
            desk = Desk(store)
            return [await desk.start("bank", "pay bob 25", None), await desk.start("bank", "pay carol 1", "acme")]

    pay, acme = asyncio.run(go())
    items = run_json(capsys, "inbox", "list", "--store", url)
    assert [(i["snapshot_id"], i["tool"], i["data"]) for i in items] == [
        (pay.snapshot_id, "transfer", {"to": "bob", "amount": 25.0})
    ]
    assert [i["snapshot_id"] for i in run_json(capsys, "inbox", "list", "--store", url, "--tenant", "acme")] == [
        acme.snapshot_id
    ]
    code, out, err = run(capsys, "inbox", "approve", pay.snapshot_id or "", "--store", url, "--agents", AGENTS)
    assert code == 0, err
    assert out.rstrip().endswith("done: sent 25 to bob")
    assert run(capsys, "inbox", "list", "--store", url)[1] == "no pending interrupts\n"
    listed = run_json(capsys, "sessions", "list", "--store", url)
    assert [(s["session_id"], s["snapshots"]) for s in listed] == [(pay.session_id, 2)]
