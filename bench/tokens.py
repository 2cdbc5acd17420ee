"""Resume tokens' cost: minting and checking one interrupt's token (CPU µs), and the interrupt cycle on vs off.

* mint: :meth:`TokenSigner.mint` for one paused tool request (canonical JSON digest of the
  input, a random nonce, base64url, HMAC-SHA256).
* verify: :meth:`TokenSigner.read` (form, key id, HMAC, expiry).
* check: :func:`interlock.interrupts._tokens.check_tokens` on a one-entry resume plan (verify plus the
  binding: agent, session, snapshot, tool/ref, input digest, decision, edit).
* cycle: a paused turn and its approval on an in-memory store with
  ``require_resume_tokens=True`` against the same agent without tokens (CPU per cycle,
  ``time.process_time``, the median of interleaved runs).

    python bench/tokens.py
    python bench/tokens.py --iterations 20000 --cycles 300
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

from pydantic import BaseModel

from interlock import InMemoryStore, Message, PromptAgent, Resume, ToolContext, ToolRequestPart, tool
from interlock import metadata as md
from interlock.agents._host import Host
from interlock.interrupts._decisions import Decision
from interlock.interrupts._tokens import TokenSigner, check_tokens
from interlock.testing import ScriptedModel


class Transfer(BaseModel):
    to: str
    amount: int
    memo: str


class Approval(BaseModel):
    approved: bool


PART = ToolRequestPart(name="transfer", ref="t1", input={"to": "bob", "amount": 5, "memo": "rent " * 10})
PAY = Message(role="model", content=[PART])


def agent(store: InMemoryStore, signer: TokenSigner | None, cycles: int) -> PromptAgent:
    @tool
    async def transfer(req: Transfer, ctx: ToolContext[Any], approval: Approval | None) -> str:
        """Move money once approved."""
        if approval is None:
            ctx.interrupt({"to": req.to})
        return "sent"

    script: list[Any] = [PAY, "paid"] * cycles
    return PromptAgent(
        "bank",
        ScriptedModel(script),
        tools=[transfer],
        store=store,
        host=Host(resume_tokens=signer, require_resume_tokens=signer is not None),
    )


def per_call_us(fn: Any, n: int) -> float:
    start = time.process_time()
    for _ in range(n):
        fn()
    return (time.process_time() - start) / n * 1e6


async def cycle_ms(signer: TokenSigner | None, cycles: int) -> float:
    bank = agent(InMemoryStore(), signer, cycles)
    start = time.process_time()
    for _ in range(cycles):
        out = await bank.run("pay bob 5")
        assert out.message is not None and out.snapshot_id
        [part] = out.message.interrupts
        entry = Decision.restart({"approved": True}).answer(part)
        assert isinstance(entry, ToolRequestPart)
        done = await bank.run(resume=Resume(restart=[entry]), snapshot_id=out.snapshot_id)
        assert done.finish_reason == "stop", done.error
    return (time.process_time() - start) / cycles * 1e3


async def main(iterations: int, cycles: int, runs: int) -> None:
    signer = TokenSigner({"k1": b"k" * 32})
    token = signer.mint(
        agent="bank", session_id="s" * 36, snapshot_id="p" * 36, part=PART, decisions=("respond", "restart")
    )
    mint = per_call_us(
        lambda: signer.mint(agent="bank", session_id="s" * 36, snapshot_id="p" * 36, part=PART, decisions=("restart",)),
        iterations,
    )
    verify = per_call_us(lambda: signer.read(token), iterations)

    store = InMemoryStore()
    bank = agent(store, signer, 1)
    out = await bank.run("pay bob 5")
    assert out.message is not None and out.snapshot_id
    snap = await store.load(out.snapshot_id)
    assert snap is not None and snap.state is not None
    [part] = out.message.interrupts
    entry = Decision.restart({"approved": True}).answer(part)
    assert isinstance(entry, ToolRequestPart) and md.resume_token(entry)
    plan = bank.check_resume(Resume(restart=[entry]), snap.state.messages)
    check = per_call_us(
        lambda: check_tokens(bank, plan, session_id=snap.session_id, snapshot_id=snap.snapshot_id), iterations
    )

    on: list[float] = []
    off: list[float] = []
    for _ in range(runs):
        off.append(await cycle_ms(None, cycles))
        on.append(await cycle_ms(signer, cycles))
    on_ms, off_ms = statistics.median(on), statistics.median(off)
    print(f"resume tokens: token {len(md.resume_token(part) or '')} chars")
    print(f"  per interrupt: mint {mint:.1f} µs, verify {verify:.1f} µs, check (verify + binding) {check:.1f} µs")
    print(
        f"  interrupt cycle (pause + approve, in-memory store): {on_ms:.2f} ms CPU with tokens, "
        f"{off_ms:.2f} ms without ({(on_ms - off_ms) * 1e3:+.0f} µs)"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--iterations", type=int, default=5000)
    parser.add_argument("--cycles", type=int, default=200)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    asyncio.run(main(args.iterations, args.cycles, args.runs))
