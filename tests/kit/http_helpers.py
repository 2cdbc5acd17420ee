"""Run an ASGI app on a real uvicorn server: inside the test's event loop, or in a process of its own."""

from __future__ import annotations

import asyncio
import contextlib
import os
import pathlib
import re
import subprocess
import threading
from collections.abc import AsyncGenerator, Generator
from dataclasses import dataclass
from typing import IO, Any

import uvicorn


@contextlib.asynccontextmanager
async def serve(app: Any) -> AsyncGenerator[str]:
    """Serve ``app`` on a free 127.0.0.1 port; yields the base URL, shuts the server down after."""
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=0,
        log_level="warning",
        log_config=None,
        lifespan="off",
        ws="none",
        timeout_graceful_shutdown=5,
    )
    server = uvicorn.Server(config)
    task = asyncio.ensure_future(server.serve())
    try:
        async with asyncio.timeout(10):
            while not server.started:
                if task.done():
                    task.result()
                    raise RuntimeError("uvicorn stopped before it started")
                await asyncio.sleep(0.01)
        port = server.servers[0].sockets[0].getsockname()[1]
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task


_LISTENING = re.compile(r"Uvicorn running on http://127\.0\.0\.1:(\d+)")


@dataclass
class ServerProcess:
    """A server in its own process: its base URL and what it logged on stderr so far."""

    url: str
    proc: subprocess.Popen[str]
    log: list[str]


@contextlib.contextmanager
def serve_process(command: list[str], *, cwd: pathlib.Path, timeout: float = 60.0) -> Generator[ServerProcess]:
    """Run a command that starts uvicorn on ``--port 0``; yields once it listens, terminates it after.

    The port is read from uvicorn's "Uvicorn running on ..." line; stderr is drained on a thread
    for the whole run, so the server never blocks on a full pipe.
    """
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(command, cwd=cwd, env=env, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    log: list[str] = []
    found = threading.Event()

    def read(stream: IO[str]) -> None:
        for line in stream:
            log.append(line)
            if _LISTENING.search(line):
                found.set()

    reader = threading.Thread(target=read, args=(proc.stderr,), daemon=True)
    reader.start()
    try:
        if not found.wait(timeout):
            raise AssertionError(f"{command} did not listen within {timeout:.0f} s:\n{''.join(log)}")
        port = next(int(m[1]) for line in list(log) if (m := _LISTENING.search(line)))
        yield ServerProcess(url=f"http://127.0.0.1:{port}", proc=proc, log=log)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        reader.join(timeout=5)
        proc.stderr.close()
