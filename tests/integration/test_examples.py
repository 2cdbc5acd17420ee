"""The examples in examples/ (one per scenario of the docs guides) run as documented and print what they claim."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest
from where import ROOT

EXAMPLES = ROOT / "examples"
TIMEOUT = 120.0


def run(name: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / name)], capture_output=True, text=True, timeout=TIMEOUT, check=False
    )
    assert done.returncode == 0, f"examples/{name} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done.stdout.splitlines()


def test_approve_transfer_example_pauses_approves_and_resumes() -> None:
    lines = run("approve_transfer.py")
    assert lines[0].startswith("turn paused (interrupted); snapshot ")
    assert "pending: transfer_money(" in lines[1] and "'amount': 25" in lines[1]
    assert lines[2] == "approving transfer of 25.0 to Bob ..."
    assert lines[3] == "resumed (stop): Done: 25 sent to Bob."
    assert lines[4] == "tool result recorded in history: {'status': 'sent', 'to': 'Bob', 'amount': 25.0}"


def test_respond_example_answers_without_running_the_tool() -> None:
    assert run("respond.py") == ["stop - Bob was paid by the back office.", "the model saw: sent by the back office"]


def test_revised_input_example_runs_the_revision_and_keeps_the_original() -> None:
    assert run("revised_input.py") == [
        "tool result: sent 20.0 to Bob",
        "original input kept: {'to': 'Bob', 'amount': 25}",
    ]


def test_another_process_example_resumes_in_a_second_process() -> None:
    first, second = run("another_process.py")
    assert first.startswith("process 1: paused on snapshot ")
    assert second == "process 2: approved 25.0 to Bob; the model says 'Sent.'"


def test_detach_abort_example_waits_for_one_and_aborts_the_other() -> None:
    assert run("detach_abort.py") == ["detached: True", "first: completed", "second: pending -> aborted"]


def test_middleware_example_holds_the_unlisted_tool_until_approved() -> None:
    assert run("middleware.py") == [
        "held: delete_file {'path': 'old.log'} deleted so far: []",
        "Cleaned up old.log. deleted: ['old.log']",
    ]


def test_inbox_example_lists_approves_and_audits() -> None:
    assert run("inbox.py") == [
        "waiting: transferMoney {'to': 'Bob', 'amount': 25.0}",
        "audit: alice [('transferMoney#1', 'approve', {'approved': True})]",
        "still waiting: 0",
    ]


@pytest.mark.slow
def test_serve_http_example_answers_over_a_real_socket() -> None:
    assert run("serve_http.py") == ["Echo: hello over HTTP | stored: completed"]


@pytest.mark.slow
def test_mount_fastapi_example_serves_under_the_prefix() -> None:
    assert run("mount_fastapi.py") == [
        "host: {'hello': 'from the host app'}",
        "health: {'status': 'SERVING', 'stores': {'echo': 'ok'}}",
        "agent: Echo: hi",
    ]


def test_client_state_example_carries_signed_state_and_refuses_a_forgery() -> None:
    assert run("client_state.py") == [
        "You are Ann. | history: 4 messages",
        "forged state: PERMISSION_DENIED | model calls: 2",
    ]


def test_streaming_example_prints_chunks_then_the_output() -> None:
    assert run("streaming.py") == [
        "chunk: 'Hello, '",
        "chunk: 'Ann.'",
        "output: Hello, Ann.",
        "event: TurnEnd",
        "finish: stop",
    ]


def test_delegation_example_answers_the_sub_agents_approval_through_the_orchestrator() -> None:
    assert run("delegation.py") == [
        "interrupted: transfer_money via banker, ref d1/1",
        "stop: Bob has his 25.",
    ]


SERVED = {"agui_app.py": "test_agui_client.py"}
"""Examples that are served, not run: the test that serves each (and drives it with its client)."""


def test_every_example_has_a_test() -> None:
    source = pathlib.Path(__file__).read_text()

    def tested(example: pathlib.Path) -> bool:
        server_test = SERVED.get(example.name)
        if server_test is not None:
            return f"{example.stem}:" in (pathlib.Path(__file__).parent / server_test).read_text()
        return f'run("{example.name}")' in source

    assert [p.name for p in EXAMPLES.glob("*.py") if not tested(p)] == []
