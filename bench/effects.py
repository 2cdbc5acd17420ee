"""The effect journal's cost on the SQLite interrupt cycle: CPU ms and fsyncs per cycle, journal on vs off.

One cycle is what a person's approval costs end to end on a server-managed agent: a turn
whose model asks for one tool that pauses for approval (committed as an interrupted
snapshot), then a resume that approves it (claim, tool, model, fenced commit). The model is
:class:`interlock.testing.ScriptedModel`, so the figures are the runtime's and the store's.

* CPU: user + system time of every thread of this process (the SQLite worker included) per
  cycle, in pairs of short runs (one on, one off, the order alternating): the ratio is the
  median of the pairs' ratios, so a neighbour's load, which drifts, hits both sides of a pair
  alike. The interquartile range of the pairs' ratios is printed beside it.
* Writes: SQLite write transactions (``BEGIN IMMEDIATE`` … ``COMMIT``) per cycle, counted by
  wrapping the store; of them, journal writes.
* fsyncs: ``fsync``/``fdatasync`` calls per cycle, counted by ``strace -f -c`` around a child
  process running the cycles (minus a child running none), when strace is installed.

"Off" is the runtime with the journal switched off for the benchmark only
(``TurnWriter.effects`` patched to return ``None``: no intent, no result, no replay).

    python bench/effects.py                 # the figures, and the CPU ratio against its target
    python bench/effects.py --cycles 100 --runs 10
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import pathlib
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from machine import describe
from pydantic import BaseModel

from interlock import Message, PromptAgent, Resume, ToolContext, ToolRequestPart, tool
from interlock._engine.commit import TurnWriter
from interlock.stores.sqlite import SQLiteStore
from interlock.stores.sqlite._worker import Worker
from interlock.testing import ScriptedModel

TARGET_RATIO = 1.3


class Transfer(BaseModel):
    to: str
    amount: int


class Approval(BaseModel):
    approver: str


class Receipt(BaseModel):
    id: str
    amount: int


@tool
async def transfer(req: Transfer, ctx: ToolContext[Approval], approval: Approval | None) -> Receipt:
    """Move money; pauses for approval."""
    if approval is None:
        ctx.interrupt({"reason": f"send {req.amount} to {req.to}"})
    return Receipt(id=f"tx-{approval.approver}", amount=req.amount)


ASK = Message(role="model", content=[ToolRequestPart(name="transfer", ref="0", input={"to": "ann", "amount": 5})])
APPROVE = Resume(
    restart=[
        ToolRequestPart(
            name="transfer", ref="0", input={"to": "ann", "amount": 5}, metadata={"resumed": {"approver": "bench"}}
        )
    ]
)


async def one_cycle(store: SQLiteStore, counts: Counts | None = None) -> None:
    """Pause → approve → finish, one tool call, on ``store`` (``counts`` learns which turn is running)."""
    agent = PromptAgent("bank", ScriptedModel([ASK, "sent"]), tools=[transfer], store=store)
    if counts is not None:
        counts.turn = "pause"
    paused = await agent.run("send ann 5")
    assert paused.finish_reason == "interrupted" and paused.snapshot_id, paused
    if counts is not None:
        counts.turn = "resume"
    done = await agent.run(resume=APPROVE, snapshot_id=paused.snapshot_id)
    assert done.finish_reason == "stop", done.error


@contextlib.contextmanager
def journal(on: bool) -> Iterator[None]:
    """The runtime with its effect journal on (as shipped) or off (no Effects for any turn)."""
    if on:
        yield
        return
    writer: Any = TurnWriter  # patched for the benchmark only
    original = writer.effects
    writer.effects = lambda self, session_id, parent, turn_id: None
    try:
        yield
    finally:
        writer.effects = original


@dataclass
class Counts:
    """Store calls by turn (``pause``, ``resume``) and kind."""

    turn: str = "pause"
    calls: collections.Counter[tuple[str, str]] = field(default_factory=collections.Counter[tuple[str, str]])

    def per_cycle(self, turn: str, kind: str, cycles: int) -> float:
        return self.calls[(turn, kind)] / cycles


_KINDS = {"put": "journal write", "_save_all": "snapshot write", "_nothing": "empty write (ready check)"}


@contextlib.contextmanager
def counting() -> Iterator[Counts]:
    """Count the SQLite writes (by kind) and journal reads of every SQLiteStore meanwhile.

    Each write is one transaction when writes do not overlap (one cycle at a time, as here);
    concurrent ones share transactions (group commit).
    """
    counts = Counts()
    store: Any = SQLiteStore  # patched for the benchmark only
    worker: Any = Worker
    run, journal_get, run_here = store._run, store.journal_get, worker.run_here

    def counted_here(self: Worker, fn: Any, args: Any) -> tuple[bool, Any]:
        done, value = run_here(self, fn, args)
        if done:
            counts.calls[(counts.turn, "journal write, no hand-off")] += 1
        return done, value

    async def counted_run(self: SQLiteStore, kind: str, fn: Any, args: Any, **kwargs: Any) -> Any:
        if kind == "write":
            name: str = fn.__name__
            counts.calls[(counts.turn, _KINDS.get(name, name))] += 1
        return await run(self, kind, fn, args, **kwargs)

    async def counted_get(self: SQLiteStore, *args: Any, **kwargs: Any) -> Any:
        counts.calls[(counts.turn, "journal read")] += 1
        return await journal_get(self, *args, **kwargs)

    store._run, store.journal_get, worker.run_here = counted_run, counted_get, counted_here
    try:
        yield counts
    finally:
        store._run, store.journal_get, worker.run_here = run, journal_get, run_here


async def cpu_ms(store: SQLiteStore, on: bool, cycles: int) -> tuple[float, float]:
    """(user, system) CPU ms per cycle over ``cycles`` cycles, every thread of the process."""
    with journal(on):
        before = resource.getrusage(resource.RUSAGE_SELF)  # microseconds (os.times counts 10 ms ticks)
        for _ in range(cycles):
            await one_cycle(store)
        after = resource.getrusage(resource.RUSAGE_SELF)
    return (after.ru_utime - before.ru_utime) * 1000 / cycles, (after.ru_stime - before.ru_stime) * 1000 / cycles


async def writes(store: SQLiteStore, on: bool, cycles: int) -> Counts:
    """Store calls per turn and kind over ``cycles`` cycles."""
    with journal(on), counting() as counts:
        for _ in range(cycles):
            await one_cycle(store, counts)
    return counts


def fsyncs(on: bool, cycles: int, work: pathlib.Path) -> float | None:
    """fsync + fdatasync calls per cycle (strace around a child process), or ``None`` without strace."""
    if shutil.which("strace") is None:
        return None

    def calls(n: int) -> int:
        out = work / f"strace-{on}-{n}.txt"
        db = work / f"fsync-{on}-{n}.db"
        cmd = ["strace", "-f", "-c", "-e", "trace=fsync,fdatasync", "-o", str(out)]
        cmd += [sys.executable, __file__, "--child", "on" if on else "off", "--cycles", str(n), "--db", str(db)]
        subprocess.run(cmd, check=True, timeout=300, stdout=subprocess.DEVNULL)
        found = re.search(r"^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?total$", out.read_text(), re.M)
        return int(found.group(1)) if found else 0

    return (calls(cycles) - calls(0)) / cycles


async def child(on: bool, cycles: int, db: str) -> None:
    """The fsync-counting child: open the file, warm up once (schema), then run ``cycles`` cycles."""
    async with SQLiteStore(db) as store:
        with journal(on):
            await one_cycle(store)
            for _ in range(cycles):
                await one_cycle(store)


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cycles", type=int, default=60, help="cycles per run (default 60)")
    parser.add_argument("--runs", type=int, default=30, help="pairs of runs, one on and one off (default 30)")
    parser.add_argument("--child", choices=["on", "off"], help=argparse.SUPPRESS)
    parser.add_argument("--db", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        await child(args.child == "on", args.cycles, args.db)
        return 0
    with tempfile.TemporaryDirectory(prefix="interlock-bench-effects-") as tmp:
        work = pathlib.Path(tmp)
        cpu: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
        async with SQLiteStore(work / "cpu.db") as store:
            for on in (True, False):  # warm up: the schema, caches, imports
                await cpu_ms(store, on, 20)
            for i in range(args.runs):
                for on in (True, False) if i % 2 == 0 else (False, True):  # a pair, its order alternating
                    cpu[on].append(await cpu_ms(store, on, args.cycles))
            counted = {on: await writes(store, on, 50) for on in (True, False)}
        synced = {on: fsyncs(on, min(args.cycles, 100), work) for on in (True, False)}
    return 0 if report(args, cpu, counted, synced) <= TARGET_RATIO else 1


def pair_ratios(cpu: dict[bool, list[tuple[float, float]]]) -> list[float]:
    """Each pair's CPU on / off."""
    return [(u1 + s1) / (u0 + s0) for (u1, s1), (u0, s0) in zip(cpu[True], cpu[False], strict=True)]


def report(
    args: argparse.Namespace,
    cpu: dict[bool, list[tuple[float, float]]],
    counted: dict[bool, Counts],
    synced: dict[bool, float | None],
) -> float:
    """Print the figures; returns the CPU ratio (the median of the pairs' ratios)."""
    total = {on: [u + s for u, s in cpu[on]] for on in (True, False)}
    med = {on: statistics.median(total[on]) for on in (True, False)}
    ratios = pair_ratios(cpu)
    ratio = statistics.median(ratios)
    low, _, high = statistics.quantiles(ratios, n=4)
    name = {True: "journal on", False: "journal off"}
    print(f"machine: {describe()}")
    print(
        f"SQLite interrupt cycle (pause → approve → finish, one tool call): "
        f"{args.runs} pairs of runs × {args.cycles} cycles"
    )
    print(f"  {'':11}  {'CPU ms/cycle':>12}  {'user':>5}  {'sys':>5}  {'(min-max)':>11}  {'fsyncs/cycle':>12}")
    for on in (True, False):
        user = statistics.median(u for u, _ in cpu[on])
        system = statistics.median(s for _, s in cpu[on])
        fs = synced[on]
        spread = f"{min(total[on]):.2f}-{max(total[on]):.2f}"
        print(
            f"  {name[on]:11}  {med[on]:12.2f}  {user:5.2f}  {system:5.2f}  {spread:>11}  "
            f"{'n/a (no strace)' if fs is None else f'{fs:.1f}':>12}"
        )
    verdict = "within target" if ratio <= TARGET_RATIO else "OVER TARGET"
    line = f"  on/off: CPU {ratio:.2f}× (pairs' IQR {low:.2f}-{high:.2f}; target ≤ {TARGET_RATIO}×: {verdict})"
    on_fs, off_fs = synced[True], synced[False]
    if on_fs is not None and off_fs:
        line += f", fsyncs {on_fs / off_fs:.2f}× (+{on_fs - off_fs:.1f} per cycle)"
    print(line)
    kinds = [
        "snapshot write",
        "journal write",
        "journal write, no hand-off",
        "empty write (ready check)",
        "journal read",
    ]
    print(
        "\n  store calls per turn (a durable write transaction is one fsync: WAL, synchronous=FULL; a journal"
        " write that needs no flush (a fresh call's intent, an outcome: interlock._engine.effects.flushes_intent) runs"
        " on the caller's thread when the worker is idle)"
    )
    print(f"  {'':11}  {'turn':6}  " + "  ".join(f"{k:>{len(k)}}" for k in kinds))
    for on in (True, False):
        for turn in ("pause", "resume"):
            cells = "  ".join(f"{counted[on].per_cycle(turn, k, 50):>{len(k)}.1f}" for k in kinds)
            print(f"  {name[on]:11}  {turn:6}  {cells}")
    return ratio


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
