"""The inbox's HTTP API from Python (and ``interlock inbox ... --server URL``), with the Inbox verbs.

::

    async with InboxClient("http://127.0.0.1:8000/inbox", headers={"Authorization": "Bearer ..."}) as inbox:
        for item in await inbox.pending(agent="bank"):
            print(item.label, item.data)
        await inbox.answer(item.snapshot_id, Approve())

Answers are given as the server's signed-in user, for the server's tenant; each carries
the interrupt's resume token when it has one. Refusals arrive as the typed errors
(a second answer: :class:`~interlock.errors.ClaimConflictError`, ``details`` naming who
answered). Only needs httpx (not the web app's Starlette and Jinja2).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from types import TracebackType
from typing import Any

import httpx

from .. import metadata as md
from .._engine.io import AgentOutput
from .._json_object import is_object
from .._wire import output_from_json
from ..errors import UnimplementedError
from ..inbox._answers import Answer, Approve, Edit, Reject, Respond, Restart, match_all
from ..inbox._inbox import PendingInterrupt
from ..parts import ToolRequestPart
from ._status import error_from_http

TITLE = "interlock inbox"
"""The ``info.title`` of the inbox's OpenAPI description, by which a URL is told to be an inbox."""


async def is_inbox(url: str, headers: dict[str, str] | None = None) -> bool:
    """True when ``url`` serves the inbox's HTTP API (its ``/openapi.json`` says so)."""
    async with httpx.AsyncClient(headers=headers, timeout=10) as http:
        try:
            r = await http.get(url.rstrip("/") + "/openapi.json")
            body: Any = r.json() if r.status_code == 200 else None
        except (httpx.HTTPError, ValueError):
            return False
    return is_object(body) and body.get("info", {}).get("title") == TITLE


class InboxClient:
    """An inbox served over HTTP (:class:`interlock.http._inbox.InboxApp`), as an async context manager."""

    store = None
    """No store here: the server lists, answers and audits."""

    def __init__(self, url: str, *, headers: dict[str, str] | None = None, timeout: float = 60.0) -> None:
        self.url = url.rstrip("/")
        self._http = httpx.AsyncClient(base_url=self.url, headers=headers, timeout=timeout)

    async def __aenter__(self) -> InboxClient:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None):
        await self._http.aclose()

    async def _call(self, method: str, path: str, **kw: Any) -> Any:
        r = await self._http.request(method, path, **kw)
        if r.status_code != 200:
            raise error_from_http(r.status_code, r.content)
        return r.json()

    async def pending(
        self,
        *,
        agent: str | None = None,
        tool: str | None = None,
        tenant: str | None = None,
        older_than: timedelta | None = None,
        newer_than: timedelta | None = None,
        in_doubt: bool | None = None,
        limit: int = 500,
    ) -> list[PendingInterrupt]:
        """Every pending interrupt the server shows its signed-in user (all pages), the longest-waiting first."""
        if tenant is not None:
            raise UnimplementedError("over HTTP the server decides the tenant (its context hook)")
        query: dict[str, str] = {"limit": str(limit)}
        for key, value in (("agent", agent), ("tool", tool)):
            if value:
                query[key] = value
        for key, age in (("older_than", older_than), ("newer_than", newer_than)):
            if age is not None:
                query[key] = str(int(age.total_seconds()))
        if in_doubt is not None:
            query["in_doubt"] = "true" if in_doubt else "false"
        items: list[PendingInterrupt] = []
        while True:
            page = await self._call("GET", "/api/interrupts", params=query)
            items += [_item(i) for i in page["items"]]
            if not page.get("next_cursor"):
                return items
            query["cursor"] = page["next_cursor"]

    async def get(self, snapshot_id: str, *, tenant: str | None = None) -> list[PendingInterrupt]:
        """The interrupts ``snapshot_id`` waits on (refusals as :meth:`Inbox.get`'s)."""
        if tenant is not None:
            raise UnimplementedError("over HTTP the server decides the tenant (its context hook)")
        detail = await self._call("GET", f"/api/interrupts/{_quote(snapshot_id)}")
        return [_item(i) for i in detail["interrupts"]]

    async def answer(
        self,
        snapshot_id: str,
        answer: Answer,
        *,
        ref: str | None = None,
        tool: str | None = None,
        identity: Any = None,
        tenant: str | None = None,
        token: str | None = None,
    ) -> AgentOutput:
        """Give ``answer`` to the snapshot's interrupt; the server answers as its signed-in user."""
        if identity is not None or tenant is not None:
            raise UnimplementedError("over HTTP the server decides who answers, and for which tenant")
        body = _answer_json(answer) | {k: v for k, v in (("ref", ref), ("tool", tool)) if v}
        if token is None:
            items = await self.get(snapshot_id)
            picked = [i for i in items if ref in (None, i.ref) and tool in (None, i.tool)]
            token = md.resume_token(picked[0].part) if len(picked) == 1 else None
        if token is not None:
            body["resume_token"] = token
        result = await self._call("POST", f"/api/interrupts/{_quote(snapshot_id)}/answer", json=body)
        return output_from_json(result["output"])

    async def answer_all(
        self,
        snapshot_id: str,
        answers: Answer | Mapping[str, Answer],
        *,
        identity: Any = None,
        tenant: str | None = None,
    ) -> AgentOutput:
        """Answer every interrupt of the snapshot in one request (as :meth:`Inbox.answer_all`)."""
        if identity is not None or tenant is not None:
            raise UnimplementedError("over HTTP the server decides who answers, and for which tenant")
        pairs = match_all(snapshot_id, await self.get(snapshot_id), answers)
        body = [_answer_json(a) | _naming(item) for item, a in pairs]
        result = await self._call("POST", f"/api/interrupts/{_quote(snapshot_id)}/answer", json={"answers": body})
        return output_from_json(result["output"])

    async def journal_entry(self, item: PendingInterrupt) -> None:
        """The effect journal is read where the store is (``--store``), not over HTTP."""
        return None


def _naming(item: PendingInterrupt) -> dict[str, Any]:
    """Which call an answer is for, with the call's resume token."""
    token = md.resume_token(item.part)
    return {"ref": item.ref, "tool": item.tool} | ({"resume_token": token} if token else {})


def _quote(value: str) -> str:
    from urllib.parse import quote

    return quote(value, safe="")


def _answer_json(answer: Answer) -> dict[str, Any]:
    if isinstance(answer, Approve):
        return {"decision": "approve", "payload": answer.payload}
    if isinstance(answer, Reject):
        body = {"decision": "reject", "payload": answer.payload, "output": answer.output}
        return body | ({"reason": answer.reason} if answer.reason else {})
    if isinstance(answer, Respond):
        return {"decision": "respond", "output": answer.output}
    if isinstance(answer, Restart):
        return {"decision": "restart", "payload": answer.payload}
    edit: Edit = answer
    return {"decision": "edit", "input": edit.input, "payload": edit.payload}


def _item(d: dict[str, Any]) -> PendingInterrupt:
    meta: dict[str, Any] = {md.INTERRUPT: d.get("data")}
    if d.get("resume_token"):
        meta[md.RESUME_TOKEN] = d["resume_token"]
    part = ToolRequestPart(name=d["tool"], ref=d.get("ref"), input=d.get("input"), metadata=meta)
    return PendingInterrupt(
        snapshot_id=d["snapshot_id"],
        session_id=d["session_id"],
        agent=d.get("agent"),
        tool=d["tool"],
        ref=d.get("ref"),
        input=d.get("input"),
        data=d.get("data"),
        is_hold=bool(d.get("is_hold")),
        created_at=datetime.fromisoformat(d["created_at"]),
        age=timedelta(seconds=float(d.get("age_seconds") or 0)),
        in_doubt=bool(d.get("in_doubt")),
        idempotency_key=d.get("idempotency_key"),
        attempts=d.get("attempts"),
        agent_path=tuple(str(n) for n in d.get("agent_path") or ()),
        part=part,
    )
