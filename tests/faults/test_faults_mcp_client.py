"""A SIGKILL of the interlock process while it retries a paused MCP call leaves the call in doubt, never repeated.

The MCP server (``tests/kit/mcp_server.py``, the official SDK's, under uvicorn) holds the retry
that carries the answer while ``hold`` exists, noting each retry that reaches it in
``hold.reached``. ``interlock inbox respond`` (a process of its own) answers the paused ``pay``
call; once its retry is held there, it is SIGKILLed. After its claim lapses (``CLAIM_TTL=1``) the
same answer, given again here, takes the snapshot over: the journal has the call's attempt
started and never finished, so the call pauses in doubt and no second retry reaches the
server. Skipping it (a person's reject) ends the turn, and still nothing more reaches the server.
"""

from __future__ import annotations

import asyncio
import os
import pathlib
import signal
import subprocess
import sys
from collections.abc import Iterator

import pytest
from fault_worker import _until  # pyright: ignore[reportPrivateUsage]
from http_helpers import serve_process
from mcp_client_app import PAY, agents
from where import KIT, UNIT

from interlock import metadata as md
from interlock._engine.commit import claim_state
from interlock.inbox import Inbox, Reject, Respond
from interlock.stores.sqlite import SQLiteStore

pytestmark = pytest.mark.slow

LAUNCH = "import interlock.cli._inbox, runpy; runpy.run_module('interlock', run_name='__main__', alter_sys=True)"


@pytest.fixture
def hold(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[pathlib.Path]:
    """The MCP server in its own process, holding answered retries while the yielded file exists."""
    (tmp_path / "runs.txt").touch()
    monkeypatch.setenv("MCP_RUNS", str(tmp_path / "runs.txt"))
    monkeypatch.setenv("MCP_HOLD", str(tmp_path / "hold"))
    monkeypatch.setenv("CLAIM_TTL", "1")
    command = [sys.executable, "-m", "uvicorn", "mcp_server:app", "--host", "127.0.0.1", "--port", "0"]
    with serve_process(command, cwd=KIT) as server:
        monkeypatch.setenv("MCP_URL", f"{server.url}/mcp")
        yield tmp_path / "hold"
        (tmp_path / "hold").unlink(missing_ok=True)


def reached(hold: pathlib.Path) -> int:
    """How many answered retries reached the server."""
    path = pathlib.Path(f"{hold}.reached")
    return len(path.read_text().splitlines()) if path.exists() else 0


async def test_a_resumer_killed_during_the_mcp_retry_leaves_the_call_in_doubt(
    tmp_path: pathlib.Path, hold: pathlib.Path
) -> None:
    db = tmp_path / "sessions.db"
    async with SQLiteStore(db) as store:
        [agent] = await agents(store, [PAY, "done"])
        paused = await agent.run("pay 30")
        assert paused.finish_reason == "interrupted", paused.error
        snap = paused.snapshot_id or ""

    hold.touch()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(KIT), str(UNIT), os.environ.get("PYTHONPATH", "")])}
    args = ["inbox", "respond", snap, "--store", f"sqlite:///{db}", "--agents", "mcp_client_app:agents"]
    resumer = subprocess.Popen(
        [sys.executable, "-c", LAUNCH, *args, "--output", '{"card": "4242"}'],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        await _until("the retry to reach the MCP server", lambda: reached(hold) == 1, 60)
    finally:
        resumer.send_signal(signal.SIGKILL)
        resumer.wait()

    async with SQLiteStore(db) as store:

        async def lapsed() -> bool:
            cur = await store.load(snap)
            return cur is not None and claim_state(cur) in ("lapsed", "free")

        await _until("the killed resumer's claim to lapse", lapsed, 15)
        [agent] = await agents(store)
        inbox = Inbox(store, agents=[agent])
        async with asyncio.timeout(60):  # were the call retried, the held server would keep it: fail, not hang
            again = await inbox.answer_all(snap, Respond({"card": "4242"}))  # the same answer, after the crash
        assert again.finish_reason == "interrupted", again.error
        [doubt] = again.interrupts
        assert doubt.name == "pay" and md.is_in_doubt(doubt), doubt.metadata
        assert reached(hold) == 1  # not retried: the server was not asked again

        skipped = await inbox.answer_all(again.snapshot_id or "", Reject())
        assert skipped.finish_reason == "stop", skipped.error
        assert reached(hold) == 1
