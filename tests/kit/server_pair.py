"""Several real ``interlock serve`` processes on one store, for the multi-server tests.

The processes start together (their start-up overlaps) on free ports; each one's output goes
to a file (kept when it is SIGKILLed). :func:`started` yields once every one answers
``GET /healthz``, and stops them with SIGINT (then SIGKILL) afterwards.
"""

from __future__ import annotations

import os
import pathlib
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Generator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import httpx

TESTS = pathlib.Path(__file__).parent


@dataclass(frozen=True)
class Served:
    """One ``interlock serve`` process: its base URL, the process, and its log file."""

    url: str
    proc: subprocess.Popen[bytes]
    log: pathlib.Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start(tmp: pathlib.Path, target: str, flags: Sequence[str], env: dict[str, str]) -> Served:
    port = free_port()
    log = tmp / f"serve-{port}.log"
    environ = {**os.environ, "PYTHONUNBUFFERED": "1", **env}
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "interlock", "serve", target, "--port", str(port), *flags],
            cwd=TESTS,
            env=environ,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    return Served(url=f"http://127.0.0.1:{port}", proc=proc, log=log)


def _wait_ready(servers: Sequence[Served], timeout: float) -> None:
    end = time.monotonic() + timeout
    waiting = list(servers)
    while waiting:
        server = waiting[0]
        assert server.proc.poll() is None, f"{server.url} exited:\n{server.output()}"
        assert time.monotonic() < end, f"{server.url} did not answer within {timeout} s:\n{server.output()}"
        try:
            httpx.get(f"{server.url}/healthz", timeout=2)
            waiting.pop(0)
        except httpx.TransportError:
            time.sleep(0.05)


def _stop(server: Served) -> None:
    if server.proc.poll() is None:
        server.proc.send_signal(signal.SIGINT)
        try:
            server.proc.wait(20)
        except subprocess.TimeoutExpired:
            server.proc.kill()
            server.proc.wait(10)


@contextmanager
def started(
    tmp: pathlib.Path, target: str, *flags: str, count: int = 2, env: dict[str, str] | None = None
) -> Generator[list[Served]]:
    """``count`` processes of ``interlock serve target *flags``, all answering."""
    servers: list[Served] = []
    try:
        servers = [_start(tmp, target, flags, env or {}) for _ in range(count)]
        _wait_ready(servers, 60)
        yield servers
    finally:
        for server in servers:
            _stop(server)
