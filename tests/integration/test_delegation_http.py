"""A delegating agent served over HTTP: interlock's RemoteAgent and the published Genkit JS client see the
sub-agent's interrupt as the agent's own (streamed, and in the output) and answer it."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from http_helpers import serve
from inbox_apps import who
from pydantic import BaseModel
from test_interop import Clients, run_client
from test_interop import interop_clients as interop_clients  # the fixture: installs the published clients

from interlock import AgentServer, InMemoryStore, Message, PromptAgent, RemoteAgent, Resume, ToolContext, tool
from interlock import metadata as md
from interlock.agents._delegation import delegate
from interlock.http._inbox import InboxApp
from interlock.http._inbox_client import InboxClient
from interlock.inbox._inbox import Inbox
from interlock.models import ModelChunk
from interlock.parts import ToolRequestPart
from interlock.testing import ScriptedModel

ROOT_SCRIPT = "tests/kit/interop/js_delegation.cjs"


class Approval(BaseModel):
    approved: bool


RUNS: list[dict[str, Any]] = []


@tool
async def pay(req: dict[str, Any], ctx: ToolContext[Approval], approval: Approval | None) -> str:
    """Pay someone; a person approves first."""
    if approval is None:
        ctx.interrupt({"to": req["to"]})
    RUNS.append(req)
    return "paid" if approval.approved else "refused"


def call(name: str, ref: str, **input: Any) -> Message:
    return Message(role="model", content=[ToolRequestPart(name=name, ref=ref, input=input)])


def agents() -> tuple[PromptAgent, PromptAgent, InMemoryStore]:
    """The boss, delegating to the banker, whose payment waits for approval; one store."""
    store = InMemoryStore()
    banker = PromptAgent(
        "banker", ScriptedModel([call("pay", "p1", to="bob"), "banker: paid"]), tools=[pay], store=store
    )
    boss = PromptAgent(
        "boss",
        ScriptedModel([call("delegate_to_banker", "d1", task="pay bob"), "boss: bob is paid"]),
        tools=delegate([banker]),
        store=store,
    )
    return boss, banker, store


def server() -> tuple[AgentServer, InMemoryStore]:
    boss, _, store = agents()
    return AgentServer([boss]), store


async def test_remote_agent_sees_streams_and_answers_a_surfaced_interrupt() -> None:
    RUNS.clear()
    app, _ = server()
    chunks: list[Any] = []
    async with serve(app) as url, RemoteAgent(f"{url}/boss") as boss:
        out = await boss.run("pay bob", on_chunk=chunks.append)
        (part,) = out.interrupts
        assert (part.name, part.ref, part.meta(md.AGENT_PATH)) == ("pay", "d1/p1", ["banker"])
        streamed = [p for c in chunks if isinstance(c, ModelChunk) for p in c.interrupts]
        assert streamed == [part]
        assert await boss.pending_interrupts(out.snapshot_id) == [part]
        claimed = pay.interrupted(part)
        assert claimed is not None
        done = await boss.run(
            resume=Resume(restart=[claimed.restart(Approval(approved=True))]), snapshot_id=out.snapshot_id
        )
    assert (done.finish_reason, done.text, RUNS) == ("stop", "boss: bob is paid", [{"to": "bob"}])


@pytest.mark.slow
async def test_the_genkit_js_client_sees_a_surfaced_interrupt_and_answers_it(interop_clients: Clients) -> None:
    RUNS.clear()
    app, store = server()
    async with serve(app) as url:
        command = [interop_clients.node, ROOT_SCRIPT, f"{url}/boss"]
        run = await run_client(command, interop_clients.env)
    assert run.returncode == 0, run.stderr
    seen = json.loads(run.stdout)
    assert seen["paused"]["finishReason"] == "interrupted"
    (interrupt,) = seen["interrupts"]
    assert (interrupt["name"], interrupt["ref"], interrupt["input"]) == ("pay", "d1/p1", {"to": "bob"})
    assert interrupt["metadata"][md.AGENT_PATH] == ["banker"]
    assert seen["streamed"] == ["pay"] and seen["claimed"] == ["pay"]
    assert seen["done"] == {
        "finishReason": "stop",
        "text": "boss: bob is paid",
        "snapshotId": seen["done"]["snapshotId"],
    }
    assert RUNS == [{"to": "bob"}]
    final = await store.load(seen["done"]["snapshotId"])
    assert final is not None and final.parent_id == seen["paused"]["snapshotId"]


async def test_the_inbox_web_api_and_page_show_a_surfaced_interrupt_with_its_path_and_answer_it() -> None:
    RUNS.clear()
    boss, banker, store = agents()
    out = await boss.run("pay bob")
    inbox = InboxApp(Inbox(store, agents=[boss, banker]), context=who)
    async with serve(inbox) as url, httpx.AsyncClient(base_url=url, headers={"x-user": "alice"}, timeout=30) as c:
        (item,) = (await c.get("/api/interrupts")).json()["items"]
        assert (item["snapshot_id"], item["agent"], item["agent_path"]) == (out.snapshot_id, "boss", ["boss", "banker"])
        assert "boss › banker" in (await c.get("/")).text
        async with InboxClient(url, headers={"x-user": "alice"}) as remote_inbox:
            (listed,) = await remote_inbox.pending()
            assert listed.agent_path == ("boss", "banker") and listed.tool == "pay"
        answered = await c.post(f"/api/interrupts/{out.snapshot_id}/answer", json={"decision": "approve"})
        assert answered.status_code == 200, answered.text
        assert answered.json()["finish_reason"] == "stop"
        assert (await c.get("/api/interrupts")).json()["items"] == []
    assert RUNS == [{"to": "bob"}]


@pytest.mark.slow
async def test_the_genkit_python_client_sees_a_surfaced_interrupt_and_answers_it(interop_clients: Clients) -> None:
    RUNS.clear()
    app, _ = server()
    async with serve(app) as url:
        command = [str(interop_clients.python), "tests/kit/interop/py_delegation.py", f"{url}/boss"]
        run = await run_client(command, interop_clients.env)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout) == {
        "paused": "interrupted",
        "interrupts": [{"name": "pay", "ref": "d1/p1"}],
        "done": {"finishReason": "stop", "text": "boss: bob is paid"},
    }
    assert RUNS == [{"to": "bob"}]


async def test_a_remote_client_managed_sub_agent_pauses_and_is_answered_through_the_parent() -> None:
    RUNS.clear()
    banker = PromptAgent("banker", ScriptedModel([call("pay", "p1", to="bob"), "banker: paid"]), tools=[pay])
    async with serve(AgentServer([banker])) as url, RemoteAgent(f"{url}/banker", state_management="client") as far:
        boss = PromptAgent(
            "boss",
            ScriptedModel([call("delegate_to_banker", "d1", task="pay bob"), "boss: bob is paid"]),
            tools=delegate([far]),
            store=InMemoryStore(),
        )
        out = await boss.run("pay bob")
        (part,) = out.interrupts
        record = out.message.content[0].meta(md.DELEGATED) if out.message else None
        assert record is not None and record["snapshotId"] is None and record["state"]["messages"]
        claimed = pay.interrupted(part)
        assert claimed is not None
        resume = Resume(restart=[claimed.restart(Approval(approved=True))])
        done = await boss.run(resume=resume, snapshot_id=out.snapshot_id)
    assert (done.text, RUNS) == ("boss: bob is paid", [{"to": "bob"}])
