"""Snapshot state, and every change of it, in one place.

A snapshot's status goes ``pending`` → ``completed``, ``failed`` or ``aborted`` (``expired``
is read, never written: a pending row whose heartbeat stopped). The claim on an interrupted
snapshot goes ``free`` → ``held`` → ``answered``, or ``held`` → ``lapsed`` (then it may be
taken over) or back to ``free`` (released). :func:`claim_state` is the one rule for "is this
interrupt taken": the runtime, the inbox, the index and the wire codec all read it.

Every write of that state is one of the named changes below. Each returns an updater for
``store.save`` / ``store.save_all`` (:data:`Updater`): a pure function of the
stored row (``None``: no such row) to the row to write (``None``: write nothing), which the
store runs inside its transaction. An updater refuses by raising: nothing of the write
commits. :class:`NoChange` means the row no longer qualifies (the caller drops its write);
:class:`~interlock.errors.ClaimConflictError` and the other typed errors reach the caller.

* a claim: :func:`take_claim` (recording quorum votes with :func:`cast_votes`), :func:`refresh_claim`,
  :func:`answer_claim`, :func:`release_claim`, and :func:`settle_claimed` (a worker's lease on the row it writes);
* a row: :func:`put_row`, :func:`heartbeat`, :func:`fail_pending`, :func:`fail_taken_over`,
  :func:`abort_pending`, :func:`finalize`, :func:`requeue` (with :func:`if_orphaned`),
  :func:`mark_escalated`, :func:`mark_warned`, :func:`extend_deadline` and :func:`spend_nonce`.

Every store runs each updater through :func:`apply_update`, which enforces the rules all
stores share (a row keeps its id and session, a finished status never changes, the version
is bumped, the times stamped).

The record types (:class:`~interlock.records.Snapshot`, its :class:`~interlock.records.SnapshotStatus`
and :data:`~interlock.records._sessions.EXPIRY`) are defined in :mod:`interlock.records._sessions`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, Literal, TypeAlias

from .._json_object import is_array, is_object
from ..errors import (
    ClaimConflictError,
    FailedPreconditionError,
    InvalidArgumentError,
    PermissionDeniedError,
    SnapshotNotFoundError,
)
from ..metadata import CONSUMED_TOKENS, DEADLINE, ESCALATED, EXTENDED, HANDOFF, RECLAIMED_FROM, REQUEUED, VOTES, WARNED
from ..parts import ToolRequestPart
from ._sessions import EXPIRY, ErrorInfo, SessionState, Snapshot, SnapshotStatus, utcnow

__all__ = [
    "Updater",
    "apply_update",
    "EXPIRY",
    "Ballot",
    "ClaimState",
    "ClaimTake",
    "NoChange",
    "SnapshotStatus",
    "abort_pending",
    "answer_claim",
    "cast_votes",
    "claim_state",
    "conflict",
    "consumed_tokens",
    "fail_pending",
    "fail_taken_over",
    "finalize",
    "heartbeat",
    "if_orphaned",
    "is_answerable",
    "is_orphaned",
    "extend_deadline",
    "mark_escalated",
    "mark_warned",
    "put_row",
    "refresh_claim",
    "refuse_spent",
    "release_claim",
    "requeue",
    "requeues",
    "settle_claimed",
    "spend_nonce",
    "take_claim",
]

Updater = Callable[[Snapshot | None], Snapshot | None]
"""A pure function from the current row (or ``None``) to the row to write (or ``None``: write nothing).

It runs inside the store's transaction and may run again under contention, so it must
not have side effects. Raising aborts the save and propagates.
"""


def apply_update(current: Snapshot | None, update: Updater, snapshot_id: str) -> Snapshot | None:
    """Run an updater and enforce the rules every store shares.

    The row keeps its id and session; a terminal status never changes; the version is
    bumped; ``created_at`` is kept and ``updated_at`` stamped.
    """
    new = update(current)
    if new is None:
        return None
    if new.snapshot_id != snapshot_id:
        new = new.evolve(snapshot_id=snapshot_id)
    if not new.session_id:
        raise InvalidArgumentError(f"snapshot {snapshot_id!r} needs a session id")
    if current is not None:
        if new.session_id != current.session_id:
            raise FailedPreconditionError(
                f"snapshot {snapshot_id!r} belongs to session {current.session_id!r}; it cannot move to another"
            )
        if current.is_terminal and new.status != current.status:
            raise FailedPreconditionError(
                f"snapshot {snapshot_id!r} is {current.status}; a finished snapshot's status cannot change"
            )
        return new.evolve(version=current.version + 1, created_at=current.created_at, updated_at=utcnow())
    return new.evolve(version=1, updated_at=new.updated_at or new.created_at)


Update = Updater
"""The named changes' return type: an :data:`Updater`."""

ClaimState: TypeAlias = Literal["free", "held", "answered", "lapsed"]
"""``free``: nobody claimed it; ``held``: a resume is running; ``answered``: a resume committed;
``lapsed``: a resume claimed it and stopped refreshing (it may be taken over)."""


class NoChange(Exception):
    """The row no longer qualifies for the change (answered, finished, or refreshed meanwhile): nothing is written."""


# the claim rules ---------------------------------------------------------------------------


def claim_state(snap: Snapshot, now: datetime | None = None) -> ClaimState:
    """The state of the claim on ``snap`` (see :data:`ClaimState`)."""
    if not snap.claimed_by:
        return "free"
    if snap.claim_expires_at is None:
        return "answered"
    return "held" if (now or utcnow()) < snap.claim_expires_at else "lapsed"


def is_answerable(snap: Snapshot, now: datetime | None = None) -> bool:
    """True when a resume of ``snap`` may claim it now (nobody holds it, or the holder's lease lapsed)."""
    return claim_state(snap, now) in ("free", "lapsed")


def consumed_tokens(snap: Snapshot) -> list[str]:
    """The resume-token nonces spent on ``snap`` by its committed answer (``metadata.consumedTokens``)."""
    spent = (snap.metadata or {}).get(CONSUMED_TOKENS)
    return [n for n in spent if isinstance(n, str)] if is_array(spent) else []


def refuse_spent(snap: Snapshot, nonces: Sequence[str]) -> None:
    """The one rule of single use: raise PERMISSION_DENIED (``replayed``) if one of ``nonces`` was spent on ``snap``."""
    if nonces and not set(nonces).isdisjoint(consumed_tokens(snap)):
        raise PermissionDeniedError(
            f"a resume token for snapshot {snap.snapshot_id} was already used by a committed answer (replayed); "
            "each token answers its interrupt once",
            details={"reason": "replayed"},
        )


def conflict(parent_id: str, holder: str | None, *, answered: bool, lapsed: bool = False) -> ClaimConflictError:
    """The refusal a losing resume gets, naming the winner."""
    if lapsed:
        return ClaimConflictError(
            f"This turn's claim on snapshot {parent_id} lapsed"
            + (f" and turn {holder} took it over" if holder else "")
            + "; its result was not saved. Load the session's latest snapshot to continue.",
            winner=holder,
        )
    if answered:
        return ClaimConflictError(
            f"Snapshot {parent_id} was already resumed by turn {holder}; each interrupt is answered once. "
            f"Load snapshot {holder} to continue from there.",
            winner=holder,
        )
    return ClaimConflictError(
        f"Snapshot {parent_id} is being resumed by turn {holder}; each interrupt is answered once. "
        f"Wait for snapshot {holder} and continue from there.",
        winner=holder,
    )


# the claim changes -------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class Ballot:
    """One quorum vote to record on an interrupted row (:mod:`interlock.interrupts._policy` casts them).

    ``key`` names the call (``tool#ref``), ``by`` the voter, ``quorum`` the approvals it needs,
    ``row`` the record kept in ``metadata.votes`` (``{by, at, decision, digest}``).
    """

    key: str
    by: str
    quorum: int
    row: dict[str, Any]


@dataclass(kw_only=True, slots=True)
class ClaimTake:
    """The updater of :func:`take_claim`; after a write that wrote nothing, ``lapsed`` names the lapsed holder.

    With ``ballots``, after a write that recorded them without reaching every call's quorum,
    ``voted_only`` is true (the row is written with the votes, and not claimed).
    """

    turn_id: str
    ttl: float
    steal: str | None
    nonces: tuple[str, ...] = ()
    ballots: tuple[Ballot, ...] = ()
    lapsed: str | None = None
    voted_only: bool = False

    def __call__(self, cur: Snapshot | None) -> Snapshot | None:
        if cur is None:
            raise SnapshotNotFoundError("Snapshot not found")
        now = utcnow()
        state = claim_state(cur, now)
        if state in ("held", "answered") and cur.claimed_by != self.turn_id:  # a spent token too: who answered
            raise conflict(cur.snapshot_id, cur.claimed_by, answered=state == "answered")
        refuse_spent(cur, self.nonces)  # spent, yet nobody answered
        if state == "lapsed" and cur.claimed_by not in (self.steal, self.turn_id):  # its own lapsed claim: retaken
            self.lapsed = cur.claimed_by
            return None
        meta = dict(cur.metadata or {})
        self.voted_only = False
        if self.ballots:
            meta[VOTES], reached = cast_votes(meta.get(VOTES), self.ballots)
            if not reached:
                self.voted_only = True
                return cur.evolve(metadata=meta)
        if self.steal:
            meta[RECLAIMED_FROM] = self.steal
        return cur.evolve(claimed_by=self.turn_id, claim_expires_at=now + timedelta(seconds=self.ttl), metadata=meta)


def take_claim(
    turn_id: str, *, ttl: float, steal: str | None = None, nonces: Sequence[str] = (), ballots: Sequence[Ballot] = ()
) -> ClaimTake:
    """Claim a free interrupted row for ``turn_id`` (a lapsed one only when ``steal`` names its holder).

    A row held or answered by another turn raises :func:`conflict` (checked before the spent
    tokens: a spent token's resume is told who answered); a spent nonce with nobody answering
    raises PERMISSION_DENIED; a lapsed claim of another holder writes nothing and is named in
    :attr:`ClaimTake.lapsed` (take it over with ``steal``). ``ballots`` are recorded first
    (:func:`cast_votes`); the row is claimed only when they reach every call's quorum.
    """
    return ClaimTake(turn_id=turn_id, ttl=ttl, steal=steal, nonces=tuple(nonces), ballots=tuple(ballots))


def cast_votes(recorded: object, ballots: Sequence[Ballot]) -> tuple[dict[str, Any], bool]:
    """``metadata.votes`` with ``ballots`` added, and whether every call they vote on reached its quorum.

    The one rule of a quorum, run inside the store's transaction: a voter already recorded on
    that call is refused (PERMISSION_DENIED ``already_voted``: the same identity counts once,
    even racing itself from two processes); the approvals that reach the quorum claim the row.
    """
    votes: dict[str, Any] = {k: list(v) for k, v in recorded.items()} if is_object(recorded) else {}
    reached = True
    for ballot in ballots:
        rows: list[Any] = votes.setdefault(ballot.key, [])
        if any(is_object(r) and r.get("by") == ballot.by for r in rows):
            raise PermissionDeniedError(
                f"already_voted: {ballot.by!r} has already voted on {ballot.key}; a vote counts once",
                details={"reason": "already_voted", "identity": ballot.by, "call": ballot.key},
            )
        rows.append(ballot.row)
        approvals = sum(1 for r in rows if is_object(r) and r.get("decision") == "approve")
        reached = reached and ballot.row.get("decision") == "approve" and approvals >= ballot.quorum
    return votes, reached


def refresh_claim(parent_id: str, turn_id: str, ttl: float) -> Update:
    """Extend ``turn_id``'s held claim by ``ttl`` seconds; a claim no longer held by it raises (lapsed) ABORTED."""

    def refresh(cur: Snapshot | None) -> Snapshot | None:
        if cur is None or cur.claimed_by != turn_id or claim_state(cur) != "held":
            raise conflict(parent_id, None if cur is None else cur.claimed_by, answered=False, lapsed=True)
        return cur.evolve(claim_expires_at=utcnow() + timedelta(seconds=ttl))

    return refresh


def answer_claim(parent_id: str, turn_id: str, nonces: Sequence[str] = ()) -> Update:
    """The fence of a commit: the claim must still be held by ``turn_id``; it becomes answered, spending ``nonces``."""

    def answer(cur: Snapshot | None) -> Snapshot | None:
        if cur is None:
            raise SnapshotNotFoundError(f"Snapshot {parent_id} was deleted while turn {turn_id} ran")
        if cur.claimed_by != turn_id or claim_state(cur) != "held":
            raise conflict(parent_id, cur.claimed_by, answered=False, lapsed=True)
        if not nonces:
            return cur.evolve(claim_expires_at=None)
        meta = {**(cur.metadata or {}), CONSUMED_TOKENS: [*consumed_tokens(cur), *nonces]}
        return cur.evolve(claim_expires_at=None, metadata=meta)

    return answer


def settle_claimed(fence: Update, update: Update) -> Update:
    """For a claim on the very row its holder writes: ``fence`` (:func:`answer_claim`), then ``update``.

    The written row's claim is cleared: a finished turn's row is not held by anyone.
    """

    def settle(cur: Snapshot | None) -> Snapshot | None:
        new = update(fence(cur))
        return None if new is None else new.evolve(claimed_by=None, claim_expires_at=None)

    return settle


def release_claim(holder: str) -> Update:
    """Drop ``holder``'s unanswered claim (and leave any other row alone)."""

    def release(cur: Snapshot | None) -> Snapshot | None:
        if cur is None or cur.claimed_by != holder or cur.claim_expires_at is None:
            return None
        return cur.evolve(claimed_by=None, claim_expires_at=None)

    return release


# the row changes ---------------------------------------------------------------------------


def put_row(row: Snapshot) -> Update:
    """Write ``row`` as it is (a new turn's snapshot, a pending row), whatever is stored."""

    def put(_: Snapshot | None) -> Snapshot | None:
        return row

    return put


def heartbeat(older_than: timedelta = timedelta(0)) -> Update:
    """Refresh a still-pending row's heartbeat (only if older than ``older_than``)."""

    def beat(cur: Snapshot | None) -> Snapshot | None:
        if cur is None or cur.status != "pending":
            return None
        now = utcnow()
        if cur.heartbeat_at is not None and now - cur.heartbeat_at < older_than:
            return None
        return cur.evolve(heartbeat_at=now)

    return beat


def fail_pending(error: ErrorInfo) -> Update:
    """Mark a still-pending (detached) row failed with ``error``; any other row is kept."""

    def fail(cur: Snapshot | None) -> Snapshot | None:
        if cur is None or cur.status != "pending":
            return None
        return cur.evolve(status="failed", finish_reason="failed", error=error, heartbeat_at=None)

    return fail


def fail_taken_over(turn_id: str) -> Update:
    """Mark a dead detached holder's pending row failed, so it no longer reads as running."""
    return fail_pending(
        ErrorInfo(status="ABORTED", message=f"its claim lapsed and turn {turn_id} took the interrupt over")
    )


def abort_pending() -> Update:
    """Flip a pending row to ``aborted``; any other row is kept."""

    def abort(cur: Snapshot | None) -> Snapshot | None:
        return cur.evolve(status="aborted") if cur is not None and cur.status == "pending" else None

    return abort


def finalize(*, state: SessionState, error: ErrorInfo | None, finish: str, traced: dict[str, Any]) -> Update:
    """Write a detached run's outcome into its pending row (dropping the handed-off input).

    A row no longer pending (aborted meanwhile) raises :class:`NoChange`: nothing may commit.
    """

    def final(cur: Snapshot | None) -> Snapshot | None:
        if cur is None or cur.status != "pending":
            raise NoChange("the row is no longer pending")
        return cur.evolve(
            status="failed" if error else "completed",
            finish_reason=finish,
            error=error,
            state=state,
            heartbeat_at=None,
            metadata={**_without_handoff(cur.metadata), **traced},
        )

    return final


def _without_handoff(metadata: dict[str, Any] | None) -> dict[str, Any]:
    """``metadata`` without the handoff entry (a finished turn's snapshot keeps no copy of its input and context)."""
    return {k: v for k, v in (metadata or {}).items() if k != HANDOFF}


def is_orphaned(cur: Snapshot | None) -> bool:
    """A handed-off pending row that reads ``expired`` and whose lease (if any) lapsed."""
    if cur is None or cur.read_status() != "expired" or HANDOFF not in (cur.metadata or {}):
        return False
    return cur.claim_expires_at is None or cur.claim_expires_at <= utcnow()


def requeues(cur: Snapshot) -> int:
    """How many times the row's hand-off was re-enqueued (``metadata.requeued``)."""
    found = (cur.metadata or {}).get(REQUEUED)
    return found if isinstance(found, int) else 0


def requeue() -> Update:
    """Count one more re-enqueue of a handed-off row and refresh its heartbeat (use under :func:`if_orphaned`)."""

    def count(cur: Snapshot | None) -> Snapshot | None:
        assert cur is not None
        return cur.evolve(heartbeat_at=utcnow(), metadata={**(cur.metadata or {}), REQUEUED: requeues(cur) + 1})

    return count


def if_orphaned(update: Update) -> Update:
    """``update``, applied only while the row is still :func:`is_orphaned` (else :class:`NoChange`)."""

    def guarded(cur: Snapshot | None) -> Snapshot | None:
        if not is_orphaned(cur):
            raise NoChange("the row is no longer an orphan")
        return update(cur)

    return guarded


def mark_escalated(label: str, mark: dict[str, Any]) -> Update:
    """Record ``mark`` as the escalation of the call ``label`` (``tool#ref``) on a still-answerable row, once.

    An answered (or held) row, or a call escalated already, raises :class:`NoChange`.
    """

    def escalate(cur: Snapshot | None) -> Snapshot | None:
        if cur is None or not is_answerable(cur):
            raise NoChange("the interrupt was answered meanwhile")
        done: Any = (cur.metadata or {}).get(ESCALATED)
        marks = dict(done) if is_object(done) else {}
        if label in marks:
            raise NoChange(f"{label} was already escalated")
        marks[label] = mark
        return cur.evolve(metadata={**(cur.metadata or {}), ESCALATED: marks})

    return escalate


def mark_warned(label: str, expires_at: str, mark: dict[str, Any]) -> Update:
    """Record that the deadline ``expires_at`` of call ``label`` was warned of (``metadata.warned``).

    An answered (or held) row, or that deadline warned of already, raises :class:`NoChange`.
    """

    def warn(cur: Snapshot | None) -> Snapshot | None:
        if cur is None or not is_answerable(cur):
            raise NoChange("the interrupt was answered meanwhile")
        done: Any = (cur.metadata or {}).get(WARNED)
        marks = dict(done) if is_object(done) else {}
        if is_object(marks.get(label)) and marks[label].get("expiresAt") == expires_at:
            raise NoChange(f"{label} was already warned of its deadline")
        marks[label] = {**mark, "expiresAt": expires_at}
        return cur.evolve(metadata={**(cur.metadata or {}), WARNED: marks})

    return warn


def extend_deadline(label: str, expires_at: str, mark: dict[str, Any]) -> Update:
    """Move the deadline of the pending call ``label`` to ``expires_at``, recording ``mark`` (``metadata.extended``).

    ``mark`` says who and when; ``from`` and ``to`` are added. An answered (or held) row, or a
    call that no longer waits with a deadline, raises :class:`NoChange`.
    """

    def extend(cur: Snapshot | None) -> Snapshot | None:
        if cur is None or not is_answerable(cur) or cur.state is None or not cur.state.messages:
            raise NoChange("the interrupt was answered meanwhile")
        last = cur.state.messages[-1]
        content = list(last.content)
        for i, part in enumerate(content):
            if not isinstance(part, ToolRequestPart) or not part.is_interrupt:
                continue
            deadline = part.meta(DEADLINE)
            if is_object(deadline) and f"{part.name}#{part.ref or ''}" == label:
                moved: dict[str, Any] = {**deadline, "expiresAt": expires_at}
                content[i] = replace(part, metadata={**(part.metadata or {}), DEADLINE: moved})
                state = cur.state.copy()
                state.messages = [*state.messages[:-1], replace(last, content=content)]
                done: Any = (cur.metadata or {}).get(EXTENDED)
                marks = {k: list(v) for k, v in done.items()} if is_object(done) else {}
                marks.setdefault(label, []).append({**mark, "from": deadline.get("expiresAt"), "to": expires_at})
                return cur.evolve(state=state, metadata={**(cur.metadata or {}), EXTENDED: marks})
        raise NoChange(f"{label} no longer waits with a deadline")

    return extend


def spend_nonce(nonce: str, *, session_id: str, agent: str) -> Update:
    """Spend ``nonce`` on its own row (created for it: ``session_id``, ``agent``); a spent one raises (replayed)."""

    def spend(cur: Snapshot | None) -> Snapshot | None:
        if cur is not None:
            refuse_spent(cur, (nonce,))
        row = cur or Snapshot(snapshot_id=nonce, session_id=session_id, metadata={"agent": agent})
        return row.evolve(metadata={**(row.metadata or {}), CONSUMED_TOKENS: [*consumed_tokens(row), nonce]})

    return spend
