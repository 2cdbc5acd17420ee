"""Answer policies over HTTP (real uvicorn, SQLite): the Genkit server and the inbox API refuse alike.

The requester approving their own transfer, a non-member, an edit raising the amount or changing
the recipient, a decision the policy forbids: each 403 PERMISSION_DENIED with its reason, the
store unchanged and the transfer never run.
"""

from __future__ import annotations

import pathlib
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from typing import Any

import httpx
import pytest
from http_helpers import serve
from policy_bank import ALICE, RUNS, bank, timed_bank, who

from interlock import AgentOutput, PromptAgent, RemoteAgent, Resume
from interlock import metadata as md
from interlock.errors import PermissionDeniedError
from interlock.http import AgentServer
from interlock.http._inbox import InboxApp
from interlock.inbox._inbox import Inbox
from interlock.interrupts import Decision
from interlock.stores.sqlite import SQLiteStore

pytestmark = pytest.mark.slow


class Bank:
    def __init__(self, store: SQLiteStore, agent: PromptAgent, url: str) -> None:
        self.store, self.agent, self.url = store, agent, url

    async def paused(self) -> AgentOutput:
        out = await self.agent.run("pay bob 500", context={"identity": ALICE})
        assert out.finish_reason == "interrupted"
        return out

    async def state(self, out: AgentOutput) -> Any:
        assert out.snapshot_id is not None
        snap = await self.store.load(out.snapshot_id)
        assert snap is not None
        return snap.version, snap.claimed_by, snap.metadata

    def client(self, user: str) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=f"{self.url}/inbox", headers={"x-user": user}, timeout=30)


@pytest.fixture
async def served(tmp_path: pathlib.Path) -> AsyncIterator[Bank]:
    RUNS.clear()
    async with SQLiteStore(tmp_path / "bank.db") as store:
        agent = bank(store)
        server = AgentServer([agent], context=who)
        inbox = InboxApp(Inbox(store, agents=[agent]), context=who)

        async def app(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] == "http" and scope["path"].startswith("/inbox"):
                scope = {**scope, "path": scope["path"][len("/inbox") :] or "/", "root_path": "/inbox"}
                await inbox(scope, receive, send)
            else:
                await server(scope, receive, send)

        async with serve(app) as url:
            yield Bank(store, agent, url)


GENKIT = [
    ("requester_cannot_approve", "alice", Decision.approve({"approved": True})),
    ("not_permitted", "mallory", Decision.approve({"approved": True})),
    ("decision_not_allowed", "bob", Decision.respond("sent")),
    (
        "edit_not_allowed",
        "bob",
        Decision.restart({"approved": True}, input={"to": "bob", "amount": 501.0}, decision="approve"),
    ),
    (
        "edit_not_allowed",
        "bob",
        Decision.restart({"approved": True}, input={"to": "eve", "amount": 5.0}, decision="approve"),
    ),
]


@pytest.mark.parametrize(("reason", "user", "decision"), GENKIT)
async def test_the_genkit_server_refuses(served: Bank, reason: str, user: str, decision: Decision) -> None:
    out = await served.paused()
    before = await served.state(out)
    (part,) = out.interrupts
    entry = decision.answer(part)
    resume = Resume(restart=[entry]) if entry.kind == "tool_request" else Resume(respond=[entry])
    async with RemoteAgent(f"{served.url}/bank", headers={"x-user": user}) as remote:
        with pytest.raises(PermissionDeniedError) as refused:
            await remote.run(resume=resume, snapshot_id=out.snapshot_id)
    assert refused.value.details["reason"] == reason
    assert await served.state(out) == before and RUNS == []
    async with RemoteAgent(f"{served.url}/bank", headers={"x-user": "bob"}) as remote:
        approve = Decision.approve({"approved": True}).answer(part)
        done = await remote.run(resume=Resume(restart=[approve]), snapshot_id=out.snapshot_id)  # type: ignore[list-item]
    assert done.finish_reason == "stop" and RUNS == [{"to": "bob", "amount": 500.0}]


INBOX = [
    ("requester_cannot_approve", "alice", {"decision": "approve"}),
    ("not_permitted", "mallory", {"decision": "reject"}),
    ("decision_not_allowed", "bob", {"decision": "respond", "output": "sent"}),
    ("decision_not_allowed", "bob", {"decision": "restart", "payload": {"approved": True}}),
    ("edit_not_allowed", "bob", {"decision": "edit", "input": {"to": "bob", "amount": 900}}),
    ("edit_not_allowed", "carol", {"decision": "edit", "input": {"to": "eve", "amount": 5}}),
]


@pytest.mark.parametrize(("reason", "user", "body"), INBOX)
async def test_the_inbox_api_refuses(served: Bank, reason: str, user: str, body: dict[str, Any]) -> None:
    out = await served.paused()
    before = await served.state(out)
    async with served.client(user) as c:
        refused = await c.post(f"/api/interrupts/{out.snapshot_id}/answer", json=body)
    assert refused.status_code == 403, refused.text
    assert refused.json()["status"] == "PERMISSION_DENIED"
    assert refused.json()["details"]["reason"] == reason
    assert await served.state(out) == before and RUNS == []
    async with served.client("bob") as c:
        ok = await c.post(
            f"/api/interrupts/{out.snapshot_id}/answer",
            json={"decision": "edit", "input": {"to": "bob", "amount": 400}},
        )
    assert ok.status_code == 200, ok.text
    assert RUNS == [{"to": "bob", "amount": 400.0}]


async def test_the_inbox_api_extends_a_deadline_for_a_permitted_identity(tmp_path: pathlib.Path) -> None:
    async with SQLiteStore(tmp_path / "timed.db") as store:
        agent = timed_bank(store)
        async with serve(InboxApp(Inbox(store, agents=[agent]), context=who)) as url:
            out = await agent.run("pay bob 500", context={"identity": ALICE})
            old = datetime.fromisoformat(md.deadline_of(out.interrupts[0])["expiresAt"])  # type: ignore[index]
            path = f"/api/interrupts/{out.snapshot_id}/extend"
            for user, body, code, reason in (
                ("mallory", {"by": "1h"}, 403, "not_permitted"),
                ("alice", {"by": "1h"}, 403, "requester_cannot_approve"),
                ("bob", {"by": "soon"}, 400, None),
                ("bob", {"by": "1h", "when": "now"}, 400, None),
            ):
                async with httpx.AsyncClient(base_url=url, headers={"x-user": user}) as c:
                    refused = await c.post(path, json=body)
                assert refused.status_code == code, refused.text
                assert reason is None or refused.json()["details"]["reason"] == reason
            async with httpx.AsyncClient(base_url=url, headers={"x-user": "bob"}) as c:
                ok = await c.post(path, json={"by": "2h"})
                assert ok.status_code == 200, ok.text
                assert datetime.fromisoformat(ok.json()["expires_at"]) == old + timedelta(hours=2)
                audit = (await c.get(f"/api/sessions/{out.session_id}/audit")).json()["entries"]
            assert [(e["by"], e["restart"][0]["kind"]) for e in audit] == [("bob", "extend")]
