"""Starting ``interlock serve notify_app:server`` in a subprocess, for the notification tests."""

from __future__ import annotations

import asyncio
import os
import pathlib
import signal
import socket
import subprocess
import sys
from collections.abc import Generator
from contextlib import contextmanager
from typing import Any

import httpx
from hook_receiver import Receiver

TESTS = pathlib.Path(__file__).parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def serve(tmp: pathlib.Path, db: pathlib.Path, hook: str, *flags: str, **env: str) -> Generator[tuple[Any, int]]:
    """``interlock serve notify_app:server`` on a free port (its output in files, so a SIGKILL loses nothing)."""
    port = _free_port()
    environ = {**os.environ, "PYTHONUNBUFFERED": "1", "NOTIFY_DB": str(db), "NOTIFY_HOOK": hook, **env}
    with (tmp / f"serve-{port}.log").open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "interlock", "serve", "notify_app:server", "--port", str(port), *flags],
            cwd=TESTS,
            env=environ,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        yield proc, port
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)


async def ready(proc: Any, port: int) -> None:
    async with httpx.AsyncClient() as http, asyncio.timeout(60):
        while True:
            assert proc.poll() is None, "the server exited"
            try:
                await http.post(f"http://127.0.0.1:{port}/bank/getSnapshot", json={"data": {"snapshotId": "x"}})
                return
            except httpx.TransportError:
                await asyncio.sleep(0.1)


async def wait_for(hook: Receiver, count: int, timeout: float) -> None:
    got = await asyncio.to_thread(hook.received, timeout, count)
    assert len(got) >= count, f"{len(got)} deliveries arrived, expected {count}"
