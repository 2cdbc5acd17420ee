"""Drive ``interlock serve agui_app:server --ag-ui`` with the published ``@ag-ui/client`` (node).

:func:`clients` installs the client with ``scripts/setup_interop.sh`` (failing, never skipping,
when it cannot); :func:`served` starts the server in its own process over a SQLite file, with
an append-only file every transfer that runs writes a line to; :func:`drive` runs a plan of
client runs (``tests/kit/interop/agui_client.cjs``) and parses every event the client received
with ``ag_ui.core``'s models.
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import subprocess
import sys
import time
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any, cast

import httpx
import pytest
from ag_ui.core import Event
from http_helpers import serve_process
from pydantic import TypeAdapter
from where import KIT, ROOT

INTERLOCK = str(pathlib.Path(sys.executable).with_name("interlock"))
INTEROP_DIR = pathlib.Path(os.environ.get("INTERLOCK_INTEROP_DIR") or ROOT / ".interop")
EVENT: TypeAdapter[Any] = TypeAdapter(Event)
SETUP_TIMEOUT = 900.0
CLIENT_TIMEOUT = 120.0


def clients() -> dict[str, str]:
    """The environment node runs the client with, after scripts/setup_interop.sh installed it."""
    env = {**os.environ, "INTERLOCK_INTEROP_DIR": str(INTEROP_DIR)}
    for leak in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV"):
        env.pop(leak, None)
    command = ["bash", str(ROOT / "scripts" / "setup_interop.sh")]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=SETUP_TIMEOUT, check=False)
    if done.returncode != 0:
        pytest.fail(
            f"scripts/setup_interop.sh could not install @ag-ui/client (exit {done.returncode}):\n"
            f"{done.stdout}{done.stderr}",
            pytrace=False,
        )
    return env


@dataclass
class Served:
    url: str
    runs_log: pathlib.Path

    def runs(self) -> list[dict[str, Any]]:
        """The transfers that ran, one per line of the append-only file."""
        text = self.runs_log.read_text() if self.runs_log.exists() else ""
        return [json.loads(line) for line in text.splitlines()]

    def snapshot(self, agent: str, thread: str) -> dict[str, Any]:
        """The thread's latest snapshot, through the Genkit route (``getSnapshot``)."""
        got = httpx.post(
            f"{self.url}/{agent}/getSnapshot",
            json={"data": {"sessionId": thread}},
            headers={"x-user": "ann"},
            timeout=30,
        )
        assert got.status_code == 200, got.text
        return got.json()["result"]


@contextlib.contextmanager
def served(tmp: pathlib.Path, *extra: str) -> Generator[Served]:
    """``interlock serve agui_app:server --ag-ui`` over ``tmp``/agui.sqlite3, in its own process."""
    log = tmp / "runs.jsonl"
    env = {"INTERLOCK_STORE": str(tmp / "agui.sqlite3"), "INBOX_RUNS_LOG": str(log)}
    with pytest.MonkeyPatch.context() as patch:
        for key, value in env.items():
            patch.setenv(key, value)
        command = [INTERLOCK, "serve", "agui_app:server", "--port", "0", "--ag-ui", *extra]
        with serve_process(command, cwd=KIT) as server:
            _ready(server.url)
            yield Served(url=server.url, runs_log=log)


def _ready(url: str) -> None:
    """Wait until the server answers (``--workers`` listens before its workers have started)."""
    for _ in range(600):
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{url}/healthz", timeout=5).status_code == 200:
                return
        time.sleep(0.1)
    raise AssertionError(f"{url} did not answer /healthz within a minute")


def drive(env: dict[str, str], url: str, plan: list[Any]) -> list[Any]:
    """Run ``plan`` with the client; each run's events come back parsed by ``ag_ui.core`` (``parsed``)."""
    command = ["node", str(KIT / "interop" / "agui_client.cjs"), url, json.dumps(plan)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=CLIENT_TIMEOUT, check=False)
    assert done.returncode == 0, done.stderr
    runs: list[Any] = json.loads(done.stdout)
    for run in runs:
        group = cast(list[dict[str, Any]], run if isinstance(run, list) else [run])
        for one in group:
            events: list[Any] = one["events"]
            one["parsed"] = [EVENT.validate_python(e) for e in events]
    return runs


def kinds(run: dict[str, Any]) -> list[str]:
    """The event types of one run, in order."""
    return [e["type"] for e in run["events"]]


def outcome(run: dict[str, Any]) -> dict[str, Any] | None:
    """The ``RUN_FINISHED`` outcome of a run (``None`` for a plain finish)."""
    last = run["events"][-1]
    assert last["type"] == "RUN_FINISHED", kinds(run)
    return last.get("outcome")


def error(run: dict[str, Any]) -> dict[str, Any]:
    """The ``RUN_ERROR`` event that ended a run."""
    last = run["events"][-1]
    assert last["type"] == "RUN_ERROR", kinds(run)
    return last
