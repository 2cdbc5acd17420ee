"""The effect journal: a tool's side effect is never silently repeated; an in-doubt effect is asked, not guessed."""

from __future__ import annotations

import asyncio
import pathlib
from collections.abc import Sequence
from typing import Any

import pytest
from banking import APPROVE, PAY, Approval, Transfer
from pydantic import BaseModel

from interlock import InMemoryStore, Message, PromptAgent, Resume, SessionStore, ToolContext, ToolRequestPart, tool
from interlock import metadata as md
from interlock.errors import UnavailableError
from interlock.models import ModelRequest, ModelResponse
from interlock.stores import JournalUpdater, TxStep, Updater
from interlock.stores.sqlite import SQLiteStore
from interlock.testing import ScriptedModel


class Ledger:
    """An external service's side effects, counted in an append-only file (one line per effect)."""

    def __init__(self, path: pathlib.Path) -> None:
        self.path = path
        self.keys: list[str | None] = []

    def charge(self, what: str, key: str | None) -> None:
        with self.path.open("a") as f:
            f.write(f"{what} {key}\n")
        self.keys.append(key)

    @property
    def effects(self) -> list[str]:
        return self.path.read_text().splitlines() if self.path.exists() else []


class FailingModel:
    """Fails its first ``failures`` calls (a provider outage after the tool ran), then answers."""

    def __init__(self, failures: int, reply: str = "paid") -> None:
        self.failures = failures
        self.inner = ScriptedModel([reply] * 10)

    async def generate(self, request: ModelRequest, *, on_chunk: Any = None) -> ModelResponse:
        if self.failures:
            self.failures -= 1
            raise UnavailableError("the model provider is down")
        return await self.inner.generate(request, on_chunk=on_chunk)


def bank(
    store: SessionStore,
    ledger: Ledger,
    model: Any = None,
    *,
    gate: asyncio.Event | None = None,
    started: asyncio.Event | None = None,
    **options: Any,
) -> PromptAgent:
    @tool(**options)
    async def transfer(req: Transfer, ctx: ToolContext[Any], approval: Approval | None) -> str:
        """Move money once approved."""
        if approval is None:
            ctx.interrupt({"to": req.to})
        if started is not None:
            started.set()
        if gate is not None:
            await gate.wait()
        ledger.charge(f"pay {req.to} {req.amount}", ctx.idempotency_key)
        return "sent"

    return PromptAgent("bank", model or ScriptedModel(["paid"]), tools=[transfer], store=store)


async def paused(store: SessionStore, ledger: Ledger) -> str:
    out = await bank(store, ledger, ScriptedModel([PAY])).run("pay bob 5")
    assert out.finish_reason == "interrupted" and out.snapshot_id
    return out.snapshot_id


async def test_a_model_failure_after_the_tool_replays_the_recorded_result(store: Any, tmp_path: pathlib.Path) -> None:
    ledger = Ledger(tmp_path / "effects.log")
    sid = await paused(store, ledger)
    failed = await bank(store, ledger, FailingModel(1)).run(resume=APPROVE, snapshot_id=sid, raise_on_error=False)
    assert failed.error is not None and failed.error.status == "UNAVAILABLE"
    done = await bank(store, ledger, FailingModel(0)).run(resume=APPROVE, snapshot_id=sid)
    assert done.finish_reason == "stop", done.error
    assert ledger.effects == ["pay bob 5.0 " + str(ledger.keys[0])]  # the body ran once
    [entry] = await store.journal_entries()
    assert entry.status == "done" and entry.attempt == 2 and entry.output == "sent"  # 1: it interrupted


class FailingCommit(InMemoryStore):
    failing = True

    async def save_all(
        self,
        updates: Sequence[tuple[str, Updater]],
        *,
        tenant: str | None = None,
        journal: Sequence[tuple[str, JournalUpdater]] = (),
        events: Sequence[Any] = (),
        then: Sequence[TxStep] = (),
    ) -> list[Any]:
        if self.failing and len(updates) > 1:
            raise UnavailableError("disk I/O error")
        return await super().save_all(updates, tenant=tenant, journal=journal, events=events, then=then)


async def test_a_commit_failure_after_the_tool_replays_the_recorded_result(tmp_path: pathlib.Path) -> None:
    store, ledger = FailingCommit(), Ledger(tmp_path / "effects.log")
    sid = await paused(store, ledger)
    failed = await bank(store, ledger).run(resume=APPROVE, snapshot_id=sid, raise_on_error=False)
    assert failed.error is not None and failed.error.status == "UNAVAILABLE"
    store.failing = False
    done = await bank(store, ledger).run(resume=APPROVE, snapshot_id=sid)
    assert done.finish_reason == "stop", done.error
    assert len(ledger.effects) == 1


async def test_an_abort_after_the_tool_finished_replays_it(store: Any, tmp_path: pathlib.Path) -> None:
    ledger = Ledger(tmp_path / "effects.log")
    sid = await paused(store, ledger)
    stuck = asyncio.Event()

    class SlowModel:
        async def generate(self, request: ModelRequest, *, on_chunk: Any = None) -> ModelResponse:
            stuck.set()
            await asyncio.sleep(60)
            raise AssertionError("aborted before this")

    agent = bank(store, ledger, SlowModel())
    out = await agent.run(resume=APPROVE, snapshot_id=sid, detach=True)
    assert out.snapshot_id
    await asyncio.wait_for(stuck.wait(), 5)  # the tool ran; the model call after it is running
    assert await agent.abort(out.snapshot_id) == "pending"
    assert (await agent.wait(out.snapshot_id, timeout=5)).status == "aborted"
    await asyncio.sleep(0.05)
    done = await bank(store, ledger).run(resume=APPROVE, snapshot_id=sid)
    assert done.finish_reason == "stop", done.error
    assert len(ledger.effects) == 1


async def in_doubt_after_an_abort_mid_tool(store: Any, ledger: Ledger, **options: Any) -> tuple[str, PromptAgent]:
    """Abort a detached resume while its tool runs: the journal has an intent and no result."""
    sid = await paused(store, ledger)
    started, gate = asyncio.Event(), asyncio.Event()
    agent = bank(store, ledger, started=started, gate=gate, **options)
    out = await agent.run(resume=APPROVE, snapshot_id=sid, detach=True)
    assert out.snapshot_id
    await asyncio.wait_for(started.wait(), 5)
    assert await agent.abort(out.snapshot_id) == "pending"
    assert (await agent.wait(out.snapshot_id, timeout=5)).status == "aborted"
    await asyncio.sleep(0.05)
    return sid, agent


async def test_an_abort_mid_tool_leaves_an_in_doubt_call_that_is_asked_not_guessed(
    store: Any, tmp_path: pathlib.Path
) -> None:
    ledger = Ledger(tmp_path / "effects.log")
    sid, _ = await in_doubt_after_an_abort_mid_tool(store, ledger)
    again = await bank(store, ledger).run(resume=APPROVE, snapshot_id=sid)
    assert again.finish_reason == "interrupted", again.error
    [part] = again.interrupts
    assert md.is_in_doubt(part) and ledger.effects == []
    data = part.meta(md.INTERRUPT)
    assert data["attempts"] == 2 and data["resumed"] == {"approved": True} and data["idempotencyKey"].startswith("ik_")
    # Restart: a person says "run it again" — the same idempotency key, the payload it had.
    retry = Resume(restart=[ToolRequestPart(name="transfer", ref="t1", input=part.input, metadata={"resumed": True})])
    done = await bank(store, ledger).run(resume=retry, snapshot_id=again.snapshot_id)
    assert done.finish_reason == "stop", done.error
    assert ledger.keys == [data["idempotencyKey"]]
    [entry] = await store.journal_entries()
    assert entry.status == "done" and entry.attempt == 3
    assert [a["status"] for a in entry.attempts] == ["interrupted", "running", "done"]


async def test_responding_to_an_in_doubt_call_marks_it_done(store: Any, tmp_path: pathlib.Path) -> None:
    ledger = Ledger(tmp_path / "effects.log")
    sid, _ = await in_doubt_after_an_abort_mid_tool(store, ledger)
    again = await bank(store, ledger).run(resume=APPROVE, snapshot_id=sid)
    [part] = again.interrupts
    answer = Resume(respond=[md_respond(part, {"note": "the bank says it went through"})])
    done = await bank(store, ledger).run(resume=answer, snapshot_id=again.snapshot_id)
    assert done.finish_reason == "stop", done.error
    assert ledger.effects == []
    [entry] = await store.journal_entries()
    assert entry.status == "done" and entry.output == {"note": "the bank says it went through"}


def md_respond(part: ToolRequestPart, output: Any) -> Any:
    from interlock import ToolResponsePart

    return ToolResponsePart(name=part.name, ref=part.ref, output=output, metadata={md.INTERRUPT_RESPONSE: True})


async def test_an_idempotent_tool_is_retried_with_the_same_key(store: Any, tmp_path: pathlib.Path) -> None:
    ledger = Ledger(tmp_path / "effects.log")
    sid, _ = await in_doubt_after_an_abort_mid_tool(store, ledger, idempotent=True)
    done = await bank(store, ledger, idempotent=True).run(resume=APPROVE, snapshot_id=sid)
    assert done.finish_reason == "stop", done.error
    [entry] = await store.journal_entries()
    assert ledger.keys == [entry.key] and entry.attempt == 3


async def test_an_intent_is_flushed_when_its_call_keeps_its_key_and_is_not_idempotent(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fresh call from the model: written, not flushed; a retry of a call in the history: flushed (flushes_intent)."""
    flushed: list[tuple[int, bool]] = []
    real = SQLiteStore.journal_put

    async def spy(self: SQLiteStore, entry: Any, *, expect: int, tenant: Any = None, durable: bool = True) -> None:
        if entry.status == "running":
            flushed.append((entry.attempt, durable))
        await real(self, entry, expect=expect, tenant=tenant, durable=durable)

    monkeypatch.setattr(SQLiteStore, "journal_put", spy)
    async with SQLiteStore(tmp_path / "s.db") as store:
        for idempotent in (False, True):
            flushed.clear()
            ledger = Ledger(tmp_path / f"effects-{idempotent}.log")
            sid, _ = await in_doubt_after_an_abort_mid_tool(store, ledger, idempotent=idempotent)
            again = await bank(store, ledger, idempotent=idempotent).run(resume=APPROVE, snapshot_id=sid)
            if not idempotent:  # asked: a person says "run it again"
                [part] = again.interrupts
                retry = Resume(restart=[ToolRequestPart(name="transfer", ref="t1", input=part.input, metadata=RESUMED)])
                again = await bank(store, ledger).run(resume=retry, snapshot_id=again.snapshot_id)
            assert again.finish_reason == "stop", again.error
            assert len(ledger.effects) == 1
            # attempt 1 (the model's fresh call, which paused): not flushed; attempt 2 rode the claim's transaction;
            # attempt 3, the retry of a call in the history: flushed unless the tool is idempotent
            assert flushed == [(1, False), (3, not idempotent)], (idempotent, flushed)


RESUMED = {"resumed": True}


async def test_reconcile_decides_an_in_doubt_call(store: Any, tmp_path: pathlib.Path) -> None:
    ledger = Ledger(tmp_path / "effects.log")
    asked: list[str] = []

    async def happened(key: str) -> str:
        asked.append(key)
        return "sent"

    sid, _ = await in_doubt_after_an_abort_mid_tool(store, ledger, reconcile=happened)
    done = await bank(store, ledger, reconcile=happened).run(resume=APPROVE, snapshot_id=sid)
    assert done.finish_reason == "stop", done.error
    assert ledger.effects == [] and len(asked) == 1
    [entry] = await store.journal_entries()
    assert entry.status == "done" and entry.key == asked[0]


def _did_not_happen(key: str) -> None:
    return None


async def test_reconcile_saying_it_did_not_happen_runs_the_tool(store: Any, tmp_path: pathlib.Path) -> None:
    ledger = Ledger(tmp_path / "effects.log")
    sid, _ = await in_doubt_after_an_abort_mid_tool(store, ledger, reconcile=_did_not_happen)
    done = await bank(store, ledger, reconcile=_did_not_happen).run(resume=APPROVE, snapshot_id=sid)
    assert done.finish_reason == "stop", done.error
    assert len(ledger.effects) == 1


async def test_steps_run_once_across_an_interrupt_and_a_restart(store: Any, tmp_path: pathlib.Path) -> None:
    ledger = Ledger(tmp_path / "effects.log")

    @tool
    async def book(req: Transfer, ctx: ToolContext[Any], approval: Approval | None) -> str:
        """Reserve, ask, then charge."""
        hold = await ctx.step("reserve", lambda: ledger.charge("reserve", ctx.idempotency_key) or "hold-1")
        if approval is None:
            ctx.interrupt({"hold": hold})
        await ctx.step("charge", lambda: ledger.charge("charge", ctx.idempotency_key) or "ok")
        return f"booked {hold}"

    call = Message(role="model", content=[ToolRequestPart(name="book", ref="b1", input={"to": "bob", "amount": 5})])
    first = await PromptAgent("bank", ScriptedModel([call]), tools=[book], store=store).run("book it")
    assert first.finish_reason == "interrupted" and first.snapshot_id
    restart = ToolRequestPart(
        name="book", ref="b1", input={"to": "bob", "amount": 5}, metadata={"resumed": {"approved": True}}
    )
    done = await PromptAgent("bank", ScriptedModel(["done"]), tools=[book], store=store).run(
        resume=Resume(restart=[restart]), snapshot_id=first.snapshot_id
    )
    assert done.finish_reason == "stop", done.error
    assert [e.split()[0] for e in ledger.effects] == ["reserve", "charge"]  # reserve ran once
    assert len(set(ledger.keys)) == 1


async def test_the_key_is_stable_per_call_and_differs_for_a_revised_input(store: Any, tmp_path: pathlib.Path) -> None:
    ledger = Ledger(tmp_path / "effects.log")
    sid = await paused(store, ledger)
    agent = PromptAgent(
        "bank", ScriptedModel(["paid"]), tools=bank(store, ledger).tools, store=store, allow_replaced_input=True
    )
    revised = ToolRequestPart(
        name="transfer",
        ref="t1",
        input={"to": "bob", "amount": 6},
        metadata={"resumed": {"approved": True}, "replacedInput": {"to": "bob", "amount": 5}},
    )
    done = await agent.run(resume=Resume(restart=[revised]), snapshot_id=sid)
    assert done.finish_reason == "stop", done.error
    keys = {e.key for e in await store.journal_entries()}
    assert ledger.keys[0] in keys and len(keys) == 2  # the first (interrupted) call and the revised one


async def test_plain_generate_without_a_store_journals_nothing() -> None:
    from interlock._engine.loop import generate

    runs: list[str | None] = []

    @tool
    async def ping(ctx: ToolContext[Any]) -> str:
        """Ping."""
        runs.append(ctx.idempotency_key)
        return await ctx.step("s", lambda: "pong")

    call = Message(role="model", content=[ToolRequestPart(name="ping", ref="p", input={})])
    result = await generate(ScriptedModel([call, "ok"]), [Message.user("hi")], tools=[ping])
    assert result.finish_reason == "stop" and runs == [None]


async def test_the_key_is_of_the_validated_inputs_json_form(store: Any, tmp_path: pathlib.Path) -> None:
    """Keys journaled by earlier releases stay valid: the key is a function of the input's JSON, nothing else."""
    from interlock.records._journal import call_key, digest

    ledger = Ledger(tmp_path / "effects.log")
    sid = await paused(store, ledger)
    done = await bank(store, ledger).run(resume=APPROVE, snapshot_id=sid)
    assert done.finish_reason == "stop", done.error
    session = done.session_id
    assert session is not None
    validated = {"to": "bob", "amount": 5.0}  # Transfer's JSON form: amount is a float
    expected = call_key(
        agent="bank", session_id=session, index=1, tool="transfer", ref="t1", input_digest=digest(validated)
    )
    assert ledger.keys == [expected]
    [entry] = await store.journal_entries(session_id=session)
    assert entry.input_digest == digest(validated) and entry.status == "done"


async def test_an_input_with_no_json_form_is_refused_before_the_body_runs(store: Any) -> None:
    runs: list[float] = []

    class Reading(BaseModel):
        x: float

    @tool
    async def measure(reading: Reading) -> str:
        """Record a reading."""
        runs.append(reading.x)
        return "ok"

    call = Message(role="model", content=[ToolRequestPart(name="measure", ref="m", input={"x": float("nan")})])
    agent = PromptAgent("lab", ScriptedModel([call, "done"]), tools=[measure], store=store)
    out = await agent.run("go", raise_on_error=False)
    assert out.error is not None and out.error.status == "INVALID_ARGUMENT", out.error
    assert "not a finite number" in out.error.message
    assert runs == [] and await store.journal_entries() == []


def test_a_remembered_key_is_for_the_same_input_only_types_included() -> None:
    """Keys are remembered across turns; an input that differs only in JSON type (1, 1.0, true) gets its own key."""
    from interlock._engine.effects import _call_key  # pyright: ignore[reportPrivateUsage]
    from interlock.records._journal import call_key, digest

    def fresh(value: object, index: int = 1) -> str:
        return call_key(agent="a", session_id="s", index=index, tool="t", ref="r", input_digest=digest(value))

    keys = [_call_key("a", "s", 1, "t", "r", {"n": value})[0] for value in (1, 1.0, True, 1)]
    assert keys == [fresh({"n": 1}), fresh({"n": 1.0}), fresh({"n": True}), fresh({"n": 1})]
    assert len(set(keys)) == 3
    nested = [_call_key("a", "s", 2, "t", "r", value)[0] for value in ([{"x": [1]}], [{"x": [1.0]}])]
    assert nested == [fresh([{"x": [1]}], 2), fresh([{"x": [1.0]}], 2)]


def test_a_key_and_its_digest_are_pinned_values_whether_remembered_or_not() -> None:
    """Journals stored by earlier releases keep matching: the same call and input give these exact values."""
    from interlock._engine import effects

    value = {"to": "bob", "amount": 5.0, "note": "é", "tags": [1, True, None]}
    pinned = ("ik_a8e6d8fd3239fc3408dbc779a81b2fc03e8637f9", "e42740df3175d86ba8b6a34a845e56cc")
    effects._KEYS.clear()  # pyright: ignore[reportPrivateUsage]
    assert effects._call_key("bank", "s-1", 1, "transfer", "t1", value) == pinned  # pyright: ignore[reportPrivateUsage]
    reordered = {"tags": [1, True, None], "note": "é", "amount": 5.0, "to": "bob"}  # remembered: key order aside
    assert effects._call_key("bank", "s-1", 1, "transfer", "t1", reordered) == pinned  # pyright: ignore[reportPrivateUsage]


@pytest.mark.parametrize("changed_by", ["middleware", "none"])
async def test_a_restart_is_keyed_by_the_input_its_body_runs_on(changed_by: str, tmp_path: pathlib.Path) -> None:
    """The claim keys a restart once; middleware that changes the input in place gets the changed input's key."""
    from interlock.records._journal import call_key, digest

    store = InMemoryStore()
    ledger = Ledger(tmp_path / "effects.log")
    sid = await paused(store, ledger)

    async def double(ctx: ToolContext[Any], value: Any, call_next: Any) -> Any:
        if isinstance(value, Transfer) and ctx.is_resumed:
            value.amount *= 2  # in place: the same object the resume plan validated
        return await call_next(value)

    agent = bank(store, ledger)
    if changed_by == "middleware":
        agent = PromptAgent("bank", ScriptedModel(["paid"]), tools=list(agent.tools), store=store, middleware=[double])
    done = await agent.run(resume=APPROVE, snapshot_id=sid)
    assert done.finish_reason == "stop", done.error
    assert done.session_id is not None
    ran = {"to": "bob", "amount": 10.0 if changed_by == "middleware" else 5.0}
    key = call_key(
        agent="bank", session_id=done.session_id, index=1, tool="transfer", ref="t1", input_digest=digest(ran)
    )
    assert ledger.keys == [key] and ledger.effects == [f"pay bob {ran['amount']} {key}"]
