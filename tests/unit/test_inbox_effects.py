"""In-doubt calls in the inbox and the CLI: marked, filtered, answered (rerun, done, skipped), with their attempts.

An in-doubt call is made as in ``test_effects``: a detached resume is aborted while its
tool runs (the journal has an intent and no result); the next resume pauses on it.
"""

from __future__ import annotations

import asyncio
import json
import os
import pathlib
from typing import Any

import pytest
from test_effects import APPROVE, Ledger, bank, in_doubt_after_an_abort_mid_tool, paused

import interlock.cli._inbox  # noqa: F401  # pyright: ignore[reportUnusedImport]  (registers the commands)
from interlock import AgentOutput, PromptAgent, SessionStore, ToolResponsePart
from interlock import metadata as md
from interlock.cli import main
from interlock.errors import InvalidArgumentError, UsageError
from interlock.inbox._inbox import Inbox, Reject
from interlock.stores.sqlite import SQLiteStore


@pytest.fixture
def ledger(tmp_path: pathlib.Path) -> Ledger:
    return Ledger(tmp_path / "effects.log")


async def in_doubt(store: SessionStore, ledger: Ledger) -> AgentOutput:
    """A turn paused on an in-doubt call: its approved transfer was aborted mid-tool, then resumed again."""
    sid, _ = await in_doubt_after_an_abort_mid_tool(store, ledger)
    again = await bank(store, ledger).run(resume=APPROVE, snapshot_id=sid)
    assert again.finish_reason == "interrupted" and again.snapshot_id, again.error
    assert md.is_in_doubt(again.interrupts[0]) and ledger.effects == []
    return again


def inbox(store: SessionStore, ledger: Ledger) -> tuple[Inbox, PromptAgent]:
    agent = bank(store, ledger)
    return Inbox(store, agents=[agent]), agent


# ------------------------------------------------------------------------------ reading


async def test_pending_marks_an_in_doubt_call_and_filters_on_it(store: Any, ledger: Ledger) -> None:
    doubt = await in_doubt(store, ledger)
    plain = await paused(store, ledger)  # another session: the tool's own interrupt
    box, _ = inbox(store, ledger)
    items = await box.pending()
    assert [(i.snapshot_id, i.in_doubt) for i in items] == [(doubt.snapshot_id, True), (plain, False)]
    item = items[0]
    data = doubt.interrupts[0].meta(md.INTERRUPT)
    assert item.idempotency_key == data["idempotencyKey"] and str(item.idempotency_key).startswith("ik_")
    assert item.attempts == 2 and item.data["resumed"] == {"approved": True}
    assert items[1].idempotency_key is None and items[1].attempts is None
    assert [i.snapshot_id for i in await box.pending(in_doubt=True)] == [doubt.snapshot_id]
    assert [i.snapshot_id for i in await box.pending(in_doubt=False)] == [plain]
    assert [i.in_doubt for i in await box.get(doubt.snapshot_id or "")] == [True]
    as_json = item.to_json()
    assert as_json["in_doubt"] is True and as_json["idempotency_key"] == item.idempotency_key
    assert as_json["attempts"] == 2
    json.dumps(as_json, default=str)


async def test_the_journal_gives_the_attempt_history(store: Any, ledger: Ledger) -> None:
    doubt = await in_doubt(store, ledger)
    plain = await paused(store, ledger)
    box, _ = inbox(store, ledger)
    [entry] = await box.journal(doubt.session_id or "")
    assert entry.tool == "transfer" and entry.status == "running" and entry.attempt == 2
    assert [a["status"] for a in entry.attempts] == ["interrupted", "running"]
    doubtful, waiting = await box.pending()
    assert await box.journal_entry(doubtful) == entry
    found = await box.journal_entry(waiting)  # the tool's own interrupt: the attempt that paused there
    assert found is not None and found.status == "interrupted" and found.attempts[0]["turn"] == plain
    assert found.session_id == waiting.session_id != doubtful.session_id


# ------------------------------------------------------------------------------ answering


async def test_approve_runs_it_again_with_the_same_key_and_the_payload_it_had(store: Any, ledger: Ledger) -> None:
    doubt = await in_doubt(store, ledger)
    box, _ = inbox(store, ledger)
    [item] = await box.pending()
    out = await box.approve(doubt.snapshot_id or "", identity="alice")
    assert out.finish_reason == "stop", out.error
    assert len(ledger.effects) == 1 and ledger.keys == [item.idempotency_key]  # ran once, with the same key
    [entry] = await box.journal(doubt.session_id or "")
    assert entry.status == "done" and entry.attempt == 3 and entry.output == "sent"
    assert [a["status"] for a in entry.attempts] == ["interrupted", "running", "done"]
    [record] = [e for e in await box.audit(doubt.session_id or "") if e.parent_id == doubt.snapshot_id]
    [restart] = record.restart
    assert record.by == "alice" and restart.decision == "approve" and restart.payload == {"approved": True}
    assert await box.pending() == []


async def test_approve_with_a_payload_replaces_the_one_it_had(store: Any, ledger: Ledger) -> None:
    doubt = await in_doubt(store, ledger)
    box, _ = inbox(store, ledger)
    # strict answers: a key the tool's resume type does not declare is refused, and nothing runs
    with pytest.raises(InvalidArgumentError, match="'note'"):
        await box.approve(doubt.snapshot_id or "", payload={"approved": True, "note": "checked"})
    assert ledger.effects == []
    out = await box.approve(doubt.snapshot_id or "", payload={"approved": True})
    assert out.finish_reason == "stop", out.error
    [record] = [e for e in await box.audit(doubt.session_id or "") if e.parent_id == doubt.snapshot_id]
    assert record.restart[0].payload == {"approved": True} and len(ledger.effects) == 1


async def test_respond_marks_it_done_and_the_tool_does_not_run(store: Any, ledger: Ledger) -> None:
    doubt = await in_doubt(store, ledger)
    box, _ = inbox(store, ledger)
    out = await box.respond(doubt.snapshot_id or "", "sent (the bank confirmed it)", identity="bob")
    assert out.finish_reason == "stop", out.error
    assert ledger.effects == []
    [entry] = await box.journal(doubt.session_id or "")
    assert entry.status == "done" and entry.output == "sent (the bank confirmed it)" and entry.attempt == 2
    [record] = [e for e in await box.audit(doubt.session_id or "") if e.parent_id == doubt.snapshot_id]
    assert record.respond[0].output == "sent (the bank confirmed it)" and record.respond[0].decision is None


async def test_reject_skips_it_with_a_note_and_the_tool_never_runs(store: Any, ledger: Ledger) -> None:
    doubt = await in_doubt(store, ledger)
    box, _ = inbox(store, ledger)
    with pytest.raises(UsageError, match="skips it"):
        await box.reject(doubt.snapshot_id or "", payload={"approved": False})
    out = await box.reject(doubt.snapshot_id or "", identity="carol")
    assert out.finish_reason == "stop", out.error
    assert ledger.effects == []
    snap = await store.load(out.snapshot_id)
    assert snap is not None and snap.state is not None
    [response] = [p for m in snap.state.messages for p in m.content if isinstance(p, ToolResponsePart)]
    assert response.output["skipped"] is True and "was skipped" in response.output["message"]
    [record] = [e for e in await box.audit(doubt.session_id or "") if e.parent_id == doubt.snapshot_id]
    assert record.respond[0].decision == "deny" and record.respond[0].output == response.output
    [entry] = await box.journal(doubt.session_id or "")
    assert entry.status == "done" and entry.output == response.output  # answered: a later resume replays the skip


async def test_reject_with_an_output_gives_the_model_that_note(store: Any, ledger: Ledger) -> None:
    doubt = await in_doubt(store, ledger)
    box, _ = inbox(store, ledger)
    out = await box.answer(doubt.snapshot_id or "", Reject(output={"error": "not sent: ask the customer"}))
    assert out.finish_reason == "stop", out.error
    [entry] = await box.journal(doubt.session_id or "")
    assert entry.output == {"error": "not sent: ask the customer"} and ledger.effects == []


# ------------------------------------------------------------------------------ the command line


def cli_agents(store: SessionStore) -> list[PromptAgent]:
    """``--agents test_inbox_effects:cli_agents``: the bank over the command's store (ledger: $LEDGER)."""
    return [bank(store, Ledger(pathlib.Path(os.environ["LEDGER"])))]


def seed_in_doubt(db: pathlib.Path, ledger: Ledger) -> tuple[AgentOutput, str]:
    async def go() -> tuple[AgentOutput, str]:
        async with SQLiteStore(db) as store:
            return await in_doubt(store, ledger), await paused(store, ledger)

    return asyncio.run(go())


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_marks_in_doubt_calls_and_prints_their_attempts(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("INTERLOCK_STORE", raising=False)
    db, ledger = tmp_path / "sessions.db", Ledger(tmp_path / "effects.log")
    doubt, plain = seed_in_doubt(db, ledger)
    sid = doubt.snapshot_id or ""

    code, out, err = run(capsys, "inbox", "list", "--store", str(db))
    assert code == 0, err
    header, *rows = out.splitlines()
    assert header.split() == ["SNAPSHOT", "AGE", "AGENT", "TOOL", "DATA"]
    [marked] = [r for r in rows if r.startswith(sid)]
    [unmarked] = [r for r in rows if r.startswith(plain)]
    assert "IN DOUBT (attempt 2)" in marked and "IN DOUBT" not in unmarked

    code, out, err = run(capsys, "inbox", "list", "--store", str(db), "--json")
    items = json.loads(out)
    assert [(i["snapshot_id"], i["in_doubt"]) for i in items] == [(sid, True), (plain, False)]
    assert items[0]["idempotency_key"].startswith("ik_") and items[0]["attempts"] == 2
    for flag, expected in (("--in-doubt", [sid]), ("--not-in-doubt", [plain])):
        code, out, err = run(capsys, "inbox", "list", "--store", str(db), flag, "--json")
        assert [i["snapshot_id"] for i in json.loads(out)] == expected, err

    code, out, err = run(capsys, "inbox", "show", sid, "--store", str(db))
    assert code == 0, err
    assert "transfer#t1: IN DOUBT: attempt 2 started and never reported back" in out
    assert f"journal  {items[0]['idempotency_key']}: running, attempt 2" in out
    history = out[out.index("ATTEMPT") :].splitlines()
    assert history[0].split() == ["ATTEMPT", "TURN", "STATUS", "STARTED", "FINISHED"]
    first, second = (line.split() for line in history[1:3])
    assert first[0] == "1" and first[2] == "interrupted" and first[1] != "-" and first[4] != "-"
    assert second[0] == "2" and second[2] == "running" and second[4] == "-"

    code, out, err = run(capsys, "inbox", "show", plain, "--store", str(db))
    assert "transfer#t1: paused by the tool" in out and f"1        {plain}  interrupted" in out

    code, out, err = run(capsys, "inbox", "show", sid, "--store", str(db), "--json")
    [shown] = json.loads(out)
    assert shown["in_doubt"] is True and [a["status"] for a in shown["journal"]["attempts"]] == [
        "interrupted",
        "running",
    ]


def test_cli_approve_reruns_and_reject_skips(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("INTERLOCK_STORE", raising=False)
    db, ledger = tmp_path / "sessions.db", Ledger(tmp_path / "effects.log")
    monkeypatch.setenv("LEDGER", str(ledger.path))
    first, _ = seed_in_doubt(db, ledger)
    second, _ = seed_in_doubt(db, ledger)
    agents = ("--store", str(db), "--agents", "test_inbox_effects:cli_agents", "--as", "dana")

    code, out, err = run(capsys, "inbox", "approve", first.snapshot_id or "", *agents)
    assert code == 0, err
    assert f"approved transfer#t1 of snapshot {first.snapshot_id} as dana" in out
    assert len(ledger.effects) == 1  # run again, once

    code, out, err = run(capsys, "inbox", "reject", second.snapshot_id or "", *agents, "--json")
    assert code == 0, err
    assert json.loads(out)["finish_reason"] == "stop" and len(ledger.effects) == 1  # skipped: not run

    code, out, err = run(capsys, "inbox", "list", "--store", str(db), "--in-doubt")
    assert out == "no pending interrupts\n"
