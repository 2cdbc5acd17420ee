"""Defect: a client's unchanged retry of an approval must not answer the in-doubt question it caused.

A resume approves a paused ``book`` call and is SIGKILLed inside the tool (a real worker
process, :mod:`effects_worker`). Its client retries: the first retry takes the lapsed claim
over and pauses the call as in doubt, as designed. The client retries once more, unchanged;
that retry is refused (by session id: FAILED_PRECONDITION, stale, the call in doubt; by the
old snapshot id: ABORTED, already resumed), nothing runs, and the in-doubt question is
answered only by an answer that names it. Every effect is one line of an append-only file.
"""

from __future__ import annotations

import asyncio
import pathlib
from typing import Any

import pytest
from effects_worker import APPROVE, Service, _kill_at, booking_agent, effect_counts, pause  # pyright: ignore[reportPrivateUsage]
from fault_worker import _until  # pyright: ignore[reportPrivateUsage]

from interlock import AgentOutput, PromptAgent, Resume, ToolRequestPart
from interlock import metadata as md
from interlock._engine.commit import claim_state
from interlock.interrupts._decisions import Decision
from interlock.stores.sqlite import SQLiteStore

pytestmark = pytest.mark.slow


async def _killed_in_the_tool(tmp_path: pathlib.Path, point: str) -> tuple[pathlib.Path, pathlib.Path, str, str]:
    """A paused booking whose approved resume was SIGKILLed at ``point``; ``(db, effects, snapshot, session)``."""
    db, effects, marker = tmp_path / "s.db", tmp_path / "effects", tmp_path / "marker"
    snap = await pause(db, effects, "asks")
    await _kill_at(db, effects, snap, point, "attached", "asks", marker)
    async with SQLiteStore(db) as store:
        loaded = await store.load(snap)
        assert loaded is not None

        async def lapsed() -> bool:
            cur = await store.load(snap)
            return cur is not None and claim_state(cur) in ("lapsed", "free")

        await _until("the killed resume's lease to lapse", lapsed, 15)
        return db, effects, snap, loaded.session_id


async def _run(agent: PromptAgent, resume: Resume, **target: Any) -> AgentOutput:
    async with asyncio.timeout(30):
        return await agent.run(resume=resume, raise_on_error=False, **target)


def _in_doubt(out: AgentOutput) -> ToolRequestPart:
    assert out.finish_reason == "interrupted", out
    [part] = out.interrupts
    assert md.is_in_doubt(part), part.metadata
    return part


@pytest.mark.parametrize("point", ["intent", "charge-journaled"])
async def test_a_resent_approval_by_session_id_is_refused_as_stale_and_runs_nothing(
    tmp_path: pathlib.Path, point: str
) -> None:
    db, effects, _snap, session = await _killed_in_the_tool(tmp_path, point)
    before = effect_counts(effects)
    told: list[str | None] = []
    async with SQLiteStore(db) as store:
        agent = booking_agent(store, Service(effects, dedupe=False), idempotent=False, told=told)
        paused = await _run(agent, APPROVE, session_id=session)  # the takeover asks: the call is in doubt
        question = _in_doubt(paused)
        taken_from = question.meta(md.INTERRUPT).get(md.RECLAIMED_FROM)
        assert taken_from, "the in-doubt question names the turn the takeover found the call in"
        assert effect_counts(effects) == before
        tip = await store.latest(session)
        assert tip is not None and tip.snapshot_id == paused.snapshot_id

        again = await _run(agent, APPROVE, session_id=session)  # the same approval, unchanged
        assert again.error is not None and again.error.status == "FAILED_PRECONDITION", again
        assert "in doubt" in again.error.message and "stale" in again.error.message
        assert effect_counts(effects) == before, "a resent approval ran the in-doubt call"
        after = await store.latest(session)
        assert after is not None and after.snapshot_id == paused.snapshot_id, "the refusal wrote a snapshot"

        entry = Decision.restart().answer(question)  # names the attempt it answers
        assert isinstance(entry, ToolRequestPart) and md.is_in_doubt(entry)
        answer = Resume(restart=[entry])
        done = await _run(agent, answer, session_id=session)
    assert done.finish_reason == "stop", done
    counts = effect_counts(effects)
    assert sorted(counts.values()) == [1, 1], f"each step took effect once: {dict(counts)}"
    assert told == [taken_from], "the restart's tool is told of the takeover (ctx.reclaimed_from)"


async def test_a_resent_approval_by_snapshot_id_is_aborted_and_the_pause_is_answered_by_its_own_id(
    tmp_path: pathlib.Path,
) -> None:
    db, effects, snap, _session = await _killed_in_the_tool(tmp_path, "intent")
    async with SQLiteStore(db) as store:
        agent = booking_agent(store, Service(effects, dedupe=False), idempotent=False)
        paused = await _run(agent, APPROVE, snapshot_id=snap)
        question = _in_doubt(paused)

        again = await _run(agent, APPROVE, snapshot_id=snap)
        assert again.error is not None and again.error.status == "ABORTED", again
        assert effect_counts(effects) == {}, "a resent approval ran the in-doubt call"

        plain = Resume(
            restart=[
                ToolRequestPart(name=question.name, ref=question.ref, input=question.input, metadata={md.RESUMED: True})
            ]
        )
        done = await _run(agent, plain, snapshot_id=paused.snapshot_id)  # naming the in-doubt pause itself
    assert done.finish_reason == "stop", done
    assert sorted(effect_counts(effects).values()) == [1, 1]


async def test_a_restart_naming_another_attempt_is_refused(tmp_path: pathlib.Path) -> None:
    db, effects, _snap, session = await _killed_in_the_tool(tmp_path, "intent")
    async with SQLiteStore(db) as store:
        agent = booking_agent(store, Service(effects, dedupe=False), idempotent=False)
        question = _in_doubt(await _run(agent, APPROVE, session_id=session))
        data = dict(question.meta(md.INTERRUPT))
        wrong = {**data, "attempts": data["attempts"] + 1}
        entry = ToolRequestPart(
            name=question.name, ref=question.ref, input=question.input, metadata={md.RESUMED: True, md.INTERRUPT: wrong}
        )
        out = await _run(agent, Resume(restart=[entry]), session_id=session)
    assert out.error is not None and out.error.status == "FAILED_PRECONDITION", out
    assert effect_counts(effects) == {}
