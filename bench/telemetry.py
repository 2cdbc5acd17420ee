"""The CPU cost of telemetry on an interrupt cycle (pause, then a fresh agent object resumes), in memory.

Setups measured round by round in one process (A B C ..., then ... C B A, ...) so a drift in
the machine's load falls on all of them alike:

- ``removed``: the runtime's telemetry hooks patched out of the code path (each hook the
  engine calls, :mod:`interlock.telemetry._hooks` and :mod:`interlock.telemetry._calls`,
  replaced by a do-nothing stand-in): the cycle as if interlock had no telemetry;
- ``off``: no tracer provider, as shipped (interlock makes no span, no attribute dict);
- ``recording``: the OpenTelemetry SDK recording every span: a ``TracerProvider`` as
  configured by default (parent-based always-on sampling, default limits) with a
  ``BatchSpanProcessor``, the processor production uses (``interlock serve`` installs it),
  whose exporter drops the spans (the cost measured is interlock's and the SDK's, not a
  network's). The target applies to this one;
- ``simple``: the same with a ``SimpleSpanProcessor`` (each span handed to the exporter as
  it ends): shown to separate the batch queue's share (spans held until a batch of 512 is
  full, which the garbage collector keeps walking) from recording's;
- ``content``: ``recording`` with content capture on.

Also shown: the SDK floor, the same spans, events and link a cycle records (names and
attributes as interlock sets them) made by a plain loop on the ``recording`` provider with
no interlock code around them: the least a cycle can cost with every span recorded.

Each figure is CPU ms per cycle (``time.process_time``, the exporter's thread included),
the least of a round's blocks; the ratios are the medians of the per-round ratios.
Targets: ``off`` at most 1.02x ``removed``, ``recording`` at most 1.5x ``off``. Exits 1 when
one misses.

    python bench/telemetry.py [--rounds 7] [--cycles 300]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import os
import statistics
import sys
import time
from collections.abc import Callable, Generator, Iterator, Sequence
from typing import Any

from bank import one_cycle
from opentelemetry import context as otel_context
from opentelemetry import trace as otel_trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)

from interlock import InMemoryStore
from interlock.telemetry import _calls, _hooks, configure

TARGET_OFF = 1.02
TARGET_RECORDING = 1.5
WARMUP = 20
BLOCKS = 3


class Dropping(SpanExporter):
    """Receives every span and keeps none (the cost measured is interlock's and the SDK's, not a network's)."""

    def __init__(self) -> None:
        self.count = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.count += len(spans)
        return SpanExportResult.SUCCESS


class _NoTrace:
    """What the patched-out ``turn`` hook hands the invocation: no span, no snapshot metadata."""

    span = None

    def metadata(self) -> dict[str, Any]:
        return {}

    def finish(self, **_: object) -> None:
        return None


@contextlib.contextmanager
def _no_turn(*_: object, **__: object) -> Iterator[_NoTrace]:
    yield _NoTrace()


async def _plain_call_model(model: Any, request: Any, *, on_chunk: Any) -> Any:
    return await model.generate(request, on_chunk=on_chunk)


def _nothing(*_: object, **__: object) -> None:
    return None


_REMOVED: dict[Any, dict[str, Callable[..., Any]]] = {
    _hooks: {
        "turn": _no_turn,
        "resuming": _nothing,
        "claim_taken": _nothing,
        "claim_lost": _nothing,
        "journal": _nothing,
        "detached_enqueued": _nothing,
        "detached_finished": _no_turn,
        "store_error": _nothing,
    },
    _calls: {
        "call_model": _plain_call_model,
        "tool_call": lambda *_, **__: contextlib.nullcontext(_calls.ToolTrace(span=None)),
        "model_retry": _nothing,
    },
}


@contextlib.contextmanager
def hooks_removed() -> Generator[None, None, None]:
    """The engine's telemetry hooks replaced by do-nothing stand-ins (the modules are patched, then restored)."""
    saved = [(module, name, getattr(module, name)) for module, names in _REMOVED.items() for name in names]
    for module, names in _REMOVED.items():
        for name, stand_in in names.items():
            setattr(module, name, stand_in)
    try:
        yield
    finally:
        for module, name, original in saved:
            setattr(module, name, original)


async def cycle_ms(store: InMemoryStore, n: int) -> float:
    """CPU ms per cycle: the least of ``BLOCKS`` blocks of ``n`` cycles, after a warm-up."""
    for _ in range(WARMUP):
        await one_cycle(store)
    best = float("inf")
    for _ in range(BLOCKS):
        gc.collect()
        start = time.process_time()
        for _ in range(n):
            await one_cycle(store)
        best = min(best, (time.process_time() - start) * 1000 / n)
    return best


def measure(setup: str, providers: dict[str, TracerProvider], n: int) -> float:
    if setup == "floor":
        return floor_ms(providers["floor"], n)
    configure(tracer_provider=providers.get(setup), capture_content=setup == "content")
    try:
        with hooks_removed() if setup == "removed" else contextlib.nullcontext():
            return asyncio.run(cycle_ms(InMemoryStore(), n))
    finally:
        configure()


def _floor_turn(tracer: otel_trace.Tracer, *, pausing: bool) -> None:
    """One turn's spans as interlock records them: ``invoke_agent`` with ``chat`` and ``execute_tool`` inside."""
    links = () if pausing else [otel_trace.Link(_PAUSED, {"interlock.link": "paused_turn"})]
    turn = tracer.start_span("invoke_agent bank", attributes=_TURN, links=links)
    outer = otel_context.attach(otel_trace.set_span_in_context(turn))
    chat = tracer.start_span("chat scripted", kind=otel_trace.SpanKind.CLIENT, attributes=_CHAT)
    token = otel_context.attach(otel_trace.set_span_in_context(chat))
    chat.set_attributes({"gen_ai.response.finish_reasons": ["stop"]})
    otel_context.detach(token)
    chat.end()
    tool = tracer.start_span("execute_tool transfer", attributes=_TOOL | {"interlock.tool.resumed": not pausing})
    token = otel_context.attach(otel_trace.set_span_in_context(tool))
    if pausing:
        tool.set_attribute("interlock.tool.interrupted", True)
    otel_context.detach(token)
    tool.end()
    for _ in range(1 if pausing else 2):  # the interrupt; the resume and the claim
        turn.add_event("interlock.event", _EVENT)
    turn.set_attribute("interlock.finish_reason", "interrupted" if pausing else "stop")
    otel_context.detach(outer)
    turn.end()


_PAUSED = otel_trace.SpanContext(0x1234, 0x5678, is_remote=True, trace_flags=otel_trace.TraceFlags(1))
_TURN = {
    "gen_ai.operation.name": "invoke_agent",
    "gen_ai.agent.name": "bank",
    "interlock.detached": False,
    "gen_ai.conversation.id": "0" * 32,
    "interlock.snapshot.id": "0" * 32,
}
_CHAT = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "scripted", "gen_ai.request.model": "scripted"}
_TOOL = {
    "gen_ai.operation.name": "execute_tool",
    "gen_ai.tool.name": "transfer",
    "gen_ai.tool.type": "function",
    "interlock.tool.resumed": False,
    "gen_ai.tool.call.id": "t1",
    "gen_ai.tool.description": "Move money once approved.",
}
_EVENT = {"gen_ai.tool.name": "transfer", "gen_ai.tool.call.id": "t1", "interlock.snapshot.id": "0" * 32}


def floor_ms(provider: TracerProvider, n: int) -> float:
    """CPU ms per cycle of the SDK alone: the pausing turn (one event) and the resuming one (two, and a link)."""
    tracer = provider.get_tracer("interlock")

    def cycle() -> None:
        _floor_turn(tracer, pausing=True)
        _floor_turn(tracer, pausing=False)

    for _ in range(WARMUP):
        cycle()
    best = float("inf")
    for _ in range(BLOCKS):
        gc.collect()
        start = time.process_time()
        for _ in range(n):
            cycle()
        best = min(best, (time.process_time() - start) * 1000 / n)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--cycles", type=int, default=300, help="cycles per block (3 blocks per setup and round)")
    args = parser.parse_args()
    exporter = Dropping()
    providers = {"recording": TracerProvider(), "simple": TracerProvider(), "floor": TracerProvider()}
    providers["recording"].add_span_processor(BatchSpanProcessor(exporter))
    providers["simple"].add_span_processor(SimpleSpanProcessor(Dropping()))
    providers["floor"].add_span_processor(BatchSpanProcessor(Dropping()))
    providers["content"] = providers["recording"]
    setups = ["removed", "off", "recording", "simple", "content", "floor"]
    ms: dict[str, list[float]] = {s: [] for s in setups}
    for round_ in range(args.rounds):
        for setup in setups if round_ % 2 == 0 else setups[::-1]:
            ms[setup].append(measure(setup, providers, args.cycles))
    for provider in providers.values():
        provider.shutdown()

    def ratio(b: str, a: str) -> float:
        return statistics.median(y / x for x, y in zip(ms[a], ms[b], strict=True))

    off, recording = ratio("off", "removed"), ratio("recording", "off")
    ok_off, ok_recording = off <= TARGET_OFF, recording <= TARGET_RECORDING
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"interlock telemetry: CPU ms per interrupt cycle in memory, {args.rounds} interleaved rounds (load {load})")
    print(f"  hooks removed from the code path     {statistics.median(ms['removed']):8.3f} ms")
    verdict = "ok" if ok_off else "MISSED"
    print(
        f"  no tracer provider (no spans)        {statistics.median(ms['off']):8.3f} ms"
        f"  ({off:.3f}x removed; <= {TARGET_OFF}x: {verdict})"
    )
    verdict = "ok" if ok_recording else "MISSED"
    print(
        f"  SDK recording every span             {statistics.median(ms['recording']):8.3f} ms"
        f"  ({recording:.2f}x off; <= {TARGET_RECORDING}x: {verdict})"
    )
    for setup, label in (("simple", "SDK recording, simple processor"), ("content", "SDK recording, content on")):
        print(f"  {label:<37}{statistics.median(ms[setup]):8.3f} ms  ({ratio(setup, 'off'):.2f}x off)")
    floor = ratio("floor", "off")
    print(
        f"  SDK floor: the same spans, alone     {statistics.median(ms['floor']):8.3f} ms"
        f"  ({floor:.2f}x off: recording costs at least {1 + floor:.2f}x off)"
    )
    cycles = 2 * args.rounds * (WARMUP + BLOCKS * args.cycles)
    print(f"  spans exported: {exporter.count} ({exporter.count / cycles:.1f} per cycle)")
    return 0 if ok_off and ok_recording else 1


if __name__ == "__main__":
    sys.exit(main())
