"""A server-managed turn's writes: claim the interrupted parent, commit the new snapshot, or give it back.

The claim writes the intents of the calls a resume restarts in its own transaction; the commit
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

import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol, cast

from .. import metadata as md
from .._json_object import is_object
from ..errors import InterlockError
from ..interrupts._decisions import DecisionLabel, decision_of
from ..interrupts._plan import Resume, ResumePlan
from ..interrupts._tokens import mint_tokens
from ..messages import Message
from ..parts import ToolRequestPart, ToolResponsePart
from ..records._outbox import DEADLINE, WEBHOOK, OutboxEvent, new_event
from ..records._sessions import ErrorInfo, Session, Snapshot, utcnow
from ..records.snapshots import Ballot, put_row
from ..stores import JournalStore, JournalUpdater, SnapshotStore, Updater
from .claims import ClaimHold, Claims
from .effects import Effects

if TYPE_CHECKING:
    from .protocols import RunnableAgent


def error_info(exc: BaseException) -> ErrorInfo:
    """What a failure looks like in an output or a snapshot (INTERNAL unless it is an interlock error)."""
    if isinstance(exc, InterlockError):
        return ErrorInfo(status=exc.status, message=exc.message, details=exc.details)
    return ErrorInfo(status="INTERNAL", message=str(exc) or type(exc).__name__)


class TurnStore(SnapshotStore, JournalStore, Protocol):
    """What a turn writes to: snapshots (its claim and commit) and the effect journal (its tool calls)."""


@dataclass(frozen=True, kw_only=True)
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

    def label(entry: ToolRequestPart | ToolResponsePart) -> DecisionLabel | None:
        call = calls.get((entry.name, entry.ref or None))
        return decision_of(entry) or (call.decision if call else None)

    def policy(row: dict[str, Any], entry: ToolRequestPart | ToolResponsePart) -> dict[str, Any]:
        call = calls.get((entry.name, entry.ref or None))
        said = call.request.meta(md.POLICY) if call else None
        return {**row, "policy": said["digest"]} if is_object(said) and "digest" in said else row

    def respond_row(p: ToolResponsePart) -> dict[str, Any]:
        row = {"name": p.name, "ref": p.ref, "decision": label(p), "output": p.output}
        expired = md.expired_by(p)
        return policy(row if expired is None else {**row, "expired": expired}, p)

    return {
        "by": identity if isinstance(identity, (str, int, float, dict)) else None,
        "at": utcnow().isoformat(),
        "respond": [respond_row(p) for p in resume.respond],
        "restart": [policy(_restart_row(p, label(p)), p) for p in resume.restart],
    }


def _restart_row(p: ToolRequestPart, decision: DecisionLabel | None) -> dict[str, Any]:
    row = {"name": p.name, "ref": p.ref, "decision": decision, "payload": md.without_approval(p.meta(md.RESUMED))}
    reason = p.meta(md.REASON)
    return row if reason is None else {**row, "reason": reason}


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
