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

Also shown, the SDK floor (:mod:`otel_floor`): the spans, events and link one cycle records
(the same names, kinds, nesting, attribute and event keys; checked against a recorded cycle
before each run, which stops with exit status 2 when they differ), made on a provider of
their own (a ``BatchSpanProcessor``, a dropping exporter) with no interlock code:

- ``floor``: by a plain loop, the SDK alone (hot in the caches: an underestimate);
- ``beside``: each cycle without a provider, then the floor's spans;
- ``in place``: each cycle without a provider, its hooks replaced by stand-ins that make the
  floor's spans where interlock makes them (constant attributes, no stored trace context):
  the least a cycle can cost with every span recorded. ``recording`` minus this is
  interlock's own share.

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
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from bank import one_cycle
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from otel_floor import floor_cycle, hooks_patched, in_place, same_spans

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


async def cycle_ms(store: InMemoryStore, n: int, beside: Callable[[], None] | None = None) -> float:
    """CPU ms per cycle (and ``beside`` after each): the least of ``BLOCKS`` blocks of ``n``, after a warm-up."""
    for _ in range(WARMUP):
        await one_cycle(store)
        if beside is not None:
            beside()
    best = float("inf")
    for _ in range(BLOCKS):
        gc.collect()
        start = time.process_time()
        for _ in range(n):
            await one_cycle(store)
            if beside is not None:
                beside()
        best = min(best, (time.process_time() - start) * 1000 / n)
    return best


def _stand_ins(setup: str, providers: dict[str, TracerProvider]) -> dict[Any, dict[str, Callable[..., Any]]]:
    if setup == "removed":
        return _REMOVED
    if setup == "in place":
        return in_place(providers["in place"].get_tracer("interlock"))
    return {}


def measure(setup: str, providers: dict[str, TracerProvider], n: int) -> float:
    if setup == "floor":
        return floor_ms(providers["floor"], n)
    beside = None
    if setup == "beside":  # no provider for interlock; the floor's spans made after each cycle
        tracer = providers["beside"].get_tracer("interlock")
        beside = lambda: floor_cycle(tracer)  # noqa: E731
    provider = None if setup in ("beside", "in place") else providers.get(setup)
    configure(tracer_provider=provider, capture_content=setup == "content")
    try:
        with hooks_patched(_stand_ins(setup, providers)):
            return asyncio.run(cycle_ms(InMemoryStore(), n, beside))
    finally:
        configure()


def floor_ms(provider: TracerProvider, n: int) -> float:
    """CPU ms per cycle of the SDK alone: :func:`floor_cycle` in a plain loop."""
    tracer = provider.get_tracer("interlock")
    for _ in range(WARMUP):
        floor_cycle(tracer)
    best = float("inf")
    for _ in range(BLOCKS):
        gc.collect()
        start = time.process_time()
        for _ in range(n):
            floor_cycle(tracer)
        best = min(best, (time.process_time() - start) * 1000 / n)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--cycles", type=int, default=300, help="cycles per block (3 blocks per setup and round)")
    args = parser.parse_args()
    if not same_spans():
        print("bench/telemetry.py: the SDK floor no longer makes the spans a cycle records; update bench/otel_floor.py")
        return 2
    exporter = Dropping()
    providers = {name: TracerProvider() for name in ("recording", "simple", "floor", "beside", "in place")}
    providers["recording"].add_span_processor(BatchSpanProcessor(exporter))
    providers["simple"].add_span_processor(SimpleSpanProcessor(Dropping()))
    providers["floor"].add_span_processor(BatchSpanProcessor(Dropping()))
    providers["beside"].add_span_processor(BatchSpanProcessor(Dropping()))
    providers["in place"].add_span_processor(BatchSpanProcessor(Dropping()))
    providers["content"] = providers["recording"]
    setups = ["removed", "off", "recording", "simple", "content", "floor", "beside", "in place"]
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
    rows = (
        ("floor", "SDK floor: the same spans, alone", ""),
        ("beside", "each cycle, then the same spans alone", ""),
        ("in place", "the same spans, made in place", ": recording costs at least this"),
    )
    for setup, label, note in rows:
        print(f"  {label:<37}{statistics.median(ms[setup]):8.3f} ms  ({ratio(setup, 'off'):.2f}x off{note})")
    own = statistics.median((r - p) / o for o, r, p in zip(ms["off"], ms["recording"], ms["in place"], strict=True))
    print(f"  interlock's own share of recording   {own:8.2f}x off (recording minus the row above)")
    cycles = 2 * args.rounds * (WARMUP + BLOCKS * args.cycles)
    print(f"  spans exported: {exporter.count} ({exporter.count / cycles:.1f} per cycle)")
    return 0 if ok_off and ok_recording else 1


if __name__ == "__main__":
    sys.exit(main())
