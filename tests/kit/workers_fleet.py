"""A fleet on one PostgreSQL database: ``interlock serve`` and ``interlock worker`` processes (tests and bench).

Every process imports ``workers_app`` (this folder), whose tool bodies append to one log;
:func:`runs` reads it back. Workers run with short leases and sweeps (``FAST``), so a
killed worker's turn is taken over in about two seconds.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import io
import os
import pathlib
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Generator, Sequence
from dataclasses import dataclass, field
from typing import IO

import psycopg

from interlock.cli import main

HERE = pathlib.Path(__file__).resolve().parent
INTERLOCK = pathlib.Path(sys.executable).with_name("interlock")
FAST = ("--lease", "2", "--stalled-after", "2", "--sweep-every", "0.5", "--poll", "0.5")
"""Worker options for the tests: a dead worker's turn is retried after ~2 s."""
DSN, LOG, SLEEP = "INTERLOCK_TEST_WORKERS_DSN", "INTERLOCK_TEST_WORKERS_LOG", "INTERLOCK_TEST_WORKERS_SLEEP"
"""What ``workers_app`` reads: the store, the tool-run log, how long its ``wait`` tool sleeps."""
_LISTENING = re.compile(r"Uvicorn running on http://127\.0\.0\.1:(\d+)")


@dataclass
class Proc:
    """A process of the fleet: its command, its output so far (read on a thread)."""

    proc: subprocess.Popen[str]
    lines: list[str] = field(default_factory=list[str])
    url: str | None = None
    reader: threading.Thread | None = None

    @property
    def pid(self) -> int:
        return self.proc.pid

    def output(self) -> str:
        return "".join(self.lines)


@dataclass
class Fleet:
    """The processes on one database; stopped (SIGKILL if they linger) when the fleet's context ends."""

    dsn: str
    log: pathlib.Path
    env: dict[str, str]
    servers: list[Proc] = field(default_factory=list[Proc])
    workers: list[Proc] = field(default_factory=list[Proc])

    def _start(self, args: Sequence[str]) -> Proc:
        proc = subprocess.Popen(
            [str(INTERLOCK), *args], cwd=HERE, env=self.env, stderr=subprocess.PIPE, text=True, start_new_session=True
        )
        found = Proc(proc)
        found.reader = threading.Thread(target=_drain, args=(proc.stderr, found), daemon=True)
        found.reader.start()
        return found

    def server(self, timeout: float = 60.0) -> Proc:
        """Start ``interlock serve workers_app:agents --detach-to-workers`` on a free port (waits until it listens)."""
        found = self._start(
            ["serve", "workers_app:agents", "--detach-to-workers", "--port", "0", "--log-level", "info"]
        )
        self.servers.append(found)
        deadline = time.monotonic() + timeout
        while found.url is None:
            if found.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"interlock serve did not listen:\n{found.output()}")
            time.sleep(0.02)
        return found

    def worker(self, *flags: str) -> Proc:
        """Start ``interlock worker`` on the fleet's store (``FAST`` unless flags say otherwise)."""
        args = ["worker", "--store", self.dsn, "--agents", "workers_app:agents", "--log-level", "info"]
        found = self._start([*args, *(flags or FAST)])
        self.workers.append(found)
        return found

    def stop(self) -> None:
        for p in [*self.servers, *self.workers]:
            if p.proc.poll() is None:
                p.proc.terminate()
        for p in [*self.servers, *self.workers]:
            try:
                p.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.proc.kill()
                p.proc.wait()
            if p.reader is not None:
                p.reader.join(timeout=5)
            if p.proc.stderr is not None:
                p.proc.stderr.close()


def _drain(stream: IO[str] | None, found: Proc) -> None:
    assert stream is not None
    for line in stream:
        found.lines.append(line)
        if found.url is None and (m := _LISTENING.search(line)):
            found.url = f"http://127.0.0.1:{m[1]}"


def upgrade(dsn: str) -> str:
    """``interlock db upgrade --store DSN`` (the store's tables and the worker queue's), in this process; its output.

    On a thread of its own: the command runs its own event loop, and the caller may be inside one.
    """
    out = io.StringIO()

    def run() -> int:
        with contextlib.redirect_stdout(out):
            return main(["db", "upgrade", "--store", dsn])

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        code = pool.submit(run).result()
    assert code == 0, out.getvalue()
    return out.getvalue()


@contextlib.contextmanager
def fleet(dsn: str, tmp: pathlib.Path, *, sleep: float = 0.0) -> Generator[Fleet]:
    """A fleet on ``dsn`` (upgraded first) whose ``wait`` tool sleeps ``sleep`` seconds."""
    upgrade(dsn)
    log = tmp / "runs.log"
    log.touch()
    env = {
        **os.environ,
        "PYTHONUNBUFFERED": "1",
        "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
        DSN: dsn,
        LOG: str(log),
        SLEEP: str(sleep),
    }
    found = Fleet(dsn=dsn, log=log, env=env)
    try:
        yield found
    finally:
        found.stop()


def runs(log: pathlib.Path, what: str, session_id: str | None = None) -> list[tuple[int, float]]:
    """The ``(pid, time)`` of each logged ``what`` (of one session, if given), in order."""
    found: list[tuple[int, float]] = []
    for line in log.read_text().splitlines():
        kind, session, pid, at = line.split(" ")
        if kind == what and (session_id is None or session == session_id):
            found.append((int(pid), float(at)))
    return found


async def logged(log: pathlib.Path, what: str, session_id: str | None, *, timeout: float = 20.0) -> tuple[int, float]:
    """Wait until ``what`` is logged (for the session); its first ``(pid, time)``."""
    deadline = time.monotonic() + timeout
    while not (found := runs(log, what, session_id)):
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} was not logged within {timeout} s:\n{log.read_text()}")
        await asyncio.sleep(0.01)
    return found[0]


def kill(proc: Proc, sig: signal.Signals = signal.SIGKILL) -> None:
    """Send ``sig`` to the process's whole group (it was started in a session of its own)."""
    os.killpg(proc.pid, sig)


def job_statuses(dsn: str) -> list[str]:
    """The status of every job in the queue, oldest first."""
    with psycopg.connect(dsn, autocommit=True) as con:
        return [str(r[0]) for r in con.execute("SELECT status FROM procrastinate_jobs ORDER BY id").fetchall()]


async def settled_jobs(dsn: str, timeout: float = 20.0) -> list[str]:
    """:func:`job_statuses` once no job is waiting or running: a worker marks its job done just
    after the turn's final write, so a snapshot can read finished a moment before its job does."""
    deadline = time.monotonic() + timeout
    while True:
        statuses = job_statuses(dsn)
        if not {"todo", "doing"} & set(statuses) or time.monotonic() > deadline:
            return statuses
        await asyncio.sleep(0.05)
