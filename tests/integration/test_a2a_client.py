"""interlock delegates to remote A2A agents: one built with the official ``a2a-sdk``, and ``interlock serve --a2a``.

The third-party agent (``tests/kit/a2a_remote.py``, a uvicorn process of its own) goes
input-required with a text question; the question surfaces in the delegating agent's
interrupts and inbox, ``interlock inbox respond`` (another process) answers it from the
SQLite store, and the remote task completes once (counted in an append-only file). Against
``interlock serve --a2a`` the interrupts extension carries the answer schema through: an
answer that does not fit is refused before anything is sent.
"""

from __future__ import annotations

import asyncio
import json
import os
import pathlib
import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest
from a2a_apps import runs
from a2a_parent import agents, delegating
from http_helpers import ServerProcess, serve_process
from where import KIT, UNIT

from interlock import AgentOutput
from interlock import metadata as md
from interlock.errors import InvalidArgumentError
from interlock.inbox import Inbox
from interlock.inbox._options import answer_options
from interlock.stores.sqlite import SQLiteStore

pytestmark = pytest.mark.slow
LAUNCH = "import interlock.cli._inbox, runpy; runpy.run_module('interlock', run_name='__main__', alter_sys=True)"
"""``python -m interlock``, after importing interlock.cli._inbox (which cli.main does not import yet)."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def bookings(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[pathlib.Path]:
    """The a2a-sdk agent in its own process at ``$A2A_REMOTE_URL``; the file it counts completions in."""
    counted = tmp_path / "remote_runs.txt"
    counted.touch()
    port = free_port()
    monkeypatch.setenv("A2A_REMOTE_RUNS", str(counted))
    monkeypatch.setenv("A2A_REMOTE_URL", f"http://127.0.0.1:{port}")
    command = [sys.executable, "-m", "uvicorn", "a2a_remote:app", "--host", "127.0.0.1", "--port", str(port)]
    with serve_process(command, cwd=KIT):
        yield counted


def start(db: pathlib.Path, name: str, task: str) -> AgentOutput:
    """The ``travel`` agent's turn delegating ``task`` to ``name``: it pauses on the remote task's question."""

    async def go() -> AgentOutput:
        async with SQLiteStore(db) as store:
            [agent] = agents(store, [delegating(name, task), "done"])
            return await agent.run(f"please: {task}")

    return asyncio.run(go())


def respond(db: pathlib.Path, snapshot_id: str, output: object) -> subprocess.CompletedProcess[str]:
    """``interlock inbox respond`` in a process of its own."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(KIT), str(UNIT), os.environ.get("PYTHONPATH", "")])}
    args = ["inbox", "respond", snapshot_id, "--store", f"sqlite:///{db}", "--agents", "a2a_parent:agents"]
    return subprocess.run(
        [sys.executable, "-c", LAUNCH, *args, "--output", json.dumps(output), "--as", "carol", "--json"],
        env=env,
        cwd=db.parent,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_third_party_a2a_question_is_answered_from_another_process_and_completes_once(
    tmp_path: pathlib.Path, bookings: pathlib.Path
) -> None:
    db = tmp_path / "sessions.db"
    paused = start(db, "bookings", "a flight to Rome")
    assert paused.finish_reason == "interrupted", paused.error
    [question] = paused.interrupts
    assert md.agent_path(question) == ("bookings",)
    assert "booking reference" in question.meta(md.INTERRUPT)["message"]
    [delegation] = [p for p in paused.message.content if p.meta(md.DELEGATED)] if paused.message else []
    record = delegation.meta(md.DELEGATED)
    assert record["snapshotId"] and record["sessionId"]  # the remote task and its context, kept in the snapshot

    async def pending() -> list[object]:
        async with SQLiteStore(db) as store:
            items = await Inbox(store, agents=agents(store)).pending()
            return [(i.tool, i.ref, i.snapshot_id) for i in items]

    assert asyncio.run(pending()) == [("bookings", question.ref, paused.snapshot_id)]
    assert bookings.read_text() == ""

    refused = respond(db, paused.snapshot_id or "", 42)  # the free-text question takes a string: nothing is sent
    assert refused.returncode == 1 and "INVALID_ARGUMENT" in refused.stderr, refused.stderr
    assert bookings.read_text() == ""

    done = respond(db, paused.snapshot_id or "", "BK-42")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["text"] == "done", (done.stdout, done.stderr)
    assert bookings.read_text() == f"completed {record['snapshotId']} BK-42\n"

    again = respond(db, paused.snapshot_id or "", "BK-43")
    assert again.returncode == 1
    assert bookings.read_text() == f"completed {record['snapshotId']} BK-42\n"
    assert asyncio.run(pending()) == []


@pytest.fixture
def banker(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ServerProcess]:
    """``interlock serve a2a_apps:agents --a2a`` in its own process; the parent delegates to its banker."""
    remote = tmp_path / "remote"
    remote.mkdir()
    monkeypatch.setenv("A2A_DIR", str(remote))
    command = [sys.executable, "-m", "interlock", "serve", "a2a_apps:agents", "--a2a", "--port", "0"]
    with serve_process(command, cwd=KIT) as served:
        monkeypatch.setenv("A2A_REMOTE_URL", f"{served.url}/a2a/banker")
        monkeypatch.setenv("A2A_REMOTE_NAME", "banker")
        yield served


async def test_interlocks_extension_carries_the_schema_and_a_wrong_answer_is_never_sent(
    tmp_path: pathlib.Path, banker: ServerProcess
) -> None:
    remote_runs = tmp_path / "remote"
    async with SQLiteStore(tmp_path / "parent.db") as store:
        [agent] = agents(store, [delegating("banker", "alice"), "done"])
        paused = await agent.run("pay alice")
        assert paused.finish_reason == "interrupted", paused.error
        [question] = paused.interrupts
        assert (question.name, md.agent_path(question)) == ("transfer", ("banker",))
        assert question.meta(md.INTERRUPT) == {"message": "Send 5 to alice?"}
        inbox = Inbox(store, agents=[agent])
        [item] = await inbox.pending()
        options = answer_options({"travel": agent}, item)
        assert options["approve"]["payload_schema"]["properties"]["approved"]["type"] == "boolean"

        with pytest.raises(InvalidArgumentError, match="approved.*nothing was sent"):
            await inbox.approve(paused.snapshot_id or "", payload={"approved": "yes"})
        assert runs(remote_runs) == []
        [still] = await inbox.pending()
        assert still.snapshot_id == paused.snapshot_id

        done = await inbox.approve(paused.snapshot_id or "", identity="carol")
        assert done.finish_reason == "stop", done.error
        assert done.text == "done"
        assert runs(remote_runs) == ["alice 5 True"]
