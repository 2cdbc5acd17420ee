"""The command line: ``python -m interlock serve`` in a real subprocess."""

from __future__ import annotations

import asyncio
import os
import pathlib
import signal
import socket
import subprocess
import sys
import textwrap

import httpx
import pytest

from interlock.cli import main

pytestmark = pytest.mark.slow

MODULE = textwrap.dedent(
    """
    from interlock import InMemoryStore, PromptAgent
    from interlock.testing import EchoModel

    agents = [PromptAgent("echo", EchoModel(), store=InMemoryStore()), PromptAgent("stateless", EchoModel())]
    """
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def interlock(*args: str, cwd: pathlib.Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "interlock", *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


async def test_serve_runs_agents_and_logs_each_turn(tmp_path: pathlib.Path) -> None:
    (tmp_path / "tests_module.py").write_text(MODULE)
    port = free_port()
    proc = interlock("serve", "tests_module:agents", "--port", str(port), "--base-path", "/api", cwd=tmp_path)
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
            async with asyncio.timeout(20):
                while True:
                    assert proc.poll() is None, proc.communicate()
                    try:
                        await http.post("/api/echo/getSnapshot", json={"data": {"snapshotId": "x"}})
                        break
                    except httpx.TransportError:
                        await asyncio.sleep(0.1)
            body = {"data": {"message": {"role": "user", "content": [{"text": "hi"}]}}, "init": {}}
            response = await http.post("/api/echo", json=body, headers={"Accept": "text/event-stream"})
            assert response.status_code == 200
            assert response.text.endswith("\n\n") and '"finishReason":"stop"' in response.text
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=20)
    assert proc.returncode is not None
    lines = [line for line in err.splitlines() if "interlock.http.server" in line and " turn " in line]
    assert len(lines) == 1, err
    assert "agent=echo" in lines[0] and "finish=stop" in lines[0] and "duration_ms=" in lines[0]
    assert "session=-" not in lines[0] and "snapshot=-" not in lines[0]


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("no_colon_here", "expected a target like"),
        ("no_such_module_xyz:agents", "cannot import module 'no_such_module_xyz'"),
        ("tests_module:nothing", "has no attribute 'nothing'"),
        ("tests_module:MODULE_NUMBER", "cannot serve a int"),
    ],
)
def test_bad_targets_exit_2_with_a_message(tmp_path: pathlib.Path, target: str, message: str) -> None:
    (tmp_path / "tests_module.py").write_text(MODULE + "\nMODULE_NUMBER = 3\n")
    proc = interlock("serve", target, "--port", str(free_port()), cwd=tmp_path)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 2, (out, err)
    assert message in err and "Traceback" not in err


def test_no_command_prints_help_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "serve" in capsys.readouterr().err
