"""interlock's own span events: the effect journal (replay, in doubt, retry), claims taken over and lost, aborts."""

from __future__ import annotations

import asyncio
import pathlib
import time
from collections.abc import Iterator
from typing import Any

import pytest
from banking import APPROVE, PAY, Approval, Transfer, transfer
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import (
    NonRecordingSpan,
    SpanContext,
    StatusCode,
    TraceFlags,
    TraceState,
    set_span_in_context,
    use_span,
)
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from test_effects import FailingModel, Ledger, bank, in_doubt_after_an_abort_mid_tool, paused

from interlock import InMemoryStore, PromptAgent, Resume, ToolContext, ToolRequestPart, tool
from interlock import metadata as md
from interlock._engine.commit import Claims
from interlock.agents._host import Host
from interlock.stores.sqlite import SQLiteStore
from interlock.telemetry import configure
from interlock.telemetry._otel import span_carrier
from interlock.testing import ScriptedModel


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    configure(tracer_provider=provider)
    yield exporter
    configure()
    provider.shutdown()


@pytest.fixture
async def store(tmp_path: pathlib.Path) -> Any:
    async with SQLiteStore(tmp_path / "s.db") as sqlite:
        yield sqlite


def event_names(spans: tuple[ReadableSpan, ...], span_name: str) -> list[list[str]]:
    """The event names of each span called ``span_name``, oldest span first."""
    found = sorted((s for s in spans if s.name == span_name), key=lambda s: s.start_time or 0)
    return [[e.name for e in s.events] for s in found]


async def test_a_replayed_call_is_an_event_on_its_tool_span(
    spans: InMemorySpanExporter, store: Any, tmp_path: pathlib.Path
) -> None:
    ledger = Ledger(tmp_path / "effects.log")
    sid = await paused(store, ledger)
    failed = await bank(store, ledger, FailingModel(1)).run(resume=APPROVE, snapshot_id=sid, raise_on_error=False)
    assert failed.error is not None
    spans.clear()
    done = await bank(store, ledger, FailingModel(0)).run(resume=APPROVE, snapshot_id=sid)
    assert done.finish_reason == "stop", done.error
    assert event_names(spans.get_finished_spans(), "execute_tool transfer") == [["interlock.journal.replayed"]]


async def test_an_in_doubt_call_and_its_retry_are_events(
    spans: InMemorySpanExporter, store: Any, tmp_path: pathlib.Path
) -> None:
    ledger = Ledger(tmp_path / "effects.log")
    sid, _ = await in_doubt_after_an_abort_mid_tool(store, ledger)
    finishes = [s for s in spans.get_finished_spans() if s.name == "interlock.detached.finish"]
    assert [dict(s.attributes or {})["interlock.detached.status"] for s in finishes] == ["aborted"]
    spans.clear()
    again = await bank(store, ledger).run(resume=APPROVE, snapshot_id=sid)
    assert again.finish_reason == "interrupted" and again.snapshot_id is not None
    got = spans.get_finished_spans()
    assert event_names(got, "execute_tool transfer") == [["interlock.journal.in_doubt"]]
    (turn,) = [s for s in got if s.name == "invoke_agent bank"]
    (interrupt,) = [dict(e.attributes or {}) for e in turn.events if e.name == "interlock.interrupt"]
    assert interrupt["interlock.interrupt.kind"] == "in_doubt"
    spans.clear()
    part = again.interrupts[0]
    retry = Resume(restart=[ToolRequestPart(name="transfer", ref="t1", input=part.input, metadata={"resumed": True})])
    done = await bank(store, ledger).run(resume=retry, snapshot_id=again.snapshot_id)
    assert done.finish_reason == "stop", done.error
    assert event_names(spans.get_finished_spans(), "execute_tool transfer") == [["interlock.journal.retried"]]


async def test_a_lapsed_claim_taken_over_is_an_event(spans: InMemorySpanExporter, store: Any) -> None:
    sid = await paused(store, Ledger(pathlib.Path("/dev/null")))
    dead = await Claims(store, None, ttl=0.2).take(sid, "dead-turn")
    dead._stop()  # pyright: ignore[reportPrivateUsage]  # its process died: the lease is no longer renewed
    await asyncio.sleep(0.4)
    spans.clear()
    done = await bank(store, Ledger(pathlib.Path("/dev/null"))).run(resume=APPROVE, snapshot_id=sid)
    assert done.finish_reason == "stop", done.error
    (turn,) = [s for s in spans.get_finished_spans() if s.name == "invoke_agent bank"]
    taken = [dict(e.attributes or {}) for e in turn.events if e.name == "interlock.claim.taken_over"]
    assert [t["interlock.claim.previous_holder"] for t in taken] == ["dead-turn"]
    assert [t["interlock.claim.holder"] for t in taken] == [done.snapshot_id]


async def test_a_lost_claim_is_an_event_and_the_turn_fails_aborted(spans: InMemorySpanExporter, store: Any) -> None:
    @tool
    async def transfer(req: Transfer, ctx: ToolContext[Any], approval: Approval | None) -> str:
        """Blocks the event loop past the claim's lease once approved (a starved loop)."""
        if approval is None:
            ctx.interrupt({"to": req.to})
        time.sleep(1.0)
        return "sent"

    out = await PromptAgent("bank", ScriptedModel([PAY]), tools=[transfer], store=store).run("pay")
    assert out.snapshot_id is not None
    spans.clear()
    agent = PromptAgent("bank", ScriptedModel(["paid"]), tools=[transfer], store=store, host=Host(claim_ttl=0.3))
    lost = await agent.run(resume=APPROVE, snapshot_id=out.snapshot_id, raise_on_error=False)
    assert lost.error is not None and lost.error.status == "ABORTED"
    (turn,) = [s for s in spans.get_finished_spans() if s.name == "invoke_agent bank"]
    names = [e.name for e in turn.events]
    assert names.count("interlock.claim.lost") == 1 and names.index("interlock.claim.taken") < names.index(
        "interlock.claim.lost"
    )
    assert turn.status.status_code == StatusCode.ERROR and dict(turn.attributes or {})["error.type"] == "ABORTED"


async def test_a_paused_turn_under_a_callers_span_stores_its_tracestate_and_the_resume_links_with_it(
    spans: InMemorySpanExporter,
) -> None:
    """The stored trace context is the W3C pair (traceparent, tracestate); the resumed turn's link carries both."""
    caller = SpanContext(
        0xA1, 0xB2, is_remote=True, trace_flags=TraceFlags(1), trace_state=TraceState([("bank", "eu")])
    )
    store = InMemoryStore()
    with use_span(NonRecordingSpan(caller)):
        out = await PromptAgent("bank", ScriptedModel([PAY]), tools=[transfer], store=store).run("pay")
    assert out.snapshot_id is not None
    stored = await store.load(out.snapshot_id)
    assert stored is not None and stored.metadata is not None
    (paused_turn,) = [s for s in spans.get_finished_spans() if s.name == "invoke_agent bank"]
    assert paused_turn.context is not None and paused_turn.context.trace_id == 0xA1
    ids = f"00-{paused_turn.context.trace_id:032x}-{paused_turn.context.span_id:016x}-01"
    assert stored.metadata[md.TRACE_CONTEXT] == {"traceparent": ids, "tracestate": "bank=eu"}
    spans.clear()
    done = await PromptAgent("bank", ScriptedModel(["paid"]), tools=[transfer], store=store).run(
        resume=APPROVE, snapshot_id=out.snapshot_id
    )
    assert done.finish_reason == "stop", done.error
    (resumed,) = [s for s in spans.get_finished_spans() if s.name == "invoke_agent bank"]
    (link,) = resumed.links
    assert (link.context.trace_id, link.context.span_id) == (0xA1, paused_turn.context.span_id)
    assert link.context.is_remote and dict(link.context.trace_state) == {"bank": "eu"}


@pytest.mark.parametrize(
    ("trace_id", "span_id", "flags", "state"),
    [(0x1, 0xABC, 0, None), (0xA1, 0x1, 1, [("bank", "eu")]), (2**128 - 1, 2**64 - 1, 3, None), (0x5, 0x6, 0xFF, None)],
)
def test_a_stored_trace_context_is_what_the_w3c_propagator_writes(
    trace_id: int, span_id: int, flags: int, state: list[tuple[str, str]] | None
) -> None:
    """The carrier a turn stores is formatted without the propagator, and reads the same (leading zeros, every flag)."""
    context = SpanContext(
        trace_id, span_id, is_remote=False, trace_flags=TraceFlags(flags), trace_state=TraceState(state)
    )
    written: dict[str, str] = {}
    TraceContextTextMapPropagator().inject(written, set_span_in_context(NonRecordingSpan(context)))
    assert span_carrier(NonRecordingSpan(context)) == written
