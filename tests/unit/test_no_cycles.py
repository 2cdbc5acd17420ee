"""A finished turn is freed by reference counting: it leaves no reference cycles for the garbage collector.

A cycle (say, a closure that names itself, or a session whose sink is its invocation's bound
method) keeps a whole turn alive (the invocation, its queues and tasks, the session, the
journal's bookkeeping) until a collection finds it; at 100 concurrent sessions those
collections took about a fifth of the CPU of an interrupt cycle. Each test runs interrupt
cycles with the collector off and counts what a collection then finds unreachable, among
objects of interlock's own types.
"""

from __future__ import annotations

import gc
import pathlib
from collections.abc import Iterator
from typing import Any

import pytest
from banking import APPROVE, PAY, Approval, Transfer

from interlock import PromptAgent, ToolContext, tool, tool_approval
from interlock.stores import SessionStore
from interlock.stores.memory import InMemoryStore
from interlock.stores.sqlite import SQLiteStore
from interlock.testing import ScriptedModel


@pytest.fixture
def collector_off() -> Iterator[None]:
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        yield
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()


def interlock_garbage() -> dict[str, int]:
    """Unreachable objects of interlock's types, by type name (a collection with the collector off)."""
    gc.collect()
    found: dict[str, int] = {}
    garbage: list[object] = gc.garbage
    for item in garbage:
        kind = type(item)
        if kind.__module__.startswith("interlock"):
            found[kind.__qualname__] = found.get(kind.__qualname__, 0) + 1
    gc.garbage.clear()
    return found


@tool
async def transfer(req: Transfer, ctx: ToolContext[Approval], approval: Approval | None) -> str:
    """Move money once approved."""
    if approval is None:
        ctx.interrupt({"to": req.to, "amount": req.amount})
    return "sent"


async def cycle(store: SessionStore, middleware: list[Any]) -> None:
    """Pause on the transfer, then approve it from a fresh agent object (the journal runs: a server-managed agent)."""
    paused = await PromptAgent("bank", ScriptedModel([PAY]), tools=[transfer], store=store, middleware=middleware).run(
        "pay bob"
    )
    assert paused.finish_reason == "interrupted", paused.error
    done = await PromptAgent("bank", ScriptedModel(["paid"]), tools=[transfer], store=store, middleware=middleware).run(
        resume=APPROVE, snapshot_id=paused.snapshot_id
    )
    assert done.finish_reason == "stop", done.error


async def passthrough(ctx: ToolContext[Any], value: Any, call_next: Any) -> Any:
    return await call_next(value)


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
@pytest.mark.parametrize("layers", [0, 2], ids=["no-middleware", "two-middleware"])
async def test_interrupt_cycles_leave_no_reference_cycles(
    kind: str, layers: int, tmp_path: pathlib.Path, collector_off: None
) -> None:
    store: SessionStore = InMemoryStore() if kind == "memory" else SQLiteStore(tmp_path / "s.db")
    middleware: list[Any] = [passthrough] * layers
    await cycle(store, middleware)  # warm: schema, caches, imports
    interlock_garbage()
    for _ in range(5):
        await cycle(store, middleware)
    assert interlock_garbage() == {}
    if isinstance(store, SQLiteStore):
        await store.close()


async def test_a_tool_approval_hold_leaves_no_reference_cycles(collector_off: None) -> None:
    store = InMemoryStore()
    await cycle(store, [tool_approval(["transfer"])])
    interlock_garbage()
    for _ in range(3):
        await cycle(store, [tool_approval(["transfer"])])
    assert interlock_garbage() == {}
