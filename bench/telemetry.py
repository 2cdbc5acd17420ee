"""The CPU cost of tracing an interrupt cycle (pause, then a fresh agent object resumes), in memory.

Three figures, median of several runs: no tracer provider (interlock makes no span at
all), the OpenTelemetry SDK recording every span into a batch processor whose exporter
drops them, and the same with content capture on. Target: with the SDK recording, a cycle
costs at most 2x the cycle without a provider. Exits 1 when it misses.

    python bench/telemetry.py
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from collections.abc import Sequence

from agents import one_cycle
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from interlock import InMemoryStore
from interlock.telemetry import configure

RUNS = 5
CYCLES = 400
TARGET_RECORDING = 2.0


class Dropping(SpanExporter):
    """Receives every span and keeps none (the cost measured is interlock's and the SDK's, not a network's)."""

    def __init__(self) -> None:
        self.count = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.count += len(spans)
        return SpanExportResult.SUCCESS


async def cycle_ms(n: int) -> float:
    store = InMemoryStore()
    for _ in range(20):
        await one_cycle(store)
    start = time.process_time()
    for _ in range(n):
        await one_cycle(store)
    return (time.process_time() - start) * 1000 / n


def median_ms(runs: int, n: int) -> float:
    return statistics.median(asyncio.run(cycle_ms(n)) for _ in range(runs))


def main() -> int:
    print(f"interlock telemetry: CPU ms per interrupt cycle in memory, median of {RUNS} runs x {CYCLES} cycles")
    configure()
    off = median_ms(RUNS, CYCLES)
    print(f"  no tracer provider (no spans)  {off:8.3f} ms")
    exporter = Dropping()
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(exporter))
    configure(tracer_provider=provider)
    recording = median_ms(RUNS, CYCLES)
    configure(tracer_provider=provider, capture_content=True)
    content = median_ms(RUNS, CYCLES)
    configure()
    provider.shutdown()
    ratio = recording / off
    ok = ratio <= TARGET_RECORDING
    verdict = "ok" if ok else "MISSED"
    print(f"  SDK recording every span       {recording:8.3f} ms  ({ratio:.2f}x; <= {TARGET_RECORDING}x: {verdict})")
    print(f"  SDK recording, content on      {content:8.3f} ms  ({content / off:.2f}x)")
    print(f"  spans exported: {exporter.count} ({exporter.count / (2 * RUNS * (CYCLES + 20)):.1f} per cycle)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
