"""AG-UI 1.0: the published ``@ag-ui/client`` (``HttpAgent``) drives ``interlock serve --ag-ui``.

One real server (uvicorn, its own process, a SQLite file) for the module; each test runs one
node process with a plan of client runs (``tests/kit/interop/agui_client.cjs``). Every event
the client received is parsed by ``ag_ui.core``'s models (:func:`agui_kit.drive`). Transfers
that run append a line to a file, so "ran once" is counted, not assumed. A client that knows
nothing of the thread (a new name in the plan) sends what a careless client would: the
reference client checks coverage itself only for the interrupts it saw.
"""

from __future__ import annotations

import pathlib
import subprocess
from collections.abc import Generator
from typing import Any

import pytest
from agui_kit import INTERLOCK, INTEROP_DIR, Served, clients, drive, error, kinds, outcome, served
from http_helpers import serve_process
from where import ROOT

pytestmark = [pytest.mark.slow]

YES = {"status": "resolved", "payload": {"approved": True}}


@pytest.fixture(scope="module")
def env() -> dict[str, str]:
    return clients()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Generator[Served]:
    with served(tmp_path_factory.mktemp("agui")) as found:
        yield found


def run(client: str, thread: str, *, message: str | None = None, resume: list[Any] | None = None) -> dict[str, Any]:
    step: dict[str, Any] = {"client": client, "agent": "bank", "threadId": thread}
    return step | ({"message": message} if message else {}) | ({"resume": resume} if resume is not None else {})


def test_a_pause_then_a_resolved_resume_runs_the_tool_once(env: dict[str, str], server: Served) -> None:
    paused, done, replay = drive(
        env,
        server.url,
        [
            run("a", "pay", message="pay bob 5"),
            run("a", "pay", resume=[{"interruptId": "t1", **YES}]),
            run("b", "pay", resume=[{"interruptId": "t1", **YES}]),
        ],
    )
    assert kinds(paused)[:4] == ["RUN_STARTED", "TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END"]
    found = outcome(paused)
    assert found is not None and found["type"] == "interrupt"
    (asked,) = found["interrupts"]
    assert (asked["id"], asked["toolCallId"], asked["reason"]) == ("t1", "t1", "input_required")
    assert asked["responseSchema"]["properties"]["approved"]["type"] == "boolean"
    assert asked["metadata"]["input"] == {"to": "bob", "amount": 5.0}
    assert [i["id"] for i in paused["pendingInterrupts"]] == ["t1"]  # the client took the outcome as a pause

    assert outcome(done) is None and done["error"] is None and done["pendingInterrupts"] == []
    results = [e for e in done["events"] if e["type"] == "TOOL_CALL_RESULT"]
    assert [(r["toolCallId"], r["content"]) for r in results] == [("t1", '{"status":"sent","reference":"T-bob-5"}')]
    assert "TEXT_MESSAGE_CONTENT" in kinds(done)

    assert error(replay)["code"] == "ABORTED"  # a replay, from a client that sends no history
    assert server.runs() == [{"to": "bob", "amount": 5.0}]


def test_a_cancelled_interrupt_ends_the_turn_without_the_tool(env: dict[str, str], server: Served) -> None:
    _, done = drive(
        env,
        server.url,
        [
            run("a", "cancel", message="pay carl 3"),
            run("a", "cancel", resume=[{"interruptId": "t1", "status": "cancelled"}]),
        ],
    )
    assert outcome(done) is None
    assert [e["content"] for e in done["events"] if e["type"] == "TOOL_CALL_RESULT"] == ['{"status":"cancelled"}']
    assert all(r["to"] != "carl" for r in server.runs())


def test_refused_resumes_change_nothing_then_one_resume_answers_both(env: dict[str, str], server: Served) -> None:
    (paused,) = drive(env, server.url, [run("a", "two", message="pay dora 1 and emil 2")])
    found = outcome(paused)
    assert found is not None and [i["id"] for i in found["interrupts"]] == ["t1", "t2"]
    before = server.snapshot("bank", "two")

    wrong, partial = drive(
        env,
        server.url,
        [
            run("w", "two", resume=[{"interruptId": "t1", **YES}, {"interruptId": "t9", **YES}]),
            run("p", "two", resume=[{"interruptId": "t1", **YES}]),
        ],
    )
    assert error(wrong)["code"] == "INVALID_ARGUMENT" and "t9" in error(wrong)["message"]
    assert error(partial)["code"] == "FAILED_PRECONDITION" and "t2" in error(partial)["message"]
    assert server.snapshot("bank", "two") == before  # nothing claimed, nothing written
    assert all(r["to"] not in ("dora", "emil") for r in server.runs())

    (both,) = drive(  # a client with no history answers both at once
        env, server.url, [run("n", "two", resume=[{"interruptId": "t1", **YES}, {"interruptId": "t2", **YES}])]
    )
    assert outcome(both) is None
    assert [e["toolCallId"] for e in both["events"] if e["type"] == "TOOL_CALL_RESULT"] == ["t1", "t2"]
    assert sorted(r["to"] for r in server.runs() if r["to"] in ("dora", "emil")) == ["dora", "emil"]


def test_the_client_refuses_a_partial_resume_of_the_interrupts_it_saw(env: dict[str, str], server: Served) -> None:
    _, refused = drive(
        env,
        server.url,
        [run("a", "own", message="pay fay 1 and gil 2"), run("a", "own", resume=[{"interruptId": "t1", **YES}])],
    )
    assert refused["events"] == [] and "not addressed by resume: t2" in refused["error"]


def test_unknown_threads_and_agents_are_run_errors(env: dict[str, str], server: Served) -> None:
    nobody = run("x", "t") | {"agent": "nobody", "message": "hi"}
    missing, unknown = drive(env, server.url, [run("m", "never", resume=[{"interruptId": "t1", **YES}]), nobody])
    assert error(missing)["code"] == "NOT_FOUND" and error(unknown)["code"] == "NOT_FOUND"


def test_the_docs_example_runs_as_documented(env: dict[str, str], tmp_path: pathlib.Path) -> None:
    """docs/ag-ui.md: ``interlock serve agui_app:agent --ag-ui`` in examples/, ``node agui_client.cjs URL``."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AGUI_STORE", str(tmp_path / "agui.sqlite3"))
        command = [INTERLOCK, "serve", "agui_app:agent", "--port", "0", "--ag-ui"]
        with serve_process(command, cwd=ROOT / "examples") as server:
            node_env = env | {"NODE_PATH": str(INTEROP_DIR / "js" / "node_modules")}
            done = subprocess.run(
                ["node", str(ROOT / "examples" / "agui_client.cjs"), server.url],
                env=node_env,
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "paused: pay-1 Send 25 to Bob? answer schema: approved",
        'tool: {"status":"sent","to":"Bob","amount":25.0}',
        "reply: Done: sent.",
        "pending: 0",
    ]
