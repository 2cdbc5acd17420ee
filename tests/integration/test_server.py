"""The HTTP server: byte-exact framing, errors and status codes, companions, tenancy, CORS, disconnects."""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from http_helpers import serve

from interlock import (
    AgentResult,
    CustomAgent,
    DataPart,
    InMemoryStore,
    Message,
    PromptAgent,
    Resume,
    TextPart,
    TurnContext,
)
from interlock._engine.invocation import SessionRunner
from interlock._engine.io import AgentInput
from interlock.errors import PermissionDeniedError, SnapshotNotFoundError, UnauthenticatedError
from interlock.http._client import RemoteAgent
from interlock.http._server import AgentServer, RequestInfo
from interlock.models import ModelChunk
from interlock.testing import EchoModel

pytestmark = pytest.mark.slow

SSE = {"Accept": "text/event-stream"}
BODY = re.compile(rb"(?:data: [ -~]+\n\n)+")


def turn(text: str = "hello", **init: Any) -> dict[str, Any]:
    return {"data": {"message": {"role": "user", "content": [{"text": text}]}}, "init": init}


def frames(raw: bytes) -> list[dict[str, Any]]:
    """Check the byte-exact framing and return the frames' payloads."""
    assert BODY.fullmatch(raw), f"not canonical SSE framing: {raw!r}"
    return [json.loads(f[len(b"data: ") :]) for f in raw.split(b"\n\n")[:-1]]


async def stream_raw(http: httpx.AsyncClient, url: str, body: Any, **kw: Any) -> tuple[httpx.Response, bytes]:
    async with http.stream("POST", url, json=body, headers=SSE, **kw) as response:
        raw = b"".join([piece async for piece in response.aiter_raw()])
    return response, raw


async def until(predicate: Any, timeout: float = 5.0) -> None:
    async with asyncio.timeout(timeout):
        while not await predicate():
            await asyncio.sleep(0.01)


@pytest.fixture
async def store() -> InMemoryStore:
    return InMemoryStore()


@pytest.fixture
async def site(store: InMemoryStore) -> AsyncIterator[tuple[str, httpx.AsyncClient, AgentServer]]:
    agents = [
        PromptAgent("echo", EchoModel(), store=store),
        PromptAgent("stateless", EchoModel()),
        CustomAgent("crash", _crash),
        CustomAgent("cancelling", _cancelling),
        CustomAgent("nan", _nan_output),
        CustomAgent("nanChunk", _nan_chunk),
        CustomAgent("blocking", _blocking, store=store),
    ]
    app = AgentServer(agents, max_body=2000, cors_origins=["https://app.example"])
    async with serve(app) as base, httpx.AsyncClient(base_url=base) as http:
        yield base, http, app
    await app.aclose()


async def _crash(runner: SessionRunner) -> AgentResult | None:
    raise RuntimeError("boom")


async def _cancelling(runner: SessionRunner) -> AgentResult | None:
    raise asyncio.CancelledError


async def _nan_output(runner: SessionRunner) -> AgentResult | None:
    return AgentResult(message=Message(role="model", content=[DataPart(data=float("nan"))]))


async def _nan_chunk(runner: SessionRunner) -> AgentResult | None:
    async def one(_: AgentInput, __: TurnContext) -> None:
        runner.send_chunk(ModelChunk(role="model", index=0, content=[DataPart(data=float("nan"))]))
        await asyncio.sleep(0.05)

    await runner.run(one)
    return None


async def _blocking(runner: SessionRunner) -> AgentResult | None:
    async def one(_: AgentInput, __: TurnContext) -> None:
        await runner.aborted.wait()

    await runner.run(one)
    return None


# framing ----------------------------------------------------------------------------------


async def test_stream_is_byte_exact_ascii_sse(site: Any) -> None:
    _, http, _ = site
    response, raw = await stream_raw(http, "/echo", turn("café ✓ 日本"))
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    got = frames(raw)
    assert [next(iter(f)) for f in got] == ["message", "message", "message", "result"]
    assert got[0]["message"]["modelChunk"] == {"role": "model", "index": 0, "content": [{"text": "Echo: "}]}
    assert got[2]["message"]["turnEnd"]["finishReason"] == "stop"
    result = got[-1]["result"]
    assert result["message"]["content"][0]["text"] == "Echo: café ✓ 日本"
    assert result["snapshotId"] == got[2]["message"]["turnEnd"]["snapshotId"]
    assert b"\\u00e9" in raw and b"\r" not in raw


async def test_stream_negotiated_by_query_flag(site: Any) -> None:
    _, http, _ = site
    async with http.stream("POST", "/stateless?stream=true", json=turn()) as response:
        raw = await response.aread()
    got = frames(raw)
    assert got[-1]["result"]["state"]["messages"][1]["content"][0]["text"] == "Echo: hello"
    assert got[-2] == {"message": {"turnEnd": {"finishReason": "stop"}}}


@pytest.mark.parametrize(
    ("agent", "status", "kind"),
    [
        ("crash", "INTERNAL", "result"),  # a failure inside the agent: graceful, a failed output
        ("cancelling", "CANCELLED", "result"),  # the agent is cancelled
        ("nan", "INTERNAL", "error"),  # the output cannot be written: an error frame
        ("nanChunk", "INTERNAL", "error"),  # a chunk cannot be written mid-stream
    ],
)
async def test_exactly_one_final_frame_when_a_turn_breaks(site: Any, agent: str, status: str, kind: str) -> None:
    _, http, app = site
    _, raw = await stream_raw(http, f"/{agent}", turn())
    got = frames(raw)
    finals = [f for f in got if "result" in f or "error" in f]
    assert finals == [got[-1]]
    final = got[-1][kind]
    error = final["error"] if kind == "result" else final
    assert error["status"] == status
    if kind == "result":
        assert final["finishReason"] == "failed"
    else:
        assert error["message"] == "Internal error"  # unexpected failures are masked
    await until(lambda: _no_followers(app))


async def _no_followers(app: AgentServer) -> bool:
    return not app._followers  # pyright: ignore[reportPrivateUsage]


async def test_init_misuse_is_an_error_frame_when_streaming(site: Any, store: InMemoryStore) -> None:
    _, http, _ = site
    response, raw = await stream_raw(http, "/echo", turn(state={"messages": []}))
    assert response.status_code == 200
    assert frames(raw) == [
        {
            "error": {
                "status": "FAILED_PRECONDITION",
                "message": "Cannot send 'state' to agent 'echo': this agent uses a server-managed store. "
                "Send 'snapshotId' or 'sessionId' instead.",
            }
        }
    ]
    assert await store.list() == []


# plain JSON answers -------------------------------------------------------------------------


async def test_non_streaming_turn(site: Any) -> None:
    _, http, _ = site
    response = await http.post("/echo", json={"data": turn()["data"]})  # no init at all
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    result = response.json()["result"]
    assert result["finishReason"] == "stop" and result["snapshotId"] and result["artifacts"] == []


@pytest.mark.parametrize(
    ("path", "body", "code", "status"),
    [
        ("/echo", turn(state={"messages": []}), 400, "FAILED_PRECONDITION"),
        ("/stateless", turn(snapshotId="s1"), 400, "FAILED_PRECONDITION"),
        ("/stateless", turn(sessionId="s1"), 400, "FAILED_PRECONDITION"),
        ("/stateless/getSnapshot", {"data": {"snapshotId": "s1"}}, 400, "FAILED_PRECONDITION"),
        ("/stateless/abort", {"data": {"snapshotId": "s1"}}, 400, "FAILED_PRECONDITION"),
    ],
)
async def test_thrown_errors_map_to_http_codes(site: Any, path: str, body: Any, code: int, status: str) -> None:
    _, http, _ = site
    response = await http.post(path, json=body)
    assert response.status_code == code
    assert response.json()["status"] == status and response.json()["message"]


MALFORMED: list[tuple[str, Any, int, str]] = [
    ("/echo", b"{not json", 400, "INVALID_ARGUMENT"),
    ("/echo", b"\xff\xfe", 400, "INVALID_ARGUMENT"),
    ("/echo", [1, 2], 400, "INVALID_ARGUMENT"),
    ("/echo", {"data": "hello", "init": {}}, 400, "INVALID_ARGUMENT"),
    ("/echo", {"data": {"message": "just a string"}, "init": {}}, 400, "INVALID_ARGUMENT"),
    ("/echo", {"data": {"message": {"content": []}}, "init": {}}, 400, "INVALID_ARGUMENT"),
    ("/echo", {"data": {"message": {"role": "user", "content": "x"}}}, 400, "INVALID_ARGUMENT"),
    ("/echo", {"data": {"resume": {"respond": [{"text": "no"}]}}}, 400, "INVALID_ARGUMENT"),
    ("/echo", {"data": {"detach": "yes"}}, 400, "INVALID_ARGUMENT"),
    ("/echo", {"data": {}, "init": {}}, 400, "INVALID_ARGUMENT"),
    ("/echo", {**turn(), "init": "snap"}, 400, "INVALID_ARGUMENT"),
    ("/echo", turn(snapshotId=5), 400, "INVALID_ARGUMENT"),
    ("/echo", turn(snapshotId="s", state={"messages": []}), 400, "INVALID_ARGUMENT"),
    ("/echo", turn(sessionId="s", state={"messages": []}), 400, "INVALID_ARGUMENT"),
    ("/echo", turn("x" * 3000), 413, "RESOURCE_EXHAUSTED"),
    ("/nobody", turn(), 404, "NOT_FOUND"),
    ("/echo/nothing", turn(), 404, "NOT_FOUND"),
    ("/echo/getSnapshot", {"data": {}}, 400, "INVALID_ARGUMENT"),
    ("/echo/getSnapshot", {"data": "s1"}, 400, "INVALID_ARGUMENT"),
    ("/echo/getSnapshot", {"data": {"snapshotId": 1}}, 400, "INVALID_ARGUMENT"),
    ("/echo/abort", {"data": {"sessionId": "s"}}, 400, "INVALID_ARGUMENT"),
]


@pytest.mark.parametrize(("path", "body", "code", "status"), MALFORMED)
@pytest.mark.parametrize("accept", [SSE, {}], ids=["stream", "plain"])
async def test_malformed_requests_are_4xx_and_change_nothing(
    site: Any, store: InMemoryStore, path: str, body: Any, code: int, status: str, accept: dict[str, str]
) -> None:
    _, http, _ = site
    await http.post("/echo", json=turn("seed"))
    before = await store.list()
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    response = await http.post(path, content=content, headers={"Content-Type": "application/json", **accept})
    assert response.status_code == code, response.text
    assert response.headers["content-type"] == "application/json"
    assert response.json()["status"] == status and response.json()["message"]
    assert await store.list() == before


async def test_wrong_method(site: Any) -> None:
    _, http, _ = site
    response = await http.get("/echo")
    assert response.status_code == 405 and response.json()["status"] == "UNIMPLEMENTED"
    assert response.headers["allow"] == "POST, OPTIONS"


# companions -------------------------------------------------------------------------------


async def test_get_snapshot_and_its_misses(site: Any) -> None:
    _, http, _ = site
    result = (await http.post("/echo", json=turn())).json()["result"]
    snap, session = result["snapshotId"], result["sessionId"]
    by_id = await http.post("/echo/getSnapshot", json={"data": {"snapshotId": snap}})
    assert by_id.status_code == 200
    body = by_id.json()["result"]
    assert body["snapshotId"] == snap and body["status"] == "completed" and body["createdAt"]
    assert len(body["state"]["messages"]) == 2
    by_session = await http.post("/echo/getSnapshot", json={"data": {"sessionId": session}})
    assert by_session.json()["result"]["snapshotId"] == snap
    both = await http.post("/echo/getSnapshot", json={"data": {"snapshotId": snap, "sessionId": session}})
    assert both.json()["result"]["snapshotId"] == snap
    for data in ({"snapshotId": "nope"}, {"sessionId": "nope"}, {"snapshotId": snap, "sessionId": "other"}):
        miss = await http.post("/echo/getSnapshot", json={"data": data})
        assert miss.status_code == 404
        assert miss.json()["status"] == "NOT_FOUND"


async def test_abort(site: Any) -> None:
    _, http, _ = site
    unknown = await http.post("/echo/abort", json={"data": {"snapshotId": "nope"}})
    assert unknown.status_code == 200 and unknown.json() == {"result": {"snapshotId": "nope"}}
    done = (await http.post("/echo", json=turn())).json()["result"]["snapshotId"]
    completed = await http.post("/echo/abort", json={"data": {"snapshotId": done}})
    assert completed.json() == {"result": {"snapshotId": done, "status": "completed"}}
    body = {"data": {**turn()["data"], "detach": True}, "init": {}}
    _, raw = await stream_raw(http, "/blocking", body)
    [only] = frames(raw)
    assert only["result"]["finishReason"] == "detached"
    pending = only["result"]["snapshotId"]
    first = await http.post("/blocking/abort", json={"data": {"snapshotId": pending}})
    assert first.json() == {"result": {"snapshotId": pending, "status": "pending"}}
    waited = await http.post("/blocking/waitForSnapshot", json={"data": {"snapshotId": pending}})
    assert waited.json()["result"]["status"] == "aborted"


# tenancy ----------------------------------------------------------------------------------


def tenant_context(info: RequestInfo) -> dict[str, Any]:
    tenant = info.headers.get("x-tenant")
    if not tenant:
        raise UnauthenticatedError("send an x-tenant header")
    if tenant == "banned":
        raise PermissionDeniedError("tenant banned")
    return {"tenant": tenant, "identity": info.headers.get("x-user", "anon")}


async def async_tenant_context(info: RequestInfo) -> dict[str, Any]:
    await asyncio.sleep(0)
    return tenant_context(info)


@pytest.mark.parametrize("hook", [tenant_context, async_tenant_context], ids=["sync", "async"])
async def test_tenancy_through_the_context_hook(hook: Any) -> None:
    store = InMemoryStore()
    agents = [PromptAgent("echo", EchoModel(), store=store), CustomAgent("blocking", _blocking, store=store)]
    app = AgentServer(agents, context=hook)
    async with serve(app) as base, httpx.AsyncClient() as http:

        def remote(name: str, tenant: str | None) -> RemoteAgent:
            headers = {"x-tenant": tenant} if tenant else {}
            return RemoteAgent(f"{base}/{name}", headers=headers, http=http)

        a, b = remote("echo", "a"), remote("echo", "b")
        mine = await a.run("hi")
        assert mine.snapshot_id and mine.error is None
        stolen = await b.run("hello", snapshot_id=mine.snapshot_id, raise_on_error=False)
        assert stolen.finish_reason == "failed" and stolen.error is not None
        assert stolen.error.status == "NOT_FOUND"
        with pytest.raises(SnapshotNotFoundError):
            await b.get_snapshot(mine.snapshot_id)
        assert await b.abort(mine.snapshot_id) is None
        assert await store.list(tenant="b") == []

        job = await remote("blocking", "a").run("work", detach=True)
        assert job.snapshot_id
        assert await remote("blocking", "b").abort(job.snapshot_id) is None
        raw = await http.post(
            f"{base}/blocking/abort", json={"data": {"snapshotId": job.snapshot_id}}, headers={"x-tenant": "b"}
        )
        # exactly what an unknown id gets (Genkit's abort of an unknown snapshot answers with no status):
        # another tenant's snapshot is not revealed, and it is not aborted
        unknown = await http.post(
            f"{base}/blocking/abort", json={"data": {"snapshotId": "nope"}}, headers={"x-tenant": "b"}
        )
        assert raw.status_code == unknown.status_code == 200
        assert raw.json() == {"result": {"snapshotId": job.snapshot_id}} and unknown.json() == {
            "result": {"snapshotId": "nope"}
        }
        by_session = await b.run(resume=Resume(respond=[]), session_id=mine.session_id, raise_on_error=False)
        assert by_session.error is not None and by_session.error.status == "NOT_FOUND"
        kept = await remote("blocking", "a").get_snapshot(job.snapshot_id)
        assert kept is not None and kept.status == "pending"
        assert await remote("blocking", "a").abort(job.snapshot_id) == "pending"

        with pytest.raises(UnauthenticatedError):
            await remote("echo", None).run("hi")
        with pytest.raises(PermissionDeniedError):
            await remote("echo", "banned").get_snapshot("x")
        response = await http.post(f"{base}/echo", json=turn(), headers=SSE)
        assert response.status_code == 401 and response.json()["status"] == "UNAUTHENTICATED"
    await app.aclose()


# CORS -------------------------------------------------------------------------------------


async def test_cors(site: Any) -> None:
    _, http, _ = site
    preflight = await http.options(
        "/echo",
        headers={
            "Origin": "https://app.example",
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "content-type, authorization",
        },
    )
    assert preflight.status_code == 204
    assert preflight.headers["access-control-allow-origin"] == "https://app.example"
    assert "POST" in preflight.headers["access-control-allow-methods"]
    assert "Authorization" in preflight.headers["access-control-allow-headers"]
    refused = await http.options("/echo", headers={"Origin": "https://evil.example"})
    assert refused.status_code == 403 and "access-control-allow-origin" not in refused.headers
    actual = await http.post(
        "/echo/getSnapshot", json={"data": {"snapshotId": "x"}}, headers={"Origin": "https://app.example"}
    )
    assert actual.status_code == 404
    assert actual.headers["access-control-allow-origin"] == "https://app.example"
    _, raw = await stream_raw(http, "/echo", turn())
    assert frames(raw)


# disconnects ------------------------------------------------------------------------------


async def test_client_disconnect_mid_stream(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    store = InMemoryStore()
    release, cancelled = asyncio.Event(), asyncio.Event()

    async def slow(runner: SessionRunner) -> AgentResult | None:
        async def one(_: AgentInput, __: TurnContext) -> None:
            runner.send_chunk(ModelChunk(role="model", index=0, content=[TextPart(text="working")]))
            await release.wait()
            runner.session.add_messages(Message.model("done"))

        await runner.run(one)
        return None

    async def stuck(runner: SessionRunner) -> AgentResult | None:
        async def one(_: AgentInput, __: TurnContext) -> None:
            runner.send_chunk(ModelChunk(role="model", index=0, content=[TextPart(text="working")]))
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                cancelled.set()
                raise

        await runner.run(one)
        return None

    agents = [
        CustomAgent("slow", slow, store=store),
        CustomAgent("stuck", stuck),
        PromptAgent("echo", EchoModel(), store=store),
    ]
    app = AgentServer(agents)
    async with serve(app) as base, httpx.AsyncClient(base_url=base) as http:
        for name in ("slow", "stuck"):
            async with http.stream("POST", f"/{name}", json=turn(), headers=SSE) as response:
                async for line in response.aiter_lines():
                    assert line.startswith('data: {"message":')
                    break  # hang up after the first chunk
        await until(lambda: asyncio.sleep(0, bool(cancelled.is_set())))
        assert await store.list() == []  # the server-managed turn is still running...
        release.set()
        await until(lambda: _has_completed(store))  # ...and writes its snapshot
        [info] = await store.list()
        snap = await store.load(info.snapshot_id)
        assert snap is not None and snap.state is not None
        assert [m.text for m in snap.state.messages] == ["hello", "done"]
        await until(lambda: _no_followers(app))
        after = await http.post("/echo", json=turn("again"))
        assert after.status_code == 200 and after.json()["result"]["message"]["content"][0]["text"] == "Echo: again"
    await app.aclose()
    logged = [r for r in caplog.records if r.name == "interlock.http.server" and r.getMessage().startswith("turn ")]
    assert any("agent=stuck" in r.getMessage() and "CANCELLED" in r.getMessage() for r in logged)
    assert any("agent=slow" in r.getMessage() and "snapshot=-" not in r.getMessage() for r in logged)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


async def _has_completed(store: InMemoryStore) -> bool:
    return any(i.status == "completed" for i in await store.list())


async def test_remote_cancel_stops_a_client_managed_turn() -> None:
    cancelled = asyncio.Event()

    async def stuck(runner: SessionRunner) -> AgentResult | None:
        async def one(_: AgentInput, __: TurnContext) -> None:
            runner.send_chunk(ModelChunk(role="model", index=0, content=[TextPart(text="working")]))
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                cancelled.set()
                raise

        await runner.run(one)
        return None

    app = AgentServer([CustomAgent("stuck", stuck)])
    async with serve(app) as base, RemoteAgent(f"{base}/stuck", state_management="client") as agent:
        conn = agent.connect()
        await conn.send("hi")
        async for chunk in conn:
            assert isinstance(chunk, ModelChunk)
            conn.cancel()
        output = await conn.output()
        assert output.finish_reason == "failed" and output.error is not None
        assert output.error.status == "CANCELLED"
        await asyncio.wait_for(cancelled.wait(), 5)
        await until(lambda: _no_followers(app))
    await app.aclose()


async def test_a_cancelled_handler_still_ends_the_stream_with_one_final_frame() -> None:
    """Driving the ASGI app directly: cancel the request handler mid-stream (e.g. a server shutting down)."""
    release = asyncio.Event()

    async def slow(runner: SessionRunner) -> AgentResult | None:
        async def one(_: AgentInput, __: TurnContext) -> None:
            runner.send_chunk(ModelChunk(role="model", index=0, content=[TextPart(text="working")]))
            await release.wait()

        await runner.run(one)
        return None

    store = InMemoryStore()
    app = AgentServer([CustomAgent("slow", slow, store=store)])
    body = json.dumps(turn()).encode()
    requests = [{"type": "http.request", "body": body, "more_body": False}]
    sent: list[dict[str, Any]] = []
    forever = asyncio.Event()

    async def receive() -> Any:
        if requests:
            return requests.pop(0)
        await forever.wait()
        return {"type": "http.disconnect"}

    async def send(message: Any) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/slow", "headers": [(b"accept", b"text/event-stream")]}
    handler = asyncio.ensure_future(app(scope, receive, send))
    await until(lambda: asyncio.sleep(0, len(sent) >= 2))
    handler.cancel()
    with pytest.raises(asyncio.CancelledError):
        await handler
    raw = b"".join(m["body"] for m in sent if m["type"] == "http.response.body")
    got = frames(raw)
    assert "message" in got[0] and got[-1]["error"]["status"] == "CANCELLED"
    assert [m.get("more_body") for m in sent[1:]] == [True, False]
    release.set()  # the stored turn runs on to its snapshot
    await until(lambda: _has_completed(store))
    await until(lambda: _no_followers(app))
    await app.aclose()
