"""The claims' lease refresh: one timer per event loop serves every held claim (interlock._engine.leases)."""

from __future__ import annotations

import asyncio
import weakref
from typing import Any

import pytest
from banking import APPROVE, PAY, transfer

from interlock import InMemoryStore, Message, PromptAgent
from interlock._engine.commit import Claims
from interlock._engine.leases import LeaseClock, clock_of
from interlock.agents._host import Host
from interlock.models import ModelRequest, ModelResponse
from interlock.records.snapshots import claim_state
from interlock.testing import ScriptedModel


class Hold:
    def __init__(self, name: str, calls: list[str]) -> None:
        self.name = name
        self.calls = calls

    def due(self) -> None:
        self.calls.append(self.name)


async def test_the_clock_calls_each_hold_once_when_due_and_never_a_removed_one() -> None:
    loop = asyncio.get_running_loop()
    calls: list[str] = []
    clock = LeaseClock()
    late, early, gone = Hold("late", calls), Hold("early", calls), Hold("gone", calls)
    clock.add(late, 0.06, loop)
    clock.add(early, 0.02, loop)  # due before the armed timer: the clock arms an earlier one
    clock.add(gone, 0.01, loop)
    clock.remove(gone)
    clock.remove(gone)  # idempotent
    await asyncio.sleep(0.1)
    assert calls == ["early", "late"]
    assert len(clock) == 0


async def test_a_hold_added_again_when_called_is_called_again() -> None:
    loop = asyncio.get_running_loop()
    calls: list[str] = []
    clock = LeaseClock()

    class Again(Hold):
        def due(self) -> None:
            super().due()
            if len(self.calls) < 3:
                clock.add(self, 0.01, loop)

    clock.add(Again("again", calls), 0.01, loop)
    await asyncio.sleep(0.2)
    assert calls == ["again", "again", "again"]


async def test_one_clock_per_loop() -> None:
    here = clock_of(asyncio.get_running_loop())
    assert clock_of(asyncio.get_running_loop()) is here
    other = asyncio.new_event_loop()
    try:
        assert clock_of(other) is not here
        assert clock_of(asyncio.get_running_loop()) is here
    finally:
        other.close()


async def paused(store: InMemoryStore) -> str:
    out = await PromptAgent("bank", ScriptedModel([PAY]), tools=[transfer], store=store).run("pay bob")
    assert out.snapshot_id is not None
    return out.snapshot_id


async def expiry(store: InMemoryStore, sid: str) -> Any:
    row = await store.load(sid)
    assert row is not None
    return row.claim_expires_at, claim_state(row)


async def test_claims_of_two_leases_held_together_are_each_refreshed_and_an_ended_one_lapses() -> None:
    store = InMemoryStore()
    short, long, ended = await paused(store), await paused(store), await paused(store)
    first = await Claims(store, None, ttl=0.15).take(short, "turn-short")
    second = await Claims(store, None, ttl=0.45).take(long, "turn-long")
    dead = await Claims(store, None, ttl=0.15).take(ended, "turn-dead")
    dead._stop()  # pyright: ignore[reportPrivateUsage]  # its process died: the lease is no longer renewed
    taken = {sid: (await expiry(store, sid))[0] for sid in (short, long)}
    await asyncio.sleep(0.6)  # past both ttls: only refreshes keep the claims
    for sid in (short, long):
        at, state = await expiry(store, sid)
        assert state == "held" and at > taken[sid]
    assert (await expiry(store, ended))[1] == "lapsed"
    assert await first.commit([]) == []
    assert await second.commit([]) == []
    assert [(await expiry(store, sid))[1] for sid in (short, long)] == ["answered", "answered"]


async def test_a_resumed_turn_that_outlives_its_lease_commits_on_the_refreshed_claim() -> None:
    store = InMemoryStore()
    sid = await paused(store)

    async def slow(request: ModelRequest) -> ModelResponse:
        await asyncio.sleep(0.5)  # the model answers after the claim's ttl has passed twice
        return ModelResponse(message=Message.model("paid"), finish_reason="stop")

    agent = PromptAgent("bank", ScriptedModel([slow]), tools=[transfer], store=store, host=Host(claim_ttl=0.2))
    done = await agent.run(resume=APPROVE, snapshot_id=sid)
    assert done.finish_reason == "stop", done.error
    assert (await expiry(store, sid))[1] == "answered"


def test_a_loop_that_takes_no_weak_reference_still_gets_one_clock() -> None:
    loop: Any = object()  # stands for a loop class without weak references (asyncio's and uvloop's have them)
    with pytest.raises(TypeError):
        weakref.ref(loop)
    assert clock_of(loop) is clock_of(loop)
    other = asyncio.new_event_loop()
    try:
        assert clock_of(loop) is not clock_of(other)
    finally:
        other.close()
