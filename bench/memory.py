"""Memory of a server under streaming turns and clients that drop mid-stream: does it level off?

Serves an :class:`~interlock.http._server.AgentServer` on a real uvicorn server in this
process and drives it with httpx: each round is ``--streams`` streaming turns read to the
end plus ``--drops`` streaming turns whose client disconnects after the first chunk. After
each round (garbage collected) it prints the process's RSS, the Python heap traced by
tracemalloc, the asyncio tasks alive and the server's followers of abandoned turns. The
client runs in the same process, so the figures include it; what matters is the growth
per round once the first rounds have warmed the caches.

    python bench/memory.py                       # 10 rounds of 200 + 200, client-managed agent
    python bench/memory.py --store sqlite        # a server-managed agent on a SQLite file
    python bench/memory.py --store sqlite --cache-bytes 65536   # its history cache held small
    python bench/memory.py --top 10              # and the 10 biggest growths by line, first to last round

A benchmark that prints figures, not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import resource
import sys
import tempfile
import tracemalloc
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from interlock import Message, PromptAgent
from interlock.http._server import AgentServer
from interlock.models import ChunkCallback, ModelChunk, ModelRequest, ModelResponse
from interlock.parts import TextPart
from interlock.stores.sqlite import SQLiteStore

PIECES = 8
PAUSE = 0.005  # seconds between chunks: a dropping client leaves mid-stream


class SlowEcho:
    """Streams ``PIECES`` chunks, ``PAUSE`` apart, then the echo."""

    name = "bench/slow-echo"

    async def generate(self, request: ModelRequest, *, on_chunk: ChunkCallback | None = None) -> ModelResponse:
        last = next((m.text for m in reversed(request.messages) if m.role == "user"), "")
        for i in range(PIECES):
            await asyncio.sleep(PAUSE)
            if on_chunk is not None:
                result = on_chunk(ModelChunk(role="model", index=0, content=[TextPart(text=f"{i} ")]))
                if asyncio.iscoroutine(result):
                    await result
        return ModelResponse(message=Message.model(f"Echo: {last}"), finish_reason="stop")


def rss_mib() -> float:
    """The resident set size now (Linux: /proc/self/statm), else the peak."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / 2**20
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def stream(http: httpx.AsyncClient, i: int, *, drop: bool) -> None:
    body = {"data": {"message": {"role": "user", "content": [{"text": f"hello {i}"}]}}, "init": {}}
    async with http.stream("POST", "/echo", json=body, headers={"Accept": "text/event-stream"}) as response:
        async for _ in response.aiter_raw():
            if drop:
                return  # leaving the block closes the connection mid-stream


async def gather_limited(n: int, limit: int, fn: Any) -> None:
    gate = asyncio.Semaphore(limit)

    async def one(i: int) -> None:
        async with gate:
            await fn(i)

    await asyncio.gather(*(one(i) for i in range(n)))


async def run(args: argparse.Namespace) -> None:
    workdir = tempfile.mkdtemp(prefix="interlock-memory-")
    store = SQLiteStore(Path(workdir) / "sessions.db", cache_bytes=args.cache_bytes) if args.store == "sqlite" else None
    app = AgentServer([PromptAgent("echo", SlowEcho(), store=store)])
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="error", lifespan="off", ws="none")
    server = uvicorn.Server(config)
    serving = asyncio.ensure_future(server.serve())
    while not server.started:
        await asyncio.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    limits = httpx.Limits(max_connections=args.concurrency, max_keepalive_connections=args.concurrency)
    print(f"interlock memory: {args.rounds} rounds of {args.streams} streams + {args.drops} disconnects, {args.store}")
    print(f"{'round':>5} {'RSS MiB':>8} {'traced MiB':>10} {'Δ traced KiB':>12} {'tasks':>5} {'followers':>9}")
    first: tracemalloc.Snapshot | None = None
    last_traced = 0.0
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", limits=limits, timeout=30) as http:
        for r in range(1, args.rounds + 1):
            await gather_limited(args.streams, args.concurrency, lambda i: stream(http, i, drop=False))
            await gather_limited(args.drops, args.concurrency, lambda i: stream(http, i, drop=True))
            while app._followers:  # abandoned turns wind down
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.05)
            gc.collect()
            traced = tracemalloc.get_traced_memory()[0] / 2**20
            delta = (traced - last_traced) * 1024 if r > 1 else 0.0
            last_traced = traced
            tasks = len(asyncio.all_tasks())
            followers = len(app._followers)
            print(f"{r:>5} {rss_mib():>8.1f} {traced:>10.2f} {delta:>12.1f} {tasks:>5} {followers:>9}", flush=True)
            if r == 1 and args.top:
                first = tracemalloc.take_snapshot()
    if first is not None:
        growth = tracemalloc.take_snapshot().compare_to(first, "lineno")
        print(f"\nbiggest growths by line, round 1 → {args.rounds}:")
        for stat in growth[: args.top]:
            print(f"  {stat}")
    server.should_exit = True
    await serving


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--streams", type=int, default=200)
    parser.add_argument("--drops", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=20)
    parser.add_argument("--store", choices=["none", "sqlite"], default="none")
    parser.add_argument("--cache-bytes", type=int, default=64 << 20, help="the SQLite store's history cache bound")
    parser.add_argument("--top", type=int, default=0, help="print the N biggest growths by line")
    args = parser.parse_args()
    tracemalloc.start(8 if args.top else 1)
    asyncio.run(run(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
