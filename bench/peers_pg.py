"""interlock's PostgreSQL store against LangGraph's ``AsyncPostgresSaver``: one interrupt cycle, one cluster.

Run with ``make bench`` (or ``python bench/peers_pg.py [--cycles N] [--rounds R]``). It installs
LangGraph with ``langgraph-checkpoint-postgres`` (and psycopg) into its own virtual environment,
``.bench-venvs/langgraph`` (pip, from the registry; the project's environment is not touched),
starts one cluster with PostgreSQL's default durability (every commit flushed;
``scripts/postgres.sh``), and one worker process per side, each on its own database of that
cluster, both on the same event loop (``--loop``: uvloop, where both servers run, ``interlock serve``
and LangGraph's uvicorn-served API alike, or asyncio):

* **interlock**: ``bench/bank.py``'s cycle: a :class:`~interlock.testing.ScriptedModel` asks for
  ``transfer``, which pauses for approval; a fresh agent object over the same
  :class:`~interlock.stores.postgres.PostgresStore` resumes it with an approval, the tool runs,
  the model answers.
* **LangGraph**: the same shape as a graph compiled once with the checkpointer
  (``AsyncPostgresSaver.from_conn_string``, as LangGraph documents it): a scripted model node
  (no LLM) asks for the ``transfer`` tool, a ``ToolNode`` runs it, and the tool calls
  ``interrupt()``; ``Command(resume=...)`` on the same thread resumes it, the tool returns and
  the model node answers.

The workers warm up, then run ``--cycles`` cycles each, interleaved A B A B (``--rounds``
times, the order swapped every other round). Printed per side, the median over rounds: client
CPU per cycle (the worker process's user + system time), server CPU per cycle (the CPU time,
from ``/proc/<pid>/stat``, of the PostgreSQL backends serving that worker, found by their
``application_name``; the WAL writer and checkpointer are left out, and shared), and wall
time per cycle; then interlock's figures over LangGraph's. The issue's targets: client CPU
≤ 0.17×, wall ≤ 0.35×.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pathlib
import statistics
import subprocess
import sys
import time
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parents[1]
VENV = ROOT / ".bench-venvs" / "langgraph"
PACKAGES = ["langgraph", "langgraph-checkpoint-postgres", "psycopg[binary]", "psycopg-pool", "uvloop"]
TICK = os.sysconf("SC_CLK_TCK")
TARGETS = {"client CPU": 0.17, "wall": 0.35}


# the workers (each runs in its own process; the LangGraph one in the bench's own environment) -------------------


async def _interlock_worker(dsn: str) -> None:
    sys.path.insert(0, str(ROOT / "bench"))
    from bank import one_cycle

    from interlock.stores.postgres import PostgresStore

    async with PostgresStore(dsn, min_size=2, max_size=2) as store:
        await _serve(lambda: one_cycle(store))


async def _langgraph_worker(dsn: str) -> None:
    import importlib
    import uuid

    def of(module: str) -> Any:  # LangGraph lives in the bench's own environment: untyped here
        return importlib.import_module(module)

    messages, graphs, types = of("langchain_core.messages"), of("langgraph.graph"), of("langgraph.types")
    AIMessage, HumanMessage, ToolMessage = messages.AIMessage, messages.HumanMessage, messages.ToolMessage
    tool = of("langchain_core.tools").tool
    AsyncPostgresSaver = of("langgraph.checkpoint.postgres.aio").AsyncPostgresSaver
    START, StateGraph = graphs.START, graphs.StateGraph
    prebuilt = of("langgraph.prebuilt")
    ToolNode, tools_condition = prebuilt.ToolNode, prebuilt.tools_condition
    Command, interrupt = types.Command, types.interrupt

    @tool
    def transfer(to: str, amount: float) -> str:
        """Move money once approved."""
        approval = interrupt({"to": to, "amount": amount})
        assert approval["approved"]
        return "sent"

    def model(state: Any) -> dict[str, Any]:  # a scripted model: no LLM, no latency
        if isinstance(state["messages"][-1], ToolMessage):
            return {"messages": [AIMessage("paid")]}
        call = {"name": "transfer", "args": {"to": "bob", "amount": 5}, "id": "t1"}
        return {"messages": [AIMessage("", tool_calls=[call])]}

    builder = StateGraph(graphs.MessagesState)
    builder.add_node("model", model)
    builder.add_node("tools", ToolNode([transfer]))
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", tools_condition)
    builder.add_edge("tools", "model")
    async with AsyncPostgresSaver.from_conn_string(dsn) as saver:
        await saver.setup()
        graph = builder.compile(checkpointer=saver)

        async def cycle() -> None:
            config: Any = {"configurable": {"thread_id": str(uuid.uuid4())}}
            paused = await graph.ainvoke({"messages": [HumanMessage("pay bob")]}, config)
            assert "__interrupt__" in paused, paused
            done = await graph.ainvoke(Command(resume={"approved": True}), config)
            assert done["messages"][-1].content == "paid", done

        await _serve(cycle)


async def _serve(cycle: Any) -> None:
    """Warm up, then answer each ``N`` read from stdin with the CPU and wall time of ``N`` cycles (JSON)."""
    for _ in range(30):
        await cycle()
    print("ready", flush=True)
    loop = asyncio.get_running_loop()
    while line := (await loop.run_in_executor(None, sys.stdin.readline)).strip():
        n = int(line)
        cpu, wall = time.process_time(), time.perf_counter()
        for _ in range(n):
            await cycle()
        print(json.dumps({"cpu": time.process_time() - cpu, "wall": time.perf_counter() - wall}), flush=True)


# the parent ----------------------------------------------------------------------------------------------------


def venv_python() -> str:
    """The bench environment's python, with LangGraph installed on first use."""
    python = VENV / "bin" / "python"
    if not python.exists():
        print(f"==> creating {VENV.relative_to(ROOT)} and installing {' '.join(PACKAGES)}", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    probe = "import langgraph.checkpoint.postgres.aio, langgraph.prebuilt, uvloop"
    if subprocess.run([str(python), "-c", probe], capture_output=True).returncode != 0:
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", *PACKAGES], check=True)
    return str(python)


class Side:
    """One worker process, and the PostgreSQL backends that serve it."""

    def __init__(self, name: str, python: str, dsn: str, admin: Any, env: dict[str, str], loop: str) -> None:
        self.name = name
        self.app = f"bench-{name}"
        self.admin = admin
        self.dsn = f"{dsn}?application_name={self.app}"
        args = [python, __file__, "--worker", name, "--dsn", self.dsn, "--loop", loop]
        self.proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        assert self.proc.stdout is not None
        if self.proc.stdout.readline().strip() != "ready":
            raise SystemExit(f"the {name} worker did not start")
        self.rounds: list[tuple[float, float, float]] = []

    def backends(self) -> list[int]:
        rows = self.admin.execute("SELECT pid FROM pg_stat_activity WHERE application_name = %s", (self.app,))
        return [int(r[0]) for r in rows.fetchall()]

    @staticmethod
    def cpu_of(pids: list[int]) -> dict[int, float]:
        out: dict[int, float] = {}
        for pid in pids:
            try:
                fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            out[pid] = (int(fields[11]) + int(fields[12])) / TICK
        return out

    def run(self, n: int) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        before = self.cpu_of(self.backends())
        self.proc.stdin.write(f"{n}\n")
        self.proc.stdin.flush()
        done = json.loads(self.proc.stdout.readline())
        after = self.cpu_of(self.backends())
        server = sum(cpu - before.get(pid, 0.0) for pid, cpu in after.items())
        self.rounds.append((done["cpu"] * 1000 / n, server * 1000 / n, done["wall"] * 1000 / n))

    def median(self) -> tuple[float, float, float]:
        return tuple(statistics.median(r[i] for r in self.rounds) for i in range(3))  # type: ignore[return-value]

    def stop(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=60)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=200, help="cycles per side per round")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--loop", choices=["uvloop", "asyncio"], default="uvloop", help="both workers' event loop")
    parser.add_argument("--worker", choices=["interlock", "langgraph"], help=argparse.SUPPRESS)
    parser.add_argument("--dsn", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker is not None:
        worker = _interlock_worker if args.worker == "interlock" else _langgraph_worker
        if args.loop == "uvloop":
            import uvloop

            uvloop.run(worker(args.dsn))
        else:
            asyncio.run(worker(args.dsn))
        return
    _compare(args.cycles, args.rounds, args.loop)


def _compare(cycles: int, rounds: int, loop: str) -> None:
    import psycopg
    from machine import describe
    from postgres import Cluster

    lang_python = venv_python()
    print(describe())
    cluster = Cluster(durable=True)
    sides: list[Side] = []
    try:
        with psycopg.connect(cluster.dsn, autocommit=True) as admin:
            base = cluster.dsn.rsplit("/", 1)[0]
            for name in ("interlock", "langgraph"):
                admin.execute(f"CREATE DATABASE bench_{name}")
            env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
            sides.append(Side("interlock", sys.executable, f"{base}/bench_interlock", admin, env, loop))
            sides.append(Side("langgraph", lang_python, f"{base}/bench_langgraph", admin, dict(os.environ), loop))
            for i in range(rounds):
                for side in sides if i % 2 == 0 else reversed(sides):
                    side.run(cycles)
            _report(sides, cycles, rounds, loop)
    finally:
        for side in sides:
            side.stop()
        cluster.stop()


def _report(sides: list[Side], cycles: int, rounds: int, loop: str) -> None:
    print(
        f"interrupt cycle on PostgreSQL (fsync on), on {loop}, {cycles} cycles x {rounds} rounds per side, "
        "interleaved; per cycle, median of the rounds:"
    )
    figures = {side.name: side.median() for side in sides}
    for name, (client, server, wall) in figures.items():
        print(f"  {name:<10} client CPU {client:6.2f} ms  server CPU (backends) {server:6.2f} ms  wall {wall:6.2f} ms")
    ours, theirs = figures["interlock"], figures["langgraph"]
    for label, i in (("client CPU", 0), ("server CPU", 1), ("wall", 2)):
        ratio = ours[i] / theirs[i] if theirs[i] else float("nan")
        target = TARGETS.get(label)
        verdict = "" if target is None else f"  target <= {target:.2f}x {'OK' if ratio <= target else 'MISSED'}"
        spread = [a[i] / b[i] for a, b in zip(sides[0].rounds, sides[1].rounds, strict=True) if b[i]]
        low, high = (min(spread), max(spread)) if spread else (ratio, ratio)
        print(f"  interlock / LangGraph {label:<11} {ratio:5.2f}x  (rounds {low:.2f}-{high:.2f}x){verdict}")


if __name__ == "__main__":
    main()
