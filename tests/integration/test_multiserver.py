"""Two real ``interlock serve`` processes on one PostgreSQL database: any server answers any session.

Both servers (uvicorn subprocesses, ``--inbox``) serve ``multiserver_app`` over one fresh
schema of the test cluster, for the whole module. Each test uses its own names, so the tool
log (one line per tool run, from either process) tells its runs apart.
"""

from __future__ import annotations

import asyncio
import pathlib
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from server_pair import Served, started
from store_kinds import locate, store_at

from interlock import Resume, ToolRequestPart
from interlock.http._client import RemoteAgent

pytestmark = pytest.mark.slow


@dataclass(frozen=True)
class Pair:
    a: Served
    b: Served
    location: pathlib.Path
    log: pathlib.Path

    def runs(self, event: str, name: str) -> list[str]:
        """The pids of the processes that logged ``event`` for ``name``."""
        lines = self.log.read_text().splitlines() if self.log.exists() else []
        return [line.split()[2] for line in lines if line.split()[:2] == [event, name]]


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    tmp = tmp_path_factory.mktemp("multiserver")
    location, log = locate("postgres", tmp / "store"), tmp / "tools.log"
    asyncio.run(_create_schema(location))  # one process creates the tables; the servers find them
    env = {"MULTI_STORE": str(location), "MULTI_LOG": str(log)}
    with started(tmp, "multiserver_app:server", "--inbox", "--log-level", "warning", env=env) as (a, b):
        yield Pair(a=a, b=b, location=location, log=log)


async def _create_schema(location: pathlib.Path) -> None:
    async with store_at(location) as store:
        await store.ready()


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    limits = httpx.Limits(max_connections=200, max_keepalive_connections=200)
    async with httpx.AsyncClient(timeout=60, limits=limits) as client:
        yield client


def _remote(server: Served, agent: str, http: httpx.AsyncClient) -> RemoteAgent:
    return RemoteAgent(f"{server.url}/{agent}", http=http)


def _approve(name: str) -> Resume:
    call = ToolRequestPart(
        name="transfer", ref="c1", input={"to": name, "amount": 5}, metadata={"resumed": {"approved": True}}
    )
    return Resume(restart=[call])


async def _wait_for_snapshot(server: Served, agent: str, snapshot_id: str, http: httpx.AsyncClient) -> dict[str, Any]:
    response = await http.post(f"{server.url}/{agent}/waitForSnapshot", json={"data": {"snapshotId": snapshot_id}})
    assert response.status_code == 200, response.text
    return response.json()["result"]


async def test_a_session_paused_on_one_server_is_read_and_resumed_on_the_other(
    pair: Pair, http: httpx.AsyncClient
) -> None:
    a, b = _remote(pair.a, "bank", http), _remote(pair.b, "bank", http)
    out = await a.run("pay ann")
    assert out.finish_reason == "interrupted" and out.snapshot_id and out.session_id

    by_id = await b.get_snapshot(out.snapshot_id)
    by_session = await b.get_snapshot(session_id=out.session_id)
    assert by_id.snapshot_id == by_session.snapshot_id == out.snapshot_id
    assert [p.input for p in by_id.interrupts] == [{"to": "ann", "amount": 5}]

    done = await b.run(resume=_approve("ann"), session_id=out.session_id)  # by session id, on the other server
    assert done.finish_reason == "stop" and done.text == "tool said: ['sent']"
    latest = await a.get_snapshot(session_id=out.session_id)
    assert latest.snapshot_id == done.snapshot_id and latest.status == "completed"

    again = await a.run("pay bea", session_id=out.session_id)  # the session goes on through A
    assert again.finish_reason == "interrupted"
    final = await b.run(resume=_approve("bea"), snapshot_id=again.snapshot_id)  # by snapshot id, through B
    assert final.finish_reason == "stop"
    assert len(pair.runs("transfer", "ann")) == 1 and len(pair.runs("transfer", "bea")) == 1


async def test_wait_for_snapshot_on_b_wakes_when_a_turn_on_a_commits(pair: Pair, http: httpx.AsyncClient) -> None:
    out = await _remote(pair.a, "slow", http).run("hold cid", detach=True)
    assert out.finish_reason == "detached" and out.snapshot_id
    waiting = asyncio.ensure_future(_wait_for_snapshot(pair.b, "slow", out.snapshot_id, http))
    await _until(lambda: pair.runs("started", "cid") != [])
    await asyncio.sleep(0.3)
    assert not waiting.done()  # B waits while the turn runs on A

    opened = time.monotonic()
    pair.log.with_name("cid.gate").touch()
    result = await asyncio.wait_for(waiting, 10)
    lag = time.monotonic() - opened

    assert result["status"] == "completed" and result["snapshotId"] == out.snapshot_id
    assert pair.runs("finished", "cid") == [str(pair.a.proc.pid)]  # the turn ran on A
    print(f"waitForSnapshot on B answered {lag * 1000:.0f} ms after the gate opened on A")
    assert lag < 2.0  # the tool's 10 ms gate check + the commit + NOTIFY; not a poll of B's


async def test_abort_through_a_stops_a_detached_turn_running_on_b(pair: Pair, http: httpx.AsyncClient) -> None:
    out = await _remote(pair.b, "slow", http).run("hold dan", detach=True)
    assert out.snapshot_id
    await _until(lambda: pair.runs("started", "dan") != [])

    previous = await _remote(pair.a, "slow", http).abort(out.snapshot_id)

    assert previous == "pending"
    await _until(lambda: pair.runs("cancelled", "dan") != [])  # B's turn heard the abort and stopped
    assert pair.runs("cancelled", "dan") == [str(pair.b.proc.pid)]
    settled = await _wait_for_snapshot(pair.a, "slow", out.snapshot_id, http)
    assert settled["status"] == "aborted"
    pair.log.with_name("dan.gate").touch()
    await asyncio.sleep(0.2)
    assert pair.runs("finished", "dan") == []


async def test_the_inbox_of_either_server_lists_and_answers_once(pair: Pair, http: httpx.AsyncClient) -> None:
    out = await _remote(pair.a, "bank", http).run("pay eve")
    listed = await http.get(f"{pair.b.url}/inbox/api/interrupts", headers={"x-user": "bo"})
    assert listed.status_code == 200
    assert out.snapshot_id in [i["snapshot_id"] for i in listed.json()["items"]]

    answer = {"decision": "approve"}
    first = await http.post(
        f"{pair.b.url}/inbox/api/interrupts/{out.snapshot_id}/answer", json=answer, headers={"x-user": "bo"}
    )
    second = await http.post(
        f"{pair.a.url}/inbox/api/interrupts/{out.snapshot_id}/answer", json=answer, headers={"x-user": "al"}
    )

    assert first.status_code == 200 and first.json()["answered"]["by"] == "bo"
    assert second.status_code == 409 and second.json()["status"] == "ABORTED"
    assert second.json()["details"]["answered_by"] == "bo"
    audit = await http.get(f"{pair.a.url}/inbox/api/sessions/{out.session_id}/audit", headers={"x-user": "al"})
    assert [e["by"] for e in audit.json()["entries"]] == ["bo"]
    assert len(pair.runs("transfer", "eve")) == 1


@pytest.mark.parametrize("n", [8, 64])
async def test_racing_resumes_through_both_servers_have_one_winner(pair: Pair, http: httpx.AsyncClient, n: int) -> None:
    name = f"race{n}"
    out = await _remote(pair.a, "bank", http).run(f"pay {name}")
    assert out.snapshot_id
    remotes = [_remote(pair.a if i % 2 else pair.b, "bank", http) for i in range(n)]

    outs = await asyncio.gather(
        *(r.run(resume=_approve(name), snapshot_id=out.snapshot_id, raise_on_error=False) for r in remotes)
    )

    winners = [o for o in outs if o.error is None]
    losers = [o.error for o in outs if o.error is not None]
    assert len(winners) == 1 and winners[0].finish_reason == "stop", [o.error for o in outs]
    assert len(losers) == n - 1 and {e.status for e in losers} == {"ABORTED"}
    assert len(pair.runs("transfer", name)) == 1  # the tool ran once, on one server
    async with store_at(pair.location) as store:
        resumed = [s for s in await store.list(session_id=out.session_id) if s.parent_id == out.snapshot_id]
    assert [s.status for s in resumed] == ["completed"]  # one resumed snapshot: the losers wrote nothing


async def _until(check: Any, timeout: float = 20.0) -> None:
    async with asyncio.timeout(timeout):
        while not check():
            await asyncio.sleep(0.02)
