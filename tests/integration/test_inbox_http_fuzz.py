"""Bad input to every inbox route, over real HTTP: always a 4xx with a canonical status, never a 5xx or a hang."""

from __future__ import annotations

import asyncio
import pathlib
import threading
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import httpx
import pytest
import uvicorn
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from inbox_apps import build_app

from interlock.http._status import HTTP_STATUS
from interlock.stores.sqlite import SQLiteStore

pytestmark = pytest.mark.slow
CANONICAL = set(HTTP_STATUS) - {"OK"}


class Served:
    """An inbox on uvicorn in a thread of its own (so hypothesis drives it from plain functions)."""

    def __init__(self, path: pathlib.Path) -> None:
        self.path = path
        self.ready = threading.Event()
        self.server: uvicorn.Server | None = None
        self.ids: list[str] = []
        self.sessions: list[str] = []
        self.thread = threading.Thread(target=lambda: asyncio.run(self._main()), daemon=True)

    async def _main(self) -> None:
        async with SQLiteStore(self.path) as store:
            app, agents = build_app(store)
            for agent, text in ((agents[0], "pay bob 5"), (agents[1], "delete x"), (agents[2], "ask why")):
                out = await agent.run(text)
                self.ids.append(out.snapshot_id or "")
                self.sessions.append(out.session_id or "")
            config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off", ws="none")
            self.server = uvicorn.Server(config)
            serving = asyncio.ensure_future(self.server.serve())
            while not self.server.started and not serving.done():
                await asyncio.sleep(0.01)
            self.ready.set()
            await serving

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.servers[0].sockets[0].getsockname()[1]}"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    s = Served(tmp_path_factory.mktemp("fuzz") / "inbox.db")
    s.thread.start()
    if not s.ready.wait(30):
        pytest.fail("the inbox did not start")
    yield s
    assert s.server is not None
    s.server.should_exit = True
    s.thread.join(30)


text = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=30)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(text, inner, max_size=4),
    max_leaves=12,
)
answer_keys = st.sampled_from(["decision", "ref", "tool", "payload", "output", "input", "reason", "resume_token"])
answers = st.dictionaries(answer_keys | text, json_values, max_size=5) | st.fixed_dictionaries(
    {"decision": st.sampled_from(["approve", "reject", "respond", "restart", "edit", "maybe"])},
    optional={"output": json_values, "input": json_values, "payload": json_values, "ref": json_values},
)
query_keys = st.sampled_from(["agent", "tool", "session", "older_than", "newer_than", "order", "limit", "cursor"])
queries = st.dictionaries(query_keys | text, text, max_size=4)
ids = st.sampled_from(["nope", "%00", "a" * 300, "..", "%2e%2e%2fapi"]) | text.filter(lambda t: "/" not in t and t)


def _check(r: httpx.Response) -> None:
    assert r.status_code < 500, (r.request.method, str(r.request.url), r.status_code, r.text[:300])
    if r.status_code >= 400 and r.headers.get("content-type", "").startswith("application/json"):
        assert r.json()["status"] in CANONICAL


def test_oversized_and_malformed_bodies_are_refused(served: Served) -> None:
    url = f"/api/interrupts/{served.ids[0]}/answer"
    with httpx.Client(base_url=served.url, headers={"x-user": "fuzzer"}, timeout=30) as c:
        big = c.post(url, content=b"{" + b" " * 1_100_000 + b"}", headers={"content-type": "application/json"})
        assert big.status_code == 413 and big.json()["status"] == "RESOURCE_EXHAUSTED"
        deep = c.post(url, content=b"[" * 5000 + b"]" * 5000, headers={"content-type": "application/json"})
        assert deep.status_code == 400 and deep.json()["status"] == "INVALID_ARGUMENT"
        for bad in (b"\xff\xfe", b"not json", b"[1, 2]", b'{"decision": NaN}'):
            r = c.post(url, content=bad, headers={"content-type": "application/json"})
            assert r.status_code == 400 and r.json()["status"] == "INVALID_ARGUMENT", bad
        assert served.ids[0] in c.get("/api/interrupts").text  # refused bodies changed nothing


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    route=st.sampled_from(["list", "detail", "answer", "audit", "session", "events", "page", "form", "raw"]),
    query=queries,
    body=answers,
    raw=st.binary(max_size=200),
    kind=st.sampled_from(["application/json", "text/plain", "application/x-www-form-urlencoded", ""]),
    which=st.integers(0, 2),
    snapshot=ids,
    use_real=st.booleans(),
)
def test_bad_input_to_any_route_is_a_4xx(
    served: Served,
    route: str,
    query: dict[str, str],
    body: dict[str, Any],
    raw: bytes,
    kind: str,
    which: int,
    snapshot: str,
    use_real: bool,
) -> None:
    sid = quote(served.ids[which] if use_real else snapshot, safe="")
    headers = {"x-user": "fuzzer"} | ({"content-type": kind} if kind else {})
    with httpx.Client(base_url=served.url, headers=headers, cookies={"interlock_csrf": "x"}, timeout=30) as c:
        if route == "list":
            r = c.get("/api/interrupts", params=query)
        elif route == "detail":
            r = c.get(f"/api/interrupts/{sid}", params=query)
        elif route == "answer":
            r = c.post(f"/api/interrupts/{sid}/answer", json=body, headers={"content-type": "application/json"})
        elif route == "raw":
            r = c.post(f"/api/interrupts/{sid}/answer", content=raw)
        elif route == "audit":
            r = c.get("/api/audit", params=query)
        elif route == "session":
            session = quote(served.sessions[which] if use_real else snapshot, safe="")
            r = c.get(f"/api/sessions/{session}/audit", params=query)
        elif route == "events":
            r = c.get("/api/events", params=query or {"unexpected": "1"})
        elif route == "page":
            r = c.get(f"/interrupts/{sid}", params=query)
        else:
            form = {k: str(v) for k, v in body.items()} | {"csrf": "x"}
            r = c.post(f"/interrupts/{sid}/answer", data=form)
    _check(r)
