"""CPU cost of the core tool loop, per turn and per interrupt → resume cycle.

Runs the loop against :class:`interlock.testing.ScriptedModel`, so the figures are the
runtime's own overhead (validation, metadata bookkeeping, message building), not a
model's. Each figure is the median of several runs of many iterations, measured with
``time.process_time`` (CPU time of this process).

    python bench/core.py                 # the figures against their targets
    python bench/core.py --profile turn  # cProfile one scenario (turn or cycle)
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import statistics
import sys
import time
from collections.abc import Awaitable, Callable

from pydantic import BaseModel

from interlock import Message, Resume, ToolContext, ToolRequestPart, tool
from interlock._engine.loop import generate
from interlock.testing import ScriptedModel

RUNS = 7
ITERATIONS = 2000
TARGET_TURN_MS = 0.3
TARGET_CYCLE_MS = 1.0


class Account(BaseModel):
    account: str


class Transfer(BaseModel):
    to: str
    amount: int


class Approval(BaseModel):
    approver: str


class Receipt(BaseModel):
    id: str
    amount: int


@tool
def balance(q: Account) -> str:
    """Read an account balance."""
    return f"{q.account}: 100"


@tool
async def transfer(req: Transfer, ctx: ToolContext[Approval], approval: Approval | None) -> Receipt:
    """Move money; pauses for approval."""
    if approval is None:
        ctx.interrupt({"reason": f"send {req.amount} to {req.to}"})
    return Receipt(id=f"tx-{approval.approver}", amount=req.amount)


TOOLS = [balance, transfer]
USER = [Message.user("what is my balance?")]
ASK_BALANCE = Message(role="model", content=[ToolRequestPart(name="balance", ref="0", input={"account": "main"})])
ASK_TRANSFER = Message(
    role="model", content=[ToolRequestPart(name="transfer", ref="0", input={"to": "ann", "amount": 5})]
)
APPROVAL = Approval(approver="bench")


async def one_turn() -> None:
    """User message → model asks for one tool → tool runs → model answers."""
    result = await generate(ScriptedModel([ASK_BALANCE, "you have 100"]), USER, tools=TOOLS)
    assert result.finish_reason == "stop"


async def one_cycle() -> None:
    """A turn that interrupts, then a resume with restart that completes."""
    model = ScriptedModel([ASK_TRANSFER, "sent"])
    paused = await generate(model, USER, tools=TOOLS)
    (pending,) = paused.interrupts
    call = transfer.interrupted(pending)
    assert call is not None
    resumed = await generate(model, paused.messages, tools=TOOLS, resume=Resume(restart=[call.restart(APPROVAL)]))
    assert resumed.finish_reason == "stop"


SCENARIOS: dict[str, tuple[Callable[[], Awaitable[None]], float]] = {
    "turn": (one_turn, TARGET_TURN_MS),
    "cycle": (one_cycle, TARGET_CYCLE_MS),
}


async def _repeat(fn: Callable[[], Awaitable[None]], n: int) -> float:
    """CPU milliseconds per call of ``fn`` over ``n`` calls."""
    for _ in range(min(n, 200)):  # warm caches (pydantic, method lookups) outside the measurement
        await fn()
    start = time.process_time()
    for _ in range(n):
        await fn()
    return (time.process_time() - start) * 1000 / n


def measure(fn: Callable[[], Awaitable[None]], runs: int, n: int) -> list[float]:
    return [asyncio.run(_repeat(fn, n)) for _ in range(runs)]


def profile(name: str, n: int) -> None:
    fn, _ = SCENARIOS[name]
    profiler = cProfile.Profile()
    profiler.runcall(asyncio.run, _repeat(fn, n))
    pstats.Stats(profiler).sort_stats("cumulative").print_stats(30)
    pstats.Stats(profiler).sort_stats("tottime").print_stats(20)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=RUNS)
    parser.add_argument("--iterations", type=int, default=ITERATIONS)
    parser.add_argument("--profile", choices=sorted(SCENARIOS), help="cProfile one scenario instead")
    args = parser.parse_args()
    if args.profile:
        profile(args.profile, args.iterations)
        return 0

    print(f"interlock core: CPU ms (time.process_time), median of {args.runs} runs x {args.iterations} iterations")
    missed = False
    for name, (fn, target) in SCENARIOS.items():
        samples = measure(fn, args.runs, args.iterations)
        median = statistics.median(samples)
        ok = median <= target
        missed |= not ok
        spread = f"min {min(samples):.3f}, max {max(samples):.3f}"
        print(f"  {name:<6} {median:.3f} ms  (target <= {target:.1f} ms: {'ok' if ok else 'MISSED'}; {spread})")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
