"""Acceptance: boss → banker (local) → approver (another ``interlock serve`` process), answered from a third process.

The approver's approval surfaces in the boss's output, tagged with the agent path; a separate
process (a fresh chain on a fresh store object) answers it through the boss by snapshot id; the
whole chain finishes, and the approver's tool ran once (an append-only file counts its runs).
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from delegation_apps import approve_payment, chain, runs
from http_helpers import serve_process
from where import KIT

from interlock import RemoteAgent
from interlock import metadata as md
from interlock.stores.sqlite import SQLiteStore

INTERLOCK = str(pathlib.Path(sys.executable).with_name("interlock"))


@pytest.fixture
def approver_url(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The approver agent served by ``interlock serve`` in its own process, on its own SQLite file."""
    monkeypatch.setenv("DELEGATION_DIR", str(tmp_path))
    command = [INTERLOCK, "serve", "delegation_apps:approver_server", "--port", "0"]
    with serve_process(command, cwd=KIT) as server:
        yield server.url


async def test_a_remote_grandchilds_approval_is_answered_through_the_top_agent_from_another_process(
    tmp_path: pathlib.Path, approver_url: str
) -> None:
    db = str(tmp_path / "chain.db")
    async with SQLiteStore(db) as store:
        boss, remote = chain(store, approver_url, "ask")
        try:
            out = await boss.run("have bob paid")
        finally:
            await remote.aclose()
    assert out.finish_reason == "interrupted"
    (part,) = out.interrupts
    assert part.meta(md.AGENT_PATH) == ["banker", "approver"]
    assert part.meta(md.INTERRUPT) == {"to": "bob", "amount": 5}
    claimed = approve_payment.interrupted(part)
    assert claimed is not None and claimed.input.amount == 5
    assert runs() == []

    worker = [sys.executable, "delegation_worker.py", db, approver_url, str(out.snapshot_id)]
    done = subprocess.run(worker, cwd=KIT, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"claimed": 1, "finish_reason": "stop", "text": "boss: bob is paid"}
    assert runs() == ["bob 5 True"]

    async with SQLiteStore(db) as store:
        boss, remote = chain(store, approver_url, "answer")
        try:
            final = await boss.get_snapshot(session_id=out.session_id)
            assert final.state is not None
            (response,) = final.state.messages[-2].tool_responses
            assert response.name == "delegate_to_banker"
            assert response.output == {"response": "banker: bob is paid"}
            record = final.state.messages[-3].content[0].meta(md.RESOLVED_INTERRUPT)[md.DELEGATED]
            banker_snap = await store.latest(record["sessionId"])
            assert banker_snap is not None and banker_snap.finish_reason == "stop"
            async with RemoteAgent(f"{approver_url}/approver") as far:
                (deep,) = banker_snap.state.messages[-3].content if banker_snap.state else []
                far_record = deep.meta(md.RESOLVED_INTERRUPT)[md.DELEGATED]
                far_snap = await far.get_snapshot(session_id=far_record["sessionId"])
                assert far_snap.finish_reason == "stop" and far_snap.parent_id == far_record["snapshotId"]
        finally:
            await remote.aclose()


async def test_a_resume_that_dies_after_the_sub_agents_commit_is_taken_over_and_nothing_runs_twice(
    tmp_path: pathlib.Path, approver_url: str
) -> None:
    db = str(tmp_path / "chain.db")
    async with SQLiteStore(db) as store:
        boss, remote = chain(store, approver_url, "ask")
        try:
            out = await boss.run("have bob paid")
        finally:
            await remote.aclose()
    worker = [sys.executable, "delegation_worker.py", db, approver_url, str(out.snapshot_id)]
    died = subprocess.run([*worker, "die"], cwd=KIT, capture_output=True, text=True, timeout=120, check=False)
    assert died.returncode == 17, died.stderr
    assert runs() == ["bob 5 True"]  # the approver and the banker committed; the boss did not

    time.sleep(1.5)  # the dead resume's claim on the boss's snapshot lapses (claim_ttl=1)
    done = subprocess.run(worker, cwd=KIT, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"claimed": 1, "finish_reason": "stop", "text": "boss: bob is paid"}
    assert runs() == ["bob 5 True"]
    async with SQLiteStore(db) as store:
        final = await store.latest(str(out.session_id))
        assert final is not None and final.parent_id == out.snapshot_id
        answered = await store.load(str(out.snapshot_id))
        assert answered is not None and (answered.metadata or {}).get(md.RECLAIMED_FROM)  # taken over
        assert final.state is not None
        (response,) = final.state.messages[-2].tool_responses
        assert response.output == {"response": "banker: bob is paid"}


async def test_a_first_delegation_that_dies_after_the_sub_agent_paused_is_found_again_not_rerun(
    tmp_path: pathlib.Path, approver_url: str
) -> None:
    db = str(tmp_path / "chain.db")
    session = "2b0c8d4e-0f51-4c3e-9d8e-5d3f4b1a7c60"
    worker = [sys.executable, "delegation_worker.py", db, approver_url, session]
    died = subprocess.run([*worker, "ask-die"], cwd=KIT, capture_output=True, text=True, timeout=120, check=False)
    assert died.returncode == 17, died.stderr  # the banker and the approver paused and committed; the boss did not

    again = subprocess.run([*worker, "ask"], cwd=KIT, capture_output=True, text=True, timeout=120, check=False)
    assert again.returncode == 0, again.stderr
    seen = json.loads(again.stdout)
    assert (seen["finish_reason"], seen["refs"]) == ("interrupted", ["b1/a1/p1"])
    async with SQLiteStore(db) as store, SQLiteStore(str(tmp_path / "approver.db")) as far:
        bankers = {i.session_id for i in await store.list() if i.agent == "banker"}
        assert len(bankers) == 1  # the retried call found the banker's paused turn: no second session
        assert len({i.session_id for i in await far.list()}) == 1  # nor a second approver run
    done = subprocess.run(
        [*worker[:-1], seen["snapshot_id"]],
        cwd=KIT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["text"] == "boss: bob is paid" and runs() == ["bob 5 True"]


async def test_racing_answers_from_four_processes_to_a_surfaced_interrupt_have_one_winner(
    tmp_path: pathlib.Path, approver_url: str
) -> None:
    db = str(tmp_path / "chain.db")
    async with SQLiteStore(db) as store:
        boss, remote = chain(store, approver_url, "ask")
        try:
            out = await boss.run("have bob paid")
        finally:
            await remote.aclose()
    worker = [sys.executable, "delegation_worker.py", db, approver_url, str(out.snapshot_id)]
    procs = [
        subprocess.Popen([*worker, "race"], cwd=KIT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(4)
    ]
    deadline = time.monotonic() + 120
    while len(list(tmp_path.glob("ready-*"))) < 4:  # all four have read the surfaced interrupt
        assert time.monotonic() < deadline and all(p.poll() is None for p in procs)
        time.sleep(0.01)
    (tmp_path / "go").touch()
    results = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err for _, err in results]
    seen = sorted((json.loads(o) for o, _ in results), key=lambda r: "error" in r)
    assert seen[0] == {"claimed": 1, "finish_reason": "stop", "text": "boss: bob is paid"}
    assert seen[1:] == [{"claimed": 1, "error": "ABORTED"}] * 3
    assert runs() == ["bob 5 True"]
