"""``interlock inbox serve``, ``serve --inbox`` and ``interlock inbox ... --server URL``, in real processes."""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import socket
import subprocess
import sys
import time
from collections.abc import Generator

import httpx
import pytest
from inbox_apps import build_agents
from where import KIT

from interlock import AgentOutput, SQLiteStore

pytestmark = pytest.mark.slow
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(KIT), os.environ.get("PYTHONPATH", "")])}


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def _running(args: list[str], url: str, env: dict[str, str]) -> Generator[subprocess.Popen[str]]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "interlock", *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(url + "/openapi.json", timeout=2).status_code == 200:
                    break
            if proc.poll() is not None or time.monotonic() > deadline:
                _, err = proc.communicate(timeout=10)
                pytest.fail(f"the inbox did not start: {err}")
            time.sleep(0.2)
        yield proc
    finally:
        proc.terminate()
        proc.communicate(timeout=30)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "interlock", *args], env=ENV, capture_output=True, text=True, timeout=120
    )


async def _seed(db: pathlib.Path, *texts: tuple[int, str]) -> list[AgentOutput]:
    async with SQLiteStore(db) as store:
        agents = build_agents(store)
        return [await agents[i].run(text) for i, text in texts]


async def test_inbox_serve_and_the_cli_over_it(tmp_path: pathlib.Path) -> None:
    db = tmp_path / "sessions.db"
    pay, held, both = await _seed(db, (0, "pay bob 25"), (1, "delete x.txt"), (0, "pay ann 1 and cy 2"))
    port = _port()
    url = f"http://127.0.0.1:{port}"
    serve = ["inbox", "serve", "--store", str(db), "--agents", "inbox_apps:build_agents", "--port", str(port)]
    with _running([*serve, "--token", "t0ken", "--user", "carol"], url, ENV) as proc:
        auth = ["--server", url, "--header", "Authorization: Bearer t0ken"]
        listed = _cli("inbox", "list", *auth, "--json")
        assert listed.returncode == 0, listed.stderr
        ids = [pay.snapshot_id, held.snapshot_id, both.snapshot_id, both.snapshot_id]
        assert [i["snapshot_id"] for i in json.loads(listed.stdout)] == ids
        only = json.loads(_cli("inbox", "list", *auth, "--agent", "ops", "--json").stdout)
        assert [i["tool"] for i in only] == ["delete_file"]
        shown = _cli("inbox", "show", pay.snapshot_id or "", *auth)
        assert shown.returncode == 0 and "transfer#t1" in shown.stdout
        done = _cli("inbox", "approve", pay.snapshot_id or "", *auth, "--json")
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["finish_reason"] == "stop"
        again = _cli("inbox", "reject", pay.snapshot_id or "", *auth)
        assert again.returncode == 1 and "already answered by carol" in again.stderr
        denied = _cli("inbox", "list", "--server", url, "--header", "Authorization: Bearer wrong")
        assert denied.returncode == 1 and "UNAUTHENTICATED" in denied.stderr
        rejected = _cli("inbox", "reject", held.snapshot_id or "", *auth, "--output", '"not today"')
        assert rejected.returncode == 0, rejected.stderr
        one = _cli("inbox", "approve", both.snapshot_id or "", *auth, "--ref", "t1")
        assert one.returncode == 1 and '{"answers": [...]}' in one.stderr
        every = _cli("inbox", "approve", both.snapshot_id or "", *auth, "--all", "--json")
        assert every.returncode == 0, every.stderr
        assert json.loads(every.stdout)["finish_reason"] == "stop"
    assert proc.returncode is not None


async def test_serve_with_inbox_mounts_it_beside_the_agents_with_the_same_hook(tmp_path: pathlib.Path) -> None:
    db = tmp_path / "sessions.db"
    [pay] = await _seed(db, (0, "pay dora 7"))
    port = _port()
    url = f"http://127.0.0.1:{port}"
    env = ENV | {"INTERLOCK_STORE": str(db)}
    with _running(["serve", "inbox_served:server", "--inbox", "--port", str(port)], url + "/inbox", env):
        async with httpx.AsyncClient(base_url=url, headers={"x-user": "erin"}, timeout=30) as c:
            assert (await c.get("/inbox/api/interrupts", headers={"x-user": ""})).status_code == 401
            items = (await c.get("/inbox/api/interrupts")).json()["items"]
            assert [i["snapshot_id"] for i in items] == [pay.snapshot_id]
            page = await c.get("/inbox/")
            assert page.status_code == 200 and 'href="/inbox/static/inbox.css"' in page.text
            answer = await c.post(f"/inbox/api/interrupts/{pay.snapshot_id}/answer", json={"decision": "approve"})
            assert answer.status_code == 200 and answer.json()["answered"]["by"] == "erin"
            turn = await c.post("/bank", json={"data": {"message": {"role": "user", "content": [{"text": "hi"}]}}})
            assert turn.status_code == 200 and turn.json()["result"]["message"]["content"][0]["text"] == "hello"
