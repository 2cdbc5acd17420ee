"""Server CPU per interrupt cycle over HTTP, memory store (target <= 3.5 ms).

Run with ``make bench`` (or ``python bench/http_cycle.py [--cycles N]``). It starts
``interlock serve served_bank:agent`` in a process of its own (``BENCH_STORE=memory``) and
drives interrupt cycles one after another from this process: the turn that pauses, then
the resume that approves it (by snapshot id), each a POST answered with JSON, or streamed
as server-sent events (``--stream``, what the Genkit clients ask for). The server's CPU is
read from ``/proc/<pid>/stat`` (user + system) around the cycles, so the client's own CPU
is not counted; the median of 5 rounds is printed.

Both at serve's default log level (info: a line per turn). Two servers are measured: before,
uvicorn's pure-Python stack with its access log (``--http h11 --loop asyncio --access-log``,
what ``interlock serve`` ran before the fast path), and after, what ``interlock serve`` picks
by default (httptools and uvloop when installed, as the ``server`` extra does; no access log).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import pathlib
import socket
import statistics
import subprocess
import sys

import httpx
from served_bank import PAUSE_BODY, resume_body

HERE = pathlib.Path(__file__).resolve().parent
TICK = os.sysconf("SC_CLK_TCK")
TARGET_MS = 3.5


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def process_cpu(pid: int) -> float:
    """Seconds of CPU (user + system) a process has used."""
    fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


class Served:
    """``interlock serve served_bank:agent`` in a process of its own, on a free port."""

    def __init__(
        self, *flags: str, store: str = "memory", env: dict[str, str] | None = None, log_level: str = "info"
    ) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        command = [sys.executable, "-m", "interlock", "serve", "served_bank:agent", "--port", str(self.port)]
        environ = {**os.environ, "BENCH_STORE": store, **(env or {})}
        self.proc = subprocess.Popen(
            [*command, "--log-level", log_level, *flags],
            cwd=HERE,
            env=environ,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    async def ready(self, http: httpx.AsyncClient) -> None:
        async with asyncio.timeout(60):
            while True:
                if self.proc.poll() is not None:
                    raise SystemExit(f"the server exited with {self.proc.returncode}")
                try:
                    await http.get(f"{self.url}/healthz")
                    return
                except httpx.TransportError:
                    await asyncio.sleep(0.05)

    def cpu(self) -> float:
        return process_cpu(self.proc.pid)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def snapshot_of(body: bytes, stream: bool) -> tuple[str, str]:
    """(snapshot id, finish reason) of a turn's JSON body or of its stream's last frame."""
    import json

    text = body.rsplit(b"data: ", 1)[-1] if stream else body
    result = json.loads(text)["result"]
    return result["snapshotId"], result["finishReason"]


async def cycle(http: httpx.AsyncClient, url: str, stream: bool) -> None:
    headers = {"content-type": "application/json", "accept": "text/event-stream" if stream else "application/json"}
    paused = await http.post(f"{url}/bank", content=PAUSE_BODY, headers=headers)
    snapshot_id, finish = snapshot_of(paused.content, stream)
    assert finish == "interrupted", paused.content
    done = await http.post(f"{url}/bank", content=resume_body(snapshot_id), headers=headers)
    assert snapshot_of(done.content, stream)[1] == "stop", done.content


async def server_ms(served: Served, cycles: int, stream: bool) -> float:
    """Median over 5 rounds of the server's CPU per cycle, in ms."""
    async with httpx.AsyncClient(timeout=60) as http:
        await served.ready(http)
        for _ in range(50):
            await cycle(http, served.url, stream)
        rounds: list[float] = []
        for _ in range(5):
            before = served.cpu()
            for _ in range(cycles):
                await cycle(http, served.url, stream)
            rounds.append((served.cpu() - before) * 1000 / cycles)
    return statistics.median(rounds)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cycles", type=int, default=200, help="cycles per round (5 rounds)")
    parser.add_argument("--check", action="store_true", help="exit 1 when the default server misses the target")
    args = parser.parse_args()
    print(f"server CPU per interrupt cycle over HTTP, memory store; load average {os.getloadavg()[0]:.2f}:")
    figures: dict[str, float] = {}
    configs = (
        ("before: h11, asyncio, access log", ("--http", "h11", "--loop", "asyncio", "--access-log")),
        ("after: default (auto)", ()),
    )
    for label, flags in configs:
        for stream in (False, True):
            served = Served(*flags)
            try:
                ms = await server_ms(served, args.cycles, stream)
            finally:
                served.stop()
            name = f"{label}, {'SSE stream' if stream else 'JSON'}"
            figures[name] = ms
            ok = ms <= TARGET_MS
            print(f"  {name:<46} {ms:6.2f} ms/cycle   target <= {TARGET_MS} ms  {'OK' if ok else 'MISSED'}")
    if args.check and max(v for k, v in figures.items() if k.startswith("after")) > TARGET_MS:
        sys.exit(1)


if __name__ == "__main__":
    asyncio.run(main())
