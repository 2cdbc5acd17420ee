"""OpenTelemetry spans of a pause -> approve -> finish cycle, read from the SDK's in-memory exporter."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import textwrap
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from pydantic import BaseModel

from interlock import Message, PromptAgent, Resume, ToolContext, ToolRequestPart, tool
from interlock import metadata as md
from interlock.models import ModelResponse, Usage
from interlock.stores.sqlite import SQLiteStore
from interlock.telemetry import configure
from interlock.testing import ScriptedModel


class Transfer(BaseModel):
    to: str
    amount: float


class Approval(BaseModel):
    approved: bool


@tool
async def transfer(req: Transfer, ctx: ToolContext[Any], approval: Approval | None) -> str:
    """Send money; a person approves first."""
    if approval is None:
        ctx.interrupt({"to": req.to, "amount": req.amount})
    return f"sent {req.amount} to {req.to}" if approval.approved else "rejected"


PAY = Message(role="model", content=[ToolRequestPart(name="transfer", ref="t1", input={"to": "bob", "amount": 5})])


def reply(text: str, tokens: tuple[int, int]) -> ModelResponse:
    return ModelResponse(message=Message.model(text), usage=Usage(input_tokens=tokens[0], output_tokens=tokens[1]))


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    configure(tracer_provider=provider)
    yield exporter
    configure()
    provider.shutdown()


def named(spans: Sequence[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name == name]


def children(spans: Sequence[ReadableSpan], parent: ReadableSpan) -> list[str]:
    assert parent.context is not None
    return [s.name for s in spans if s.parent is not None and s.parent.span_id == parent.context.span_id]


def events(span: ReadableSpan, name: str) -> list[dict[str, object]]:
    return [dict(e.attributes or {}) for e in span.events if e.name == name]


async def pause_and_approve(db: pathlib.Path) -> tuple[str, str, str, str]:
    """Pause in one agent object, approve through another on the same store.

    Returns the session id, the paused and the finished snapshot ids, and the traceparent stored in the paused one.
    """
    async with SQLiteStore(db) as store:
        first = PromptAgent("banker", ScriptedModel([PAY]), tools=[transfer], store=store)
        out = await first.run("Send Bob 5")
        assert out.finish_reason == "interrupted" and out.snapshot_id is not None
        paused = out.snapshot_id
    async with SQLiteStore(db) as store:
        second = PromptAgent("banker", ScriptedModel([reply("Sent.", (42, 7))]), tools=[transfer], store=store)
        call = transfer.interrupted(out.interrupts[0])
        assert call is not None
        done = await second.run(
            resume=Resume(restart=[call.restart(Approval(approved=True))]),
            snapshot_id=paused,
            context={"identity": "alice"},
        )
        assert done.finish_reason == "stop" and done.snapshot_id is not None
        stored = await store.load(paused)
        assert stored is not None
        carrier = (stored.metadata or {})[md.TRACE_CONTEXT]
    assert out.session_id is not None
    return out.session_id, paused, done.snapshot_id, carrier["traceparent"]


async def test_pause_approve_finish_span_tree(spans: InMemorySpanExporter, tmp_path: pathlib.Path) -> None:
    session, paused, finished, traceparent = await pause_and_approve(tmp_path / "s.db")
    got = spans.get_finished_spans()
    turns = named(got, "invoke_agent banker")
    assert len(turns) == 2
    first, second = sorted(turns, key=lambda s: s.start_time or 0)
    assert first.context is not None and second.context is not None

    # the paused turn: a root span with its model call and the tool call that paused
    assert first.parent is None and first.kind == SpanKind.INTERNAL
    assert children(got, first) == ["chat scripted", "execute_tool transfer"]
    attrs = dict(first.attributes or {})
    assert attrs["gen_ai.operation.name"] == "invoke_agent" and attrs["gen_ai.agent.name"] == "banker"
    assert attrs["gen_ai.conversation.id"] == session and attrs["interlock.snapshot.id"] == paused
    assert attrs["interlock.finish_reason"] == "interrupted"
    (interrupt,) = events(first, "interlock.interrupt")
    assert interrupt == {
        "gen_ai.tool.name": "transfer",
        "gen_ai.tool.call.id": "t1",
        "interlock.snapshot.id": paused,
        "interlock.interrupt.kind": "tool",
    }
    paused_tool = named(got, "execute_tool transfer")[0]
    tool_attrs = dict(paused_tool.attributes or {})
    assert tool_attrs["gen_ai.operation.name"] == "execute_tool" and tool_attrs["gen_ai.tool.call.id"] == "t1"
    assert tool_attrs["interlock.tool.interrupted"] is True and paused_tool.status.status_code != StatusCode.ERROR
    # the span context stored in the paused snapshot is the paused turn's
    assert traceparent.split("-")[1:3] == [f"{first.context.trace_id:032x}", f"{first.context.span_id:016x}"]

    # the resumed turn: its own trace, linked to the paused turn; resume and claim recorded
    assert second.parent is None and second.context.trace_id != first.context.trace_id
    assert [(link.context.trace_id, link.context.span_id) for link in second.links] == [
        (first.context.trace_id, first.context.span_id)
    ]
    assert children(got, second) == ["execute_tool transfer", "chat scripted"]
    assert dict(second.attributes or {})["interlock.parent_snapshot.id"] == paused
    (resume,) = events(second, "interlock.resume")
    assert resume["interlock.resume.verb"] == "restart" and resume["interlock.identity"] == "alice"
    assert resume["interlock.claim.holder"] == finished and resume["gen_ai.tool.name"] == "transfer"
    (claim,) = events(second, "interlock.claim.taken")
    assert claim["interlock.snapshot.id"] == paused and claim["interlock.claim.holder"] == finished
    assert events(second, "interlock.claim.taken_over") == []
    assert dict(second.attributes or {})["interlock.finish_reason"] == "stop"

    # the model call after the approval: GenAI attributes and token usage
    chat = [s for s in named(got, "chat scripted") if s.parent and s.parent.span_id == second.context.span_id][0]
    chat_attrs = dict(chat.attributes or {})
    assert chat.kind == SpanKind.CLIENT
    assert chat_attrs["gen_ai.operation.name"] == "chat" and chat_attrs["gen_ai.provider.name"] == "test"
    assert chat_attrs["gen_ai.request.model"] == "scripted"
    assert chat_attrs["gen_ai.usage.input_tokens"] == 42 and chat_attrs["gen_ai.usage.output_tokens"] == 7
    assert chat_attrs["gen_ai.response.finish_reasons"] == ("stop",)
    # content is off by default: no prompts, inputs, outputs or interrupt data anywhere
    for span in got:
        keys = set(span.attributes or {}) | {k for e in span.events for k in (e.attributes or {})}
        assert not keys & {"gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.tool.call.arguments"}
        assert not keys & {"gen_ai.tool.call.result", "interlock.interrupt.data", "interlock.resume.payload"}


async def test_content_capture_is_a_setting(
    spans: InMemorySpanExporter, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("INTERLOCK_OTEL_CAPTURE_CONTENT", "true")
    await pause_and_approve(tmp_path / "s.db")
    got = spans.get_finished_spans()
    first_chat = min(named(got, "chat scripted"), key=lambda s: s.start_time or 0)
    messages = json.loads(str(dict(first_chat.attributes or {})["gen_ai.input.messages"]))
    assert messages == [{"role": "user", "parts": [{"type": "text", "content": "Send Bob 5"}]}]
    output = json.loads(str(dict(first_chat.attributes or {})["gen_ai.output.messages"]))
    assert output[0]["role"] == "assistant" and output[0]["parts"][0]["type"] == "tool_call"
    tools = named(got, "execute_tool transfer")
    assert all(json.loads(str(dict(t.attributes or {})["gen_ai.tool.call.arguments"]))["to"] == "bob" for t in tools)
    results = [dict(t.attributes or {}).get("gen_ai.tool.call.result") for t in tools]
    assert sorted(map(str, results)) == ['"sent 5.0 to bob"', "None"]
    turn = min(named(got, "invoke_agent banker"), key=lambda s: s.start_time or 0)
    assert json.loads(str(events(turn, "interlock.interrupt")[0]["interlock.interrupt.data"])) == {
        "to": "bob",
        "amount": 5.0,
    }

    spans.clear()
    configure(capture_content=False, tracer_provider=None)  # the argument wins over the environment
    assert not any("gen_ai.input.messages" in (s.attributes or {}) for s in spans.get_finished_spans())


async def test_a_failing_tool_marks_its_span_and_the_turn(spans: InMemorySpanExporter) -> None:
    @tool
    async def explode(req: Transfer) -> str:
        """Fails."""
        raise RuntimeError("boom")

    ask = Message(role="model", content=[ToolRequestPart(name="explode", ref="e1", input={"to": "x", "amount": 1})])
    out = await PromptAgent("ops", ScriptedModel([ask]), tools=[explode]).run("go", raise_on_error=False)
    assert out.finish_reason == "failed"
    got = spans.get_finished_spans()
    (tool_span,) = named(got, "execute_tool explode")
    assert tool_span.status.status_code == StatusCode.ERROR
    assert dict(tool_span.attributes or {})["error.type"] == "RuntimeError"
    assert [e.name for e in tool_span.events] == ["exception"]
    (turn,) = named(got, "invoke_agent ops")
    assert turn.status.status_code == StatusCode.ERROR
    assert dict(turn.attributes or {})["error.type"] == "INTERNAL"


async def test_a_detached_turn_records_enqueued_started_and_finished(
    spans: InMemorySpanExporter, tmp_path: pathlib.Path
) -> None:
    async with SQLiteStore(tmp_path / "s.db") as store:
        agent = PromptAgent("banker", ScriptedModel([PAY]), tools=[transfer], store=store)
        out = await agent.run("Send Bob 5", detach=True)
        assert out.finish_reason == "detached" and out.snapshot_id is not None
        snap = await agent.wait(out.snapshot_id, timeout=30)
        assert snap is not None and snap.status == "completed" and snap.finish_reason == "interrupted"
        assert md.TRACE_CONTEXT in (snap.metadata or {})
    got = spans.get_finished_spans()
    (turn,) = named(got, "invoke_agent banker")
    assert dict(turn.attributes or {})["interlock.detached"] is True
    assert [e.name for e in turn.events][:1] == ["interlock.detached.started"]
    (finish,) = named(got, "interlock.detached.finish")
    assert turn.context is not None and finish.parent is not None and finish.parent.span_id == turn.context.span_id
    assert dict(finish.attributes or {})["interlock.detached.status"] == "completed"
    assert (snap.metadata or {})[md.TRACE_CONTEXT]["traceparent"].split("-")[2] == f"{turn.context.span_id:016x}"


async def test_no_provider_no_trace_context(tmp_path: pathlib.Path) -> None:
    """Without a configured tracer provider, nothing is recorded and snapshots carry no trace context."""
    configure()
    async with SQLiteStore(tmp_path / "s.db") as store:
        out = await PromptAgent("banker", ScriptedModel([PAY]), tools=[transfer], store=store).run("Send Bob 5")
        assert out.snapshot_id is not None
        snap = await store.load(out.snapshot_id)
        assert snap is not None and md.TRACE_CONTEXT not in (snap.metadata or {})


def test_without_the_extra_everything_runs_and_nothing_is_traced(tmp_path: pathlib.Path) -> None:
    """With ``opentelemetry`` not importable, a pause/approve cycle runs; exporting names the extra to install."""
    script = textwrap.dedent(
        """
        import sys
        sys.modules["opentelemetry"] = None  # as if interlock[otel] were not installed
        import asyncio
        from interlock import InMemoryStore, Message, PromptAgent, Resume, ToolContext, ToolRequestPart, tool
        from interlock import metadata as md
        from interlock.telemetry import configure_from_env
        from interlock.testing import ScriptedModel

        @tool
        async def transfer(to: str, ctx: ToolContext, approved: dict | None) -> str:
            '''Pays once approved.'''
            if approved is None:
                ctx.interrupt({"to": to})
            return "sent"

        async def main():
            store = InMemoryStore()
            ask = Message(role="model", content=[ToolRequestPart(name="transfer", ref="t1", input="bob")])
            out = await PromptAgent("b", ScriptedModel([ask]), tools=[transfer], store=store).run("pay")
            assert out.finish_reason == "interrupted", out
            restart = ToolRequestPart(name="transfer", ref="t1", input="bob", metadata={"resumed": {"ok": 1}})
            agent = PromptAgent("b", ScriptedModel(["done"]), tools=[transfer], store=store)
            done = await agent.run(resume=Resume(restart=[restart]), snapshot_id=out.snapshot_id)
            assert done.finish_reason == "stop", done
            snap = await store.load(out.snapshot_id)
            assert md.TRACE_CONTEXT not in snap.metadata

        asyncio.run(main())
        try:
            configure_from_env({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"})
        except ImportError as exc:
            assert "pip install 'interlock[otel]'" in str(exc), exc
        else:
            raise AssertionError("configure_from_env exported without the SDK")
        assert "opentelemetry.trace" not in sys.modules
        print("ok")
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert (proc.returncode, proc.stdout.strip(), proc.stderr) == (0, "ok", "")
