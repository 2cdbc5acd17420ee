"""interlock's MCP client against an MCP server built with the official SDK, in a process of its own.

The server (``tests/kit/mcp_server.py``) runs under uvicorn; its ``pay`` tool answers
``InputRequiredResult`` (one question, with a ``requestState``) and completes when retried with
the answer, appending one line per completed run to an append-only file. The turn pauses here;
``interlock inbox respond``, another process, answers it from the SQLite store; and a Genkit client
answers it over HTTP.
"""

from __future__ import annotations

import asyncio
import json
import os
import pathlib
import subprocess
import sys
from collections.abc import Iterator

import pytest
from http_helpers import serve, serve_process
from mcp_client_app import PAY, agents
from where import KIT, UNIT

from interlock import AgentOutput, Resume, ToolRequestPart, ToolResponsePart
from interlock import metadata as md
from interlock.errors import InvalidArgumentError
from interlock.http import AgentServer, RemoteAgent
from interlock.interrupts import Decision
from interlock.stores.sqlite import SQLiteStore

LAUNCH = "import interlock.cli._inbox, runpy; runpy.run_module('interlock', run_name='__main__', alter_sys=True)"
"""``python -m interlock``, after importing interlock.cli._inbox (which cli.main does not import yet)."""


@pytest.fixture
def mcp_url(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The MCP server in its own process; ``$MCP_URL`` names it, ``runs.txt`` counts its completed runs."""
    (tmp_path / "runs.txt").touch()
    monkeypatch.setenv("MCP_RUNS", str(tmp_path / "runs.txt"))
    command = [sys.executable, "-m", "uvicorn", "mcp_server:app", "--host", "127.0.0.1", "--port", "0"]
    with serve_process(command, cwd=KIT) as server:
        url = f"{server.url}/mcp"
        monkeypatch.setenv("MCP_URL", url)
        yield url


def pause(db: pathlib.Path) -> AgentOutput:
    """The ``travel`` agent's turn asking the MCP server to pay 30: it pauses on the server's question."""

    async def go() -> AgentOutput:
        async with SQLiteStore(db) as store:
            [agent] = await agents(store, [PAY, "done"])
            return await agent.run("pay 30")

    return asyncio.run(go())


def answer(db: pathlib.Path, snapshot_id: str, card: str) -> subprocess.CompletedProcess[str]:
    """``interlock inbox respond`` in a process of its own, answering the question with ``card``."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(KIT), str(UNIT), os.environ.get("PYTHONPATH", "")])}
    args = ["inbox", "respond", snapshot_id, "--store", f"sqlite:///{db}", "--agents", "mcp_client_app:agents"]
    output = json.dumps({"card": card})
    return subprocess.run(
        [sys.executable, "-c", LAUNCH, *args, "--output", output, "--as", "carol", "--json"],
        env=env,
        cwd=db.parent,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.slow
def test_a_paused_mcp_call_answered_from_another_process_completes_once(tmp_path: pathlib.Path, mcp_url: str) -> None:
    db = tmp_path / "sessions.db"
    paused = pause(db)
    assert paused.finish_reason == "interrupted", paused.error
    [question] = paused.interrupts
    assert (question.name, question.ref) == ("pay", "p1/card")
    runs = tmp_path / "runs.txt"
    assert runs.read_text() == ""

    refused = answer(db, paused.snapshot_id or "", "42")  # off the schema (four digits): nothing runs
    assert refused.returncode == 1 and "INVALID_ARGUMENT" in refused.stderr, refused.stderr
    assert runs.read_text() == ""

    done = answer(db, paused.snapshot_id or "", "4242")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["text"] == "done", (done.stdout, done.stderr)
    assert runs.read_text() == "paid 30 4242\n"

    again = answer(db, paused.snapshot_id or "", "4242")
    assert again.returncode == 1
    assert runs.read_text() == "paid 30 4242\n"


def responding(question: ToolRequestPart, output: object) -> Resume:
    entry = Decision.respond(output).answer(question)
    assert isinstance(entry, ToolResponsePart)
    return Resume(respond=[entry])


async def test_a_genkit_client_answers_the_mcp_question_over_http(tmp_path: pathlib.Path, mcp_url: str) -> None:
    """The agent served by ``AgentServer``: interlock's Genkit client sees the question and answers it."""
    runs = tmp_path / "runs.txt"
    async with SQLiteStore(tmp_path / "sessions.db") as store:
        [agent] = await agents(store, [PAY, "done"])
        async with serve(AgentServer([agent])) as base, RemoteAgent(f"{base}/travel") as remote:
            paused = await remote.run("pay 30")
            assert paused.finish_reason == "interrupted", paused.error
            [question] = paused.interrupts
            assert question.meta(md.INTERRUPT)["requestedSchema"]["required"] == ["card"]
            with pytest.raises(InvalidArgumentError, match="card"):  # a number: refused
                await remote.run(resume=responding(question, {"card": 4242}), snapshot_id=paused.snapshot_id)
            assert runs.read_text() == ""
            done = await remote.run(resume=responding(question, {"card": "4242"}), snapshot_id=paused.snapshot_id)
            assert done.finish_reason == "stop", done.error
    assert runs.read_text() == "paid 30 4242\n"
