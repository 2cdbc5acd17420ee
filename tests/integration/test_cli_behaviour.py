"""The command line behaves: --version, serve refuses what is not an app and passes uvicorn its options,
demo errors are one line, Ctrl-C at the approval prompt exits at once, progress while the model works,
and ``inbox list`` says which source it reads. Each runs the real ``interlock`` command in a subprocess
(a pseudo-terminal for Ctrl-C)."""

from __future__ import annotations

import fcntl
import http.client
import os
import pathlib
import pty
import select
import signal
import socket
import subprocess
import sys
import termios
import time
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from http_helpers import serve_process
from where import KIT

from interlock import AgentServer, PromptAgent, __version__
from interlock.cli._main import is_asgi_app
from interlock.testing import EchoModel

pytestmark = pytest.mark.slow

INTERLOCK = str(pathlib.Path(sys.executable).with_name("interlock"))
TIMEOUT = 120.0


def interlock(*args: str, cwd: pathlib.Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")} | (env or {})
    return subprocess.run(
        [INTERLOCK, *args],
        cwd=cwd,
        env=environment,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def errors(stderr: str) -> list[str]:
    """What the command reported on stderr, without the progress line."""
    return [line for line in stderr.splitlines() if line and not line.startswith("(waiting for the model")]


def test_version(tmp_path: pathlib.Path) -> None:
    done = interlock("--version", cwd=tmp_path)
    assert (done.returncode, done.stdout) == (0, f"interlock {__version__}\n")


@pytest.mark.parametrize(
    ("target", "found"),
    [
        ("interlock.cli.demo:agents", "the function agents(store: 'SQLiteStore') -> 'list[Agent]'"),
        ("interlock.cli.demo:Ledger", "the class Ledger"),
        ("interlock:__version__", f"a str ('{__version__}')"),
    ],
)
def test_serve_refuses_a_target_that_is_not_an_app(tmp_path: pathlib.Path, target: str, found: str) -> None:
    done = interlock("serve", target, "--port", "0", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"interlock serve: error: cannot serve {found}: it is not an ASGI app.")
    assert "Traceback" not in done.stderr and "Uvicorn running" not in done.stderr


def test_is_asgi_app_knows_apps_from_other_callables() -> None:
    async def app(scope: Any, receive: Any, send: Any) -> None: ...

    async def two(scope: Any, receive: Any) -> None: ...

    def sync(scope: Any, receive: Any, send: Any) -> None: ...

    assert is_asgi_app(app) and is_asgi_app(FastAPI()) and is_asgi_app(AgentServer([PromptAgent("a", EchoModel())]))
    assert not any(is_asgi_app(x) for x in (two, sync, FastAPI, "app", print))


def test_serve_passes_workers_and_keep_alive_to_uvicorn() -> None:
    command = [INTERLOCK, "serve", "mounted_app:own", "--port", "0", "--workers", "2", "--timeout-keep-alive", "30"]
    with serve_process(command, cwd=KIT) as server:
        deadline = time.monotonic() + 60
        while sum("Application startup complete" in line for line in server.log) < 2:
            assert time.monotonic() < deadline, "".join(server.log)
            time.sleep(0.1)
        workers = {line.split("[")[1].split("]")[0] for line in server.log if "Started server process" in line}
        assert len(workers) == 2, "".join(server.log)
        assert httpx.get(f"{server.url}/healthz", timeout=30).json()["status"] == "SERVING"

        # uvicorn's default keep-alive is 5 s; with 30 an idle connection is still open after 7 s.
        port = int(server.url.rsplit(":", 1)[1])
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        try:
            conn.request("GET", "/healthz")
            answer = conn.getresponse()
            assert (answer.status, answer.getheader("connection")) == (200, None)  # kept alive
            answer.read()
            assert conn.sock is not None
            conn.sock.settimeout(7)
            with pytest.raises(TimeoutError):  # nothing arrives, not even the close (b"")
                conn.sock.recv(1)
        finally:
            conn.close()


def test_serve_refuses_zero_workers(tmp_path: pathlib.Path) -> None:
    done = interlock("serve", "mounted_app:own", "--workers", "0", cwd=tmp_path)
    assert done.returncode == 2 and "--workers: the value must be a whole number from 1 to 1024" in done.stderr


def test_demo_without_a_key_is_one_line(tmp_path: pathlib.Path) -> None:
    done = interlock("demo", "--yes", "--model", "openai/gpt-4o-mini", "--store", "d.db", cwd=tmp_path)
    assert done.returncode == 1
    assert errors(done.stderr) == [
        "interlock demo: error: no API key for 'openai': set OPENAI_API_KEY or pass api_key= (UNAUTHENTICATED)"
    ]


def test_demo_with_an_unreachable_server_is_one_line(tmp_path: pathlib.Path) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {"OLLAMA_BASE_URL": f"http://127.0.0.1:{port}/v1"}
    done = interlock("demo", "--yes", "--model", "ollama/qwen2.5", "--store", "d.db", cwd=tmp_path, env=env)
    assert done.returncode == 1
    assert errors(done.stderr) == ["interlock demo: error: could not reach ollama: Connection error. (UNAVAILABLE)"]


def test_demo_shows_progress_while_the_model_answers(tmp_path: pathlib.Path) -> None:
    done = interlock("demo", "--no", "--model", "scripted", "--store", "d.db", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == ["(waiting for the model's answer...)"] * 2  # the first turn and the resume
    assert "banker: I'll send $150 to Alice for dinner." in done.stdout
    assert '"status": "rejected"' in done.stdout


def _read_until(fd: int, marker: bytes, timeout: float) -> bytes:
    seen = b""
    deadline = time.monotonic() + timeout
    while marker not in seen:
        left = deadline - time.monotonic()
        assert left > 0, f"no {marker!r} within {timeout} s; saw {seen!r}"
        if select.select([fd], [], [], left)[0]:
            try:
                seen += os.read(fd, 4096)
            except OSError:  # the other side closed
                break
    return seen


def test_ctrl_c_at_the_approval_prompt_exits_at_once(tmp_path: pathlib.Path) -> None:
    main, terminal = pty.openpty()

    def controlling_terminal() -> None:  # the pty becomes the demo's terminal, so ^C is its SIGINT
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    proc = subprocess.Popen(
        [INTERLOCK, "demo", "--model", "scripted", "--store", "d.db"],
        cwd=tmp_path,
        stdin=terminal,
        stdout=terminal,
        stderr=terminal,
        start_new_session=True,
        preexec_fn=controlling_terminal,
    )
    os.close(terminal)
    try:
        seen = _read_until(main, b"Approve this transfer? [y/n] ", TIMEOUT)
        assert b"(waiting for the model's answer..." in seen  # the progress line, on a terminal
        os.write(main, b"\x03")  # Ctrl-C
        started = time.monotonic()
        code = proc.wait(timeout=15)
        assert time.monotonic() - started < 10
        rest = _read_until(main, b"", 1)
        assert code == 130, seen + rest
        assert b"Traceback" not in seen + rest
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        os.close(main)


def test_inbox_list_with_a_store_and_a_server_says_it_lists_from_the_store(tmp_path: pathlib.Path) -> None:
    paused = interlock("demo", "--later", "--model", "scripted", "--store", "d.db", cwd=tmp_path)
    assert paused.returncode == 0, paused.stderr
    done = interlock("inbox", "list", "--store", "d.db", "--server", "http://127.0.0.1:9", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [
        "interlock inbox list: listing from the store d.db; --server http://127.0.0.1:9 is not used for listing"
    ]
    assert "transferMoney" in done.stdout
