"""A server-managed turn's writes: claim the interrupted parent, commit the new snapshot, or give it back.

The claim writes the intents of the calls a resume restarts in its own transaction; the commit
writes the snapshot, the journal's deferred outcomes and the outbox events in one transaction,
fenced by the claim (ABORTED if it lapsed); a turn that does not commit gives the interrupt back.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from .. import metadata as md
from .._json_object import is_object
from ..errors import InterlockError
from ..interrupts._decisions import DecisionLabel, decision_of
from ..interrupts._plan import Resume, ResumePlan
from ..interrupts._tokens import mint_tokens
from ..messages import Message
from ..parts import ToolRequestPart, ToolResponsePart
from ..records._outbox import OutboxEvent
from ..records._sessions import ErrorInfo, Session, Snapshot, utcnow
from ..records.snapshots import Ballot, put_row
from ..stores import JournalStore, JournalUpdater, SnapshotStore, Updater
from .claims import ClaimHold, Claims
from .effects import Effects
from .notifications import commit_events

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
        """The outbox rows the turn's commit writes with it (:func:`interlock._engine.notifications.commit_events`)."""
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
