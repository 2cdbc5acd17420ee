"""RemoteAgent against what Genkit's servers really send (shapes from shared/reference/captures)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from http_helpers import serve

from interlock import Resume, ToolResponsePart
from interlock._engine.io import TurnEnd
from interlock.errors import (
    FailedPreconditionError,
    InternalError,
    InvalidArgumentError,
    NotFoundError,
    SnapshotNotFoundError,
    UnauthenticatedError,
    UnavailableError,
)
from interlock.http._client import RemoteAgent
from interlock.models import ModelChunk
from interlock.records._sessions import Artifact, CustomPatch

pytestmark = pytest.mark.slow

ECHO_JS = [
    b'data: {"message":{"modelChunk":{"role":"model","index":0,"content":[{"text":"Echo: "}]}}}\n\n',
    b'data: {"message":{"modelChunk":{"role":"model","index":0,"content":[{"text":"hello"}]}}}\n\n',
    b'data: {"message":{"turnEnd":{"snapshotId":"snap-1","finishReason":"stop"}}}\n\n',
    b'data: {"result":{"sessionId":"sess-1","message":{"role":"model","content":[{"text":"Echo: hello"}]},'
    b'"finishReason":"stop","snapshotId":"snap-1"}}\n\n',
]
INTERRUPTED_JS = [
    b'data: {"message":{"modelChunk":{"role":"tool","content":[{"toolRequest":{"name":"approveTransfer","ref":"r1",'
    b'"input":{"amount":100}},"metadata":{"interrupt":true}}]}}}\n\n',
    b'data: {"message":{"turnEnd":{"snapshotId":"snap-2","finishReason":"interrupted"}}}\n\n',
    b'data: {"result":{"sessionId":"sess-1","message":{"role":"model","content":[{"text":"Need approval."},'
    b'{"toolRequest":{"name":"approveTransfer","ref":"r1","input":{"amount":100}},"metadata":{"interrupt":true}}]},'
    b'"finishReason":"interrupted","snapshotId":"snap-2"}}\n\n',
]
SNAPSHOT_JS = (
    b'{"result":{"snapshotId":"snap-2","sessionId":"sess-1","createdAt":"2026-11-29T13:21:44.782Z",'
    b'"updatedAt":"2026-11-29T13:21:44.790Z","status":"completed","finishReason":"interrupted",'
    b'"state":{"sessionId":"sess-1","messages":[{"role":"user","content":[{"text":"hi"}]},{"role":"model",'
    b'"content":[{"toolRequest":{"name":"approveTransfer","ref":"r1","input":{}},"metadata":{"interrupt":true}}]}]}}}'
)


@dataclass
class Reply:
    status: int = 200
    pieces: list[bytes] = field(default_factory=list[bytes])
    content_type: bytes = b"text/plain"


@dataclass
class Canned:
    """An ASGI app answering each POST with the next scripted reply; it records what it received."""

    replies: list[Reply] = field(default_factory=list[Reply])
    received: list[tuple[str, dict[str, str], Any]] = field(default_factory=list[tuple[str, dict[str, str], Any]])

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        assert scope["type"] == "http"
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = {k.decode(): v.decode() for k, v in scope["headers"]}
        self.received.append((scope["path"], headers, json.loads(body)))
        reply = self.replies.pop(0)
        await send(
            {"type": "http.response.start", "status": reply.status, "headers": [(b"content-type", reply.content_type)]}
        )
        for piece in reply.pieces:
            await send({"type": "http.response.body", "body": piece, "more_body": True})
        await send({"type": "http.response.body", "body": b""})


@pytest.fixture
async def canned() -> AsyncIterator[tuple[Canned, str]]:
    app = Canned()
    async with serve(app) as base:
        yield app, base


async def test_stream_from_a_js_server_and_the_requests_we_send(canned: tuple[Canned, str]) -> None:
    app, base = canned
    app.replies += [Reply(pieces=ECHO_JS), Reply(pieces=INTERRUPTED_JS)]

    async def token() -> dict[str, str]:
        return {"Authorization": "Bearer t", "accept": "application/json"}

    async with RemoteAgent(f"{base}/api/approvalAgent", headers=token) as agent:
        conn = agent.connect()
        await conn.send("hello")
        await conn.send("please approve")
        await conn.close()
        chunks = [c async for c in conn]
        output = await conn.output()
    assert [type(c).__name__ for c in chunks] == ["ModelChunk", "ModelChunk", "TurnEnd", "ModelChunk", "TurnEnd"]
    assert chunks[2] == TurnEnd(snapshot_id="snap-1", finish_reason="stop")
    assert output.finish_reason == "interrupted" and output.snapshot_id == "snap-2"
    assert [p.ref for p in output.interrupts] == ["r1"]
    (p1, h1, b1), (_, _, b2) = app.received
    assert p1 == "/api/approvalAgent"
    assert h1["accept"] == "text/event-stream" and h1["authorization"] == "Bearer t"
    assert b1 == {"data": {"message": {"role": "user", "content": [{"text": "hello"}]}}, "init": {}}
    assert b2["init"] == {"snapshotId": "snap-1"}


async def test_client_managed_connection_sends_the_state_back(canned: tuple[Canned, str]) -> None:
    app, base = canned
    state = {"sessionId": "s7", "messages": [{"role": "user", "content": [{"text": "a"}]}], "custom": {"n": 1}}
    first = {"result": {"sessionId": "s7", "state": state, "finishReason": "stop"}}
    app.replies += [Reply(pieces=[b"data: " + json.dumps(first).encode() + b"\n\n"]), Reply(pieces=ECHO_JS[-1:])]
    async with RemoteAgent(f"{base}/statelessAgent", state_management="client") as agent:
        conn = agent.connect()
        await conn.send("a")
        await conn.resume(Resume(respond=[ToolResponsePart(name="t", ref="r", output=1)]))
        await conn.output()
    init = app.received[1][2]["init"]
    assert init == {"state": {**state, "artifacts": []}}
    assert app.received[1][2]["data"] == {
        "resume": {"respond": [{"toolResponse": {"name": "t", "ref": "r", "output": 1}}]}
    }


async def test_detach_after_a_message_is_merged_into_its_request(canned: tuple[Canned, str]) -> None:
    app, base = canned
    detached = b'data: {"result":{"sessionId":"s3","snapshotId":"snap-9","finishReason":"detached"}}\n\n'
    app.replies += [Reply(pieces=[detached]), Reply(pieces=[detached])]
    async with RemoteAgent(f"{base}/a") as agent:
        conn = agent.connect()
        await conn.send("slow job")
        await conn.detach()
        output = await conn.output()
        assert output.finish_reason == "detached" and output.snapshot_id == "snap-9"
        conn = agent.connect(session_id="s3")
        await conn.detach()
        await conn.output()
    assert [r[2]["data"] for r in app.received] == [
        {"message": {"role": "user", "content": [{"text": "slow job"}]}, "detach": True},
        {"detach": True},
    ]
    assert app.received[1][2]["init"] == {"sessionId": "s3"}


@pytest.mark.parametrize(
    ("pieces", "error", "message"),
    [
        (
            [b'error: {"error":{"status":"FAILED_PRECONDITION","message":"Cannot send \'state\'"}}\n\n'],
            FailedPreconditionError,
            "Cannot send 'state'",
        ),
        (
            [b'data: {"error":{"details":{"stack":null},"message":"None","status":"INTERNAL"}}\n\n'],
            InternalError,
            "None",
        ),
        ([b'data: {"error":{"error":{"status":"NOT_FOUND","message":"NOT_FOUND: gone"}}}\n\n'], NotFoundError, "gone"),
        ([b'data: {"error":{"code":16,"message":"who?"}}\n\n'], UnauthenticatedError, "who?"),
        (ECHO_JS[:2], UnavailableError, "ended before"),
        ([b'data: {"message":{"turnEnd":{}}}\n\ndata: [1]\n\n'], InternalError, "unexpected stream frame"),
    ],
)
async def test_stream_errors_raise_typed_errors(
    canned: tuple[Canned, str], pieces: list[bytes], error: type[Exception], message: str
) -> None:
    app, base = canned
    app.replies.append(Reply(pieces=pieces))
    async with RemoteAgent(f"{base}/a") as agent:
        with pytest.raises(error) as raised:
            await agent.run("hi")
    assert message in str(raised.value)


async def test_tolerant_framing(canned: tuple[Canned, str]) -> None:
    app, base = canned
    text = "café ✓".encode()
    chunk = b'{"message":{"modelChunk":{"role":"model","index":0,"content":[{"text":"' + text + b'"}]}}}'
    split = len(b'data: {"message":{"modelChunk":{"role":"model","index":0,"content":[{"text":"caf')
    pieces = [
        b": ping\r\n\r\nevent: message\r\nid: 1\r\n",
        (b"data: " + chunk + b"\r\n\r\n")[: split + 1],  # a UTF-8 character split across reads
        (b"data: " + chunk + b"\r\n\r\n")[split + 1 :],
        b'{"message":{"customPatch":[{"op":"replace","path":"","value":{"n":1}}]}}\n',  # NDJSON
        b'data: {"message":\ndata: {"artifact":{"name":"a","parts":[{"text":"x"}]}}}\n\n',  # multi-line data
        b'data:{"result":{"finishReason":"stop"}}',  # no space, no trailing blank line
    ]
    app.replies.append(Reply(pieces=pieces))
    async with RemoteAgent(f"{base}/a") as agent:
        conn = agent.connect()
        await conn.send("hi")
        await conn.close()
        chunks = [c async for c in conn]
        assert (await conn.output()).finish_reason == "stop"
    assert isinstance(chunks[0], ModelChunk) and chunks[0].content[0].text == "café ✓"  # type: ignore[union-attr]
    assert chunks[1] == CustomPatch(ops=[{"op": "replace", "path": "", "value": {"n": 1}}])
    assert isinstance(chunks[2], Artifact) and chunks[2].name == "a"


@pytest.mark.parametrize(
    ("status", "body", "error", "message"),
    [
        (400, b'{"status":"FAILED_PRECONDITION","message":"Cannot send"}', FailedPreconditionError, "Cannot send"),
        (400, b"<!DOCTYPE html><pre>Bad Request</pre>", InvalidArgumentError, "Bad Request"),
        (500, b'{"details":{"stack":null},"message":"None","status":"INTERNAL"}', InternalError, "None"),
        (500, b"Internal Server Error", InternalError, "Internal Server Error"),
        (503, b"", UnavailableError, "HTTP 503"),
        (401, b'{"error":{"status":"UNAUTHENTICATED","message":"no token"}}', UnauthenticatedError, "no token"),
    ],
)
async def test_http_errors_raise_typed_errors(
    canned: tuple[Canned, str], status: int, body: bytes, error: type[Exception], message: str
) -> None:
    app, base = canned
    app.replies.append(Reply(status=status, pieces=[body]))
    async with RemoteAgent(f"{base}/a") as agent:
        with pytest.raises(error) as raised:
            await agent.run("hi")
    assert message in str(raised.value)


async def test_companions_against_genkit_servers(canned: tuple[Canned, str]) -> None:
    app, base = canned
    json_type = b"application/json"
    app.replies += [
        Reply(status=200, pieces=[SNAPSHOT_JS], content_type=json_type),
        Reply(status=404, pieces=[]),  # genkit-fastapi
        Reply(status=404, pieces=[b'{"status":"NOT_FOUND","message":"Snapshot \'x\' not found"}']),  # express
        Reply(status=200, pieces=[b'{"result":null}'], content_type=json_type),
        Reply(status=200, pieces=[b'{"error":{"status":"NOT_FOUND","message":"nope"}}'], content_type=json_type),
        Reply(status=200, pieces=[b'{"result":{"snapshotId":"x","status":null}}'], content_type=json_type),
        Reply(status=200, pieces=[b'{"result":{"snapshotId":"x"}}'], content_type=json_type),
        Reply(status=200, pieces=[b'{"result":{"snapshotId":"x","status":"pending"}}'], content_type=json_type),
        Reply(status=200, pieces=[SNAPSHOT_JS], content_type=json_type),
        Reply(pieces=ECHO_JS),
    ]
    async with RemoteAgent(f"{base}/api/approvalAgent", abort_url=f"{base}/custom/abort") as agent:
        snap = await agent.get_snapshot("snap-2")
        assert snap is not None and snap.parent_id is None and snap.status == "completed"
        assert snap.state is not None and [p.ref for p in snap.interrupts] == ["r1"]
        with pytest.raises(SnapshotNotFoundError):
            await agent.get_snapshot("x")
        with pytest.raises(SnapshotNotFoundError):
            await agent.get_snapshot(session_id="x")
        with pytest.raises(SnapshotNotFoundError):  # a 200 with a null result is no snapshot either
            await agent.pending_interrupts("x")
        with pytest.raises(NotFoundError, match="nope"):
            await agent.get_snapshot("x")
        assert await agent.abort("x") is None
        assert await agent.abort("x") is None
        assert await agent.abort("x") == "pending"
        conn = await agent.load("snap-2")
        assert conn.snapshot is not None and conn.snapshot.snapshot_id == "snap-2"
        await conn.send("hello")
        assert (await conn.output()).text == "Echo: hello"
    paths = [r[0] for r in app.received]
    assert paths[0] == "/api/approvalAgent/getSnapshot" and paths[5] == "/custom/abort"
    assert app.received[2][2] == {"data": {"sessionId": "x"}}
    assert app.received[-1][2]["init"] == {"snapshotId": "snap-2"}
