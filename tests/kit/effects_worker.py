"""The effect journal's fault harness: SIGKILL at every await point of a two-step tool turn, then recover.

A library (the scenario, used by ``tests/faults/test_faults_effects.py`` and ``bench/effects_faults.py``)
and a worker process::

    python effects_worker.py DB EFFECTS SNAP POINT MODE VARIANT MARKER

The worker resumes SNAP (``claim_ttl=1``), ``attached`` or ``detached``, approving a paused
``book`` call whose tool then does ``ctx.step("reserve")`` and ``ctx.step("charge")``, each a
call to a keyed external service that appends one line ``<idempotency key> <step> <pid>`` to
EFFECTS; then the model answers and the turn commits. The worker writes MARKER and hangs at
POINT (one of :data:`POINTS`: a store wrapper around the claim, ``journal_put`` and the
commit, or the model), where the test SIGKILLs it.

VARIANT ``asks``: a plain tool (an in-doubt call pauses the turn for a person). VARIANT
``idempotent``: ``@tool(idempotent=True)`` and a service that dedupes by key (a keyed write
whose key and step already have a line is a no-op, noted in ``EFFECTS.deduped``).
"""

from __future__ import annotations

import asyncio
import collections
import json
import os
import pathlib
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from fault_worker import HangingModel, _reap, _until, outcome  # pyright: ignore[reportPrivateUsage]
from pydantic import BaseModel
from store_kinds import integrity

from interlock import Message, PromptAgent, Resume, Snapshot, ToolContext, ToolRequestPart, ToolResponsePart, tool
from interlock import metadata as md
from interlock._engine.commit import claim_state
from interlock.agents._host import Host
from interlock.records._journal import JournalEntry
from interlock.stores import JournalUpdater, Updater
from interlock.stores.sqlite import SQLiteStep, SQLiteStore
from interlock.testing import ScriptedModel

HERE = pathlib.Path(__file__).resolve().parent
WORKER = HERE / "effects_worker.py"

POINTS: dict[str, str] = {
    "before-claim": "before the claim",
    "claim": "inside the claim (and intent) transaction",
    "intent": "claimed, intent journaled, before step 1",
    "reserve-effect": "step 1 done, not journaled",
    "reserve-journaled": "step 1 journaled, before step 2",
    "charge-effect": "step 2 done, not journaled",
    "charge-journaled": "step 2 journaled, tool returning",
    "returned": "tool returned, result not journaled",
    "result-journaled": "result journaled, before the model",
    "model": "at the model call",
    "commit": "inside the commit transaction",
}
"""Kill point → where the worker hangs (in the order the turn reaches them)."""
AT_KILL: dict[str, str] = {
    **dict.fromkeys(("before-claim", "claim"), "interrupted"),
    **dict.fromkeys(("intent", "reserve-effect", "reserve-journaled", "charge-effect"), "running"),
    **dict.fromkeys(("charge-journaled", "returned"), "running"),
    **dict.fromkeys(("result-journaled", "model", "commit"), "done"),
}
"""Kill point → the journal entry's status once the worker is dead (``interrupted``: the first attempt's)."""
MODES = ("attached", "detached")
VARIANTS = ("asks", "idempotent")
STEPS = ("reserve", "charge")

# journal_put hooks: (status, steps recorded) → (point when hanging before the write, point after it)
_JOURNAL_POINTS: dict[tuple[str, tuple[str, ...]], tuple[str, str]] = {
    ("running", ("reserve",)): ("reserve-effect", "reserve-journaled"),
    ("running", ("charge", "reserve")): ("charge-effect", "charge-journaled"),
    ("done", ("charge", "reserve")): ("returned", "result-journaled"),
}

BOOK = {"to": "bob", "amount": 5}
ASK = Message(role="model", content=[ToolRequestPart(name="book", ref="b1", input=BOOK)])
APPROVE = Resume(
    restart=[ToolRequestPart(name="book", ref="b1", input=BOOK, metadata={md.RESUMED: {"approved": True}})]
)
CONFIRMED = "booked (a person checked the payment log: it went through)"


class Booking(BaseModel):
    to: str
    amount: float


class Approval(BaseModel):
    approved: bool


class Service:
    """A keyed external API (think payments): every effect is one line appended to ``path``.

    With ``dedupe`` it behaves like a service that honours idempotency keys: a request whose
    key and step already have a line changes nothing (it is noted in ``<path>.deduped``).
    """

    def __init__(self, path: pathlib.Path, *, dedupe: bool) -> None:
        self.path, self.dedupe = path, dedupe

    def call(self, key: str, step: str) -> str:
        if self.dedupe and (key, step) in effect_counts(self.path):
            with self.path.with_suffix(".deduped").open("a") as f:
                f.write(f"{key} {step} {os.getpid()}\n")
        else:
            with self.path.open("a") as f:  # O_APPEND: one whole line per write
                f.write(f"{key} {step} {os.getpid()}\n")
        return f"{step}-{key[-6:]}"


def effect_lines(path: pathlib.Path) -> list[tuple[str, str]]:
    """The external effects so far, oldest first: ``(idempotency key, step)``."""
    if not path.exists():
        return []
    return [(k, s) for k, s, _pid in (line.split(" ") for line in path.read_text().splitlines())]


def effect_counts(path: pathlib.Path) -> collections.Counter[tuple[str, str]]:
    return collections.Counter(effect_lines(path))


def booking_agent(
    store: SQLiteStore,
    service: Service,
    *,
    idempotent: bool,
    model: Any = None,
    claim_ttl: float = 60.0,
    told: list[str | None] | None = None,
) -> PromptAgent:
    """The agent of the scripted turn: ``book`` asks first; once approved it reserves, then charges.

    ``told`` collects the ``ctx.reclaimed_from`` of every approved run of ``book``.
    """

    @tool(idempotent=idempotent)
    async def book(req: Booking, ctx: ToolContext[Any], approval: Approval | None) -> str:
        """Reserve a seat, then charge for it; asks a person first."""
        if approval is None:
            ctx.interrupt({"to": req.to, "amount": req.amount})
        if told is not None:
            told.append(ctx.reclaimed_from)
        key = ctx.idempotency_key
        assert key is not None, "a server-managed agent's tool has an idempotency key"
        hold = await ctx.step("reserve", lambda: service.call(key, "reserve"))
        paid = await ctx.step("charge", lambda: service.call(key, "charge"))
        return f"booked {hold} {paid}"

    return PromptAgent(
        "booker", model or ScriptedModel(["booked"]), tools=[book], store=store, host=Host(claim_ttl=claim_ttl)
    )


# the worker -------------------------------------------------------------------------------------


class HookStore(SQLiteStore):
    """A SQLite store that writes ``marker`` and hangs at ``point`` (the claim, a journal write, the commit)."""

    def __init__(self, path: str, parent: str, point: str, marker: pathlib.Path) -> None:
        super().__init__(path)
        self.parent, self.point, self.marker = parent, point, marker

    async def _hang(self) -> None:
        self.marker.write_text(self.point)
        await asyncio.sleep(3600)

    async def save_all(
        self,
        updates: Sequence[tuple[str, Updater]],
        *,
        tenant: str | None = None,
        journal: Sequence[tuple[str, JournalUpdater]] = (),
        events: Sequence[Any] = (),
        then: Sequence[SQLiteStep] = (),
    ) -> list[Any]:
        updates = list(updates)
        ours = bool(updates) and updates[0][0] == self.parent
        claim = ours and len(updates) == 1 and bool(journal)  # the claim carries the restart's intent
        if self.point == "before-claim" and claim:
            await self._hang()  # the claim is the first write of the parent
        if self.point == "claim" and claim:
            key, write = journal[-1]
            journal = [*journal[:-1], (key, self._hanging(write))]
        if self.point == "commit" and ours and len(updates) >= 2:
            sid, update = updates[-1]
            marker = self.marker

            def hang(cur: Snapshot | None) -> Snapshot | None:
                new = update(cur)  # on the SQLite worker thread, inside BEGIN IMMEDIATE
                marker.write_text("commit")
                time.sleep(3600)
                return new

            updates[-1] = (sid, hang)
        written = await super().save_all(updates, tenant=tenant, journal=journal, events=events, then=then)
        if self.point == "intent" and claim:
            await self._hang()
        return written

    def _hanging(self, write: JournalUpdater) -> JournalUpdater:
        marker, point = self.marker, self.point

        def hang(cur: JournalEntry | None) -> JournalEntry | None:
            new = write(cur)  # on the SQLite worker thread, inside BEGIN IMMEDIATE
            marker.write_text(point)
            time.sleep(3600)
            return new

        return hang

    async def journal_put(
        self, entry: JournalEntry, *, expect: int, tenant: str | None = None, durable: bool = True
    ) -> None:
        before, after = _JOURNAL_POINTS.get((entry.status, tuple(sorted(entry.steps))), ("", ""))
        if self.point == before:
            await self._hang()
        await super().journal_put(entry, expect=expect, tenant=tenant, durable=durable)
        if self.point == after:
            await self._hang()


async def _worker(
    db: str, effects: pathlib.Path, snap: str, point: str, mode: str, variant: str, marker: pathlib.Path
) -> None:
    async with HookStore(db, snap, point, marker) as store:
        agent = booking_agent(
            store,
            Service(effects, dedupe=variant == "idempotent"),
            idempotent=variant == "idempotent",
            model=HangingModel(marker) if point == "model" else None,
            claim_ttl=1.0,
        )
        out = await agent.run(resume=APPROVE, snapshot_id=snap, detach=mode == "detached", raise_on_error=False)
        print(json.dumps(outcome(out)), flush=True)
        if mode == "detached" and out.snapshot_id:
            final = await agent.wait(out.snapshot_id, timeout=600)
            print(json.dumps({"status": final.status}), flush=True)


# the scenario -----------------------------------------------------------------------------------


@dataclass
class EffectRun:
    """One run: killed at ``point``, recovered; what the journal, the service and the session say."""

    variant: str
    point: str
    mode: str
    key: str = ""
    status_at_kill: str = ""
    """The journal entry's status once the worker was dead (``running``: the call is in doubt)."""
    in_doubt: bool = False
    """The recovery paused with an in-doubt interrupt on the call."""
    ran_before_asking: int = 0
    """Effects written between the kill and the in-doubt interrupt (a silent run: must be 0)."""
    auto_retried: bool = False
    """An in-doubt ``idempotent=True`` call the recovery retried without asking (with the same key)."""
    answer: str = ""
    """How the person answered the in-doubt interrupt: ``restart``, ``respond`` or ``""`` (not asked)."""
    counts: dict[str, int] = field(default_factory=dict[str, int])
    """Effect lines per step for the call's key."""
    retried_after_asking: int = 0
    """Repeated effects that a person's restart asked for, of steps the journal never recorded."""
    silent_repeats: int = 0
    deduped: int = 0
    lost: bool = False
    output: Any = None
    integrity: str = ""
    lapse_wait: float = 0.0
    wall: float = 0.0
    problems: list[str] = field(default_factory=list[str])


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}


async def pause(db: pathlib.Path, effects: pathlib.Path, variant: str) -> str:
    """A paused ``book`` call on ``db`` (its first attempt journaled as interrupted); the snapshot id."""
    async with SQLiteStore(db) as store:
        service = Service(effects, dedupe=variant == "idempotent")
        agent = booking_agent(store, service, idempotent=variant == "idempotent", model=ScriptedModel([ASK]))
        out = await agent.run("book bob a seat")
        assert out.finish_reason == "interrupted" and out.snapshot_id, out
        return out.snapshot_id


async def _kill_at(
    db: pathlib.Path, effects: pathlib.Path, snap: str, point: str, mode: str, variant: str, marker: pathlib.Path
) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        WORKER,
        *map(str, (db, effects, snap, point, mode, variant, marker)),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        env=_env(),
    )
    try:
        await _until(f"the resume to reach {point}", marker.exists, 30, proc)
        proc.kill()
        await asyncio.wait_for(proc.wait(), 10)
    finally:
        await _reap(proc)


def _tool_output(snap: Snapshot | None) -> Any:
    """The output of the ``b1`` tool response in ``snap``'s history, or ``None``."""
    found: Any = None
    for message in snap.state.messages if snap is not None and snap.state is not None else []:
        for part in message.content:
            if isinstance(part, ToolResponsePart) and part.ref == "b1":
                found = part.output
    return found


async def _answer_in_doubt(run: EffectRun, agent: PromptAgent, paused: Any, effects: pathlib.Path) -> Any:
    """A person checks the payment log: respond if the charge went through, restart (retry) if it did not."""
    [part] = paused.interrupts
    data = part.meta(md.INTERRUPT)
    if data.get("idempotencyKey") != run.key:
        run.problems.append(f"the in-doubt interrupt names key {data.get('idempotencyKey')}, not {run.key}")
    if (run.key, "charge") in effect_counts(effects):
        run.answer = "respond"
        reply = ToolResponsePart(name=part.name, ref=part.ref, output=CONFIRMED, metadata={md.INTERRUPT_RESPONSE: True})
        answer = Resume(respond=[reply])
    else:
        run.answer = "restart"
        answer = Resume(
            restart=[ToolRequestPart(name=part.name, ref=part.ref, input=part.input, metadata={md.RESUMED: True})]
        )
    async with asyncio.timeout(30):
        return await agent.run(resume=answer, snapshot_id=paused.snapshot_id, raise_on_error=False)


async def _recover(run: EffectRun, db: pathlib.Path, effects: pathlib.Path, snap: str) -> None:
    """After the killed holder's lease lapses: resume; answer an in-doubt pause as a person would."""
    async with SQLiteStore(db) as store:
        [entry] = await store.journal_entries()
        run.key, run.status_at_kill = entry.key, entry.status
        journaled = set(entry.steps)

        async def answerable() -> bool:
            cur = await store.load(snap)
            return cur is not None and claim_state(cur) in ("lapsed", "free")

        run.lapse_wait = await _until("the killed holder's lease to lapse", answerable, 15)
        service = Service(effects, dedupe=run.variant == "idempotent")
        agent = booking_agent(store, service, idempotent=run.variant == "idempotent", claim_ttl=5.0)
        before = len(effect_lines(effects))
        async with asyncio.timeout(30):
            out = await agent.run(resume=APPROVE, snapshot_id=snap, raise_on_error=False)
        if out.finish_reason == "interrupted" and any(md.is_in_doubt(p) for p in out.interrupts):
            run.in_doubt = True
            run.ran_before_asking = len(effect_lines(effects)) - before
            [entry] = await store.journal_entries()
            journaled = set(entry.steps)
            out = await _answer_in_doubt(run, agent, out, effects)
        run.auto_retried = run.variant == "idempotent" and run.status_at_kill == "running" and not run.in_doubt
        if out.finish_reason != "stop":
            run.problems.append(f"the recovery did not finish: {outcome(out)}")
        latest = await store.latest(entry.session_id)
        run.output = _tool_output(latest)
        run.lost = latest is None or latest.status != "completed" or not str(run.output or "").startswith("booked")
        counts = effect_counts(effects)
        run.counts = {s: counts[(run.key, s)] for s in STEPS}
        for step, n in run.counts.items():
            if n > 1 and run.answer == "restart" and step not in journaled:
                run.retried_after_asking += n - 1
            elif n > 1:
                run.silent_repeats += n - 1
        if len(counts) != sum(1 for s in STEPS if run.counts[s]):
            run.problems.append(f"effects under other keys: {dict(counts)}")


def judge(run: EffectRun) -> None:
    """The acceptance rules, as problems on ``run``."""
    if run.status_at_kill != AT_KILL[run.point]:
        run.problems.append(f"the journal says {run.status_at_kill} after a kill at {run.point}: the hook missed")
    expect_doubt = run.variant == "asks" and run.status_at_kill == "running"
    if run.in_doubt != expect_doubt:
        run.problems.append(f"in doubt {run.in_doubt}, expected {expect_doubt} (journal status {run.status_at_kill})")
    if run.ran_before_asking:
        run.problems.append(f"{run.ran_before_asking} effect(s) ran before the in-doubt call was asked about")
    if run.silent_repeats:
        run.problems.append(f"{run.silent_repeats} silent repeat(s): {run.counts}")
    if any(n < 1 for n in run.counts.values()):
        run.problems.append(f"a step never took effect: {run.counts}")
    if run.variant == "idempotent" and any(n != 1 for n in run.counts.values()):
        run.problems.append(f"an idempotent call against a deduping service took effect more than once: {run.counts}")
    if run.lost:
        run.problems.append(f"the turn is lost: the session's latest snapshot does not hold the result ({run.output})")
    if run.integrity != "ok":
        run.problems.append(f"integrity_check: {run.integrity}")


async def kill_and_recover(work: pathlib.Path, variant: str, point: str, mode: str, run: int) -> EffectRun:
    """Pause a booking, SIGKILL its approved resume at ``point``, recover, and judge the run."""
    name = f"{variant}-{point}-{mode}-{run}"
    db, effects, marker = work / f"{name}.db", work / f"{name}.effects", work / f"{name}.marker"
    fig = EffectRun(variant=variant, point=point, mode=mode)
    start = time.monotonic()
    snap = await pause(db, effects, variant)
    await _kill_at(db, effects, snap, point, mode, variant, marker)
    await _recover(fig, db, effects, snap)
    deduped = effects.with_suffix(".deduped")
    fig.deduped = len(deduped.read_text().splitlines()) if deduped.exists() else 0
    fig.integrity = await integrity(db)
    fig.wall = time.monotonic() - start
    judge(fig)
    return fig


async def effect_runs(
    work: pathlib.Path,
    *,
    variants: Sequence[str] = VARIANTS,
    points: Sequence[str] = tuple(POINTS),
    modes: Sequence[str] = MODES,
    runs: int = 10,
    parallel: int = 20,
) -> list[EffectRun]:
    """Every (variant, point, mode) ``runs`` times, ``parallel`` at a time (each on its own SQLite file)."""
    gate = asyncio.Semaphore(parallel)

    async def one(variant: str, point: str, mode: str, i: int) -> EffectRun:
        async with gate:
            try:
                return await kill_and_recover(work, variant, point, mode, i)
            except Exception as exc:  # a harness failure is a problem of that run, not of the whole table
                return EffectRun(variant=variant, point=point, mode=mode, problems=[f"{type(exc).__name__}: {exc}"])

    plan = [(v, p, m, i) for v in variants for p in points for m in modes for i in range(runs)]
    return list(await asyncio.gather(*(one(*cell) for cell in plan)))


def _span(values: Sequence[int]) -> str:
    lo, hi = min(values, default=0), max(values, default=0)
    return str(lo) if lo == hi else f"{lo}-{hi}"


def table(runs: Sequence[EffectRun]) -> tuple[list[str], list[list[str]]]:
    """The figures: one row per (variant, point, mode)."""
    header = [
        "tool",
        "killed at",
        "mode",
        "runs",
        "effects per call (reserve/charge)",
        "in doubt",
        "asked (interrupt)",
        "auto-retried",
        "answered restart/respond",
        "retried after asking",
        "silent repeats",
        "deduped",
        "lost",
        "problems",
    ]
    groups: dict[tuple[str, str, str], list[EffectRun]] = {}
    for r in runs:
        groups.setdefault((r.variant, r.point, r.mode), []).append(r)
    rows: list[list[str]] = []
    for (variant, point, mode), rs in groups.items():
        doubt = sum(r.status_at_kill == "running" for r in rs)
        rows.append(
            [
                "plain (asks)" if variant == "asks" else "idempotent=True",
                POINTS.get(point, point),
                mode,
                str(len(rs)),
                "/".join(_span([r.counts.get(s, 0) for r in rs]) for s in STEPS),
                str(doubt),
                str(sum(r.in_doubt for r in rs)),
                str(sum(r.auto_retried for r in rs)),
                f"{sum(r.answer == 'restart' for r in rs)}/{sum(r.answer == 'respond' for r in rs)}",
                str(sum(r.retried_after_asking for r in rs)),
                str(sum(r.silent_repeats for r in rs)),
                str(sum(r.deduped for r in rs)),
                str(sum(r.lost for r in rs)),
                str(sum(bool(r.problems) for r in rs)),
            ]
        )
    return header, rows


def render(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    cells = [list(header), *[list(r) for r in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    out: list[str] = []
    for i, row in enumerate(cells):
        out.append(
            "  ".join(c.rjust(w) if j > 2 else c.ljust(w) for j, (c, w) in enumerate(zip(row, widths, strict=True)))
        )
        if i == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out)


if __name__ == "__main__":
    a = sys.argv[1:]
    asyncio.run(_worker(a[0], pathlib.Path(a[1]), a[2], a[3], a[4], a[5], pathlib.Path(a[6])))
