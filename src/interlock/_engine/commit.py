"""A server-managed turn's writes: claim the interrupted parent, commit the new snapshot, or give it back.

**Claims**: how exactly one resume of an interrupted snapshot runs its tools and commits.

A resume first *claims* the interrupted snapshot in one atomic store write. Of several
racing resumes (in any process) one wins; the others get :class:`ClaimConflictError`
(ABORTED) naming the winner. A claim is a lease: it carries its holder (the resuming
turn's snapshot id, which is unique per attempt and so serves as the fencing token) and
an expiry, which the holder extends every ``ttl / 3`` seconds while its turn runs.

The holder's commit is *fenced*: the turn's snapshot is written in the same transaction
that checks the claim is still held by that holder and unexpired, and marks it answered.
A holder whose lease lapsed (a blocked event loop, a stopped process) or was taken over
cannot commit. Every exit path that does not commit gives the claim back. A lease that
lapsed may be taken over whatever the holder's own row says; the takeover is recorded as
``metadata.reclaimedFrom`` and a dead detached holder's pending row is marked failed.

This module is the lease *process* (take, keep fresh, fenced commit, release). The claim
rules (:func:`claim_state`, the one rule for "is this interrupt taken") and every change of
a claim are :mod:`interlock.records.snapshots`'s; they are re-exported here.

**The turn's writes.** The claim writes the intents of the calls a resume restarts in its own transaction; the commit
writes the snapshot, the journal's deferred outcomes and the outbox events in one transaction,
fenced by the claim (ABORTED if it lapsed); a turn that does not commit gives the interrupt back.

The outbox events a commit owes (webhook notifications and deadline timers) are decided in
one place, :func:`commit_events`, and written in the same transaction as the turn's snapshot
(:mod:`interlock.records._outbox`):

=========================  ===========================================================
event (channel)            written when
=========================  ===========================================================
``interrupt.created``      a turn pauses: one per pending interrupt (agents built with
(webhook)                  ``notify=True``); carries the resume token when the agent
                           mints them, and the deadline when there is one
``effect.in_doubt``        the same, for a call the effect journal paused
(webhook)                  (:func:`interlock.metadata.is_in_doubt`)
``interrupt.answered``     a resume commits: one per answered call (``notify=True``)
(webhook)
``interrupt.expired``      the same, for a call a passed deadline's policy answered
(webhook)                  (:mod:`interlock.notify._deadlines`)
``deadline.due``           a turn pauses on an interrupt with a deadline (every
(deadline)                 server-managed agent); due at the deadline
``deadline.warn``          the same, with ``warn_before``: due that long before it
(deadline)                 (the sweeper sends ``interrupt.expiring``, once)
=========================  ===========================================================

``interrupt.escalated`` is written by :mod:`interlock.notify._deadlines` itself, with the
escalation marker it sets on the snapshot.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol, cast

from .. import metadata as md
from .._json_object import is_object
from ..errors import ClaimConflictError, InterlockError
from ..interrupts._decisions import decision_of
from ..interrupts._plan import PlannedCall, Resume, ResumePlan
from ..interrupts._tokens import mint_tokens
from ..messages import Message
from ..parts import ToolRequestPart, ToolResponsePart
from ..records._outbox import DEADLINE, WEBHOOK, OutboxEvent, new_event
from ..records._sessions import ErrorInfo, Session, Snapshot, utcnow
from ..records.snapshots import (
    Ballot,
    ClaimTake,
    answer_claim,
    conflict,
    fail_taken_over,
    put_row,
    refresh_claim,
    release_claim,
    settle_claimed,
    take_claim,
)
from ..records.snapshots import ClaimState as ClaimState
from ..records.snapshots import claim_state as claim_state
from ..records.snapshots import consumed_tokens as consumed_tokens
from ..records.snapshots import is_answerable as is_answerable
from ..records.snapshots import refuse_spent as refuse_spent
from ..stores import JournalStore, JournalUpdater, SnapshotStore, Updater
from ..telemetry import _hooks as hooks
from .effects import Effects
from .leases import LeaseClock, clock_of

if TYPE_CHECKING:
    from .protocols import RunnableAgent


class Claims:
    """Claims on interrupted snapshots in one store, for one tenant."""

    def __init__(self, store: SnapshotStore, tenant: str | None, *, ttl: float) -> None:
        self.store = store
        self.tenant = tenant
        self.ttl = ttl

    async def take(
        self,
        parent_id: str,
        turn_id: str,
        *,
        nonces: Sequence[str] = (),
        journal: Sequence[tuple[str, JournalUpdater]] = (),
    ) -> ClaimHold:
        """Claim ``parent_id`` for ``turn_id`` and keep the lease fresh until the hold ends.

        See :meth:`vote` for a resume that casts quorum votes.

        ``journal`` is written in the claim's transaction (the intents of the calls the
        resume restarts, :meth:`interlock._engine.effects.Effects.prepare`): only if the claim is taken.

        ``nonces`` are the resume tokens' (:mod:`interlock.interrupts._tokens`): they are spent by the
        hold's fenced commit, in the same transaction (a hold released without committing
        leaves them unspent). A token spent on ``parent_id`` was spent by the answer that
        won, so its resume is refused like any other second answer: ABORTED naming the winner.

        Raises:
            ClaimConflictError: another resume holds the claim, or already answered (a spent
                token's resume included).
            PermissionDeniedError: a token was spent (``replayed``) on a snapshot nobody answered.
            SnapshotNotFoundError: there is no such snapshot.
        """
        hold = await self.vote(parent_id, turn_id, nonces=nonces, journal=journal)
        assert hold is not None
        return hold

    async def vote(
        self,
        parent_id: str,
        turn_id: str,
        *,
        nonces: Sequence[str] = (),
        journal: Sequence[tuple[str, JournalUpdater]] = (),
        ballots: Sequence[Ballot] = (),
    ) -> ClaimHold | None:
        """:meth:`take`, recording ``ballots`` (quorum votes) in the same write first.

        ``None`` when the votes were recorded without reaching every call's quorum (nothing is
        claimed, ``journal`` is not written); else the hold, as :meth:`take` gives it: the vote
        that reaches the quorum claims the row in the write that records it, so of racing voters
        exactly one resumes. A voter already recorded is refused (``already_voted``).
        """
        steal: str | None = None
        for _ in range(3):
            take = take_claim(turn_id, ttl=self.ttl, steal=steal, nonces=nonces, ballots=ballots)
            writes: list[tuple[str, Updater]] = [(parent_id, take)]
            if steal is not None:
                writes.append((steal, fail_taken_over(turn_id)))
            entries = [(key, _if_taken(take, update)) for key, update in journal]
            written = await self.store.save_all(writes, tenant=self.tenant, journal=entries)
            if take.voted_only:
                return None
            if written[0] is not None:
                hold = ClaimHold(
                    claims=self, parent_id=parent_id, turn_id=turn_id, reclaimed_from=steal, nonces=tuple(nonces)
                )
                hold.start()
                hooks.claim_taken(parent_id, turn_id, steal, self.ttl)
                return hold
            assert take.lapsed is not None
            holder = await self.store.load(take.lapsed, tenant=self.tenant)
            if holder is not None and holder.status == "completed":  # it did commit (a row from an older layout)
                raise conflict(parent_id, take.lapsed, answered=True)
            steal = take.lapsed
        raise conflict(parent_id, steal, answered=False)


@dataclass(kw_only=True, eq=False, slots=True)
class ClaimHold:
    """A claim held by one turn: refreshed until it is committed or released (idempotent, every exit path)."""

    claims: Claims
    parent_id: str
    turn_id: str
    reclaimed_from: str | None = None
    nonces: tuple[str, ...] = ()
    """The resume tokens' nonces this hold's commit spends (``metadata.consumedTokens``)."""
    lost: str | None = None
    """Why the lease was lost while the turn ran (then :meth:`commit_updater` refuses)."""
    done: bool = False
    _refresher: asyncio.Task[None] | None = field(default=None, repr=False)
    _clock: LeaseClock | None = field(default=None, repr=False)

    def start(self) -> None:
        """Refresh the lease ``ttl / 3`` seconds from now: an entry of the loop's one lease timer (:mod:`.leases`)."""
        loop = asyncio.get_running_loop()
        clock = self._clock = clock_of(loop)
        clock.add(self, self.claims.ttl / 3, loop)

    def due(self) -> None:
        """The lease clock's call: refresh now, unless the hold ended."""
        self._clock = None
        if not self.done:
            self._refresher = asyncio.ensure_future(self._keep_fresh())

    async def _keep_fresh(self) -> None:
        claims = self.claims
        try:
            refresh = refresh_claim(self.parent_id, self.turn_id, claims.ttl)
            if await claims.store.save(self.parent_id, refresh, tenant=claims.tenant) is None:
                return
        except ClaimConflictError as exc:
            self.lost = exc.message
            hooks.claim_lost(self.parent_id, self.turn_id, exc.message)
            return
        except Exception:  # the store is unreachable: the lease runs out, and the commit will refuse
            pass
        if self._refresher is not None:  # not stopped meanwhile: the next refresh
            self._refresher = None
            self.start()

    def commit_updater(self) -> Updater:
        """The updater that fences a commit: the claim must still be held by this turn; it becomes answered.

        It spends the hold's token nonces in the same write. Write it with the turn's
        snapshot in one :meth:`~interlock.stores.SnapshotStore.save_all`.
        """
        return answer_claim(self.parent_id, self.turn_id, self.nonces)

    def own_updater(self, update: Updater) -> Updater:
        """For a claim on the very row the holder writes (a worker's lease on a pending snapshot).

        The fence of :meth:`commit_updater`, then ``update``; the written row's claim is cleared
        (a finished turn's row is not held by anyone). Write it with ``store.save_all``, then
        call :meth:`settled`.
        """
        return settle_claimed(self.commit_updater(), update)

    def settled(self) -> None:
        """The holder's :meth:`own_updater` write committed: stop refreshing; nothing is left to release."""
        self._stop()
        self.done = True

    async def commit(
        self,
        writes: Sequence[tuple[str, Updater]],
        *,
        journal: Sequence[tuple[str, JournalUpdater]] = (),
        events: Sequence[OutboxEvent] = (),
    ) -> list[Snapshot | None]:
        """Write ``writes`` (``journal`` entries, outbox ``events``) fenced by this claim, in one transaction.

        The claim is answered after it.

        Raises:
            ClaimConflictError: the lease lapsed or was taken over; nothing was written.
        """
        self._stop()
        if self.lost is not None:
            raise ClaimConflictError(self.lost)
        claims = self.claims
        try:
            written = await claims.store.save_all(
                [(self.parent_id, self.commit_updater()), *writes], tenant=claims.tenant, journal=journal, events=events
            )
        except ClaimConflictError as exc:
            hooks.claim_lost(self.parent_id, self.turn_id, exc.message)
            raise
        self.done = True
        return written[1:]

    async def release(self) -> None:
        """Give the interrupt back, unless this hold committed (idempotent; errors are swallowed)."""
        self._stop()
        if self.done:
            return
        self.done = True
        with contextlib.suppress(Exception):
            await self.claims.store.save(self.parent_id, release_claim(self.turn_id), tenant=self.claims.tenant)

    def _stop(self) -> None:
        if self._clock is not None:
            self._clock.remove(self)
            self._clock = None
        if self._refresher is not None:
            self._refresher.cancel()
            self._refresher = None


def _if_taken(take: ClaimTake, update: JournalUpdater) -> JournalUpdater:
    """``update``, applied only when ``take`` took the claim (its row is written before journal entries)."""
    return lambda cur: update(cur) if take.lapsed is None and not take.voted_only else None


def error_info(exc: BaseException) -> ErrorInfo:
    """What a failure looks like in an output or a snapshot (INTERNAL unless it is an interlock error)."""
    if isinstance(exc, InterlockError):
        return ErrorInfo(status=exc.status, message=exc.message, details=exc.details)
    return ErrorInfo(status="INTERNAL", message=str(exc) or type(exc).__name__)


class TurnStore(SnapshotStore, JournalStore, Protocol):
    """What a turn writes to: snapshots (its claim and commit) and the effect journal (its tool calls)."""


@dataclass(kw_only=True, slots=True)
class TurnWriter:
    """The writes of one server-managed invocation's turns, in its agent's store under its tenant."""

    agent: RunnableAgent
    store: TurnStore
    tenant: str | None
    context: dict[str, Any]
    claims: Claims

    def effects(self, session_id: str, parent: Snapshot | None, turn_id: str) -> Effects:
        """The turn's effect journal: server-managed agents journal every tool call in their store."""
        return Effects(
            store=self.store,
            tenant=self.tenant,
            agent=self.agent.name,
            session_id=session_id,
            snapshot_id=parent.snapshot_id if parent else turn_id,
            turn_id=turn_id,
        )

    async def claim(
        self,
        parent: Snapshot,
        turn_id: str,
        plan: ResumePlan,
        nonces: tuple[str, ...],
        effects: Effects | None,
        index: int,
        ballots: Sequence[Ballot] = (),
    ) -> ClaimHold | None:
        """Claim the interrupted ``parent``; the intents of the calls the resume restarts go in the same write.

        ``index`` is the position of the paused message in the history. With quorum ``ballots``
        the votes are recorded in that write, and ``None`` means they did not reach the quorum
        (nothing claimed: the resume ends there, its votes kept).
        """
        journal: list[tuple[str, JournalUpdater]] = []
        if effects is not None:
            restarts = [(c.request, c.value) for c in plan.calls if c.verb == "restart"]
            journal = effects.prepare(restarts, index)
        hold = await self.claims.vote(parent.snapshot_id, turn_id, nonces=nonces, journal=journal, ballots=ballots)
        if effects is not None and hold is not None:
            effects.claimed()
        return hold

    def metadata(self, plan: ResumePlan | None, traced: dict[str, Any]) -> dict[str, Any]:
        """A committed turn's snapshot metadata: the agent, the trace ids, the resume's audit record, its delegator."""
        meta: dict[str, Any] = {"agent": self.agent.name, **traced}
        if isinstance(delegated := self.context.get(md.DELEGATED_BY), dict):  # a sub-agent's turn (delegation)
            meta[md.DELEGATED_BY] = delegated
        if plan is not None:
            meta["resume"] = audit_record(plan.resume, self.context, plan=plan)
        return meta

    async def commit(
        self,
        session: Session,
        turn_id: str,
        parent: Snapshot | None,
        finish: str | None,
        plan: ResumePlan | None,
        hold: ClaimHold | None,
        effects: Effects | None,
        traced: dict[str, Any],
    ) -> Snapshot:
        """Write the turn's snapshot; a resumed turn's write is fenced by its claim (ABORTED if it lapsed).

        The journal's deferred outcomes are written in the same transaction (no write of their own).
        """
        meta = self.metadata(plan, traced)
        if finish == "interrupted":  # each pending interrupt gets a token bound to this snapshot
            session.set_messages(
                mint_tokens(self.agent, session.messages, session_id=session.session_id, snapshot_id=turn_id)
            )
        snap = Snapshot(
            snapshot_id=turn_id,
            session_id=session.session_id,
            parent_id=parent.snapshot_id if parent else None,
            status="completed",
            finish_reason=finish,
            state=session.state.copy(),
            metadata=meta,
        )
        journal = effects.commit_updates() if effects is not None else []
        events = self.events(session.session_id, turn_id, parent, finish, session.messages, plan, meta)
        writes: list[tuple[str, Updater]] = [(turn_id, put_row(snap))]
        if hold is None:
            (written,) = await self.store.save_all(writes, tenant=self.tenant, journal=journal, events=events)
        else:
            (written,) = await hold.commit(writes, journal=journal, events=events)
        assert written is not None
        return written

    async def flush(self, effects: Effects) -> None:
        """Write ``effects``' :meth:`~interlock._engine.effects.Effects.commit_updates` alone (no commit follows)."""
        updates = effects.commit_updates()
        if updates:
            with contextlib.suppress(Exception):  # unrecorded, a call reads as in doubt: asked, never repeated
                await self.store.save_all([], tenant=self.tenant, journal=updates)

    def events(
        self,
        session_id: str,
        turn_id: str,
        parent: Snapshot | None,
        finish: str | None,
        messages: list[Message],
        plan: ResumePlan | None,
        meta: dict[str, Any],
    ) -> list[OutboxEvent]:
        """The outbox rows the turn's commit writes with it (:func:`commit_events`)."""
        record: Any = meta.get("resume")
        return commit_events(
            agent=self.agent.name,
            notify=self.agent.host.notify,
            tenant=self.tenant,
            session_id=session_id,
            turn_id=turn_id,
            parent_id=parent.snapshot_id if parent else None,
            finish=finish,
            messages=messages,
            plan=plan,
            by=record.get("by") if is_object(record) else None,
        )


async def give_back(writer: TurnWriter | None, hold: ClaimHold | None, effects: Effects | None) -> None:
    """A turn ends without committing: record its calls' outcomes, then give the interrupt back."""
    if writer is not None and effects is not None:
        await writer.flush(effects)
    if hold is not None:
        await hold.release()


def audit_record(resume: Resume, context: Mapping[str, Any], *, plan: ResumePlan | None = None) -> dict[str, Any]:
    """What a resume decided, verbatim: kept as the resumed snapshot's ``metadata["resume"]``.

    ``by`` is ``context["identity"]``, ``at`` the time; one row per answered call, under
    its verb: ``name``, ``ref``, ``decision`` (``approve``/``deny`` from an explicit
    decision or the tool's declared rule, else ``None``) and the restart's ``payload``
    (``resumed`` as sent, without the approval marker) or the respond's ``output``; a
    respond a passed deadline applied (:mod:`interlock.notify._deadlines`) adds ``expired``: its policy;
    a call asked under an answer policy adds ``policy``: that policy's digest.
    """
    calls = {(c.request.name, c.request.ref or None): c for c in plan.calls} if plan else {}
    identity = context.get("identity")
    return {
        "by": identity if isinstance(identity, (str, int, float, dict)) else None,
        "at": utcnow().isoformat(),
        "respond": [_audit_row(p, calls.get((p.name, p.ref or None))) for p in resume.respond],
        "restart": [_audit_row(p, calls.get((p.name, p.ref or None))) for p in resume.restart],
    }


def _audit_row(entry: ToolRequestPart | ToolResponsePart, call: PlannedCall | None) -> dict[str, Any]:
    """One answered call's row of :func:`audit_record` (``call``: the plan's call it answers, if any)."""
    decision = decision_of(entry) or (call.decision if call else None)
    if isinstance(entry, ToolResponsePart):
        row = {"name": entry.name, "ref": entry.ref, "decision": decision, "output": entry.output}
        expired = md.expired_by(entry)
        if expired is not None:
            row["expired"] = expired
    else:
        row = {"name": entry.name, "ref": entry.ref, "decision": decision}
        row["payload"] = md.without_approval(entry.meta(md.RESUMED))
        reason = entry.meta(md.REASON)
        if reason is not None:
            row["reason"] = reason
    said = call.request.meta(md.POLICY) if call else None
    if is_object(said) and "digest" in said:
        row["policy"] = said["digest"]
    return row


def interrupt_data(agent: str, session_id: str, snapshot_id: str, part: ToolRequestPart) -> dict[str, Any]:
    """What a webhook says of a pending interrupt (the paused request ``part`` in ``snapshot_id``)."""
    deadline = md.deadline_of(part) or {}
    return {
        "agent": agent,
        "sessionId": session_id,
        "snapshotId": snapshot_id,
        "tool": part.name,
        "ref": part.ref,
        "input": part.input,
        md.INTERRUPT: part.meta(md.INTERRUPT),
        "inDoubt": md.is_in_doubt(part),
        md.RESUME_TOKEN: md.resume_token(part),
        "expiresAt": deadline.get("expiresAt"),
    }


def _passed(part: ToolRequestPart, now: datetime) -> bool:
    at = (md.deadline_of(part) or {}).get("expiresAt")
    try:
        return isinstance(at, str) and datetime.fromisoformat(at) <= now
    except ValueError:
        return False


def _answered(
    agent: str, session_id: str, parent_id: str, turn_id: str, plan: ResumePlan, by: Any, tenant: str | None
) -> list[OutboxEvent]:
    now = utcnow()
    events: list[OutboxEvent] = []
    for call in plan.calls:
        entry = call.response if call.verb == "respond" else call.restart
        if entry is None:
            continue
        policy = md.expired_by(entry) if _passed(call.request, now) else None
        data = {
            "agent": agent,
            "sessionId": session_id,
            "snapshotId": parent_id,
            "answeredIn": turn_id,
            "tool": call.request.name,
            "ref": call.request.ref,
            "verb": call.verb,
            "decision": call.decision or decision_of(entry),
            "by": by,
        }
        if policy is not None:
            events.append(new_event(WEBHOOK, "interrupt.expired", data | {"policy": policy}, tenant=tenant))
        else:
            events.append(new_event(WEBHOOK, "interrupt.answered", data, tenant=tenant))
    return events


def _paused(
    agent: str, session_id: str, snapshot_id: str, messages: Sequence[Message], notify: bool, tenant: str | None
) -> list[OutboxEvent]:
    last = messages[-1] if messages else None
    if last is None or last.role != "model":
        return []
    events: list[OutboxEvent] = []
    for part in last.interrupts:
        if not notify and (md.deadline_of(part) or {}).get("expiresAt") is None:
            continue  # neither a webhook nor a timer
        data = interrupt_data(agent, session_id, snapshot_id, part)
        if notify:
            kind = "effect.in_doubt" if data["inDoubt"] else "interrupt.created"
            events.append(new_event(WEBHOOK, kind, data, tenant=tenant))
        events += deadline_timers(data, md.deadline_of(part), tenant)
    return events


def deadline_timers(data: dict[str, Any], deadline: dict[str, Any] | None, tenant: str | None) -> list[OutboxEvent]:
    """The timers of a pending interrupt's deadline: ``deadline.due`` at it, ``deadline.warn`` ``warnBefore`` earlier.

    ``data`` is :func:`interrupt_data`'s (its ``expiresAt`` the deadline's); a moved deadline gets new timers
    (the old ones find it moved and wait, or do nothing).
    """
    at = cast(str | None, data.get("expiresAt"))
    if at is None:
        return []
    due = datetime.fromisoformat(at)
    timer = {k: data[k] for k in ("agent", "sessionId", "snapshotId", "tool", "ref", "expiresAt")}
    events = [new_event(DEADLINE, "deadline.due", timer, tenant=tenant, due_at=due)]
    warn = (deadline or {}).get("warnBefore")
    if isinstance(warn, (int, float)) and not isinstance(warn, bool):
        events.append(new_event(DEADLINE, "deadline.warn", timer, tenant=tenant, due_at=due - timedelta(seconds=warn)))
    return events


def commit_events(
    *,
    agent: str,
    notify: bool,
    tenant: str | None,
    session_id: str,
    turn_id: str,
    parent_id: str | None,
    finish: str | None,
    messages: Sequence[Message],
    plan: ResumePlan | None,
    by: Any = None,
) -> list[OutboxEvent]:
    """The outbox rows of a turn's commit (see the module's table); ``by`` is the audit's answerer."""
    events: list[OutboxEvent] = []
    if notify and plan is not None and parent_id is not None:
        events += _answered(agent, session_id, parent_id, turn_id, plan, by, tenant)
    if finish == "interrupted":
        events += _paused(agent, session_id, turn_id, messages, notify, tenant)
    return events
