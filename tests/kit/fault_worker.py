"""The fault harness of the safety core: races, lapsed claims and crashes on a shared SQLite file.

It is both a library (the scenarios, used by ``tests/faults/test_faults_*.py`` and ``bench/faults.py``)
and a worker process (``python fault_worker.py MODE ...``):

  race DB LOG PLAN WORKER BARRIER     run every repetition of PLAN (JSON: snapshots, each worker's
                                      share of resumes), synchronised with the other workers by a
                                      file barrier; print one JSON line per resume
  stall DB LOG SNAP                   resume SNAP (claim_ttl=1) with a tool that logs, then sleeps
                                      1 s (the test SIGSTOPs it there); print the output as JSON
  crash DB LOG SNAP POINT MODE MARKER resume SNAP (claim_ttl=1), ``attached`` or ``detached``, and
                                      hang at POINT (``tool``, ``model`` or ``commit``: inside the
                                      commit's SQLite transaction) after writing MARKER

Every tool run appends one line ``<snapshot resumed> <ctx.reclaimed_from or -> <pid>`` to LOG,
so the test counts tool runs per snapshot and sees whether a re-run was flagged.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import os
import pathlib
import signal
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from banking import APPROVE, PAY, Approval, Transfer
from store_kinds import integrity, locate, store_at

from interlock import AgentOutput, Inbox, PromptAgent, Snapshot, ToolContext, tool
from interlock._engine.commit import claim_state
from interlock.agents._host import Host
from interlock.models import ModelRequest, ModelResponse
from interlock.stores import JournalUpdater, Updater
from interlock.stores.postgres import PostgresStore, TxStep
from interlock.stores.sqlite import SQLiteStore
from interlock.testing import ScriptedModel

HERE = pathlib.Path(__file__).resolve().parent
WORKER = HERE / "fault_worker.py"
POINTS = ("tool", "model", "commit")
MODES = ("attached", "detached")


def _record(log: pathlib.Path, label: str, reclaimed_from: str | None) -> None:
    with log.open("a") as f:  # O_APPEND: one short line per write, whole, whichever process writes it
        f.write(f"{label} {reclaimed_from or '-'} {os.getpid()}\n")


def bank(
    store: SQLiteStore | PostgresStore,
    log: pathlib.Path,
    label: str,
    *,
    model: Any = None,
    claim_ttl: float = 60.0,
    blocking_sleep: float = 0.0,
    tool_sleep: float = 0.0,
    tool_marker: pathlib.Path | None = None,
) -> PromptAgent:
    """The bank agent resuming snapshot ``label``: its transfer pauses for approval, then logs one line per run."""
    if blocking_sleep:

        @tool(idempotent=True)
        def transfer(req: Transfer, ctx: ToolContext[Any], approval: Approval | None) -> str:
            """Move money once approved (a blocking body)."""
            if approval is None:
                ctx.interrupt({"to": req.to, "amount": req.amount})
            _record(log, label, ctx.reclaimed_from)
            time.sleep(blocking_sleep)
            return "sent"
    else:

        @tool(idempotent=True)
        async def transfer(req: Transfer, ctx: ToolContext[Any], approval: Approval | None) -> str:
            """Move money once approved."""
            if approval is None:
                ctx.interrupt({"to": req.to, "amount": req.amount})
            _record(log, label, ctx.reclaimed_from)
            if tool_marker is not None:
                tool_marker.write_text("tool")
            if tool_sleep:
                await asyncio.sleep(tool_sleep)
            return "sent"

    return PromptAgent(
        "bank", model or ScriptedModel(["paid"]), tools=[transfer], store=store, host=Host(claim_ttl=claim_ttl)
    )


def outcome(out: AgentOutput) -> dict[str, Any]:
    err = out.error
    details: Any = err.details if err is not None else None
    winner: Any = cast(dict[str, Any], details).get("winner") if isinstance(details, dict) else None
    return {
        "finish": out.finish_reason,
        "snapshot": out.snapshot_id,
        "status": err.status if err else None,
        "message": err.message if err else None,
        "winner": winner,
    }


async def pause_many(db: pathlib.Path, count: int) -> list[str]:
    """``count`` paused transfers on ``db``, each in its own session; their snapshot ids."""
    async with store_at(db) as store:
        agent = bank(store, db.with_suffix(".setup.log"), "setup", model=ScriptedModel([PAY] * count))
        ids: list[str] = []
        for _ in range(count):
            out = await agent.run("pay bob 5")
            assert out.finish_reason == "interrupted" and out.snapshot_id, out
            ids.append(out.snapshot_id)
        return ids


def tool_runs(log: pathlib.Path) -> dict[str, list[str | None]]:
    """Per resumed snapshot, the ``reclaimed_from`` of each tool run, in order."""
    runs: dict[str, list[str | None]] = {}
    if log.exists():
        for line in log.read_text().splitlines():
            label, reclaimed, _pid = line.split(" ")
            runs.setdefault(label, []).append(None if reclaimed == "-" else reclaimed)
    return runs


async def children(store: SQLiteStore | PostgresStore, parent_id: str) -> list[Snapshot]:
    found = [i for i in await store.list() if i.parent_id == parent_id]
    return [s for i in found if (s := await store.load(i.snapshot_id)) is not None]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}


async def _spawn(*args: str | int | os.PathLike[str], stdout: bool = True) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        WORKER,
        *map(str, args),
        stdout=asyncio.subprocess.PIPE if stdout else asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        env=_env(),
    )


async def _reap(proc: asyncio.subprocess.Process) -> None:
    """Kill ``proc`` if it still runs, and wait for it (bounded)."""
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGCONT)
            proc.kill()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(proc.wait(), 10)


async def _until(what: str, check: Any, timeout: float, proc: asyncio.subprocess.Process | None = None) -> float:
    """Poll ``check()`` until true; the seconds it took. Fails on timeout, or when ``proc`` exits first."""
    start = time.monotonic()
    while True:
        if await check() if inspect.iscoroutinefunction(check) else check():
            return time.monotonic() - start
        if proc is not None and proc.returncode is not None:
            err = await proc.stderr.read() if proc.stderr else b""
            raise AssertionError(f"the worker exited ({proc.returncode}) before {what}: {err.decode()[-2000:]}")
        if time.monotonic() - start > timeout:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(0.01)


# races ---------------------------------------------------------------------------------------


@dataclass
class RaceFigures:
    where: str
    n: int
    reps: int
    resumes: int = 0
    winners: int = 0
    aborted: int = 0
    named_in_details: int = 0
    lost_while_running: int = 0
    """Losers refused while the winner's turn was still running ("is being resumed"): true overlap."""
    winning_workers: set[int] = field(default_factory=set[int])
    tool_runs: int = 0
    wall: float = 0.0
    problems: list[str] = field(default_factory=list[str])


async def judge_race(
    db: pathlib.Path, log: pathlib.Path, snaps: Sequence[str], results: Sequence[Sequence[dict[str, Any]]], n: int
) -> RaceFigures:
    """Check every repetition: one winner that exists, every loser ABORTED naming it, one tool run."""
    fig = RaceFigures(where="", n=n, reps=len(snaps))
    runs = tool_runs(log)
    async with store_at(db) as store:
        for rep, (snap, res) in enumerate(zip(snaps, results, strict=True)):
            fig.resumes += len(res)
            fig.tool_runs += len(runs.get(snap, []))
            if len(res) != n:
                fig.problems.append(f"rep {rep}: {len(res)} results for {n} resumes")
            wins = [r for r in res if r["finish"] == "stop"]
            fig.winners += len(wins)
            if len(runs.get(snap, [])) != 1:
                fig.problems.append(f"rep {rep}: the tool ran {len(runs.get(snap, []))} times")
            if len(wins) != 1:
                fig.problems.append(f"rep {rep}: {len(wins)} successes: {res}")
                continue
            winner = wins[0]["snapshot"]
            if "worker" in wins[0]:
                fig.winning_workers.add(wins[0]["worker"])
            row = await store.load(winner)
            if row is None or row.status != "completed" or row.parent_id != snap:
                fig.problems.append(f"rep {rep}: the winner {winner} is not a completed child of {snap}: {row}")
            parent = await store.load(snap)
            if parent is None or parent.claimed_by != winner or claim_state(parent) != "answered":
                fig.problems.append(f"rep {rep}: the parent's claim is not answered by the winner: {parent}")
            for r in res:
                if r is wins[0]:
                    continue
                named = r["winner"] == winner or winner in (r["message"] or "")
                if r["status"] == "ABORTED" and named:
                    fig.aborted += 1
                    fig.named_in_details += r["winner"] == winner
                    fig.lost_while_running += "is being resumed" in (r["message"] or "")
                else:
                    fig.problems.append(f"rep {rep}: a loser did not end ABORTED naming {winner}: {r}")
    return fig


async def race_in_process(db: pathlib.Path, log: pathlib.Path, snaps: Sequence[str], n: int) -> RaceFigures:
    """Each repetition: ``n`` concurrent resumes of one paused snapshot, in this process, on one store."""
    results: list[list[dict[str, Any]]] = []
    start = time.monotonic()
    async with store_at(db) as store:
        for snap in snaps:
            agents = [bank(store, log, snap) for _ in range(n)]
            async with asyncio.timeout(60):
                outs = await asyncio.gather(
                    *(a.run(resume=APPROVE, snapshot_id=snap, raise_on_error=False) for a in agents)
                )
            results.append([outcome(o) for o in outs])
    wall = time.monotonic() - start
    fig = await judge_race(db, log, snaps, results, n)
    fig.where, fig.wall = "1 process", wall
    return fig


async def race_across_processes(
    db: pathlib.Path,
    log: pathlib.Path,
    snaps: Sequence[str],
    n: int,
    *,
    workers: int = 4,
    timeout: float = 120,
    mixed: bool = False,
) -> RaceFigures:
    """Each repetition: ``n`` concurrent resumes shared by ``workers`` long-lived processes on one file.

    ``mixed``: every other resume of each worker names the paused turn's session id, not its snapshot id.
    """
    shares = [n // workers + (w < n % workers) for w in range(workers)]
    work = db.parent / f"race-{n}-{time.monotonic_ns()}"
    work.mkdir()
    plan = work / "plan.json"
    sessions: list[str | None] = [None] * len(snaps)
    if mixed:
        async with store_at(db) as store:
            sessions = [row.session_id if (row := await store.load(s)) else None for s in snaps]
    plan.write_text(json.dumps({"snaps": list(snaps), "shares": shares, "sessions": sessions}))
    start = time.monotonic()
    procs = [await _spawn("race", db, log, plan, w, work) for w in range(workers)]
    results: list[list[dict[str, Any]]] = [[] for _ in snaps]
    try:
        async with asyncio.timeout(timeout):
            outs = await asyncio.gather(*(p.communicate() for p in procs))
        for p, (stdout, stderr) in zip(procs, outs, strict=True):
            if p.returncode != 0:
                raise AssertionError(f"a race worker failed ({p.returncode}): {stderr.decode()[-3000:]}")
            for line in stdout.decode().splitlines():
                r: dict[str, Any] = json.loads(line)
                rep: int = r.pop("rep")
                results[rep].append(r)
    finally:
        for p in procs:
            await _reap(p)
    wall = time.monotonic() - start
    fig = await judge_race(db, log, snaps, results, n)
    fig.where, fig.wall = f"{workers} processes", wall
    return fig


async def meet(barrier: pathlib.Path, step: int, worker: int, workers: int) -> float:
    """Arrive at ``step``; once all workers have, the common start time (the last arrival + 30 ms)."""
    (barrier / f"{step}-{worker}").write_text("")
    paths = [barrier / f"{step}-{w}" for w in range(workers)]
    deadline = time.monotonic() + 60
    while not all(p.exists() for p in paths):
        if time.monotonic() > deadline:
            raise TimeoutError(f"barrier {step}: the other workers never arrived")
        await asyncio.sleep(0.002)
    return max(p.stat().st_mtime for p in paths) + 0.03


async def _race_worker(db: str, log: pathlib.Path, plan_path: str, worker: int, barrier: pathlib.Path) -> None:
    plan = json.loads(pathlib.Path(plan_path).read_text())
    snaps, share, workers = plan["snaps"], plan["shares"][worker], len(plan["shares"])
    async with store_at(db) as store:
        for rep, (snap, session) in enumerate(zip(snaps, plan["sessions"], strict=True)):
            agents = [bank(store, log, snap) for _ in range(share)]
            named = [{"session_id": session} if session and i % 2 else {"snapshot_id": snap} for i in range(share)]
            start_at = await meet(barrier, rep, worker, workers)
            await asyncio.sleep(max(0.0, start_at - time.time()))
            async with asyncio.timeout(60):
                pairs = zip(agents, named, strict=True)
                outs = await asyncio.gather(*(a.run(resume=APPROVE, **w, raise_on_error=False) for a, w in pairs))
            for out in outs:
                print(json.dumps({"rep": rep, "worker": worker, **outcome(out)}), flush=True)


# lapsed claims --------------------------------------------------------------------------------


@dataclass
class LapseRun:
    """One lapsed-claim run: who committed, who was refused, what the store holds after."""

    first: dict[str, Any]
    second: dict[str, Any]
    commits: int
    tool_runs: list[str | None]
    children: list[str]
    latest: str | None
    wall: float
    notes: dict[str, Any] = field(default_factory=dict[str, Any])

    @property
    def winner(self) -> dict[str, Any] | None:
        wins = [r for r in (self.first, self.second) if r["finish"] == "stop"]
        return wins[0] if len(wins) == 1 else None

    @property
    def loser(self) -> dict[str, Any] | None:
        losers = [r for r in (self.first, self.second) if r["finish"] != "stop"]
        return losers[0] if len(losers) == 1 else None


async def _session_view(store: SQLiteStore | PostgresStore, snap: str) -> tuple[list[str], str | None]:
    parent = await store.load(snap)
    assert parent is not None
    kids = [c.snapshot_id for c in await children(store, snap)]
    leaf = await store.latest(parent.session_id)
    return kids, leaf.snapshot_id if leaf else None


async def lapse_blocking_tool(work: pathlib.Path, run: int, kind: str = "sqlite") -> LapseRun:
    """A synchronous tool sleeping 3 s with claim_ttl=1, and a second resume (another store object) 1.5 s in."""
    db, log = locate(kind, work / f"blocking-{run}.db"), work / f"blocking-{run}.log"
    (snap,) = await pause_many(db, 1)
    start = time.monotonic()
    async with store_at(db) as one, store_at(db) as two:
        first = asyncio.ensure_future(
            bank(one, log, snap, blocking_sleep=3.0, claim_ttl=1.0).run(
                resume=APPROVE, snapshot_id=snap, raise_on_error=False
            )
        )
        try:
            await asyncio.sleep(1.5)
            async with asyncio.timeout(30):
                second = await bank(two, log, snap, blocking_sleep=3.0, claim_ttl=1.0).run(
                    resume=APPROVE, snapshot_id=snap, raise_on_error=False
                )
                done = await first
        finally:
            first.cancel()
        kids, latest = await _session_view(one, snap)
    outs = [outcome(done), outcome(second)]
    return LapseRun(
        first=outs[0],
        second=outs[1],
        commits=sum(o["finish"] == "stop" for o in outs),
        tool_runs=tool_runs(log).get(snap, []),
        children=kids,
        latest=latest,
        wall=time.monotonic() - start,
    )


async def lapse_stopped_process(
    work: pathlib.Path, run: int, *, stop_for: float = 2.5, kind: str = "sqlite"
) -> LapseRun:
    """A resumer process SIGSTOPped in its tool past claim_ttl=1; another resume takes over; then SIGCONT."""
    db, log = locate(kind, work / f"stopped-{run}.db"), work / f"stopped-{run}.log"
    (snap,) = await pause_many(db, 1)
    start = time.monotonic()
    proc = await _spawn("stall", db, log, snap)
    notes: dict[str, Any] = {}
    try:
        await _until("the stalled resumer's tool to start", lambda: bool(tool_runs(log).get(snap)), 30, proc)
        proc.send_signal(signal.SIGSTOP)
        stopped = time.monotonic()
        async with store_at(db) as store:
            parent = await store.load(snap)
            assert parent is not None
            holder = notes["holder"] = parent.claimed_by

            async def lapsed() -> bool:
                cur = await store.load(snap)
                return cur is not None and claim_state(cur) == "lapsed"

            notes["lapse_wait"] = await _until("the stopped holder's lease to lapse", lapsed, stop_for)
            takeover = asyncio.ensure_future(
                bank(store, log, snap, claim_ttl=1.0).run(resume=APPROVE, snapshot_id=snap, raise_on_error=False)
            )
            try:
                await asyncio.sleep(max(0.0, stopped + stop_for - time.monotonic()))
                notes["took_over_while_stopped"] = takeover.done()
                proc.send_signal(signal.SIGCONT)
                async with asyncio.timeout(30):
                    second = await takeover
                    stdout, stderr = await proc.communicate()
            finally:
                takeover.cancel()
            lines = stdout.decode().splitlines()
            if proc.returncode != 0 or not lines:
                raise AssertionError(f"the stalled worker failed ({proc.returncode}): {stderr.decode()[-2000:]}")
            first = json.loads(lines[-1])
            notes["holder_row"] = None if holder is None else await store.load(holder)
            after = await store.load(snap)
            notes["reclaimed_from"] = (after.metadata or {}).get("reclaimedFrom") if after else None
            notes["claimed_by"] = after.claimed_by if after else None
            kids, latest = await _session_view(store, snap)
    finally:
        await _reap(proc)
    outs = [first, outcome(second)]
    return LapseRun(
        first=outs[0],
        second=outs[1],
        commits=sum(o["finish"] == "stop" for o in outs),
        tool_runs=tool_runs(log).get(snap, []),
        children=kids,
        latest=latest,
        wall=time.monotonic() - start,
        notes=notes,
    )


async def _stall_worker(db: str, log: pathlib.Path, snap: str) -> None:
    async with store_at(db) as store:
        out = await bank(store, log, snap, claim_ttl=1.0, tool_sleep=1.0).run(
            resume=APPROVE, snapshot_id=snap, raise_on_error=False
        )
        print(json.dumps(outcome(out)), flush=True)


# crashes ---------------------------------------------------------------------------------------


@dataclass
class CrashRun:
    point: str
    mode: str
    holder: str | None = None
    lapse_wait: float = 0.0
    local: list[str] = field(default_factory=list[str])
    inbox: list[str] = field(default_factory=list[str])
    remote: list[str] = field(default_factory=list[str])
    resumed: dict[str, Any] = field(default_factory=dict[str, Any])
    integrity: str = ""
    tool_runs: list[str | None] = field(default_factory=list[str | None])
    wall: float = 0.0
    problems: list[str] = field(default_factory=list[str])


class HangingModel:
    """Writes a marker at its first call, then never answers (the worker is killed there)."""

    name = "test/hanging"

    def __init__(self, marker: pathlib.Path) -> None:
        self.marker = marker

    async def generate(self, request: ModelRequest, *, on_chunk: Any = None) -> ModelResponse:
        self.marker.write_text("model")
        await asyncio.sleep(3600)
        raise AssertionError("unreachable")


class _HangInCommit:
    """Its resume commit (the claim's fence first, then the turn's row) hangs inside the store's transaction."""

    parent: str
    marker: pathlib.Path

    async def save_all(
        self,
        updates: Sequence[tuple[str, Updater]],
        *,
        tenant: str | None = None,
        journal: Sequence[tuple[str, JournalUpdater]] = (),
        events: Sequence[Any] = (),
        then: Sequence[Any] = (),
    ) -> list[Any]:
        updates = list(updates)
        if len(updates) >= 2 and updates[0][0] == self.parent:
            sid, update = updates[-1]
            marker = self.marker

            def hang(cur: Snapshot | None) -> Snapshot | None:
                new = update(cur)  # inside the transaction (SQLite: BEGIN IMMEDIATE; PostgreSQL: rows locked)
                marker.write_text("commit")
                time.sleep(3600)
                return new

            updates[-1] = (sid, hang)
        return await super().save_all(updates, tenant=tenant, journal=journal, events=events, then=then)  # type: ignore[misc]


class _HangingSQLite(_HangInCommit, SQLiteStore):
    pass


class _HangingPostgres(_HangInCommit, PostgresStore):
    async def save_all(
        self,
        updates: Sequence[tuple[str, Updater]],
        *,
        tenant: str | None = None,
        journal: Sequence[tuple[str, JournalUpdater]] = (),
        events: Sequence[Any] = (),
        then: Sequence[TxStep] = (),
    ) -> list[Any]:
        if then:  # a worker hand-off's job insert: not what this store hangs in
            return await PostgresStore.save_all(self, updates, tenant=tenant, journal=journal, events=events, then=then)
        return await _HangInCommit.save_all(self, updates, tenant=tenant, journal=journal, events=events)


def _hanging_commit_store(db: str, parent: str, marker: pathlib.Path) -> SQLiteStore | PostgresStore:
    plain = store_at(db)
    store = _HangingPostgres(plain.dsn) if isinstance(plain, PostgresStore) else _HangingSQLite(db)
    store.parent, store.marker = parent, marker
    return store


async def _crash_worker(db: str, log: pathlib.Path, snap: str, point: str, mode: str, marker: pathlib.Path) -> None:
    store = _hanging_commit_store(db, snap, marker) if point == "commit" else store_at(db)
    async with store:
        agent = bank(
            store,
            log,
            snap,
            claim_ttl=1.0,
            tool_marker=marker if point == "tool" else None,
            tool_sleep=3600 if point == "tool" else 0.0,
            model=HangingModel(marker) if point == "model" else None,
        )
        out = await agent.run(resume=APPROVE, snapshot_id=snap, detach=mode == "detached", raise_on_error=False)
        print(json.dumps(outcome(out)), flush=True)
        if mode == "detached" and out.snapshot_id:
            final = await agent.wait(out.snapshot_id, timeout=600)
            print(json.dumps({"status": final.status}), flush=True)


async def crash_and_recover(work: pathlib.Path, run: int, point: str, mode: str, kind: str = "sqlite") -> CrashRun:
    """SIGKILL a resume at ``point``; after its lease lapses, check the interrupt is answerable everywhere."""
    from http_helpers import serve

    from interlock import AgentServer, RemoteAgent

    name = f"crash-{point}-{mode}-{run}"
    db, log, marker = locate(kind, work / f"{name}.db"), work / f"{name}.log", work / f"{name}.marker"
    (snap,) = await pause_many(db, 1)
    fig = CrashRun(point=point, mode=mode)
    start = time.monotonic()
    proc = await _spawn("crash", db, log, snap, point, mode, marker, stdout=False)
    try:
        await _until(f"the resume to reach the {point}", marker.exists, 30, proc)
        proc.kill()
        await asyncio.wait_for(proc.wait(), 10)
    finally:
        await _reap(proc)
    async with store_at(db) as store, store_at(db) as served:
        parent = await store.load(snap)
        assert parent is not None
        fig.holder = holder = parent.claimed_by
        if holder is None or claim_state(parent) not in ("held", "lapsed"):
            fig.problems.append(f"the killed resume did not hold the claim: {parent.claimed_by}, {claim_state(parent)}")

        async def lapsed() -> bool:
            cur = await store.load(snap)
            return cur is not None and claim_state(cur) in ("lapsed", "free")

        fig.lapse_wait = await _until("the killed holder's lease to lapse", lapsed, 15)
        agent = bank(store, log, snap, claim_ttl=5.0)
        fig.local = [p.ref or "" for p in await agent.pending_interrupts(snap)]
        fig.inbox = [i.snapshot_id for i in await Inbox(store, agents=[agent]).pending()]
        async with serve(AgentServer([bank(served, log, snap)])) as base, RemoteAgent(f"{base}/bank") as remote:
            fig.remote = [p.ref or "" for p in await remote.pending_interrupts(snap)]
        async with asyncio.timeout(30):
            done = await agent.run(resume=APPROVE, snapshot_id=snap, raise_on_error=False)
        fig.resumed = outcome(done)
        after = await store.load(snap)
        assert after is not None
        if after.claimed_by != done.snapshot_id or claim_state(after) != "answered":
            fig.problems.append(f"the parent's claim is not answered by the recovery: {after.claimed_by}")
        if (after.metadata or {}).get("reclaimedFrom") != holder:
            fig.problems.append(f"the takeover is not recorded: metadata {after.metadata}")
        kids = await children(store, snap)
        completed = [c.snapshot_id for c in kids if c.status == "completed"]
        if completed != [done.snapshot_id]:
            fig.problems.append(f"completed children of the parent: {completed}, expected only {done.snapshot_id}")
        dead = None if holder is None else await store.load(holder)
        if mode == "attached" and dead is not None:
            fig.problems.append(f"the killed attached resume left a row: {dead.status}")
        if mode == "detached" and (dead is None or dead.status != "failed"):
            fig.problems.append(f"the killed detached resume's pending row is not failed: {dead and dead.status}")
        leaf = await store.latest(parent.session_id)
        if leaf is None or leaf.snapshot_id != done.snapshot_id:
            fig.problems.append(f"the session's latest is {leaf and leaf.snapshot_id}, not the recovery")
    fig.integrity = await integrity(db)
    fig.tool_runs = tool_runs(log).get(snap, [])
    fig.wall = time.monotonic() - start
    if fig.local != ["t1"] or fig.inbox != [snap] or fig.remote != ["t1"]:
        fig.problems.append(f"not answerable again: local {fig.local}, inbox {fig.inbox}, remote {fig.remote}")
    if fig.resumed["finish"] != "stop":
        fig.problems.append(f"the recovery resume failed: {fig.resumed}")
    if fig.integrity != "ok":
        fig.problems.append(f"integrity_check: {fig.integrity}")
    # The tool is idempotent=True: killed while it ran (its journal entry in doubt), it runs again, flagged;
    # killed after it returned (at the model call or the commit), its recorded output is replayed: one run.
    expected_runs = 2 if point == "tool" else 1
    if len(fig.tool_runs) != expected_runs:
        fig.problems.append(f"expected {expected_runs} run(s) of the tool after a kill at the {point}: {fig.tool_runs}")
    if fig.tool_runs[:1] != [None] or any(r != holder for r in fig.tool_runs[1:]):
        fig.problems.append(f"a repeated tool run is not flagged with ctx.reclaimed_from={holder}: {fig.tool_runs}")
    return fig


async def crash_runs(
    work: pathlib.Path, point: str, mode: str, runs: int, parallel: int = 5, kind: str = "sqlite"
) -> list[CrashRun]:
    gate = asyncio.Semaphore(parallel)

    async def one(i: int) -> CrashRun:
        async with gate:
            return await crash_and_recover(work, i, point, mode, kind)

    return list(await asyncio.gather(*(one(i) for i in range(runs))))


async def main(argv: list[str]) -> None:
    mode, db, log = argv[0], argv[1], pathlib.Path(argv[2])
    if mode == "race":
        await _race_worker(db, log, argv[3], int(argv[4]), pathlib.Path(argv[5]))
    elif mode == "stall":
        await _stall_worker(db, log, argv[3])
    elif mode == "crash":
        await _crash_worker(db, log, argv[3], argv[4], argv[5], pathlib.Path(argv[6]))
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
