"""``interlock serve`` exports its spans over OTLP/HTTP, configured by the standard ``OTEL_*`` variables.

A small OTLP/HTTP receiver runs on 127.0.0.1 in the test (uvicorn). One server process
(the official exporter pointed at the receiver) pauses a transfer and exits; a second one,
on the same SQLite file, takes the approval. RemoteAgent drives both; the received protobuf
is decoded with ``opentelemetry-proto``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pathlib
import signal
import subprocess
import sys
import textwrap
from collections.abc import AsyncGenerator
from typing import Any

import httpx
import pytest
from http_helpers import serve
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from opentelemetry.sdk.trace import TracerProvider
from test_cli import free_port

from interlock import RemoteAgent, Resume, ToolRequestPart
from interlock.telemetry import configure

pytestmark = pytest.mark.slow

MODULE = textwrap.dedent(
    """
    import os
    from pydantic import BaseModel
    from interlock import AgentServer, Message, PromptAgent, ToolContext, ToolRequestPart, tool
    from interlock.stores.sqlite import SQLiteStore
    from interlock.testing import ScriptedModel


    class Approval(BaseModel):
        approved: bool


    @tool
    async def transfer(to: str, ctx: ToolContext, approval: Approval | None) -> str:
        \"\"\"Send money after an approval.\"\"\"
        if approval is None:
            ctx.interrupt({"to": to})
        return "sent"


    PAY = Message(role="model", content=[ToolRequestPart(name="transfer", ref="t1", input="bob")])
    script = [PAY] if os.environ["PHASE"] == "pause" else ["Sent."]
    banker = PromptAgent("banker", ScriptedModel(script), tools=[transfer], store=SQLiteStore("bank.db"))
    app = AgentServer([banker], context=lambda request: {"identity": request.headers.get("x-user")})
    """
)


class Receiver:
    """An OTLP/HTTP trace receiver: keeps every span it is sent, with its resource and scope."""

    def __init__(self) -> None:
        self.requests: list[ExportTraceServiceRequest] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        if scope["path"] != "/v1/traces" or scope["method"] != "POST":
            await send({"type": "http.response.start", "status": 404, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        self.requests.append(request)
        headers = [(b"content-type", b"application/x-protobuf")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": ExportTraceServiceResponse().SerializeToString()})

    def spans(self) -> list[tuple[dict[str, Any], str, Span]]:
        """(resource attributes, scope name, span) of everything received."""
        out: list[tuple[dict[str, Any], str, Span]] = []
        for request in self.requests:
            for resource_spans in request.resource_spans:
                resource = {kv.key: value(kv.value) for kv in resource_spans.resource.attributes}
                for scope_spans in resource_spans.scope_spans:
                    out.extend((resource, scope_spans.scope.name, span) for span in scope_spans.spans)
        return out


def value(v: AnyValue) -> Any:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [value(x) for x in v.array_value.values]
    return getattr(v, kind) if kind else None


def attributes(span: Span) -> dict[str, Any]:
    return {kv.key: value(kv.value) for kv in span.attributes}


async def wait_until_up(proc: subprocess.Popen[str], url: str) -> None:
    async with httpx.AsyncClient() as http:
        async with asyncio.timeout(30):
            while True:
                assert proc.poll() is None, proc.communicate()
                try:
                    await http.post(f"{url}/banker/getSnapshot", json={"data": {"snapshotId": "x"}})
                    return
                except httpx.TransportError:
                    await asyncio.sleep(0.1)


@contextlib.asynccontextmanager
async def server(cwd: pathlib.Path, collector: str, phase: str) -> AsyncGenerator[RemoteAgent]:
    """``interlock serve`` exporting to ``collector``; stopped (SIGINT) after the block, which flushes its spans."""
    env = {
        **os.environ,
        "PYTHONUNBUFFERED": "1",
        "PHASE": phase,
        "OTEL_EXPORTER_OTLP_ENDPOINT": collector,
        "OTEL_SERVICE_NAME": "bank-test",
        "OTEL_BSP_SCHEDULE_DELAY": "600000",  # nothing is sent before the server exits: its flush sends all
    }
    env.pop("INTERLOCK_OTEL_CAPTURE_CONTENT", None)
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "interlock", "serve", "bank_app:app", "--port", str(port)],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        await wait_until_up(proc, url)
        async with RemoteAgent(f"{url}/banker", headers={"x-user": "alice"}) as banker:
            yield banker
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = await asyncio.to_thread(proc.communicate, timeout=30)
    assert proc.returncode == 0, err


async def test_a_traced_caller_is_the_parent_of_the_served_turn(tmp_path: pathlib.Path) -> None:
    """RemoteAgent sends the caller's ``traceparent``; the server's turn span is its child, in the caller's trace."""
    (tmp_path / "bank_app.py").write_text(MODULE)
    provider = TracerProvider()  # the caller's spans record (nothing needs to export them here)
    configure(tracer_provider=provider)
    receiver = Receiver()
    try:
        async with serve(receiver) as collector:
            async with server(tmp_path, collector, "pause") as banker:
                with provider.get_tracer("caller").start_as_current_span("ask for a transfer") as caller:
                    out = await banker.run("Send Bob money")
            assert out.finish_reason == "interrupted"
    finally:
        configure()
        provider.shutdown()
    (turn,) = [s for _, _, s in receiver.spans() if s.name == "invoke_agent banker"]
    context = caller.get_span_context()
    assert turn.trace_id == context.trace_id.to_bytes(16, "big")
    assert turn.parent_span_id == context.span_id.to_bytes(8, "big")


async def test_serve_exports_the_pause_approve_cycle_over_otlp(tmp_path: pathlib.Path) -> None:
    (tmp_path / "bank_app.py").write_text(MODULE)
    receiver = Receiver()
    async with serve(receiver) as collector:
        async with server(tmp_path, collector, "pause") as banker:
            out = await banker.run("Send Bob money")
            assert out.finish_reason == "interrupted" and out.snapshot_id is not None
            assert receiver.requests == []  # batched until the server exits
        assert receiver.requests != []  # flushed at exit
        async with server(tmp_path, collector, "approve") as banker:  # another process: the link comes from the store
            approve = ToolRequestPart(name="transfer", ref="t1", input="bob", metadata={"resumed": {"approved": True}})
            done = await banker.run(resume=Resume(restart=[approve]), snapshot_id=out.snapshot_id)
            assert done.finish_reason == "stop", done.error

    received = receiver.spans()
    assert len(received) == 6, [s.name for _, _, s in received]
    assert {r.get("service.name") for r, _, _ in received} == {"bank-test"}
    assert {scope for _, scope, _ in received} == {"interlock"}
    turns = sorted((s for _, _, s in received if s.name == "invoke_agent banker"), key=lambda s: s.start_time_unix_nano)
    assert len(turns) == 2
    paused, resumed = turns
    assert attributes(paused)["interlock.snapshot.id"] == out.snapshot_id
    assert attributes(paused)["interlock.finish_reason"] == "interrupted"
    assert [e.name for e in paused.events] == ["interlock.interrupt"]
    # across two processes the resumed turn links to the paused one (its context came from the store)
    assert resumed.trace_id != paused.trace_id
    assert [(link.trace_id, link.span_id) for link in resumed.links] == [(paused.trace_id, paused.span_id)]
    resume_events = [attributes_of(e) for e in resumed.events if e.name == "interlock.resume"]
    assert resume_events and resume_events[0]["interlock.identity"] == "alice"
    assert resume_events[0]["interlock.claim.holder"] == done.snapshot_id
    by_parent = {
        turn.span_id: sorted(s.name for _, _, s in received if s.parent_span_id == turn.span_id) for turn in turns
    }
    assert by_parent == {
        paused.span_id: ["chat scripted", "execute_tool transfer"],
        resumed.span_id: ["chat scripted", "execute_tool transfer"],
    }
    chat = next(s for _, _, s in received if s.name == "chat scripted")
    assert chat.kind == Span.SPAN_KIND_CLIENT
    assert attributes(chat)["gen_ai.operation.name"] == "chat"
    assert attributes(chat)["gen_ai.provider.name"] == "test"


def attributes_of(event: Span.Event) -> dict[str, Any]:
    return {kv.key: value(kv.value) for kv in event.attributes}
