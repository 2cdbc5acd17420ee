"""The inbox's HTTP API over real uvicorn and SQLite: listing, details, answers, audit, identity, CSRF, tokens."""

from __future__ import annotations

import asyncio
import json
import pathlib
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import parse_qs, urlparse

import httpx
import pytest
from http_helpers import serve
from inbox_apps import RUNS, build_app
from starlette.routing import Route

from interlock import Agent, AgentOutput
from interlock.http._inbox import InboxApp, answer_url
from interlock.http._inbox.openapi import ROUTES
from interlock.inbox._inbox import Inbox
from interlock.stores.sqlite import SQLiteStore

pytestmark = pytest.mark.slow


class Desk:
    """A served inbox over a fresh store, and its agents."""

    def __init__(self, store: SQLiteStore, app: InboxApp, agents: list[Agent], url: str) -> None:
        self.store, self.app, self.url = store, app, url
        self.agents = {a.name: a for a in agents}

    async def start(self, agent: str, text: str, tenant: str | None = None) -> AgentOutput:
        out = await self.agents[agent].run(text, context={"tenant": tenant})
        assert out.finish_reason == "interrupted", out
        return out

    def client(self, user: str | None = "alice", tenant: str | None = None, **kw: Any) -> httpx.AsyncClient:
        headers = {k: v for k, v in (("x-user", user), ("x-tenant", tenant)) if v}
        return httpx.AsyncClient(base_url=self.url, headers=headers, timeout=30, **kw)


async def _desk(tmp_path: pathlib.Path, *, tokens: bool = False) -> AsyncIterator[Desk]:
    async with SQLiteStore(tmp_path / "inbox.db") as store:
        app, agents = build_app(store, tokens=tokens)
        async with serve(app) as url:
            yield Desk(store, app, agents, url)


@pytest.fixture
async def desk(tmp_path: pathlib.Path) -> AsyncIterator[Desk]:
    async for d in _desk(tmp_path):
        yield d


@pytest.fixture
async def token_desk(tmp_path: pathlib.Path) -> AsyncIterator[Desk]:
    async for d in _desk(tmp_path, tokens=True):
        yield d


async def _pending_ids(store: SQLiteStore, tenant: str | None = None) -> list[str]:
    return [i.snapshot_id for i in await Inbox(store).pending(tenant=tenant)]


# listing -----------------------------------------------------------------------------------------


async def test_the_list_filters_orders_and_pages(desk: Desk) -> None:
    started = [
        await desk.start("bank", "pay bob 25"),
        await desk.start("ops", "delete a.txt"),
        await desk.start("helpdesk", "ask which account"),
        await desk.start("bank", "pay carol 7"),
        await desk.start("bank", "pay dave 3"),
    ]
    ids = [o.snapshot_id for o in started]
    async with desk.client() as c:
        page = (await c.get("/api/interrupts")).json()
        assert [i["snapshot_id"] for i in page["items"]] == ids and page["next_cursor"] is None
        newest = (await c.get("/api/interrupts", params={"order": "newest"})).json()
        assert [i["snapshot_id"] for i in newest["items"]] == ids[::-1]
        bank = (await c.get("/api/interrupts", params={"agent": "bank"})).json()["items"]
        assert [i["snapshot_id"] for i in bank] == [ids[0], ids[3], ids[4]]
        held = (await c.get("/api/interrupts", params={"tool": "delete_file"})).json()["items"]
        assert [(i["snapshot_id"], i["is_hold"], i["label"]) for i in held] == [(ids[1], True, "delete_file#d1")]
        one = (await c.get("/api/interrupts", params={"session": started[2].session_id})).json()["items"]
        assert [i["snapshot_id"] for i in one] == [ids[2]]
        assert (await c.get("/api/interrupts", params={"older_than": "1h"})).json()["items"] == []
        assert len((await c.get("/api/interrupts", params={"newer_than": "3600"})).json()["items"]) == 5

        for order, expected in (("oldest", ids), ("newest", ids[::-1])):
            seen: list[str] = []
            cursor: str | None = None
            for _ in range(5):
                params = {"limit": "2", "order": order} | ({"cursor": cursor} if cursor else {})
                page = (await c.get("/api/interrupts", params=params)).json()
                seen += [i["snapshot_id"] for i in page["items"]]
                cursor = page["next_cursor"]
                if cursor is None:
                    break
            assert seen == expected


async def test_a_detail_carries_the_answer_schemas_and_recent_messages(desk: Desk) -> None:
    pay = await desk.start("bank", "pay bob 25")
    held = await desk.start("ops", "delete a.txt")
    asked = await desk.start("helpdesk", "ask which account")
    async with desk.client() as c:
        detail = (await c.get(f"/api/interrupts/{pay.snapshot_id}")).json()
        [item] = detail["interrupts"]
        assert item["input"] == {"to": "bob", "amount": 25.0} and item["data"]["question"] == "Send 25 EUR to bob?"
        answers = item["answers"]
        assert list(answers) == ["approve", "reject", "respond", "restart", "edit"]
        assert answers["respond"]["output_schema"]["title"] == "Receipt"
        assert answers["restart"]["payload_schema"]["required"] == ["approved"]
        amount = answers["edit"]["input_schema"]["properties"]["amount"]
        assert amount["exclusiveMinimum"] == 0 and amount["type"] == "number"
        assert [m["role"] for m in detail["messages"]] == ["user", "model"]
        assert detail["messages"][0]["content"] == [{"text": "pay bob 25"}]
        assert item["part"]["toolRequest"]["name"] == "transfer"

        hold = (await c.get(f"/api/interrupts/{held.snapshot_id}")).json()["interrupts"][0]
        assert list(hold["answers"]) == ["approve", "reject", "respond"]  # a held call restarts only approved
        ask = (await c.get(f"/api/interrupts/{asked.snapshot_id}")).json()["interrupts"][0]
        assert list(ask["answers"]) == ["respond"]  # an ask-only tool never runs
        assert ask["answers"]["respond"]["output_schema"]["title"] == "Reply"


# answering ---------------------------------------------------------------------------------------


async def test_approve_finishes_the_turn_and_a_second_answer_gets_409_naming_who(desk: Desk) -> None:
    pay = await desk.start("bank", "pay erin 12")
    runs = len(RUNS)
    async with desk.client("alice") as alice, desk.client("bob") as bob:
        first = await alice.post(f"/api/interrupts/{pay.snapshot_id}/answer", json={"decision": "approve"})
        assert first.status_code == 200, first.text
        result = first.json()
        assert result["finish_reason"] == "stop" and result["answered"]["by"] == "alice"
        assert result["output"]["message"]["content"][0]["text"].startswith("done: {'status': 'sent'")
        again = await bob.post(f"/api/interrupts/{pay.snapshot_id}/answer", json={"decision": "reject"})
    assert again.status_code == 409
    body = again.json()
    assert body["status"] == "ABORTED" and "already answered by alice" in body["message"]
    assert body["details"]["answered_by"] == "alice" and body["details"]["winner"] == result["snapshot_id"]
    assert len(RUNS) == runs + 1 and RUNS[-1] == {"to": "erin", "amount": 12.0}
    resumed = await desk.store.load(result["snapshot_id"])
    assert resumed is not None and resumed.finish_reason == "stop" and resumed.parent_id == pay.snapshot_id


async def test_a_turn_waiting_on_two_calls_takes_one_answer_for_each_in_one_request(desk: Desk) -> None:
    pay = await desk.start("bank", "pay ida 5 and jon 6")
    url = f"/api/interrupts/{pay.snapshot_id}/answer"
    runs = len(RUNS)
    async with desk.client() as c:
        detail = (await c.get(f"/api/interrupts/{pay.snapshot_id}")).json()
        assert [i["ref"] for i in detail["interrupts"]] == ["t1", "t2"]
        one = await c.post(url, json={"decision": "approve", "ref": "t1"})
        assert one.status_code == 400 and '{"answers": [...]}' in one.json()["message"]
        cases: list[tuple[dict[str, Any], str]] = [
            ({"answers": []}, "non-empty list"),
            ({"answers": [{"decision": "approve", "ref": "t1"}]}, "no answer for transfer#t2"),
            ({"answers": [{"decision": "approve"}, {"decision": "approve"}]}, "must name its interrupt"),
            ({"answers": [{"decision": "approve", "ref": "t1"}] * 2}, "two answers name 't1'"),
            ({"answers": [{"decision": "approve", "ref": "t1"}, {"decision": "approve", "ref": "t9"}]}, "t9"),
            ({"answers": [{"decision": "approve", "ref": "t1"}, "t2"]}, "answers[1] must be an object"),
            ({"answers": [{"decision": "approve", "ref": "t1"}], "decision": "approve"}, "nothing beside it"),
        ]
        for bad, words in cases:
            refused = await c.post(url, json=bad)
            assert refused.status_code == 400, (bad, refused.text)
            assert refused.json()["status"] == "INVALID_ARGUMENT" and words in refused.json()["message"], refused.text
        assert await _pending_ids(desk.store) == [pay.snapshot_id] * 2 and len(RUNS) == runs
        both = {"answers": [{"decision": "approve", "ref": "t1"}, {"decision": "reject", "ref": "t2", "reason": "no"}]}
        done = await c.post(url, json=both)
        assert done.status_code == 200, done.text
        result = done.json()
        again = await c.post(url, json=both)
    assert result["finish_reason"] == "stop" and result["decision"] is None
    assert [(d["ref"], d["decision"]) for d in result["decisions"]] == [("t1", "approve"), ("t2", "reject")]
    assert again.status_code == 409 and again.json()["details"]["answered_by"] == "alice"
    assert RUNS[runs:] == [{"to": "ida", "amount": 5.0}]
    [entry] = await Inbox(desk.store).audit(pay.session_id or "")
    assert entry.by == "alice" and sorted(str(r.decision) for r in entry.restart) == ["approve", "deny"]


async def test_reject_with_a_reason_tells_the_model(desk: Desk) -> None:
    pay = await desk.start("bank", "pay frank 9")
    held = await desk.start("ops", "delete b.txt")
    async with desk.client() as c:
        out = await c.post(
            f"/api/interrupts/{held.snapshot_id}/answer", json={"decision": "reject", "reason": "keep it"}
        )
        assert out.status_code == 200, out.text
        assert "keep it" in out.json()["output"]["message"]["content"][0]["text"]
        out = await c.post(f"/api/interrupts/{pay.snapshot_id}/answer", json={"decision": "reject", "reason": "no"})
        assert out.status_code == 200 and "cancelled" in out.json()["output"]["message"]["content"][0]["text"]
        audit = (await c.get(f"/api/sessions/{pay.session_id}/audit")).json()["entries"]
    assert audit[0]["restart"][0]["decision"] == "deny"
    # strict answers: the tool's resume payload has no reason field, so the reason is the entry's note
    assert audit[0]["restart"][0]["payload"] == {"approved": False} and audit[0]["restart"][0]["reason"] == "no"


async def test_respond_and_restart_are_validated_like_any_resume(desk: Desk) -> None:
    asked = await desk.start("helpdesk", "ask which account")
    pay = await desk.start("bank", "pay gina 4")
    async with desk.client() as c:
        bad = await c.post(f"/api/interrupts/{asked.snapshot_id}/answer", json={"decision": "respond", "output": {}})
        assert bad.status_code == 400 and bad.json()["status"] == "INVALID_ARGUMENT"
        assert "answer" in bad.json()["message"]
        nope = await c.post(f"/api/interrupts/{asked.snapshot_id}/answer", json={"decision": "approve"})
        assert nope.status_code == 400 and "only asks" in nope.json()["message"]
        assert asked.snapshot_id in await _pending_ids(desk.store)
        ok = await c.post(
            f"/api/interrupts/{asked.snapshot_id}/answer", json={"decision": "respond", "output": {"answer": "savings"}}
        )
        assert ok.status_code == 200 and "savings" in ok.json()["output"]["message"]["content"][0]["text"]
        bad = await c.post(f"/api/interrupts/{pay.snapshot_id}/answer", json={"decision": "restart", "payload": {}})
        assert bad.status_code == 400 and "approved" in bad.json()["message"]
        ok = await c.post(
            f"/api/interrupts/{pay.snapshot_id}/answer", json={"decision": "restart", "payload": {"approved": True}}
        )
        assert ok.status_code == 200 and ok.json()["finish_reason"] == "stop"


async def test_an_edited_input_outside_the_schema_changes_nothing(desk: Desk) -> None:
    pay = await desk.start("bank", "pay hal 30")
    runs = len(RUNS)
    path = f"/api/interrupts/{pay.snapshot_id}/answer"
    async with desk.client() as c:
        bad = await c.post(path, json={"decision": "edit", "input": {"to": "hal", "amount": -30}})
        assert bad.status_code == 400
        assert bad.json()["details"][0]["loc"] == ["amount"] and "greater than 0" in bad.json()["message"]
        assert len(RUNS) == runs and pay.snapshot_id in await _pending_ids(desk.store)
        ok = await c.post(path, json={"decision": "edit", "input": {"to": "hal", "amount": 3}})
        assert ok.status_code == 200, ok.text
    assert RUNS[-1] == {"to": "hal", "amount": 3.0}
    [entry] = await Inbox(desk.store).audit(pay.session_id or "")
    assert entry.by == "alice" and entry.restart[0].decision == "approve"


# the audit trail, tenants, identity ------------------------------------------------------------------


async def test_the_audit_trail_per_session_and_across_the_store(desk: Desk) -> None:
    one, two = await desk.start("bank", "pay ida 1"), await desk.start("ops", "delete c.txt")
    async with desk.client("alice") as alice, desk.client("bob") as bob:
        await alice.post(f"/api/interrupts/{one.snapshot_id}/answer", json={"decision": "approve"})
        await bob.post(f"/api/interrupts/{two.snapshot_id}/answer", json={"decision": "approve"})
        everything = (await alice.get("/api/audit")).json()["entries"]
        session = (await alice.get(f"/api/sessions/{one.session_id}/audit")).json()["entries"]
        missing = await alice.get("/api/sessions/nope/audit")
    assert [(e["by"], e["agent"]) for e in everything] == [("bob", "ops"), ("alice", "bank")]
    assert [(e["by"], e["parent_id"]) for e in session] == [("alice", one.snapshot_id)]
    assert missing.status_code == 404 and missing.json()["status"] == "NOT_FOUND"


async def test_another_tenant_sees_nothing_and_cannot_answer(desk: Desk) -> None:
    theirs = await desk.start("bank", "pay jo 5", tenant="acme")
    async with desk.client("mallory", tenant="globex") as other, desk.client("ann", tenant="acme") as own:
        assert (await other.get("/api/interrupts")).json()["items"] == []
        assert (await other.get(f"/api/interrupts/{theirs.snapshot_id}")).status_code == 404
        answer = await other.post(f"/api/interrupts/{theirs.snapshot_id}/answer", json={"decision": "approve"})
        assert answer.status_code == 404 and answer.json()["status"] == "NOT_FOUND"
        assert (await other.get(f"/api/sessions/{theirs.session_id}/audit")).status_code == 404
        assert [i["snapshot_id"] for i in (await own.get("/api/interrupts")).json()["items"]] == [theirs.snapshot_id]
    assert await _pending_ids(desk.store, "acme") == [theirs.snapshot_id]


async def test_identity_is_required(desk: Desk) -> None:
    pay = await desk.start("bank", "pay kim 2")
    async with desk.client(None) as anonymous:
        for method, path in [("GET", "/api/interrupts"), ("GET", f"/interrupts/{pay.snapshot_id}")]:
            r = await anonymous.request(method, path)
            assert r.status_code == 401, (path, r.text)
        r = await anonymous.post(f"/api/interrupts/{pay.snapshot_id}/answer", json={"decision": "approve"})
        assert r.status_code == 401 and r.json()["status"] == "UNAUTHENTICATED"
        assert (await anonymous.get("/openapi.json")).status_code == 200
    assert pay.snapshot_id in await _pending_ids(desk.store)


async def test_one_user_signs_in_with_a_token(tmp_path: pathlib.Path) -> None:
    async with SQLiteStore(tmp_path / "token.db") as store:
        _, agents = build_app(store)
        app = InboxApp(Inbox(store, agents=agents), token="s3cret-token", user="ops-lead")
        pay = await agents[0].run("pay lee 3")
        async with serve(app) as url:
            async with httpx.AsyncClient(base_url=url) as c:
                assert (await c.get("/api/interrupts")).status_code == 401
                wrong = await c.get("/api/interrupts", headers={"authorization": "Bearer nope"})
                assert wrong.status_code == 401
                assert (await c.get("/?key=nope")).status_code == 401
                signin = await c.get("/?key=s3cret-token&order=newest")
                assert signin.status_code == 303 and signin.headers["location"] == "/?order=newest"
                assert "httponly" in signin.headers["set-cookie"].lower()
                page = await c.get("/")  # the cookie now signs the browser in
                assert page.status_code == 200 and (pay.snapshot_id or "-") in page.text
            async with httpx.AsyncClient(base_url=url, headers={"authorization": "Bearer s3cret-token"}) as api:
                done = await api.post(f"/api/interrupts/{pay.snapshot_id}/answer", json={"decision": "approve"})
                assert done.status_code == 200 and done.json()["answered"]["by"] == "ops-lead"


async def test_answers_from_another_site_are_refused(desk: Desk) -> None:
    pay = await desk.start("bank", "pay max 8")
    api, form = f"/api/interrupts/{pay.snapshot_id}/answer", f"/interrupts/{pay.snapshot_id}/answer"
    async with desk.client() as c:
        cross = await c.post(api, json={"decision": "approve"}, headers={"origin": "https://evil.example"})
        assert cross.status_code == 403 and cross.json()["status"] == "PERMISSION_DENIED"
        as_form = await c.post(api, data={"decision": "approve"})
        assert as_form.status_code == 400 and "application/json" in as_form.json()["message"]
        page = await c.get(f"/interrupts/{pay.snapshot_id}")
        csrf = page.cookies.get("interlock_csrf") or c.cookies.get("interlock_csrf")
        assert csrf and f'value="{csrf}"' in page.text
        no_token = await c.post(form, data={"decision": "approve", "ref": "t1"})
        assert no_token.status_code == 403 and "CSRF" in no_token.text
        forged = await c.post(form, data={"decision": "approve", "ref": "t1", "csrf": "forged"})
        assert forged.status_code == 403
        assert pay.snapshot_id in await _pending_ids(desk.store)
        ok = await c.post(form, data={"decision": "approve", "ref": "t1", "csrf": csrf})
        assert ok.status_code == 200 and "Approved" in ok.text and "alice" in ok.text
    assert pay.snapshot_id not in await _pending_ids(desk.store)


# resume tokens, the OpenAPI description, live events --------------------------------------------------


async def test_an_answer_link_carries_the_token_and_answers_once(token_desk: Desk) -> None:
    desk = token_desk
    pay = await desk.start("bank", "pay ned 40")
    [item] = await Inbox(desk.store).pending()
    link = answer_url(desk.url, item)
    token = parse_qs(urlparse(link).query)["resume_token"][0]
    assert token == item.part.meta("resumeToken") and link.startswith(f"{desk.url}/interrupts/{pay.snapshot_id}?")
    async with desk.client() as c:
        page = await c.get(link)
        assert page.status_code == 200 and f'name="resume_token" value="{token}"' in page.text
        path = f"/api/interrupts/{pay.snapshot_id}/answer"
        tampered = token[:-3] + ("AAA" if not token.endswith("AAA") else "BBB")
        refused = await c.post(path, json={"decision": "approve", "resume_token": tampered})
        assert refused.status_code == 403 and refused.json()["details"]["reason"] == "tampered"
        assert pay.snapshot_id in await _pending_ids(desk.store)
        first = await c.post(path, json={"decision": "approve", "resume_token": token})
        assert first.status_code == 200, first.text
        second = await c.post(path, json={"decision": "approve", "resume_token": token})
        assert second.status_code == 409 and second.json()["details"]["answered_by"] == "alice"
        reopened = await c.get(link)
        assert reopened.status_code == 200 and "Answered by <b>alice</b>" in reopened.text
    resumed = await desk.store.load(first.json()["snapshot_id"])
    assert resumed is not None and resumed.finish_reason == "stop"


async def test_openapi_lists_every_route(desk: Desk) -> None:
    async with desk.client() as c:
        spec = (await c.get("/openapi.json")).json()
    served = {
        (r.path, m.lower())
        for r in desk.app.routes
        if isinstance(r, Route) and (r.path.startswith("/api/") or r.path == "/openapi.json")
        for m in r.methods or ()
        if m != "HEAD"
    }
    described = {(p, m) for p, ops in spec["paths"].items() for m in ops}
    assert described == served and spec["paths"] == ROUTES and spec["openapi"].startswith("3.1")


async def test_events_announce_new_interrupts_and_answers(desk: Desk) -> None:
    events: list[tuple[str, Any]] = []

    async def listen(c: httpx.AsyncClient) -> None:
        async with c.stream("GET", "/api/events") as r:
            name = ""
            async for line in r.aiter_lines():
                if line.startswith("event: "):
                    name = line[7:]
                elif line.startswith("data: "):
                    events.append((name, json.loads(line[6:])))

    async def until(predicate: Any) -> None:
        async with asyncio.timeout(20):
            while not predicate():
                await asyncio.sleep(0.05)

    async with desk.client() as c:
        task = asyncio.ensure_future(listen(c))
        try:
            await until(lambda: ("pending", {"count": 0}) in events)
            pay = await desk.start("bank", "pay ola 6")
            await until(lambda: any(n == "interrupt.created" for n, _ in events))
            created = next(d for n, d in events if n == "interrupt.created")
            assert created["snapshot_id"] == pay.snapshot_id and created["tool"] == "transfer"
            await c.post(f"/api/interrupts/{pay.snapshot_id}/answer", json={"decision": "approve"})
            await until(lambda: ("interrupt.resolved", {"snapshot_id": pay.snapshot_id}) in events)
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
