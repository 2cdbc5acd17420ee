"""Interop: the published Genkit clients drive interlock's HTTP server.

The clients are the real packages, pinned: npm ``genkit`` (``remoteAgent`` from
``genkit/beta/client``, run by node) and PyPI ``genkit`` (``genkit.exp.remote_agent``, in
its own venv). ``scripts/setup_interop.sh`` installs them into ``.interop/``; the
``interop_clients`` fixture runs it (a no-op when they are installed) and fails the tests,
never skips them, when it cannot.

One real uvicorn server serves the agents of ``tests/kit/interop/app.py`` for the whole
module. Each (client, scenario) runs the client script (``tests/kit/interop/js_client.cjs``,
``tests/kit/interop/py_client.py``) as a subprocess, all of them at once; the script prints
what the client saw as JSON, and each test asserts on that and on the server side: the
store's snapshots, the scripted model's requests, what the tools recorded.
"""

from __future__ import annotations

import asyncio
import json
import os
import pathlib
import subprocess
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import pytest_asyncio
from http_helpers import serve
from interop.app import BASE_PATH, CLIENTS, SCENARIOS, Setup, build, create_server
from where import KIT, ROOT

from interlock import Snapshot
from interlock._wire import snapshot_to_json
from interlock.messages import message_to_json, messages_to_json
from interlock.testing import ScriptedModel

pytestmark = [pytest.mark.slow, pytest.mark.asyncio(loop_scope="module")]

SCRIPTS = KIT / "interop"
INTEROP_DIR = pathlib.Path(os.environ.get("INTERLOCK_INTEROP_DIR") or ROOT / ".interop")
SETUP_TIMEOUT = 900.0
CLIENT_TIMEOUT = 60.0
"""Per scenario run; the JS client spins forever on a stream without a final frame, so this is the backstop."""
PARALLEL = 4
"""Client processes at once (each Python client spends most of a second importing genkit)."""
NON_ASCII = "caf\u00e9 \u2615 \u65e5\u672c \U0001f600"
"""What the stream scenario's second turn sends (as in the client scripts)."""


# the clients ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Clients:
    """How to run each client script."""

    node: str
    python: pathlib.Path
    env: dict[str, str]

    def command(self, client: str, url: str, scenario: str) -> list[str]:
        if client == "js":
            return [self.node, str(SCRIPTS / "js_client.cjs"), url, scenario]
        return [str(self.python), str(SCRIPTS / "py_client.py"), url, scenario]


@pytest.fixture(scope="session")
def interop_clients() -> Clients:
    """Install (or check) the published clients with scripts/setup_interop.sh; fail clearly if it cannot."""
    env = {**os.environ, "INTERLOCK_INTEROP_DIR": str(INTEROP_DIR)}
    for leak in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV"):
        env.pop(leak, None)
    command = ["bash", str(ROOT / "scripts" / "setup_interop.sh")]
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=SETUP_TIMEOUT, check=False)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"scripts/setup_interop.sh did not finish in {SETUP_TIMEOUT:.0f} s:\n{exc.stdout}{exc.stderr}")
    if done.returncode != 0:
        pytest.fail(
            "the interop tests need the published Genkit clients, and scripts/setup_interop.sh could not install"
            f" them (exit {done.returncode}); run it by hand to see why:\n{done.stdout}{done.stderr}",
            pytrace=False,
        )
    return Clients(node=env.get("NODE") or "node", python=INTEROP_DIR / "py" / "bin" / "python", env=env)


@dataclass
class Run:
    """One finished client process."""

    command: list[str]
    returncode: int | None
    stdout: str
    stderr: str
    seconds: float
    timed_out: bool


async def run_client(command: list[str], env: dict[str, str]) -> Run:
    started = time.monotonic()
    proc = await asyncio.create_subprocess_exec(
        *command, env=env, cwd=ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    timed_out = False
    try:
        try:
            async with asyncio.timeout(CLIENT_TIMEOUT):
                out, err = await proc.communicate()
        except TimeoutError:
            timed_out = True
            proc.kill()
            out, err = await proc.communicate()
    except asyncio.CancelledError:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        raise
    return Run(
        command=command,
        returncode=proc.returncode,
        stdout=out.decode(errors="replace"),
        stderr=err.decode(errors="replace"),
        seconds=time.monotonic() - started,
        timed_out=timed_out,
    )


@dataclass
class Server:
    url: str
    setups: dict[str, Setup]


@dataclass
class Runs:
    """The client runs of this module, started together (at most PARALLEL processes at once)."""

    server: Server
    clients: Clients
    tasks: dict[tuple[str, str], asyncio.Task[Run]] = field(default_factory=dict[tuple[str, str], "asyncio.Task[Run]"])
    limit: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(PARALLEL))

    def start(self, client: str, scenario: str) -> asyncio.Task[Run]:
        key = (client, scenario)
        if key not in self.tasks:
            command = self.clients.command(client, f"{self.server.url}/{client}_{scenario}", scenario)
            self.tasks[key] = asyncio.ensure_future(self._limited(command))
        return self.tasks[key]

    async def _limited(self, command: list[str]) -> Run:
        async with self.limit:
            return await run_client(command, self.clients.env)

    async def report(self, client: str, scenario: str) -> dict[str, Any]:
        """The scenario's report; fails the test with the client's output when it did not run to its end."""
        run = await self.start(client, scenario)
        where = f"the {client} client in scenario {scenario!r} ({' '.join(run.command)})"
        logs = f"\n--- stdout\n{run.stdout}\n--- stderr\n{run.stderr}"
        if run.timed_out:
            pytest.fail(f"{where} did not finish in {CLIENT_TIMEOUT:.0f} s{logs}", pytrace=False)
        lines = run.stdout.strip().splitlines()
        try:
            payload: dict[str, Any] = json.loads(lines[-1])
        except (IndexError, ValueError):
            pytest.fail(f"{where} printed no JSON result (exit {run.returncode}){logs}", pytrace=False)
        if not payload.get("ok"):
            error, stack = payload.get("error"), payload.get("stack")
            pytest.fail(f"{where} raised {error}\n{stack}{logs}", pytrace=False)
        assert run.returncode == 0, f"{where} exited {run.returncode}{logs}"
        return payload["report"]

    async def aclose(self) -> None:
        for task in self.tasks.values():
            task.cancel()
        await asyncio.gather(*self.tasks.values(), return_exceptions=True)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def server() -> AsyncIterator[Server]:
    setups = build()
    app = create_server(setups)
    try:
        async with serve(app) as base:
            yield Server(url=base + BASE_PATH, setups=setups)
    finally:
        await app.aclose()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def runs(request: pytest.FixtureRequest, server: Server, interop_clients: Clients) -> AsyncIterator[Runs]:
    """Start every selected (client, scenario) at once; each test then awaits its own."""
    all_runs = Runs(server=server, clients=interop_clients)
    for item in request.session.items:
        callspec = getattr(item, "callspec", None)
        scenario = getattr(item, "originalname", "").removeprefix("test_")
        module: object = getattr(item, "module", None)
        mine: object = request.module  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
        if module is mine and callspec is not None and scenario in SCENARIOS:
            all_runs.start(callspec.params["client"], scenario)
    yield all_runs
    await all_runs.aclose()


# helpers --------------------------------------------------------------------------------------


def setup_of(server: Server, client: str, scenario: str) -> Setup:
    return server.setups[f"{client}_{scenario}"]


async def stored(setup: Setup, snapshot_id: str | None) -> Snapshot:
    """A snapshot as the server's store holds it."""
    assert setup.store is not None and snapshot_id
    snap = await setup.store.load(snapshot_id)
    assert snap is not None, f"snapshot {snapshot_id} is not in the store"
    return snap


def history(snap: Snapshot) -> list[dict[str, Any]]:
    assert snap.state is not None
    return messages_to_json(snap.state.messages)


def roles(messages: list[dict[str, Any]]) -> list[str]:
    return [m["role"] for m in messages]


def model_texts(chunks: list[dict[str, Any]]) -> list[str]:
    return [
        "".join(p.get("text", "") for p in c["modelChunk"]["content"])
        for c in chunks
        if "modelChunk" in c and c["modelChunk"].get("role") == "model"
    ]


def tool_answer(name: str, output: Any) -> str:
    """What the scripted model says after a tool message (tests/kit/interop/app.py: tool_answer)."""
    return f"Tool {name} returned {json.dumps(output, sort_keys=True)}"


def without_metadata(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages with every ``metadata`` dropped: the clients keep their own copy of interrupt bookkeeping."""
    return [
        {"role": m["role"], "content": [{k: v for k, v in p.items() if k != "metadata"} for p in m["content"]]}
        for m in messages
    ]


@pytest.fixture
def client(request: pytest.FixtureRequest) -> str:
    return request.param


clients = pytest.mark.parametrize("client", CLIENTS, indirect=True)


# scenarios ------------------------------------------------------------------------------------


@clients
async def test_stream(runs: Runs, server: Server, client: str) -> None:
    """A streamed first turn: the model's deltas, then turnEnd, then the result."""
    report = await runs.report(client, "stream")
    result, chunks = report["result"], report["chunks"]
    assert model_texts(chunks) == ["Echo: ", "hello"]
    assert chunks[-1] == {"turnEnd": {"snapshotId": result["snapshotId"], "finishReason": "stop"}}
    assert (result["text"], result["finishReason"], result["interrupts"]) == ("Echo: hello", "stop", [])
    assert result["snapshotId"] and result["sessionId"] and result["state"] is None

    # Non-ASCII text arrives intact (the server escapes it, so no UTF-8 character is split across reads).
    second = report["second"]
    assert model_texts(report["secondChunks"]) == ["Echo: ", NON_ASCII]
    assert (second["text"], second["sessionId"]) == (f"Echo: {NON_ASCII}", result["sessionId"])

    setup = setup_of(server, client, "stream")
    first, last = await stored(setup, result["snapshotId"]), await stored(setup, second["snapshotId"])
    assert (first.status, first.finish_reason, first.session_id, first.parent_id) == (
        "completed",
        "stop",
        result["sessionId"],
        None,
    )
    assert (last.parent_id, last.session_id) == (first.snapshot_id, result["sessionId"])
    assert history(first) == [
        {"role": "user", "content": [{"text": "hello"}]},
        {"role": "model", "content": [{"text": "Echo: hello"}]},
    ]
    assert history(last) == report["messages"]
    assert report["messages"][2:] == [
        {"role": "user", "content": [{"text": NON_ASCII}]},
        {"role": "model", "content": [{"text": f"Echo: {NON_ASCII}"}]},
    ]


@clients
async def test_interrupt_respond(runs: Runs, server: Server, client: str) -> None:
    """An interrupt reaches the client as ``interrupts``; its respond resumes the turn without running the tool."""
    report = await runs.report(client, "interrupt_respond")
    paused, resumed = report["interrupted"], report["resumed"]
    assert paused["finishReason"] == "interrupted"
    assert paused["interrupts"] == [{"name": "approveTransfer", "ref": "t1", "input": {"amount": 100, "to": "acct-1"}}]
    assert paused["message"]["content"][1]["metadata"] == {"interrupt": True}
    # The paused request streams as the turn's last model chunk, role "tool" (as Genkit JS and Go
    # servers send it); the client collects it with its own chunk API, before the result arrives.
    assert report["streamedInterrupts"] == [paused["message"]["content"][1]]
    paused_chunks = report["interruptedChunks"]
    assert paused_chunks[-2]["modelChunk"]["role"] == "tool"
    assert paused_chunks[-1] == {"turnEnd": {"snapshotId": paused["snapshotId"], "finishReason": "interrupted"}}

    output = {"approved": True, "by": client}
    assert (resumed["text"], resumed["finishReason"]) == (tool_answer("approveTransfer", output), "stop")
    assert resumed["sessionId"] == paused["sessionId"]
    # The resumed turn streams the tool message (role "tool"), then ends.
    response_part = {"toolResponse": {"name": "approveTransfer", "ref": "t1", "output": output}}
    tool_chunk = {"role": "tool", "index": 0, "content": [response_part]}  # the turn's first message
    assert [c["modelChunk"] for c in report["chunks"] if "modelChunk" in c] == [tool_chunk]
    assert report["chunks"][-1] == {"turnEnd": {"snapshotId": resumed["snapshotId"], "finishReason": "stop"}}

    setup = setup_of(server, client, "interrupt_respond")
    before = await stored(setup, paused["snapshotId"])
    after = await stored(setup, resumed["snapshotId"])
    assert (before.finish_reason, before.claimed_by) == ("interrupted", resumed["snapshotId"])
    assert (after.status, after.finish_reason, after.parent_id) == ("completed", "stop", paused["snapshotId"])
    messages = history(after)
    assert roles(messages) == ["user", "model", "tool", "model"]
    request_part = messages[1]["content"][1]
    assert request_part["metadata"] == {"resolvedInterrupt": True}
    assert messages[2]["content"] == [response_part]
    assert isinstance(setup.model, ScriptedModel)
    assert [len(r.messages) for r in setup.model.requests] == [1, 3]
    assert setup.model.requests[1].messages[-1].tool_responses[0].output == output


@clients
async def test_interrupt_restart(runs: Runs, server: Server, client: str) -> None:
    """A plain restart (no metadata.resumed) pauses the tool again; a restart with resumed metadata runs it."""
    report = await runs.report(client, "interrupt_restart")
    paused, plain, restarted = report["interrupted"], report["plain"], report["restarted"]
    interrupt = [{"name": "confirmAction", "ref": "c1", "input": {"action": "deploy"}}]
    assert (paused["finishReason"], paused["interrupts"]) == ("interrupted", interrupt)
    assert paused["message"]["content"][0]["metadata"] == {"interrupt": {"requiresConfirmation": True}}
    assert (plain["finishReason"], plain["interrupts"]) == ("interrupted", interrupt)
    output = {"result": "confirmed: deploy", "resumedMetadata": {"approvedBy": client}}
    assert (restarted["text"], restarted["finishReason"]) == (tool_answer("confirmAction", output), "stop")

    setup = setup_of(server, client, "interrupt_restart")
    assert setup.log == [
        {"tool": "confirmAction", "resumed": None},
        {"tool": "confirmAction", "resumed": None},
        {"tool": "confirmAction", "resumed": {"approvedBy": client}},
    ]
    first, second, third = [await stored(setup, r["snapshotId"]) for r in (paused, plain, restarted)]
    assert (second.parent_id, second.finish_reason, first.claimed_by) == (
        first.snapshot_id,
        "interrupted",
        second.snapshot_id,
    )
    assert (third.parent_id, third.finish_reason, second.claimed_by) == (second.snapshot_id, "stop", third.snapshot_id)
    messages = history(third)
    assert roles(messages) == ["user", "model", "tool", "model"]
    assert messages[1]["content"][0]["metadata"]["resolvedInterrupt"] == {"requiresConfirmation": True}
    assert messages[2]["content"][0]["toolResponse"]["output"] == output
    assert isinstance(setup.model, ScriptedModel) and len(setup.model.requests) == 2


@clients
async def test_snapshots(runs: Runs, server: Server, client: str) -> None:
    """getSnapshot by snapshot id and by session id returns the stored snapshot, as the server writes it."""
    report = await runs.report(client, "snapshots")
    first, second = report["first"], report["second"]
    setup = setup_of(server, client, "snapshots")
    older, newer = await stored(setup, first["snapshotId"]), await stored(setup, second["snapshotId"])
    assert newer.parent_id == older.snapshot_id and newer.session_id == older.session_id == second["sessionId"]

    assert report["byId"] == snapshot_to_json(newer)
    assert report["firstById"] == snapshot_to_json(older)
    assert report["bySession"] == report["byId"]
    assert report["byId"]["status"] == "completed" and len(report["byId"]["state"]["messages"]) == 4


@clients
async def test_load_chat(runs: Runs, server: Server, client: str) -> None:
    """A chat loaded from a snapshot (or a session) has its history and continues from it."""
    report = await runs.report(client, "load_chat")
    first, second, third = report["first"], report["second"], report["third"]
    setup = setup_of(server, client, "load_chat")
    one, two, three = [await stored(setup, r["snapshotId"]) for r in (first, second, third)]

    assert report["loadedSnapshotId"] == first["snapshotId"]
    assert report["loadedMessages"] == history(one)
    assert (second["text"], second["sessionId"], two.parent_id) == ("Echo: second", first["sessionId"], one.snapshot_id)
    assert report["messages"] == history(two)
    assert report["bySessionSnapshotId"] == second["snapshotId"]
    assert report["bySessionMessages"] == history(two)
    assert (third["text"], three.parent_id, three.session_id) == ("Echo: third", two.snapshot_id, first["sessionId"])


@clients
async def test_detach_wait(runs: Runs, server: Server, client: str) -> None:
    """A detached turn answers at once; polling sees it pending, then completed with the full state."""
    report = await runs.report(client, "detach_wait")
    first, done = report["first"], report["done"]
    assert first["snapshotId"] == done["snapshotId"] == report["snapshotId"]
    assert first["status"] == "pending" and "heartbeatAt" in first and "state" not in first
    assert (done["status"], done["finishReason"], done["sessionId"]) == ("completed", "stop", report["sessionId"])

    setup = setup_of(server, client, "detach_wait")
    assert setup.log == ["polled", "finished"]
    snap = await stored(setup, report["snapshotId"])
    assert (snap.status, snap.finish_reason, snap.heartbeat_at) == ("completed", "stop", None)
    assert (
        done["state"]["messages"]
        == history(snap)
        == [
            {"role": "user", "content": [{"text": "slow job"}]},
            {"role": "model", "content": [{"text": "Done: slow job"}]},
        ]
    )


@clients
async def test_detach_abort(runs: Runs, server: Server, client: str) -> None:
    """Aborting a detached turn answers the status before (pending), stops the turn, and sticks."""
    report = await runs.report(client, "detach_abort")
    assert report["before"]["status"] == "pending"
    assert report["previous"] == "pending"
    assert report["after"]["status"] == "aborted" and report["after"]["snapshotId"] == report["snapshotId"]
    assert report["again"] == "aborted"

    setup = setup_of(server, client, "detach_abort")
    snap = await stored(setup, report["snapshotId"])
    assert (snap.status, snap.session_id) == ("aborted", report["sessionId"])
    async with asyncio.timeout(5):  # the abort reaches the running model call through the store
        while setup.log != ["started", "cancelled"]:
            assert "finished" not in setup.log
            await asyncio.sleep(0.02)
    assert (await stored(setup, report["snapshotId"])).status == "aborted"


@clients
async def test_client_managed(runs: Runs, server: Server, client: str) -> None:
    """Client-managed (no store): a send, an interrupt and its respond, then a send; the history the
    client sends back is exactly the conversation (no stray role-"tool" message, interop.md §9 pitfall 7).

    The JS client echoes ``result.state``; the Python client rebuilds the history from the
    streamed chunks and sends that.
    """
    report = await runs.report(client, "client_managed")
    hello, paused, resumed, after = report["results"]
    assert model_texts(report["chunks"]) == ["Hello ", "there"]
    assert report["chunks"][-1] == {"turnEnd": {"finishReason": "stop"}}
    assert all(r["snapshotId"] is None and r["state"] is not None for r in report["results"])
    assert len({r["sessionId"] for r in report["results"]} | {r["state"]["sessionId"] for r in report["results"]}) == 1
    assert hello["text"] == "Hello there"
    assert (paused["finishReason"], paused["interrupts"]) == (
        "interrupted",
        [{"name": "approveTransfer", "ref": "t7", "input": {"amount": 100, "to": "acct-1"}}],
    )
    # The paused request streamed too; the history the client rebuilt from the chunks stays exact (below).
    assert report["streamedInterrupts"] == [p for p in paused["message"]["content"] if "toolRequest" in p]
    assert resumed["text"] == tool_answer("approveTransfer", {"approved": False})
    conversation = ["user", "model", "user", "model", "tool", "model", "user"]
    assert after["text"] == f"I see 7 messages: {','.join(conversation)}"
    assert roles(report["messages"]) == [*conversation, "model"]
    assert roles(after["state"]["messages"]) == [*conversation, "model"]

    setup = setup_of(server, client, "client_managed")
    assert setup.store is None and isinstance(setup.model, ScriptedModel)
    requests = [[message_to_json(m) for m in r.messages] for r in setup.model.requests]
    assert [roles(r) for r in requests] == [["user"], conversation[:3], conversation[:5], conversation]
    # What the client sent back is what the server had returned, apart from the interrupt bookkeeping
    # the Python client keeps on its own copy of the paused message.
    assert without_metadata(requests[3][:6]) == without_metadata(resumed["state"]["messages"])
    assert requests[3][4]["content"] == [
        {"toolResponse": {"name": "approveTransfer", "ref": "t7", "output": {"approved": False}}}
    ]


@clients
async def test_client_managed_signed(runs: Runs, server: Server, client: str) -> None:
    """A client-managed agent that signs its state: both clients carry the signature back, so the
    send, interrupt, respond and send all verify; the model sees the conversation without it."""
    report = await runs.report(client, "client_managed_signed")
    hello, paused, resumed, after = report["results"]
    assert all(r["state"]["custom"]["$interlock"]["sig"].startswith("v1.k1.") for r in report["results"])
    assert (hello["text"], paused["finishReason"]) == ("Hello there", "interrupted")
    assert resumed["text"] == tool_answer("approveTransfer", {"approved": False})
    conversation = ["user", "model", "user", "model", "tool", "model", "user"]
    assert after["text"] == f"I see 7 messages: {','.join(conversation)}"
    setup = setup_of(server, client, "client_managed_signed")
    assert isinstance(setup.model, ScriptedModel)
    assert [len(r.messages) for r in setup.model.requests] == [1, 3, 5, 7]


@clients
async def test_errors(runs: Runs, server: Server, client: str) -> None:
    """Unknown snapshots, state sent to a store agent, an unknown abort, and a stray resume after which
    the session carries on from its last good snapshot."""
    report = await runs.report(client, "errors")
    if client == "js":  # the JS client throws on getSnapshot's 404; the Python client returns None
        assert report["getUnknown"]["error"]["message"].startswith("Server returned: 404: ")
    else:
        assert report["getUnknown"] == {"ok": None}
    assert report["sendUnknown"]["error"]["status"] == "NOT_FOUND"
    state_error = report["stateToStoreAgent"]["error"]
    assert state_error["status"] == "FAILED_PRECONDITION" and "Cannot send 'state'" in state_error["message"]
    assert report["abortUnknown"] == {"ok": None}
    assert report["badResume"]["error"]["status"] == "INVALID_ARGUMENT"
    good, after = report["good"], report["after"]
    assert (good["text"], after["text"], after["sessionId"]) == ("Echo: hi", "Echo: again", good["sessionId"])

    setup = setup_of(server, client, "errors")
    assert setup.store is not None
    last = await stored(setup, after["snapshotId"])
    assert last.parent_id == good["snapshotId"]  # continued from the last good snapshot
    assert roles(history(last)) == ["user", "model", "user", "model"]
    # Only the one good session wrote snapshots: the refused requests left nothing behind.
    listed = await setup.store.list()
    assert {i.session_id for i in listed} == {good["sessionId"]}
    assert {i.snapshot_id for i in listed if i.status == "completed"} == {good["snapshotId"], after["snapshotId"]}
